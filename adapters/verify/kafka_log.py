"""Kafka's own logs as a second kind of observation (``groupcoord verify --kafka-log FILE...``).

Theory of operation. A broker's group coordinator logs a few statements about each classic
group: it prepares a rebalance, stabilizes the next generation (or finds the group empty), takes
the leader's assignment, loses a member (failed, left, not rejoined), loads, unloads or deletes
the group. Clients log the generations they joined. kafka_log_lines.py reads each line as
the version of Kafka that wrote it words it; this module walks each group's lines and
constrains only what the lines prove, against the spec's rules:

* The order is the log's. A *source* is one coordinator's lines for a group (one broker id in
  one file; a file without broker ids is one source). Sources are walked apart: lines of
  several brokers or files are never ordered against each other by their clocks, and a group
  that moves between brokers starts afresh in each. A source whose clock runs backwards
  throughout (a newest-first export) is read in reverse.
* The code's family (kafka_log_lines.FAMILIES) is what all the source's lines agree on; a
  check that holds only for some families runs only when every family still possible has it.
* A source is trusted to hold every line the broker logged for the group in its span (a paste
  of a contiguous run, or a log filtered by group id). When a source holds only one kind of
  the rebalance statements (as after grepping for "Stabilized"), the checks that relate lines
  of different kinds are not made.
* Whatever the lines cannot decide leaves the group inconclusive, with the reason: a gap of
  generations (another coordinator may have owned the group), members leaving without a line
  in a version that removes them silently, clients' lines alone.

What diverges: a rebalance prepared while one was under way; a join phase ending at a
generation other than the next; a generation stabilized with no rebalance prepared since the
last; a generation going back with no load, unload or death of the group between; a state
printed where the code can print only another; an assignment taken outside the generation
being completed; members vanishing (fewer members, fewer removal lines) in a version that logs
every removal; a client in a generation the coordinator logged as empty. Known coordinator bugs
are named (KAFKA-8653)."""

from __future__ import annotations

from pathlib import Path

import attrs

from groupcoord.adapters.verify import kafka_log_lines as kl
from groupcoord.adapters.verify.search import CONFORMS, DIVERGES, INCONCLUSIVE, Verdict
from groupcoord.core.classic.states import PREPARING_REBALANCE

REBALANCE_KINDS = {"prepare", "stable", "empty"}
CLIENT_KINDS = {"client-joined", "client-synced", "client-rebalancing"}
_COORDINATOR_KINDS = {"prepare", "stable", "empty", "assign", "joins", "failed", "left", "removed"}
# reset, unreadable and consumer-group lines are read but constrain nothing


class LogError(ValueError):
    """A log file that cannot be read."""


@attrs.frozen
class LogRead:
    events: tuple     # kafka_log_lines.Line, in file order
    unknown: tuple    # (file:line, text) of lines matching no known statement
    lines: int
    comments: int = 0  # lines starting with '#' (a corpus file's header)


def read_logs(paths) -> LogRead:
    from groupcoord.adapters.traces.progress import Progress

    events, unknown, total, comments = [], [], 0, 0
    progress = Progress("verify --kafka-log", unit="lines")
    for path in paths:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise LogError(f"{path}: {e.strerror or e}") from None
        if b"\0" in data[:4096]:
            raise LogError(f"{path}: not a text log (binary data); expected Kafka's or a client's log lines")
        for n, raw in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
            if not raw.strip():
                continue
            if raw.startswith("#"):
                comments += 1
                continue
            total += 1
            if not total % 50_000:
                progress.advance_to(total, f"{path}: {len(events):,} group statements")
            line = kl.parse(raw, f"{path}:{n}")
            if line is None or line.kind == "unreadable":
                unknown.append((f"{path}:{n}", raw[:200]))
            if line is not None:
                events.append(line)
    progress.done()
    return LogRead(tuple(events), tuple(unknown), total, comments)


