"""Real coordinator bugs, re-created as mutants of the core (and of the spec), and the check
that catches each (``groupcoord tla mutants``; catalogue in tla/README.md).

A core mutant is applied at run time only: the source of one or more methods of
the classic group machine's functions (``groupcoord.core.classic.joining`` and ``membership``) or of
the coordinator is edited in memory, compiled in its module's namespace and set on the module or
the class, before the coordinator that runs it is made; ``applied`` restores the originals.
The source tree is never written. A spec mutant is a text edit of a copy of tla/ (tla_run's
``replace``).

Checks run cheapest first, and a mutant stops at the first check that catches it:
``scenarios`` (every conformance scenario through the core), ``graph-check`` (the state-graph
check of MCGraph, dumped once and shared), ``trace`` (trace validation of the scenario and
hypothesis traces, recorded through the mutated core, with the spec unchanged), ``tlc-mc3`` /
``tlc-mc4`` / ``tlc-live`` / ``tlc-stable`` (TLC on the mutated spec). Each check says what caught the mutant
(``Catch``): the property TLC found violated, the scenario step, the value where the core and
the spec first differ. An exception (the core raising, TLC failing to evaluate the spec) is a
crash, not a catch: the next check runs, and a mutant caught only by crashes fails. A mutant
with ``expect`` must be caught through it: TLC runs the configuration with that property alone
(so another one violated first cannot stand in for it, and a liveness property, which TLC does
not name, is the one found), or the graph check names the field where the core and the spec
differ first.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable, Sequence

import attrs

from groupcoord.core import offsets
from groupcoord.core.classic import joining, machine, membership
from groupcoord.core.coordinator import Coordinator


@attrs.frozen
class Mutant:
    name: str
    bug: str
    source: str
    core: tuple = ()  # (method name, ((old, new), ...)) pairs on the group machine
    spec: dict | None = None  # tla_run replace= for a spec mutant
    checks: tuple = ("scenarios", "graph-check", "trace")
    ids: tuple = ()  # the bug's ids (KAFKA-8500, KoP-380): --only takes them as well as the name
    expect: str | None = None  # the property (or graph-check field) that must catch it


@attrs.frozen
class Catch:
    """What caught a mutant: ``check`` (scenarios, graph-check, trace, tlc-mc3...), ``by`` (the
    property TLC found violated, or the difference the check found, in a few words), ``about``
    (the property's name, or the field where core and spec first differ; None when the check
    names none), ``detail``, and ``crash``: an exception rather than a violation or a mismatch."""

    check: str
    by: str
    about: str | None = None
    detail: str = ""
    crash: bool = False

    def line(self) -> str:
        return f"{self.check}: {self.by}" + (f" [{self.detail[:150]}]" if self.detail else "")


_VIOLATED = re.compile(r"^(?:Invariant|Action property) (\w+) is violated")


def violated_property(error: str) -> str | None:
    """The property a TLC error line names (``Invariant X is violated.``, ``Action property X is
    violated.``); None for anything else (a temporal property, which TLC does not name, or an
    evaluation error)."""
    m = _VIOLATED.match(error)
    return m.group(1) if m else None


def only_property(cfg_text: str, name: str) -> str:
    """A TLC configuration that checks ``name`` alone: its INVARIANTS and PROPERTIES sections
    keep only that name (for a liveness property, which TLC does not name when it is violated)."""
    out, section = [], None
    for line in cfg_text.splitlines():
        if line and not line[0].isspace() and not line.startswith("\\*"):
            section = line.split()[0]
        elif section in ("INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES") and line.split() \
                and line.split()[0] != name:
            continue
        out.append(line)
    if not any(line.split() == [name] for line in out):
        raise ValueError(f"the configuration does not check {name}")
    kept = [line for i, line in enumerate(out)  # no section left empty
            if line.split()[:1] not in (["INVARIANT"], ["INVARIANTS"], ["PROPERTY"], ["PROPERTIES"])
            or (i + 1 < len(out) and out[i + 1][:1].isspace())]
    return "\n".join(kept) + "\n"


MUTANTS: list[Mutant] = [
    Mutant("static-rejoin-keeps-old-id",
           "a static member rejoining with an unknown member id outside Stable keeps its old member id",
           "KAFKA-8500", ids=("KAFKA-8500",),
           core=(("_join_new_member", ((
               "                _replace_static_member(s, g, req, req.group_instance_id, old_id, new_id)",
               "                if g.state is STABLE:\n"
               "                    _replace_static_member(s, g, req, req.group_instance_id, old_id, new_id)\n"
               "                else:\n"
               "                    _update_member_then_rebalance(s, g, g.members[old_id], req)"),)),)),
    Mutant("static-join-completing-no-rebalance",
           "a static member joining in CompletingRebalance does not trigger a rebalance, so its new id "
           "gets an empty assignment", "KAFKA-9801", ids=("KAFKA-9801",),
           core=(("_replace_static_member", ((
               "        elif g.state is COMPLETING_REBALANCE:\n            prepare_rebalance(s, g)",
               "        elif g.state is COMPLETING_REBALANCE:\n            pass"),)),)),
    Mutant("leave-in-preparing-no-complete",
           "a member removed while PreparingRebalance does not complete the join phase; the group waits "
           "for the rebalance timeout", "KoP pull request #380", ids=("KoP-380",),
           core=(("leave", ((
               "            elif g.state is PREPARING_REBALANCE:\n                maybe_complete_join(s, g)",
               "            elif g.state is PREPARING_REBALANCE:\n                pass"),)),)),
    Mutant("disconnected-never-removed",
           "members that disconnect are never removed, and the group stays in PreparingRebalance",
           "Redpanda issue #3300", ids=("Redpanda-3300",),
           core=(("heartbeat_expired", ((
               "        member = group.members.get(mid)\n",
               "        member = group.members.get(mid)\n        return\n"),)),
                 ("complete_join", ((
                     "                g.remove(mid)\n                s.cancel(HeartbeatTimer(g.partition, g.group_id, mid))",
                     "                s.arm(JoinTimer(g.partition, g.group_id), g.rebalance_timeout_ms)\n"
                     "                return"),)))),
    Mutant("first-generation-zero", "the first generation is 0 instead of 1", "issue #3 list",
           core=(("_init_next_generation", ((
               "        g.generation_id += 1", "        g.generation_id += 0 if g.generation_id == 0 else 1"),)),)),
    Mutant("heartbeat-empty-none", "heartbeats in Empty answered NONE", "issue #3 list",
           core=(("heartbeat", ((
               "        if group is None:\n            error = Error.UNKNOWN_MEMBER_ID\n        else:",
               "        if group is None:\n            error = Error.UNKNOWN_MEMBER_ID\n"
               "        elif group.state is EMPTY:\n            error = NONE\n        else:"),)),)),
    Mutant("follower-assignment-accepted", "a follower's assignment accepted (written as the group's)",
           "issue #3 list",
           core=(("sync", ((
               "            if req.member_id == g.leader_id:", "            if True:"),)),)),
    Mutant("assignment-before-write", "an assignment applied before its write succeeds",
           "issue #3 list",
           core=(("sync", ((
               "                s.append(record, AfterSync(g.group_id, g.generation_id, "
               "tuple(assignments.items())))",
               "                s.append(record, AfterSync(g.group_id, g.generation_id, "
               "tuple(assignments.items())))\n"
               "                for _mid in list(g.members):\n"
               "                    g.put(evolve(g.members[_mid], assignment=assignments.get(_mid, b\"\")))"),)),)),
    Mutant("fenced-static-none", "a fenced static member answered NONE", "issue #3 list (KIP-345 fencing)",
           core=(("heartbeat", ((
               "            if member is None or (instance_id is not None and group.static_members.get(instance_id) != mid):",
               "            if member is None:"),)),)),
    Mutant("generation-bumped-twice", "the generation bumped twice for one join phase", "issue #3 list",
           core=(("_init_next_generation", ((
               "        g.generation_id += 1", "        g.generation_id += 2"),)),)),
    Mutant("no-sync-timer", "no sync timer after the join phase: a member that never syncs blocks the group",
           "KAFKA-12890", ids=("KAFKA-12890",),
           core=(("complete_join", ((
               "        s.arm(SyncTimer(g.partition, g.group_id), g.rebalance_timeout_ms, g.generation_id)",
               "        pass"),)),)),
    Mutant("static-replace-not-persisted",
           "a static member rejoining a Stable group with an unknown member id is answered at once and its "
           "new member id is never written", "KAFKA-10284", ids=("KAFKA-10284",),
           core=(("_replace_static_member", ((
               "                s.append(metadata_record(g, s.now, with_members=True),\n"
               "                             AfterStaticReplace(g.group_id, instance_id, old_id, new_id,\n"
               "                                                old.protocols, old.rebalance_timeout_ms, "
               "old.session_timeout_ms,\n"
               "                                                previous_leader, req.request_id, req.version))",
               "                g.put(evolve(new, awaiting_join=None))\n"
               "                s.respond(req.request_id, join_response(g, new_id, with_members=False))"),)),)),
    Mutant("session-timer-rebalance-length",
           "a member's session timer armed with its rebalance timeout when the join phase completes",
           "issue #17 (timer lengths)", expect="ms", checks=("graph-check", "trace"),
           core=(("complete_join", ((
               "            s.arm(HeartbeatTimer(g.partition, g.group_id, mid), member.session_timeout_ms)",
               "            s.arm(HeartbeatTimer(g.partition, g.group_id, mid), member.rebalance_timeout_ms)"),)),)),
    Mutant("commit-from-stale-generation",
           "an offset commit from a member of an older generation accepted (a fenced member's commit)",
           "issue #17 (offsets)",
           core=(("commit", ((
               "                _validate_offset_commit(group, req)",
               "                if req.generation_id == group.generation_id or req.generation_id < 0:\n"
               "                    _validate_offset_commit(group, req)"),)),)),
    Mutant("load-drops-offsets", "a partition loaded again forgets the group's committed offsets",
           "issue #17 (durability)",
           core=(("_on_load", ((
               "        self._offsets.latest.update(offsets)",
               "        pass"),)),)),
    # Spec mutants: the same bugs written into the spec; TLC must find them, through the
    # property named after each.
    Mutant("spec-first-generation-zero", "the first generation is 0 instead of 1 (in the spec)",
           "issue #3 list",
           spec={"Coordinator.tla": [("LET G1 == [G EXCEPT !.gen = @ + 1]\n",
                                      "LET G1 == [G EXCEPT !.gen = IF @ = 0 THEN 0 ELSE @ + 1]\n")]},
           checks=("tlc-mc3",), expect="generation_bump_iff_join_completed"),
    Mutant("spec-generation-bumped-twice", "the generation bumped twice for one join phase (in the spec)",
           "issue #3 list",
           spec={"Coordinator.tla": [("LET G1 == [G EXCEPT !.gen = @ + 1]\n", "LET G1 == [G EXCEPT !.gen = @ + 2]\n")]},
           checks=("tlc-mc3",), expect="generation_step"),
    Mutant("spec-disconnected-never-removed",
           "members that disconnect are never removed (in the spec): PreparingRebalance is never left",
           "Redpanda issue #3300", ids=("Redpanda-3300",),
           spec={"Coordinator.tla": [
               ("    ELSE IF ~IsMember(G, m) \\/ (~G.mem[m].isNew /\\ (Parked(G, m) \\/ G.mem[m].sync)) THEN G",
                "    ELSE IF TRUE THEN G"),
               ("         DropNotRejoined(IF ~Parked(G, m) /\\ ~IsStatic(G, m)\n"
                "                         THEN Cancel(RemoveFromGroup(G, m), HbKey(m)) ELSE G, Tail(ids))",
                "         DropNotRejoined(G, Tail(ids))"),
               ("    ELSE IF G1.leader = None /\\ G1.members # <<>> THEN Arm(G1, JoinKey, <<>>, RebalanceTimeoutOf(G1))",
                "    ELSE IF G1.leader = None /\\ G1.members # <<>> THEN Arm(G1, JoinKey, <<>>, RebalanceTimeoutOf(G1))\n"
                "    ELSE IF \\E m \\in DOMAIN G1.mem : ~Parked(G1, m) THEN Arm(G1, JoinKey, <<>>, RebalanceTimeoutOf(G1))")]},
           checks=("tlc-live",), expect="PreparingIsLeft"),
    Mutant("spec-static-rejoin-keeps-old-id",
           "a static member rejoining with an unknown member id outside Stable keeps its old member id (in the "
           "spec)", "KAFKA-8500", ids=("KAFKA-8500",),
           spec={"Coordinator.tla": [(
               "         IF old # None THEN ReplaceStaticMember(G, req, old, req.uuid) ELSE AddMember(G, req, req.uuid)",
               "         IF old # None /\\ G.st # Stable\n"
               "         THEN RebalanceOrCompleteJoin(UpdateMember(G, old, req.protos, req.rto, req.sto, \"J\"))\n"
               "         ELSE IF old # None THEN ReplaceStaticMember(G, req, old, req.uuid) ELSE AddMember(G, req, req.uuid)")]},
           checks=("tlc-mc4",), expect="StaticJoinGetsFreshId"),
    Mutant("spec-no-sync-timer", "no sync timer after the join phase (in the spec)", "KAFKA-12890",
           ids=("KAFKA-12890",),
           spec={"Coordinator.tla": [(
               "         ELSE Arm(AnswerJoins(G2, G2.members, MemberList(G2)), SyncKey, G2.gen, RebalanceTimeoutOf(G2))",
               "         ELSE AnswerJoins(G2, G2.members, MemberList(G2))")]},
           checks=("tlc-mc4",), expect="SyncTimerWhileAwaitingSync"),
    Mutant("spec-static-replace-answered-before-write",
           "a static member rejoining a Stable group is answered before its new member id is written (in the spec)",
           "KAFKA-10284", ids=("KAFKA-10284",),
           spec={"Coordinator.tla": [(
               "         THEN LET G3 == [G2 EXCEPT !.mem[new].join = \"R\"] IN",
               "         THEN LET G3 == Respond([G2 EXCEPT !.mem[new].join = \"\"], ReqTag, JoinOk(G2, new, FALSE)) IN")]},
           checks=("tlc-mc4",), expect="ReplacementAnsweredAfterWrite"),
    Mutant("spec-commit-from-stale-generation",
           "an offset commit from a member of another generation accepted (in the spec)", "issue #17 (offsets)",
           spec={"Coordinator.tla": [("         ELSE IF req.gen # G.gen THEN \"ILLEGAL_GENERATION\"\n", "")]},
           checks=("tlc-offsets",), expect="commit_requires_valid_member"),
    Mutant("spec-acked-commit-not-committed",
           "a commit's value not made the committed one when its write succeeds, while another write of the "
           "key is in flight (in the spec)", "issue #17 (offsets)",
           spec={"Coordinator.tla": [("[v |-> IF err = None THEN u.wrote ELSE slot.v, n |-> n]",
                                      "[v |-> slot.v, n |-> n]")]},
           checks=("tlc-offsets",), expect="AckedCommitReadable"),
    Mutant("spec-acked-commit-not-in-log",
           "a completed write's records not added to the log (in the spec)", "issue #17 (durability)",
           spec={"Coordinator.tla": [("        G0 == IF err = None THEN [G EXCEPT !.stored = ApplyAll(@, w.recs)] ELSE G",
                                      "        G0 == G")]},
           checks=("tlc-failover",), expect="acknowledged_commit_durable"),
    Mutant("spec-reload-drops-offsets", "a load again forgets the committed offsets (in the spec)",
           "issue #17 (durability)",
           spec={"Coordinator.tla": [("    IN Arm(ArmAll(G3, G3.members), ExpireKey, None, RetentionCheckInterval)",
                                      "    IN Arm(ArmAll(G2, G2.members), ExpireKey, None, RetentionCheckInterval)")]},
           checks=("tlc-failover",), expect="reload_restores_the_log"),
    Mutant("spec-removed-group-drops-committed",
           "removing a simple group drops the committed values of keys whose writes are in flight (in the spec; "
           "the core's bug found by modelling offsets)", "issue #17 (offsets)",
           spec={"Coordinator.tla": [("RemoveGroup(G) == [Drop(G) EXCEPT !.offs = NoFunction]",
                                      "RemoveGroup(G) == [Drop(G) EXCEPT !.offs = NoFunction, !.cmt = NoFunction]"),
                                     # and, as the core had it, a key no longer tracked left alone
                                     ("    LET slot == G.cmt[u.key]\n",
                                      "    IF u.key \\notin DOMAIN G.cmt THEN G ELSE\n    LET slot == G.cmt[u.key]\n")]},
           checks=("tlc-offsets",), expect="committed_counts_writes"),
    Mutant("spec-failed-tombstone-loses-group",
           "a deleted group whose tombstone fails is not brought back, though the log still holds it "
           "(in the spec)", "issue #17 (durability)",
           spec={"Coordinator.tla": [("IF err = None THEN G ELSE IF G.st = Absent THEN Restore(G, cb.snap) ELSE Displace(G, cb.snap)",
                                      "IF err = None THEN G ELSE IF G.st = Absent THEN G ELSE Displace(G, cb.snap)")]},
           checks=("tlc-failover",), expect="LogGroupHeld"),
    Mutant("spec-newest-failure-reverts-to-committed",
           "the newest write failing first puts back the committed value, not the older in-flight write's "
           "(in the spec)", "issue #17 (writes failing out of order)",
           spec={"Coordinator.tla": [("        val == IF n = 0 THEN slot.v ELSE u.prev\n",
                                      "        val == slot.v\n")]},
           checks=("tlc-failover",), expect="LogOffsetsHeld"),
    # Every request answered, and a cooperative group reaches Stable (issue #17 item 6).
    Mutant("spec-leave-drops-parked-join",
           "a member leaving while its JoinGroup is parked is removed without an answer to that JoinGroup "
           "(in the spec)", "issue #17 item 6",
           spec={"Coordinator.tla": [(
               "        G2 == IF Parked(G1, m)\n"
               "              THEN [Respond(G1, To(G1, \"join\", m), JoinError(\"UNKNOWN_MEMBER_ID\", \"\"))\n"
               "                       EXCEPT !.mem[m].join = \"\"]\n"
               "              ELSE G1",
               "        G2 == [G1 EXCEPT !.mem[m].join = \"\"]")]},
           checks=("tlc-mc3",), expect="AnsweredExactlyOnce"),
    Mutant("spec-static-replace-never-answered",
           "a static member's replacement in Stable is never answered when its write succeeds: its JoinGroup "
           "stays parked (in the spec)", "issue #17 item 6",
           spec={"Coordinator.tla": [(
               "    THEN IF ~parked THEN G\n         ELSE LET G1 == [G EXCEPT !.mem[cb.new].join = \"\"] IN",
               "    THEN IF TRUE THEN G\n         ELSE LET G1 == [G EXCEPT !.mem[cb.new].join = \"\"] IN")]},
           checks=("tlc-live",), expect="EveryRequestAnswered"),
    Mutant("spec-rejoin-not-parked",
           "a dynamic member rejoining in PreparingRebalance is answered at once instead of parked: the join "
           "phase never sees everyone rejoin and ends only by its timer, which drops that member (in the spec)",
           "issue #17 item 6",
           spec={"Coordinator.tla": [(
               "    THEN MaybeCompleteJoin(UpdateMember(G, m, req.protos, req.rto, req.sto, \"J\"))",
               "    THEN IF G.mem[m].inst = None\n"
               "         THEN Respond(UpdateMember(G, m, req.protos, req.rto, req.sto, \"\"), ReqTag, JoinOk(G, m, FALSE))\n"
               "         ELSE MaybeCompleteJoin(UpdateMember(G, m, req.protos, req.rto, req.sto, \"J\"))")]},
           checks=("tlc-stable",), expect="ReachesStable"),
]


_CORE_MODULES = (joining, membership, machine, offsets)


@contextlib.contextmanager
def applied(mutant: Mutant):
    """The core mutant, in place in the group machine's modules (or on the coordinator, for
    offsets) for the duration. A function is compiled in the namespace of the module that
    defines it (``joining``, ``membership``, ``offsets``...) and indented as a method, so one
    edit's text reads the same for both."""
    originals = {}
    try:
        for method, edits in mutant.core:
            owner = next(c for c in (joining, membership, offsets, *Coordinator.__mro__) if method in vars(c))
            original = vars(owner)[method]
            source = textwrap.dedent(inspect.getsource(original))
            for old, new in edits:
                # The edits are written with the method's indentation inside the class.
                indented = textwrap.indent(source, "    ")
                if indented.count(old) != 1:
                    raise ValueError(f"{mutant.name}: {method}: the text to replace occurs "
                                     f"{indented.count(old)} times")
                source = textwrap.dedent(indented.replace(old, new))
            namespace: dict = {}
            module = sys.modules[original.__module__]  # where it is defined: its globals
            exec(compile(source, f"<mutant {mutant.name}: {method}>", "exec"), vars(module), namespace)
            # a function is set in every module that imported it by name (membership calls
            # joining's complete_join as its own), a method on its class
            holders = [m for m in _CORE_MODULES if vars(m).get(method) is original] if inspect.ismodule(owner) \
                else [owner]
            for holder in holders:
                originals[(holder, method)] = original
                setattr(holder, method, namespace[method])
        yield
    finally:
        for (holder, method), original in originals.items():
            setattr(holder, method, original)


