"""Where the traces of trace validation come from (each made with ``trace.Recorder``): the
scenario runner (the Driver's observer sees every event; ``scenario_trace``,
``scenario_traces``), recorded trace files, unit by unit (``file_traces``), and a
hypothesis-driven client that picks each next input among those the spec's environment may
send (``build.spec_inputs``; ``hypothesis_trace``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

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
    OutOfModel,
    timer_key,
)
from groupcoord.adapters.tla.trace import Recorder, Trace, Unit, record, scoped_record, unit_trace
from groupcoord.adapters.tla.values import F, fmt
from groupcoord.core import events as ev
from groupcoord.core.config import CoordinatorConfig


def scenario_events(path: str | Path) -> tuple[list, CoordinatorConfig]:
    """The events the scenario runner fed the core for one scenario, and its configuration
    (OutOfModel if the scenario cannot be read or fails)."""
    from groupcoord.adapters.scenarios.runner import SCENARIO_BASE_CONFIG, read_scenario, run_scenario

    scenario, bad = read_scenario(path)
    if bad is not None:
        raise OutOfModel(bad.reason)
    events: list = []
    result = run_scenario(scenario, str(path), observer=lambda e, _c: events.append(e))
    if not result.passed:
        raise OutOfModel(f"{SCENARIO_FAILS}: {result.reason}")
    return events, CoordinatorConfig.from_kafka(scenario.get("config") or {}, base=SCENARIO_BASE_CONFIG)


def scenario_trace(path: str | Path) -> Trace:
    """One scenario's run as a trace (OutOfModel if the scenario leaves the spec's scope:
    offsets, several groups, a reload...)."""
    events, config = scenario_events(path)
    return scoped_record(events, config, Path(path).name)


def scenario_traces(paths: Iterable[str | Path]) -> tuple[list[Trace], list[tuple[str, str]]]:
    """The traces of the scenarios in ``paths`` that stay within the spec's scope, the longest
    first, and the scenarios left out: (file name, why), in file order."""
    from groupcoord.adapters.scenarios.runner import scenario_files

    found, left_out = [], []
    for p in scenario_files(paths):
        try:
            found.append(scenario_trace(p))
        except OutOfModel as e:
            left_out.append((Path(p).name, str(e)))
    found.sort(key=lambda t: (-len(t.rows), t.name))
    return found, left_out


SCENARIO_FAILS = "the scenario fails"


def reasons(left_out: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Scenarios left out, by reason: the reason with its group ids and lists elided (``OffsetCommit
    of 'g'`` and ``OffsetCommit of 'group'`` are one reason), most scenarios first."""
    import re

    by: dict[str, list[str]] = {}
    for name, why in left_out:
        why = SCENARIO_FAILS if why.startswith(SCENARIO_FAILS) else re.sub(r"\[[^\]]*\]|'[^']*'", "...", why)
        by.setdefault(why, []).append(name.removesuffix(".json"))
    return dict(sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])))


MAX_GROUPS = 50  # a recording with more is validated one named group at a time


def file_traces(path: str | Path, group_id: str | None = None) -> list[Unit]:
    """The units of a trace file or directory (spec/trace-format.md) to validate, recording by
    recording (``trace_files.recordings``: each with its own ``meta.json``): in group scope
    each group (``group_id`` for one), in instance scope each group of each file, its inputs
    re-run through the core (``unit_trace``)."""
    from groupcoord.adapters.traces import trace_files as trace_io
    from groupcoord.core import trace as core_trace

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
                    units.append(_unit(events, config, g, str(f) if len(gids) == 1 else f"{f} group {g!r}"))
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
            units.append(_unit([e for _, e in rows], config, g, f"{rec.name} group {g!r}"))
    if group_id is not None and not found:
        raise core_trace.TraceError(f"{path}: no records of group {group_id!r}")
    return units