def check_logs(read: LogRead, release: str | None = None) -> list[Verdict]:
    """Each group's verdict. ``release``: the brokers' Kafka version when the user knows it
    (``--kafka-version``); it narrows what the lines' wording leaves open."""
    by_group: dict[str, list[kl.Line]] = {}
    resets: dict[tuple, list[kl.Line]] = {}  # source -> its coordinator-wide lines (restarts, partition moves)
    for e in read.events:
        if e.kind == "reset" or (e.kind == "unreadable" and not e.group_id):
            resets.setdefault(_source(e), []).append(e)
        else:
            by_group.setdefault(e.group_id, []).append(e)
    families = _families(read.events, kl.families_of_release(release) if release else kl.ANY)
    return [_check_group(g, lines, families, resets, release) for g, lines in sorted(by_group.items())]


def _position(e: kl.Line) -> int:
    return int(e.where.rsplit(":", 1)[1])


def _source(line: kl.Line) -> tuple:
    return (line.where.rsplit(":", 1)[0], line.broker)


def _families(lines, given: frozenset) -> dict[tuple, frozenset]:
    """Each source's possible families: what all its coordinator lines agree on (any group),
    within those of the release the user gave. Lines that agree on none (a fork's wording, an
    upgrade inside one file): nothing is assumed beyond the release."""
    found: dict[tuple, frozenset] = {}
    for e in lines:
        if e.kind in CLIENT_KINDS:
            continue
        key = _source(e)
        found[key] = found.get(key, given) & e.families
    return {k: (v or given) for k, v in found.items()}


@attrs.define
class Finding:
    where: str
    why: str
    bug: str | None = None