@attrs.define
class MutantResult:
    """``catches``: what each check that ran found (crashes included), in order; ``caught``:
    the first catch that is not a crash; ``problem``: why the mutant fails (not caught, caught
    only by a crash, not through its ``expect``), None when it passes."""

    mutant: Mutant
    catches: list
    seconds: float

    @property
    def caught(self) -> Catch | None:
        return next((c for c in self.catches if not c.crash), None)

    @property
    def caught_by(self) -> str | None:
        """The check that caught it (not by a crash)."""
        return self.caught.check if self.caught is not None else None

    @property
    def also(self) -> list[str]:
        """Every check that caught it, not by a crash."""
        return [c.check for c in self.catches if not c.crash]

    @property
    def problem(self) -> str | None:
        m, c = self.mutant, self.caught
        if c is None:
            crashes = [x for x in self.catches if x.crash]
            return ("CAUGHT ONLY BY A CRASH: " + "; ".join(x.line() for x in crashes)) if crashes else "NOT CAUGHT"
        if m.expect is not None and not _through(c, m.expect):
            return f"caught by {c.check} ({c.by}), NOT THROUGH {m.expect}"
        return None

    @property
    def passed(self) -> bool:
        return self.problem is None


def _through(c: Catch, expect: str) -> bool:
    """The catch is about ``expect``: the property, or the field the first difference is in
    (``ms`` for ``out[3].ms``)."""
    about = c.about or ""
    return about == expect or about.endswith("." + expect)


