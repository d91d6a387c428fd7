"""Kafka's own logs as a second kind of observation (``groupcoord verify --kafka-log FILE...``).

A broker's GroupCoordinator lines (classic protocol; the Scala coordinator of Kafka 2.x-3.x and
the Java one of 4.x word them alike) and the Java consumer's lines say what happened to a group:
it prepared to rebalance from some state with some generation, stabilized a generation, got
the leader's assignment, lost or let go a member, was unloaded. Only what was logged is
constrained, against the spec's transition table (core/states.py) and its generation rules:

* a rebalance starts from Empty, Stable or CompletingRebalance (never while one is under way),
  with the generation the group is known to have;
* a join phase ends at the next generation (one more than the rebalance's old one);
* an assignment is received for the generation just stabilized, before the next rebalance;
* a consumer joins and syncs in a generation the coordinator stabilized (when the broker's lines
  are there too).

Lines that match no known statement are counted and listed, never dropped silently. A group
with no constraint checked is inconclusive."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import attrs

from groupcoord.core.states import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE, is_legal
from groupcoord.adapters.verify.search import CONFORMS, DIVERGES, INCONCLUSIVE, Verdict

_TIME = re.compile(r"^\[?(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d{3})")
_PATTERNS = [
    ("prepare", re.compile(r"Preparing to rebalance group (?P<g>\S+) in state (?P<state>\w+) with old generation "
                           r"(?P<gen>-?\d+)")),
    ("stable", re.compile(r"Stabilized group (?P<g>\S+) generation (?P<gen>-?\d+)")),
    ("assign", re.compile(r"Assignment received from leader (?P<m>\S+) for group (?P<g>\S+) for generation "
                          r"(?P<gen>-?\d+)")),
    ("failed", re.compile(r"Member (?P<m>\S+) in group (?P<g>\S+) has failed, removing it from the group")),
    ("left", re.compile(r"\[Group (?P<g>\S+)\] (?:Dynamic |Static |Pending )?[Mm]ember (?P<m>\S+) .*has left group")),
    ("left", re.compile(r"Member\[.*member\.id (?P<m>[^\]\s]+)\] in group (?P<g>\S+) has left")),
    ("empty", re.compile(r"Group (?P<g>\S+) with generation (?P<gen>-?\d+) is now empty")),
    ("dead", re.compile(r"[Gg]roup (?P<g>\S+?)\)? transitioned to Dead")),
    ("joined", re.compile(r"\[Consumer clientId=[^,\]]*, groupId=(?P<g>[^\]]+)\] Successfully joined group with "
                          r"generation Generation\{generationId=(?P<gen>-?\d+)")),
    ("synced", re.compile(r"\[Consumer clientId=[^,\]]*, groupId=(?P<g>[^\]]+)\] Successfully synced group in "
                          r"generation Generation\{generationId=(?P<gen>-?\d+)")),
    ("hb-rebalancing", re.compile(r"\[Consumer clientId=[^,\]]*, groupId=(?P<g>[^\]]+)\] Attempt to heartbeat failed "
                                  r"since group is rebalancing")),
    ("rejoin", re.compile(r"\[Consumer clientId=[^,\]]*, groupId=(?P<g>[^\]]+)\] Request joining group due to")),
]
_REBALANCE_FROM = {s for s in (EMPTY, STABLE, COMPLETING_REBALANCE, PREPARING_REBALANCE) if is_legal(s, PREPARING_REBALANCE)}


class LogError(ValueError):
    """A log file that cannot be read."""


@attrs.frozen
class LogEvent:
    kind: str
    group_id: str
    line: str  # file:line
    time: str | None
    generation: int | None = None
    state: str | None = None
    member: str | None = None


@attrs.frozen
class LogRead:
    events: tuple
    unknown: tuple  # (file:line, text) of lines matching no known statement
    lines: int


def read_logs(paths) -> LogRead:
    events, unknown, total = [], [], 0
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            raise LogError(f"{path}: {e.strerror or e}") from None
        for n, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            total += 1
            event = _parse(raw, f"{path}:{n}")
            if event is None:
                unknown.append((f"{path}:{n}", raw[:200]))
            else:
                events.append(event)
    return LogRead(tuple(events), tuple(unknown), total)


def _parse(raw: str, where: str) -> LogEvent | None:
    t = _TIME.search(raw)
    for kind, pattern in _PATTERNS:
        m = pattern.search(raw)
        if m:
            d = m.groupdict()
            return LogEvent(kind, d["g"].rstrip(".,"), where, t.group(1) if t else None,
                            int(d["gen"]) if d.get("gen") is not None else None, d.get("state"), d.get("m"))
    return None


def check_logs(read: LogRead) -> list[Verdict]:
    groups: dict[str, list[LogEvent]] = {}
    for e in read.events:
        groups.setdefault(e.group_id, []).append(e)
    return [_check_group(g, events) for g, events in sorted(groups.items())]


def _check_group(group_id: str, events: list[LogEvent]) -> Verdict:
    """The events in the order logged (one file per source; a broker's lines come in order)."""
    state, gen, checked = None, None, 0
    stabilized: set[int] = set()
    broker_seen = any(e.kind in ("prepare", "stable") for e in events)

    def diverges(e: LogEvent, why: str) -> Verdict:
        return Verdict(group_id, DIVERGES, f"{e.line}: {why}", len(events), checked, observed={"kind": e.kind},
                       steps=tuple(f"{x.line}: {x.kind}" for x in events[:events.index(e) + 1][-12:]))

    for e in events:
        if e.kind == "prepare":
            if e.state not in {s.value for s in _REBALANCE_FROM}:
                return diverges(e, f"a rebalance prepared from {e.state}; the spec starts one only from "
                                   f"{', '.join(sorted(s.value for s in _REBALANCE_FROM))}")
            if state is not None and e.state != state:
                return diverges(e, f"a rebalance prepared from {e.state}, but the group was {state}")
            if gen is not None and e.generation != gen:
                return diverges(e, f"a rebalance prepared with old generation {e.generation}, but the group had "
                                   f"generation {gen}")
            state, gen, checked = PREPARING_REBALANCE.value, e.generation, checked + 1
        elif e.kind == "stable":
            if state not in (None, PREPARING_REBALANCE.value):
                return diverges(e, f"generation {e.generation} stabilized while the group was {state}")
            if gen is not None and e.generation != gen + 1:
                return diverges(e, f"the join phase ended at generation {e.generation}; the spec moves it from "
                                   f"{gen} to {gen + 1}")
            state, gen, checked = COMPLETING_REBALANCE.value, e.generation, checked + 1
            stabilized.add(e.generation)
        elif e.kind == "assign":
            if state not in (None, COMPLETING_REBALANCE.value) or (gen is not None and e.generation != gen):
                return diverges(e, f"an assignment for generation {e.generation} received while the group was "
                                   f"{state} at generation {gen}")
            state, checked = STABLE.value, checked + 1
        elif e.kind == "empty":
            state, gen = EMPTY.value, e.generation
        elif e.kind == "dead":
            state, gen = None, None  # unloaded or deleted: a later load starts from what the log holds
        elif e.kind in ("joined", "synced") and broker_seen:
            if e.generation not in stabilized:
                return diverges(e, f"a consumer {e.kind} generation {e.generation}, which the coordinator never "
                                   f"stabilized")
            checked += 1
    if not checked:
        return Verdict(group_id, INCONCLUSIVE, "no logged step constrains the group", len(events), 0)
    return Verdict(group_id, CONFORMS, f"{checked} logged steps as the spec allows", len(events), checked)