@attrs.define
class _Walk:
    """One source's lines of one group, in order."""
    families: frozenset
    kinds: set
    release: str | None = None     # the brokers' Kafka version, when the user gave it
    phase: str | None = None       # preparing, completing, stable, empty; None: not known
    generation: int | None = None
    prepared: kl.Line | None = None
    prepared_from: str | None = None  # the phase the last rebalance was prepared from
    settled: kl.Line | None = None  # the last Stabilized/empty line, for the member count
    removals: set = attrs.Factory(set)  # ids of members the lines removed since ``settled``
    window: tuple | None = None     # (from, to, removals between them, the prepare before ``to``)
    checked: int = 0
    notes: list = attrs.Factory(list)
    findings: list = attrs.Factory(list)
    generations: dict = attrs.Factory(dict)  # generation -> "stable" | "empty" (what this source logged)

    def trusts(self, *kinds: str) -> bool:
        """Whether lines of these kinds would be in the source had they been logged: the source
        holds some (one of each group given), or three kinds of statement or more, which no
        filter for one statement leaves (a contiguous run, or a log filtered by group id)."""
        rich = len(self.kinds & _COORDINATOR_KINDS) >= 3
        return rich or all(bool(set(k.split("|")) & self.kinds) for k in kinds)

    @property
    def related(self) -> bool:
        """Rebalance starts and ends relate: both kinds would be there had they been logged."""
        return self.trusts("prepare", "stable|empty")

    def fail(self, line: kl.Line, why: str, bug: str | None = None) -> None:
        self.findings.append(Finding(line.where, why, bug))

    def step(self, e: kl.Line) -> None:
        getattr(self, "_" + e.kind.replace("-", "_"))(e)

    def _prepare(self, e: kl.Line) -> None:
        self._close_window()
        # a member removed before the rebalance it caused (and named in its reason): those removed
        # for not syncing are named only there (their own line is DEBUG)
        self.removals |= set(e.removed)
        if e.state is not None and self.families <= kl.PRINTS_STATE:
            self.checked += 1
            if e.state != PREPARING_REBALANCE.value:
                self.fail(e, f"'Preparing to rebalance' printed state {e.state}; Kafka logs it after "
                             f"transitionTo(PreparingRebalance), so the state it prints is always PreparingRebalance "
                             f"({e.state} cannot be printed there)")
        if self.phase == "preparing" and self.related:
            self.fail(e, f"a rebalance prepared while the one prepared at {self.prepared.where} (old generation "
                         f"{self.prepared.generation}) had not ended: Kafka starts one only from Empty, Stable or "
                         f"CompletingRebalance")
        elif self.generation is not None and e.generation is not None and self.related:
            if e.generation == self.generation:
                self.checked += 1
            elif e.generation > self.generation:
                self.notes.append(f"{e.where}: the group came back at generation {e.generation} after "
                                  f"{self.generation} (another coordinator may have owned it meanwhile)")
            else:
                self.fail(e, f"the generation went back from {self.generation} to {e.generation} with no load, "
                             f"unload or death of the group logged between")
        self.phase, self.generation, self.prepared, self.prepared_from = "preparing", e.generation, e, self.phase

    def _stable(self, e: kl.Line, empty: bool = False) -> None:
        word = "emptied" if empty else "stabilized"
        self._close_window()
        if e.members == 0 and not empty:
            self.checked += 1
            self.fail(e, "generation stabilized with 0 members: Kafka logs a join phase that ends with no members "
                         "as 'is now empty' (onCompleteJoin)")
        if self.phase == "preparing" and self.related:
            want = None if self.prepared.generation is None else self.prepared.generation + 1
            self.checked += 1
            if want is not None and e.generation != want:
                self.fail(e, f"the join phase prepared at {self.prepared.where} ended at generation {e.generation}; "
                             f"Kafka moves it from {self.prepared.generation} to {want} (initNextGeneration)")
            elif not empty:
                self._instant_join(e)
        elif (self.phase in ("completing", "stable", "empty") and e.generation == self.generation
              and kl.F4J in self.families):
            self.notes.append(f"{e.where}: generation {e.generation} {word} again: the Java coordinator reverts "
                              f"a join phase whose records were not written, and completes it again")
        elif self.phase in ("completing", "stable", "empty") and self.related:
            self.fail(e, f"generation {e.generation} {word} with no rebalance prepared since generation "
                         f"{self.generation} ({self.settled.where if self.settled else 'above'}): Kafka completes a "
                         f"join phase only from PreparingRebalance")
        if self.settled is not None and e.members is not None and self.settled.members is not None:
            self.window = (self.settled, e, self.removals, self.prepared)
        self.removals = set()
        self.phase = "empty" if empty else "completing"
        self.generation, self.settled = e.generation, attrs.evolve(e, members=0) if empty else e
        if e.generation is not None:
            self.generations[e.generation] = "empty" if empty else "stable"

    def _empty(self, e: kl.Line) -> None:
        self._stable(e, empty=True)

    def _instant_join(self, e: kl.Line) -> None:
        """KAFKA-8653 (Kafka 2.3.0 only, fixed in 2.3.1): a group of JoinGroup v0 members gets a
        rebalance timeout of 0, so a join phase ends at once and drops, without a line, every
        member that has not rejoined. Seen when a new member's join makes a Stable group (its
        leader's assignment taken) stabilize within a millisecond: its old members would all
        have had to rejoin in that millisecond. The lines cannot tell 2.3.0 from 2.3.1 or 2.4
        (same wording), so the release must be given to name the bug."""
        p = self.prepared
        if not (self.prepared_from == "stable" and p.time_ms is not None and e.time_ms is not None
                and e.time_ms - p.time_ms <= 1 and (p.reason or "").startswith("Adding new member")
                and self.families & kl.since(kl.F23, kl.F23)):
            return
        what = (f"generation {e.generation} stabilized {e.time_ms - p.time_ms} ms after a new member's join made "
                f"the Stable group rebalance ({p.where}): the members of generation {p.generation} (its leader's "
                f"assignment was taken) were dropped instead of waited for")
        if self.release is not None and self.release.strip().startswith("2.3.0"):
            self.fail(e, f"{what}. Kafka 2.3.0 gives a JoinGroup v0 a rebalance timeout of 0, so the join phase "
                         f"ends at once", bug="KAFKA-8653")
        elif self.release is None:
            self.notes.append(f"{e.where}: {what}: KAFKA-8653 if the broker is Kafka 2.3.0 (fixed in 2.3.1; the "
                              f"lines read the same in 2.3.x and 2.4): give --kafka-version to decide")

    def _joins(self, e: kl.Line) -> None:
        """A member joining, logged before anything changes: the state printed is the group's."""
        allowed = {"preparing": {"PreparingRebalance"}, "completing": {"CompletingRebalance"},
                   "stable": {"CompletingRebalance", "Stable"}, "empty": {"Empty"}}.get(self.phase or "")
        if allowed is None or e.state is None or not self.related:
            return
        self.checked += 1
        if e.state not in allowed:
            self.fail(e, f"a member joined the group in state {e.state}, but the lines above leave it "
                         f"{' or '.join(sorted(allowed))} (generation {self.generation})")

    def _assign(self, e: kl.Line) -> None:
        """The leader's assignment: Kafka takes it in CompletingRebalance, for the generation being
        completed; from 2.8 the line counts the group's members then, a new baseline for the
        member count (members removed since the generation's line are in it)."""
        if self.phase is None or self.generation is None:
            self.phase, self.generation = "stable", e.generation
        elif self.phase in ("completing", "stable") and e.generation == self.generation:
            self.checked += 1
            self.phase = "stable"
        elif self.related:
            self.fail(e, f"the leader's assignment for generation {e.generation} taken while the group was "
                         f"{_PHASES[self.phase]} at generation {self.generation}: Kafka takes it only in "
                         f"CompletingRebalance, for the generation being completed")
            return
        if e.members is not None:
            self._vanished_since_settled(e)
            self._close_window()
            self.settled, self.removals = e, set()

    def _vanished_since_settled(self, e: kl.Line) -> None:
        """No member joins a generation being completed without a new rebalance, so the leader's
        count is at least the generation's less the members removed since (a removal logged late,
        Kafka 3.0-3.9, only makes this weaker)."""
        if self.settled is None or self.settled.members is None or self.settled.generation != e.generation:
            return
        self.checked += 1
        vanished = self.settled.members - len(self.removals) - e.members
        if vanished > 0 and not (self.families & kl.SILENT_REMOVALS):
            self.fail(e, f"the leader's assignment counts {e.members} members, but generation {e.generation} had "
                         f"{self.settled.members} ({self.settled.where}) and the lines since remove "
                         f"{len(self.removals)}: {vanished} member(s) left with no line saying so")

    def _removal(self, e: kl.Line) -> None:
        self.removals |= set(e.removed)

    _failed = _left = _removed = _removal

    def _pending_left(self, e: kl.Line) -> None:
        return None  # a pending member is not counted among the group's members

    def _load(self, e: kl.Line) -> None:
        self._forget(e.generation)
        self.notes.append(f"{e.where}: loaded at generation {e.generation}")

    def _unload(self, e: kl.Line) -> None:
        self._forget(None)

    def _reset(self, e: kl.Line) -> None:
        self._forget(None)

    def _unreadable(self, e: kl.Line) -> None:
        self._forget(None)
        self.notes.append(f"{e.where}: a line about the group that cannot be read (cut short or wrapped?): what "
                          f"was known before it is set aside")

    def _consumer_group(self, e: kl.Line) -> None:
        """A KIP-848 consumer group's line (Kafka 4.x): epochs, not the classic model. A group
        converted between the protocols is checked only in its classic stretches."""
        if self.phase is not None or self.generation is not None:
            self.notes.append(f"{e.where}: the group runs KIP-848's consumer protocol from here; its classic "
                              f"stretches are checked apart")
        self._forget(None)

    _aside = _reset  # a line after which what was known of the group may no longer hold

    def _dead(self, e: kl.Line) -> None:
        self._forget(None)  # a group created again starts at generation 0

    def _forget(self, generation: int | None) -> None:
        self._close_window()
        self.phase, self.generation, self.prepared, self.settled, self.removals = None, generation, None, None, set()

    def _close_window(self) -> None:
        """Compare the member counts of the last two settled generations, with the removals
        logged between them and since (Kafka 3.1+ logs a leave after the rebalance it causes;
        a removal counted twice only weakens the check)."""
        if self.window is None:
            return
        before, after, between, prepared = self.window
        self.window = None
        vanished = before.members - len(between | self.removals) - after.members
        if vanished <= 0:
            self.checked += 1
            return
        what = (f"{vanished} member(s) of generation {before.generation} ({before.members} at {before.where}) left "
                f"before generation {after.generation} ({after.members} at {after.where}) with no line saying so")
        if not (self.families & kl.SILENT_REMOVALS):
            self.fail(after, f"{what}: Kafka logs every member it removes (failed, left, not rejoined)")
        else:
            self.notes.append(f"{after.where}: {what}; Kafka up to 2.6 drops members that did not rejoin without "
                              f"a line, so this cannot be checked")

    def finish(self) -> None:
        self._close_window()