def run_mutants(checks: dict[str, Callable[[Mutant], Catch | None]], names: list[str] | None = None,
                out=print, every_check: bool = False) -> list[MutantResult]:
    """``checks`` maps a check name to a function that returns what caught the mutant, or None.
    A crash does not stop the mutant's checks; the first catch that is not one does, unless
    ``every_check``."""
    results = []
    for m in MUTANTS:
        if names and m.name not in names:
            continue
        started = time.monotonic()
        catches = []
        ctx = applied(m) if m.core else contextlib.nullcontext()
        with ctx:
            for check in m.checks:
                c = checks[check](m)
                if c is None:
                    continue
                catches.append(c)
                if not c.crash and not every_check:
                    break
        r = MutantResult(m, catches, time.monotonic() - started)
        results.append(r)
        shown = r.problem or f"caught by {r.caught.line()}"
        if every_check:
            shown += (f" [caught by: {', '.join(r.also) or 'none'} of {', '.join(m.checks)}"
                      + "".join(f"; {c.check} crashed" for c in catches if c.crash) + "]")
        out(f"  {m.name:42s} {m.source:26s} -> {shown} ({r.seconds:.1f} s)")
    return results


def mutant_names() -> list[str]:
    return [m.name for m in MUTANTS]


def _key(text: str) -> str:
    """Names and bug ids compared without case or punctuation: ``KoP #380`` is ``kop-380``."""
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))