def _unit(events: list, config: CoordinatorConfig, gid: str, name: str) -> Unit:
    """The unit of group ``gid``: checked against the consumer group spec when the group is one
    (a ConsumerGroupHeartbeat of it among the inputs), else against the classic spec."""
    if not any(isinstance(e, ev.ConsumerGroupHeartbeat) and e.group_id == gid for e in events):
        return unit_trace(events, config, gid, name)
    from groupcoord.adapters.tla import consumer_trace

    t = consumer_trace.record(events, gid, config, name)
    unit = Unit(name, len(events), trace=t if t.steps else None, stopped=t.stopped,
                stepped_over={"inputs the consumer spec does not see": t.stepped_over} if t.stepped_over else {})
    if t.stopped is not None:
        unit.inputs_used = t.events - 1
    elif not t.steps:
        unit.stopped = "nothing for the spec to check: no step of the group after its partition's load"
    return unit


def _groups_of(request) -> tuple:
    if isinstance(request, ev.DeleteGroups):
        return tuple(request.groups_names)
    gid = getattr(request, "group_id", None)
    return (gid,) if gid is not None else ()


# The hypothesis client: inputs the spec's environment may send, chosen by hypothesis.
# Two rebalance and two session timeouts: the timers' lengths (the longest rebalance timeout of
# the members, each member's own session) differ with who joined with which.
HYPO_MODEL = Model(ids=["m1", "m2", "m3"], instances=["i1"], protocols=[(("range", "a"),), (("range", "b"),)],
                   protocol_types=["consumer"], rebalance_timeouts=[6000, 9000], session_timeouts=[10000, 12000],
                   join_versions=[3, 5, 9],
                   write_errors=["NOT_LEADER_OR_FOLLOWER"], reduce=True, offset_keys=[("t", 0), ("u", 0)],
                   offset_values=[1, 2], commit_versions=[8, 9])
HYPO_CONFIG = CoordinatorConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=3000)


def events_from_choices(choices: list[int], config: CoordinatorConfig = HYPO_CONFIG,
                        model: Model = HYPO_MODEL) -> list:
    """Core events: at each step, the input ``choices[k]`` (modulo their number) among those the
    spec's environment may send in the current state; writes complete in order, the oldest or
    the newest may fail."""
    rec = Recorder(config, GROUP)
    load = ev.LoadPartition(now_ms=0, partition=PARTITION, records=())
    rec.feed(load)
    events = [load]
    writes: list[int] = []
    for k, choice in enumerate(choices):
        s = rec.rows[-1]["s"]
        s = s.set(budget=-1)
        seen = set(rec.alpha.ids.to_spec.values())
        local = Model(sorted(set(model.ids) | seen), model.instances, model.protocols, model.protocol_types,
                      model.rebalance_timeouts, model.session_timeouts, model.join_versions, model.write_errors,
                      model.reduce, model.offset_keys, model.offset_values, model.commit_versions,
                      fail_order="both")  # the newest write may fail first too (Kafka's order)
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


def _core_event(e: F, rec: Recorder, k: int, writes: list[int]):
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
        return client_request(e, ("r", k), now, cid, uuid)
    if t == "TimerFired":
        key = e["key"]
        core_key = next(k for k in rec.timers if timer_key(k, rec.alpha.ids) == tuple(key))
        return ev.TimerFired(now_ms=now, key=core_key, payload=rec.timers[core_key])
    oldest = min(rec.coordinator.snapshot().writes) if t in ("WriteCompleted", "WriteFailed") else None
    if t == "WriteCompleted":
        return ev.WriteCompleted(now_ms=now, write_id=oldest)
    if t in ("WriteFailed", "WriteFailedLast"):
        from groupcoord.core.errors import Error
        failed = oldest if t == "WriteFailed" else max(rec.coordinator.snapshot().writes)
        return ev.WriteFailed(now_ms=now, write_id=failed, error=Error[e["error"]])
    if t == "UnloadPartition":
        return ev.UnloadPartition(now_ms=now, partition=PARTITION)
    raise ValueError(t)


def hypothesis_trace(seed: int = 0, steps: int = 40) -> Trace:
    """A trace whose inputs hypothesis chose (derandomised by ``seed``, so a run is repeatable)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
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