_PHASES = {"preparing": "PreparingRebalance", "completing": "CompletingRebalance", "stable": "Stable",
           "empty": "Empty"}


def _check_group(group_id: str, lines: list[kl.Line], families: dict, resets: dict, release: str | None) -> Verdict:
    if _redacted(group_id):
        return Verdict(group_id, INCONCLUSIVE, "the group id is redacted: the lines of different groups cannot be "
                                               "told apart", len(lines), 0, observed={"lines": len(lines)})
    walks: list[_Walk] = []
    coordinator: dict[tuple, list[kl.Line]] = {}
    clients: list[kl.Line] = []
    for e in lines:
        (clients if e.kind in CLIENT_KINDS else coordinator.setdefault(_source(e), [])).append(e)
    for key, own in coordinator.items():
        # a coordinator-wide line of this broker, or of an unnamed one in the same file, resets the group
        wide = resets.get(key, []) + (resets.get((key[0], None), []) if key[1] is not None else [])
        own = _in_log_order(sorted(own + wide, key=_position))
        walk = _Walk(families.get(key, kl.ANY), {e.kind for e in own}, release)
        for e in own:
            walk.step(e)
        walk.finish()
        walks.append(walk)
    findings = [f for w in walks for f in w.findings]
    checked = sum(w.checked for w in walks)
    notes = [n for w in walks for n in w.notes]
    logged: dict[int, str] = {}
    for w in walks:
        logged.update(w.generations)
    for e in clients:
        if e.generation is None or e.generation not in logged:
            continue
        if logged[e.generation] == "empty":
            findings.append(Finding(e.where, f"a client {e.kind[7:]} generation {e.generation}, which the "
                                             f"coordinator logged as empty (no members)"))
        else:
            checked += 1
    fams = sorted(set().union(*(w.families for w in walks)), key=kl.FAMILIES.index) if walks else []
    observed = {"families": fams, "lines": len(lines), "notes": notes[:20]}
    excerpt = tuple(f"{e.where}: {e.kind}" for e in lines[:200])
    if findings:
        first = next((f for f in findings if f.bug), findings[0])
        detail = (f"known Kafka bug {first.bug}: " if first.bug else "") + f"{first.where}: {first.why}"
        if len(findings) > 1:
            detail += f" (and {len(findings) - 1} more: " + "; ".join(f"{f.where}: {f.why}" for f in findings[1:4])
            detail += ")"
        return Verdict(group_id, DIVERGES, detail, len(lines), checked,
                       observed={**observed, "bug": first.bug, "findings": [attrs.asdict(f) for f in findings]},
                       excerpt=excerpt)
    if not checked:
        return Verdict(group_id, INCONCLUSIVE, _why_unchecked(lines, walks, notes), len(lines), 0,
                       observed=observed, excerpt=excerpt)
    said = f" (as Kafka {' or '.join(fams)} logs them)" if fams and len(fams) < len(kl.FAMILIES) else ""
    rest = f"; not decided: {notes[0]}" + (f" (+{len(notes) - 1})" if len(notes) > 1 else "") if notes else ""
    return Verdict(group_id, CONFORMS, f"{checked} logged steps as the spec allows{said}{rest}", len(lines),
                   checked, observed=observed, excerpt=excerpt)