def select(text: str, pool: Sequence[Mutant] = tuple(MUTANTS)) -> list[str]:
    """The names of the mutants of ``pool`` a comma-separated list of names and bug ids (any
    case) picks, in catalogue order; a bug id picks every mutant re-creating it. ValueError,
    listing the valid names and ids, for one that matches nothing."""
    wanted = [w.strip() for w in text.split(",") if w.strip()]
    if not wanted:
        raise ValueError(f"expected mutant names or bug ids, got {text!r}; choose from {catalogue_line(pool)}")
    picked: set[str] = set()
    for w in wanted:
        found = {m.name for m in pool if _key(w) in {_key(m.name), *map(_key, m.ids)}}
        if not found:
            raise ValueError(f"unknown mutant {w!r}; choose from {catalogue_line(pool)}")
        picked |= found
    return [m.name for m in pool if m.name in picked]


def catalogue_line(pool: Sequence[Mutant] = tuple(MUTANTS)) -> str:
    """Every mutant's name, with its bug ids, on one line."""
    return ", ".join(f"{m.name} ({'/'.join(m.ids)})" if m.ids else m.name for m in pool)


def catalogue(pool: Sequence[Mutant] = tuple(MUTANTS)) -> str:
    """The mutants, one a line: name, bug ids, where the bug comes from (for --help)."""
    width = max(len(m.name) for m in pool) + 2
    ids = max(len("/".join(m.ids)) for m in pool) + 2

    def source(m: Mutant) -> str:
        return "" if m.source in m.ids else m.source

    return "\n".join(f"  {m.name:{width}}{'/'.join(m.ids) or '-':{ids}}{source(m)}".rstrip() for m in pool)


__all__ = ["MUTANTS", "Mutant", "Catch", "MutantResult", "violated_property", "only_property", "applied", "run_mutants", "mutant_names", "select", "catalogue", "catalogue_line",
           "Path"]
