"""Trace validation: a run of the core, checked by TLC against tla/Coordinator.tla.

A trace is the core's events of one group, each with the whole state after it and the
commands it emitted, read as the spec's values (``model.Alpha``). Python writes it as a
generated module (``TraceCheck.tla``: the log as a TLA+ sequence, an index variable ``i``
walking it); TLC starts from the spec's ``Init`` for the logged ``LoadPartition`` and takes, at
each line, the spec action of the logged event with its logged parameters, requiring the next
state (all variables, ``out`` included) to be the logged one. The spec's invariants are checked
on every line. An accepted trace exits 0; a rejected one deadlocks (exit 11) in the last state
that matched, and its ``i`` tells the line where the core and the spec diverged.

Traces come from the scenario runner (the Driver's observer sees every event) and from a
hypothesis-driven client that picks each next input among those the spec's environment may
send (``build.spec_inputs``).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any, Iterable

import attrs

from groupcoord.core import events as ev
from groupcoord.core.commands import Respond
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator

from groupcoord.adapters.tla.build import (
    Model,
    client_request,
    is_client,
    spec_inputs,
)
from groupcoord.adapters.tla.model import (
    CLIENT,
    GROUP,
    PARTITION,
    Alpha,
    Ids,
    OutOfModel,
    apply_timers,
    timer_key,
)
from groupcoord.adapters.tla.run import TLA_DIR, run_tlc
from groupcoord.adapters.tla.values import MV, F, fmt, fn, parse

STATE_VARS = ("state", "prevState", "generation", "protocolType", "protocolName", "leader", "members", "mem",
              "pending", "pendingSync", "newMemberAdded", "timers", "writes", "held", "budget", "out", "event")


@attrs.define
class Trace:
    name: str
    rows: list  # F(event=..., s=F(all variables))
    initial_delay: int
    instances: set = attrs.Factory(set)


MODELLED_REQUESTS = (ev.JoinGroup, ev.SyncGroup, ev.Heartbeat, ev.LeaveGroup)


class _Recorder:
    """Reads core events and their commands as spec rows (one group, one partition).

    ``others``: what to do with an input that is no step of the spec for this group (another
    partition's load or timer, a write on another partition, a request the spec has no action
    for or of another group): "refuse" raises OutOfModel; "step over" runs it through the core
    and leaves it out of the rows if it changes nothing the spec sees (the group's state, its
    timers, the partition's writes and held results) and emits nothing the spec sees, counting
    it in ``stepped_over``, else raises OutOfModel saying so."""

    def __init__(self, config: CoordinatorConfig, gid: str, partition: int = PARTITION,
                 others: str = "refuse") -> None:
        self.config = config
        self.alpha = Alpha(Ids(), gid, partition)
        self.coordinator = Coordinator(config)
        self.timers: dict = {}
        self.rows: list[F] = []
        self.instances: set = set()
        self.others = others
        self.stepped_over: dict[str, int] = {}

    def is_other(self, event) -> bool:
        """Not a step of the spec for this group (see the class)."""
        alpha = self.alpha
        if isinstance(event, (ev.LoadPartition, ev.UnloadPartition)):
            return event.partition != alpha.partition
        if isinstance(event, ev.TimerFired):
            return timer_key(event.key, alpha.ids, alpha.gid, alpha.partition) is None
        if isinstance(event, (ev.WriteCompleted, ev.WriteFailed)):
            write = self.coordinator.snapshot().writes.get(event.write_id)
            return write is None or write.partition != alpha.partition
        if isinstance(event, ev.DeleteGroups):
            return alpha.gid not in tuple(event.groups_names)
        if isinstance(event, ev.Request):
            return not isinstance(event, MODELLED_REQUESTS) or getattr(event, "group_id", None) != alpha.gid
        return False

    def step_over(self, event) -> None:
        alpha = self.alpha
        name = type(event).__name__
        snapshot = self.coordinator.snapshot()
        before = alpha.state(snapshot, self.timers, -1)
        commands = self.coordinator.handle(event)
        if isinstance(event, ev.TimerFired):
            self.timers.pop(event.key, None)
        apply_timers(self.timers, commands)
        own = event.request_id if isinstance(event, ev.Request) else object()
        seen = [c for c in commands if not (isinstance(c, Respond) and c.request_id == own)]
        try:
            alpha.remember_writes(seen)
            out = alpha.commands(seen, snapshot if self.rows else None, event)
            after = alpha.state(self.coordinator.snapshot(), self.timers, -1)
        except OutOfModel as e:
            raise OutOfModel(f"{_what(event)}, which changes what the spec sees of group {alpha.gid!r} and its "
                             f"partition: {e}") from None
        if out or after != before:
            raise OutOfModel(f"{_what(event)}, which changes what the spec sees of group {alpha.gid!r}")
        self.stepped_over[name] = self.stepped_over.get(name, 0) + 1

    def feed(self, event) -> None:
        # Not runtime.CommandRunner: write outcomes and timer firings are the trace's own inputs,
        # re-run one at a time; the commands are read into the spec state, not carried out.
        alpha = self.alpha
        if self.others == "step over" and self.is_other(event):
            self.step_over(event)
            return
        if isinstance(event, ev.LoadPartition) and self.rows:
            raise OutOfModel("a second LoadPartition (a reload): the spec models one coordinator")
        if isinstance(event, (ev.LoadPartition, ev.UnloadPartition)) and event.partition != alpha.partition:
            raise OutOfModel("another partition")
        if isinstance(event, ev.Request):
            gid = getattr(event, "group_id", None)
            if isinstance(event, ev.DeleteGroups):
                if tuple(event.groups_names) != (alpha.gid,):
                    raise OutOfModel("a DeleteGroups of other groups")
            elif gid != alpha.gid or not isinstance(event, MODELLED_REQUESTS):
                raise OutOfModel(_what(event))
            if gid == "":
                raise OutOfModel("the empty group id (INVALID_GROUP_ID is not in the spec)")
            if isinstance(event, ev.JoinGroup) and not (
                    self.config.group_min_session_timeout_ms <= event.session_timeout_ms
                    <= self.config.group_max_session_timeout_ms):
                raise OutOfModel("a session timeout out of bounds (INVALID_SESSION_TIMEOUT is not in the spec)")
            if isinstance(event, ev.JoinGroup) and event.member_id == "":
                alpha.ids.learn(event.new_member_uuid, event.client_id, event.group_instance_id)
            for inst in [getattr(event, "group_instance_id", None)] + [
                    m.group_instance_id for m in getattr(event, "members", ())]:
                if inst is not None:
                    self.instances.add(inst)
            alpha.tags[event.request_id] = alpha.tag_of_request(event)
        before = self.coordinator.snapshot()
        spec_event = alpha.event(event)
        commands = self.coordinator.handle(event)
        if isinstance(event, ev.TimerFired):
            self.timers.pop(event.key, None)  # a timer fires once
        apply_timers(self.timers, commands)
        alpha.remember_writes(commands)
        out = alpha.commands(commands, before if self.rows else None, event)
        state = alpha.state(self.coordinator.snapshot(), self.timers, -1)
        state["out"] = out
        state["event"] = spec_event
        self.rows.append(F(event=spec_event, s=F(state)))


_NOT_IN_SPEC = {
    "OffsetCommit": "offsets are not in the spec", "OffsetFetch": "offsets are not in the spec",
    "OffsetDelete": "offsets are not in the spec",
    "FindCoordinator": "the spec has no FindCoordinator (it models one coordinator)",
    "DescribeGroups": "the spec has no DescribeGroups", "ListGroups": "the spec has no ListGroups",
}


def _what(event) -> str:
    """An input the spec has no step for, and why."""
    name = type(event).__name__
    gid = getattr(event, "group_id", None)
    named = f"{name} of {gid!r}" if gid is not None else name
    why = _NOT_IN_SPEC.get(name)
    return f"{named} ({why})" if why else named


def record(events: Iterable, config: CoordinatorConfig, gid: str, name: str) -> Trace:
    r = _Recorder(config, gid)
    for e in events:
        r.feed(e)
    return Trace(name, r.rows, config.group_initial_rebalance_delay_ms, r.instances)


# ----------------------------------------------------------------------------- sources of traces


def scenario_trace(path: str | Path) -> Trace:
    """The events the scenario runner fed the core for one scenario, as a trace (OutOfModel
    if the scenario leaves the spec's scope: offsets, several groups, a reload...)."""
    from groupcoord.adapters.conformance.scenarios import SCENARIO_BASE_CONFIG, read_scenario, run_scenario

    scenario, bad = read_scenario(path)
    if bad is not None:
        raise OutOfModel(bad.reason)
    events: list = []
    result = run_scenario(scenario, str(path), observer=lambda e, _c: events.append(e))
    if not result.passed:
        raise OutOfModel(f"the scenario fails: {result.reason}")
    config = CoordinatorConfig.from_kafka(scenario.get("config") or {}, base=SCENARIO_BASE_CONFIG)
    return scoped_record(events, config, Path(path).name)


def scoped_record(events: list, config: CoordinatorConfig, name: str) -> Trace:
    """``record`` of a run the spec can model (one group, one offsets partition, no size limit);
    OutOfModel saying why not otherwise."""
    gids = {getattr(e, "group_id", None) for e in events if isinstance(e, ev.Request)} - {None}
    if len(gids) != 1:
        raise OutOfModel(f"groups {sorted(gids)} (the spec models one)")
    if config.offsets_topic_num_partitions != 1:
        raise OutOfModel("several offsets partitions (the spec models one)")
    if config.group_max_size != CoordinatorConfig().group_max_size:
        raise OutOfModel("group.max.size (not in the spec)")
    return record(events, config, gids.pop(), name)


def scenario_traces(paths: Iterable[str | Path], limit: int) -> list[Trace]:
    """Up to ``limit`` traces of the scenarios in ``paths`` that stay within the spec's scope,
    the longest first."""
    from groupcoord.adapters.conformance.scenarios import scenario_files

    found = []
    for p in scenario_files(paths):
        try:
            found.append(scenario_trace(p))
        except OutOfModel:
            continue
    found.sort(key=lambda t: (-len(t.rows), t.name))
    return found[:limit]


MAX_GROUPS = 50  # a recording with more is validated one named group at a time


@attrs.define
class Unit:
    """One unit of a recorded trace for ``tla validate``: a group of a group-scoped recording,
    or a group of an instance-scoped file (one coordinator's recording). ``trace``: what TLC
    checks, None when nothing can be; ``stopped``: why the inputs from ``inputs_used + 1`` on
    are not checked (None: all are; ``inputs_used`` None: the unit as a whole);
    ``stepped_over``: inputs the spec does not see (another partition's, a request it has no
    action for), run through the core and shown to change nothing the spec sees, by type."""

    name: str
    inputs: int
    trace: Trace | None = None
    inputs_used: int | None = None
    stopped: str | None = None
    stepped_over: dict = attrs.Factory(dict)

    def not_checked(self) -> str:
        """What is not checked, and why."""
        if self.inputs_used is None:
            return self.stopped
        return f"inputs {self.inputs_used + 1}-{self.inputs} of {self.inputs}, from {self.stopped}"

    @property
    def partial(self) -> bool:
        return self.trace is not None and self.stopped is not None


def unit_trace(events: list, config: CoordinatorConfig, gid: str, name: str) -> Unit:
    """The part of a recorded unit the spec can check: its inputs re-run through the core for
    group ``gid``, stepping over inputs the spec does not see, up to the first input that
    leaves the spec's scope (a prefix of a run is a run: what comes before it is checked)."""
    unit = Unit(name, len(events))
    if config.group_max_size != CoordinatorConfig().group_max_size:
        unit.stopped = "group.max.size is set (not in the spec)"
        return unit
    from groupcoord.core.partitioning import partition_for

    r = _Recorder(config, gid, partition_for(gid, config.offsets_topic_num_partitions), others="step over")
    used = 0
    for k, e in enumerate(events):
        try:
            r.feed(e)
        except OutOfModel as x:
            unit.stopped = str(x)
            break
        used = k + 1
    if unit.stopped is not None:
        unit.inputs_used = used
    unit.stepped_over = dict(sorted(r.stepped_over.items()))
    if len(r.rows) >= 2:  # a LoadPartition alone checks nothing past Init
        unit.trace = Trace(name, r.rows, config.group_initial_rebalance_delay_ms, r.instances)
    elif unit.stopped is None:
        unit.stopped = "nothing for the spec to check: no step of the group after its partition's load"
    return unit


def file_traces(path: str | Path, group_id: str | None = None) -> list[Unit]:
    """The units of a trace file or directory (spec/trace-format.md) to validate, recording by
    recording (``trace_files.recordings``: each with its own ``meta.json``): in group scope
    each group (``group_id`` for one), in instance scope each group of each file, its inputs
    re-run through the core (``unit_trace``)."""
    from groupcoord.core import trace as core_trace

    from groupcoord.adapters.replay import trace_files as trace_io

    units: list[Unit] = []
    found = False
    for rec in trace_io.recordings(path):
        config = trace_io.coordinator_config(rec.meta)
        if rec.scope == "instance":
            for f in rec.files:
                events = [core_trace.decode({"type": r["type"], "data": r["data"]})
                          for r in trace_io.read_records(f) if r["dir"] == "in"]
                gids = list(dict.fromkeys(g for e in events if isinstance(e, ev.Request)
                                          for g in _groups_of(e)))
                if group_id is not None:
                    gids = [g for g in gids if g == group_id]
                elif len(gids) > MAX_GROUPS:
                    raise core_trace.TraceError(f"{f}: more than {MAX_GROUPS} groups; name one with --group")
                found |= bool(gids)
                if not gids and group_id is None:
                    units.append(Unit(str(f), len(events), stopped="no group in it"))
                for g in gids:
                    units.append(unit_trace(events, config, g, str(f) if len(gids) == 1 else f"{f} group {g!r}"))
            continue
        gids = trace_io.group_ids(rec.name, limit=MAX_GROUPS + 1, files=rec.files)
        if group_id is None and len(gids) > MAX_GROUPS:
            raise core_trace.TraceError(f"{rec.name}: more than {MAX_GROUPS} groups; name one with --group")
        by_group: dict[str, list] = {}
        for f in rec.files:
            for r in trace_io.read_records(f, group_id):
                if r["dir"] == "in" and r["group_id"] is not None:
                    by_group.setdefault(r["group_id"], []).append(
                        (r["seq"], core_trace.decode({"type": r["type"], "data": r["data"]})))
        for g, rows in by_group.items():
            found = True
            rows.sort(key=lambda row: row[0])
            units.append(unit_trace([e for _, e in rows], config, g, f"{rec.name} group {g!r}"))
    if group_id is not None and not found:
        raise core_trace.TraceError(f"{path}: no records of group {group_id!r}")
    return units


def _groups_of(request) -> tuple:
    if isinstance(request, ev.DeleteGroups):
        return tuple(request.groups_names)
    gid = getattr(request, "group_id", None)
    return (gid,) if gid is not None else ()


# The hypothesis client: inputs the spec's environment may send, chosen by hypothesis.
HYPO_MODEL = Model(ids=["m1", "m2", "m3"], instances=["i1"], protocols=[(("range", "a"),), (("range", "b"),)],
                   protocol_types=["consumer"], rebalance_timeouts=[6000], join_versions=[3, 5, 9],
                   write_errors=["NOT_LEADER_OR_FOLLOWER"], reduce=True)
HYPO_CONFIG = CoordinatorConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=3000)


def events_from_choices(choices: list[int], config: CoordinatorConfig = HYPO_CONFIG,
                        model: Model = HYPO_MODEL) -> list:
    """Core events: at each step, the input ``choices[k]`` (modulo their number) among those the
    spec's environment may send in the current state; writes complete in order."""
    rec = _Recorder(config, GROUP)
    load = ev.LoadPartition(now_ms=0, partition=PARTITION, records=())
    rec.feed(load)
    events = [load]
    writes: list[int] = []
    for k, choice in enumerate(choices):
        s = rec.rows[-1]["s"]
        s = s.set(budget=-1)
        seen = set(rec.alpha.ids.to_spec.values())
        local = Model(sorted(set(model.ids) | seen), model.instances, model.protocols, model.protocol_types,
                      model.rebalance_timeouts, model.join_versions, model.write_errors, model.reduce)
        inputs = [e for e in spec_inputs(s, local) if e["type"] != "UnloadPartition" or k == len(choices) - 1]
        inputs.sort(key=fmt)  # not in the core's (hash-dependent) set order
        kinds = sorted({_kind(e) for e in inputs})
        kind = kinds[choice % len(kinds)]
        of_kind = [e for e in inputs if _kind(e) == kind]
        e = of_kind[(choice // len(kinds)) % len(of_kind)]
        event = _core_event(e, rec, k, writes)
        rec.feed(event)
        events.append(event)
        for c in rec.coordinator.snapshot().writes.values():
            if c.write_id not in writes:
                writes.append(c.write_id)
    return events


def _kind(e: F) -> str:
    return e["type"] + (str(e["key"][0]) if e["type"] == "TimerFired" else "")


def _core_event(e: F, rec: _Recorder, k: int, writes: list[int]):
    t = e["type"]
    now = 1000 * (k + 1)

    def cid(m):
        if m == "":
            return ""
        known = [core_id for core_id, spec_id in rec.alpha.ids.to_spec.items() if spec_id == m]
        group = rec.coordinator.snapshot().groups.get(GROUP)
        live = set(group.members) | set(group.pending_members) if group is not None else set()
        for core_id in known:
            if core_id in live:
                return core_id
        return known[-1] if known else f"{CLIENT}-{m}"

    if is_client(e):
        # A fresh uuid for each JoinGroup: the core's ids are <client or instance>-<uuid>, the
        # spec's the uuid, so a reused uuid would name two core members alike.
        uuid = (f"u{k}" if e["uuid"] is not None else f"unused{k}") if t == "JoinGroup" else None
        return client_request(e, ("r", k), now, cid, uuid, session_timeout_ms=10000)
    if t == "TimerFired":
        key = e["key"]
        core_key = next(k for k in rec.timers if timer_key(k, rec.alpha.ids) == tuple(key))
        return ev.TimerFired(now_ms=now, key=core_key, payload=rec.timers[core_key])
    oldest = min(rec.coordinator.snapshot().writes) if t in ("WriteCompleted", "WriteFailed") else None
    if t == "WriteCompleted":
        return ev.WriteCompleted(now_ms=now, write_id=oldest)
    if t == "WriteFailed":
        from groupcoord.core.errors import Error
        return ev.WriteFailed(now_ms=now, write_id=oldest, error=Error[e["error"]])
    if t == "UnloadPartition":
        return ev.UnloadPartition(now_ms=now, partition=PARTITION)
    raise ValueError(t)


def hypothesis_trace(seed: int = 0, steps: int = 40) -> Trace:
    """A trace whose inputs hypothesis chose (derandomised by ``seed``, so a run is repeatable)."""
    from hypothesis import HealthCheck, Phase, given, seed as hseed, settings
    from hypothesis import strategies as st

    found: list = []

    # Several examples, the last one kept: hypothesis starts with the simplest (all zeros).
    @hseed(seed)
    @settings(max_examples=5, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.lists(st.integers(0, 10_000), min_size=steps, max_size=steps))
    def draw(choices):
        found.append(choices)

    draw()
    events = events_from_choices(found[-1])
    return record(events, HYPO_CONFIG, GROUP, f"hypothesis seed {seed}")


# ----------------------------------------------------------------------------- the TLA+ side


def corrupt(trace: Trace, step: int | None = None) -> tuple[Trace, int]:
    """A copy of ``trace`` with one line's state changed (the generation after a settled join
    phase, else the last line's out): TLC must reject it at that line (1-based)."""
    rows = list(trace.rows)
    if step is None:
        candidates = [k for k in range(1, len(rows)) if rows[k]["s"]["generation"] != rows[k - 1]["s"]["generation"]]
        step = candidates[0] + 1 if candidates else len(rows)
    k = step - 1
    s = rows[k]["s"]
    rows[k] = rows[k].set(s=s.set(generation=s["generation"] + 1))
    return Trace(trace.name + f" (corrupted at line {step})", rows, trace.initial_delay, trace.instances), step


def _ids(trace: Trace) -> set:
    ids: set = set()
    for row in trace.rows:
        s = row["s"]
        ids |= set(s["members"]) | set(s["pending"]) | set(s["pendingSync"])
        if isinstance(s["timers"], dict):
            ids |= {k[1] for k in s["timers"] if k[0] == "hb"}
        if s["leader"] is not None:
            ids.add(s["leader"])
    return {i for i in ids if isinstance(i, (str, MV))}


def module_text(trace: Trace | list) -> tuple[str, str]:
    """The generated TraceCheck.tla and TraceCheck.cfg for one trace or a batch of traces with
    the same initial delay (TLC picks the trace ``k`` in its initial state)."""
    traces = trace if isinstance(trace, list) else [trace]
    if len({t.initial_delay for t in traces}) != 1:
        raise ValueError("a batch of traces shares one initial delay")
    ids = set().union(*(_ids(t) for t in traces))
    instances = set().union(*(t.instances for t in traces))
    errors = {r["event"]["error"] for t in traces for r in t.rows
              if r["event"]["type"] == "WriteFailed"} or {"NOT_COORDINATOR"}
    logs = ",\n".join("<<\n  " + ",\n  ".join(f"[event |-> {fmt(r['event'])},\n   s |-> {fmt(r['s'])}]"
                                                for r in t.rows) + ">>" for t in traces)
    names = ", ".join(t.name for t in traces)
    matches = "\n".join(f"    /\\ {v} = t.{v}" for v in STATE_VARS if v != "budget")
    primed = "\n".join(f"    /\\ {v}' = t.{v}" for v in STATE_VARS if v != "budget")
    text = f"""---- MODULE TraceCheck ----
\\* Generated by groupcoord.adapters.tla.trace from the traces: {names}; do not edit.
EXTENDS CoordinatorProps
VARIABLES i, k
TraceIds == {fmt(frozenset(ids))}
TraceInstances == {fmt(frozenset(instances))}
TraceErrors == {fmt(frozenset(errors))}
TraceNothing == {{}}
TraceVersions == {{5}}
TraceUnbounded == -1
TraceLogs == <<
{logs}
>>
TraceLog == TraceLogs[k]
TraceInitGroups == {{TraceLogs[j][1].event.group : j \\in 1..Len(TraceLogs)}}
Match(t) ==
{matches}
MatchNext(t) ==
{primed}
Req(e) == [f \\in DOMAIN e \\ {{"type"}} |-> e[f]]
Step(e) ==
    CASE e.type = "JoinGroup" -> JoinGroup(Req(e))
      [] e.type = "SyncGroup" -> SyncGroup(Req(e))
      [] e.type = "Heartbeat" -> Heartbeat(Req(e))
      [] e.type = "LeaveGroup" -> LeaveGroup(Req(e))
      [] e.type = "DeleteGroups" -> DeleteGroups
      [] e.type = "TimerFired" /\\ e.key[1] = "hb" -> HeartbeatTimer(e.key[2])
      [] e.type = "TimerFired" /\\ e.key[1] = "join" -> JoinTimer
      [] e.type = "TimerFired" /\\ e.key[1] = "sync" -> SyncTimer
      [] e.type = "TimerFired" /\\ e.key[1] = "expire" -> ExpireTimer
      [] e.type = "WriteCompleted" -> WriteCompleted
      [] e.type = "WriteFailed" -> WriteFailed(e.error)
      [] e.type = "UnloadPartition" -> UnloadPartition
TraceInit == k \\in 1..Len(TraceLogs) /\\ i = 1 /\\ Init /\\ Match(TraceLog[1].s)
TraceNext ==
    \\/ /\\ i < Len(TraceLog)
       /\\ i' = i + 1
       /\\ UNCHANGED <<budget, k>>
       /\\ Step(TraceLog[i + 1].event)
       /\\ MatchNext(TraceLog[i + 1].s)
    \\/ i = Len(TraceLog) /\\ UNCHANGED <<vars, i, k>>
TraceSpec == TraceInit /\\ [][TraceNext]_<<vars, i, k>>
====
"""
    invariants = _invariant_names()
    cfg = f"""CONSTANTS
    None = None
    Ids <- TraceIds
    Instances <- TraceInstances
    Protocols <- TraceNothing
    ProtocolTypes <- TraceNothing
    RebalanceTimeouts <- TraceNothing
    JoinVersions <- TraceVersions
    InitialDelay = {traces[0].initial_delay}
    WriteErrors <- TraceErrors
    InitGroups <- TraceInitGroups
    MaxRequests <- TraceUnbounded
    Reduce = FALSE
SPECIFICATION TraceSpec
INVARIANTS
{chr(10).join('    ' + n for n in invariants)}
"""
    return text, cfg


def _invariant_names() -> list[str]:
    cfg = (TLA_DIR / "MC3.cfg").read_text()
    block = cfg.split("INVARIANTS", 1)[1].split("PROPERTIES", 1)[0]
    return [w for w in block.split() if w]


@attrs.define
class TraceResult:
    name: str
    lines: int
    accepted: bool
    diverged_at: int | None = None  # 1-based line of the log TLC could not match
    event: Any = None
    seconds: float = 0.0
    detail: str = ""

    def line(self) -> str:
        if self.accepted:
            return f"trace {self.name}: {self.lines} lines, accepted ({self.seconds:.1f} s)"
        return (f"trace {self.name}: {self.lines} lines, REJECTED at line {self.diverged_at} "
                f"(event {self.event}) ({self.seconds:.1f} s) {self.detail}")


_I = re.compile(r"^/\\ i = (\d+)$", re.M)


def check_trace(trace: Trace, workers: int = 1, replace: dict | None = None, timeout: float = 300) -> TraceResult:
    return check_traces([trace], workers, replace, timeout)


_K = re.compile(r"^/\\ k = (\d+)$", re.M)


def check_traces(traces: list, workers: int = 1, replace: dict | None = None, timeout: float = 300) -> TraceResult:
    """One TLC run over a batch of traces sharing an initial delay: accepted if every trace is;
    else the first rejected trace TLC met, with its diverging line."""
    text, cfg = module_text(list(traces))
    name = traces[0].name if len(traces) == 1 else f"{len(traces)} traces"
    res = run_tlc("TraceCheck.cfg", "TraceCheck", workers=workers, name=name, timeout=timeout,
                  replace=replace, extra_files={"TraceCheck.tla": text, "TraceCheck.cfg": cfg})
    out = TraceResult(name, sum(len(t.rows) for t in traces), res.ok, seconds=res.seconds)
    if not res.ok:
        found, ks = _I.findall(res.output), _K.findall(res.output)
        trace = traces[int(ks[-1]) - 1] if ks else traces[0]
        out.name = trace.name
        last = int(found[-1]) if found else 0
        out.diverged_at = last + 1 if res.exit_code == 11 else max(last, 1)
        if 1 <= out.diverged_at <= len(trace.rows):
            e = trace.rows[out.diverged_at - 1]["event"]
            out.event = e["type"] + (f" {e['key']}" if e["type"] == "TimerFired" else "")
        out.detail = res.violation()[:300]
    return out


def batches(traces: list) -> list[list]:
    """Traces grouped by initial delay (one TLC run each)."""
    by: dict = {}
    for t in traces:
        by.setdefault(t.initial_delay, []).append(t)
    return [by[d] for d in sorted(by)]