def _redacted(group_id: str) -> bool:
    """An id a reporter blanked out (``***``, ``...``, ``<redacted>``): it names no one group."""
    return set(group_id) <= set("*.#?x-") or group_id.strip("<>[]").lower() in ("redacted", "group", "masked")


def _why_unchecked(lines: list[kl.Line], walks: list[_Walk], notes: list[str]) -> str:
    kinds = {e.kind for e in lines}
    if "consumer-group" in kinds:
        return ("a KIP-848 consumer group (Kafka 4.x, group.protocol=consumer): its lines speak of epochs and "
                "assignments, not of the classic protocol's generations, which is what is checked here")
    if kinds <= CLIENT_KINDS:
        return ("only clients' lines: they show one member's generations, which nothing constrains without the "
                "coordinator's lines")
    if notes:
        return notes[0]
    if walks and not any(w.related for w in walks) and kinds & REBALANCE_KINDS:
        missing = sorted({"prepare", "stable or empty"} - {"stable or empty" if kinds & {"stable", "empty"} else "",
                                                              "prepare" if "prepare" in kinds else ""})
        return (f"only {', '.join(sorted(kinds - CLIENT_KINDS))} lines: with no {' or '.join(missing)} line to "
                f"relate them to, nothing is constrained")
    return f"no logged step constrains the group ({len(lines)} lines: {', '.join(sorted(kinds))})"


def _in_log_order(lines: list[kl.Line]) -> list[kl.Line]:
    """A source's lines as the broker logged them: reversed when its clock runs backwards from
    first to last and never forwards (an export listing the newest line first)."""
    times = [e.time_ms for e in lines if e.time_ms is not None]
    if len(times) >= 2 and times[0] > times[-1] and all(a >= b for a, b in zip(times, times[1:])):
        return lines[::-1]
    return lines


def header(path: Path) -> dict[str, str]:
    """A corpus file's header lines (``# key: value``) as a dict."""
    found: dict[str, str] = {}
    for raw in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        if not raw.startswith("#"):
            break
        key, _, value = raw[1:].strip().partition(":")
        found.setdefault(key.strip(), value.strip())
    return found


def describe(v: Verdict) -> list[str]:
    """A group's verdict in words: every finding once, with the lines' notes."""
    observed = v.observed or {}
    if v.verdict == CONFORMS:
        return [f"CONFORMS {v.group_id}: {v.detail}"] if observed.get("notes") else []
    if v.verdict == INCONCLUSIVE:
        return [f"INCONCLUSIVE {v.group_id}: {v.detail}"]
    findings = observed.get("findings") or [{"where": "", "why": v.detail, "bug": None}]
    lines = [f"DIVERGES {v.group_id}: {len(findings)} finding(s)"
             + (f"; known Kafka bug {observed['bug']}" if observed.get("bug") else "")]
    for f in findings:
        lines.append(f"  {f['where']}: " + (f"[{f['bug']}] " if f.get("bug") else "") + f["why"])
    lines.extend(f"  not decided: {n}" for n in observed.get("notes", [])[:5])
    return lines
