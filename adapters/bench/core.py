"""``groupcoord bench core``: events per second through the pure core.

Each measurement feeds pre-built events to ``Coordinator.handle`` and applies the timer
commands to a TimerTable (what every adapter must do); building events is the caller's cost
and is left out. Numbers are printed as a table, then one JSON object per line, last.
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from collections import deque

from groupcoord.adapters.bench.step_values import StepValues, builders_by_kind, run_builders
from groupcoord.adapters.protocol.translate import request_event
from groupcoord.adapters.runtime.driver import Driver
from groupcoord.core import events as ev
from groupcoord.core.commands import (
    HeartbeatTimer,
    OffsetCommitRecord,
    OffsetCommitResponse,
    PartitionResult,
    Respond,
    SetTimer,
    TopicResult,
    Write,
)
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.continuations import UndoOffsets
from groupcoord.core.coordinator import Coordinator
from groupcoord.core.errors import Error
from groupcoord.core.offsets import OffsetEntry
from groupcoord.core.writes import PendingWrite

CONFIG = CoordinatorConfig(group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=1)
SESSION_MS = 30_000


def _join(driver: Driver, rid, member_id: str, instance=None, version: int = 5):
    body = {"group_id": "g", "session_timeout_ms": SESSION_MS, "rebalance_timeout_ms": 60_000,
            "member_id": member_id, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]}
    if instance is not None:
        body["group_instance_id"] = instance
    return request_event("JoinGroup", version, body, request_id=rid, now_ms=driver.now_ms,
                         client_id=f"c{rid}", new_member_uuid=driver.new_uuid())


def stable_group(members: int) -> tuple[Driver, list[str], int]:
    """A Stable group of ``members`` static members; returns (driver, member ids, generation)."""
    driver = Driver(CONFIG)
    for i in range(members):
        driver.dispatch(_join(driver, ("j", i), "", instance=f"i{i}"))
    driver.advance(0)
    responses = [driver.responses[("j", i)] for i in range(members)]
    ids = [r.member_id for r in responses]
    generation, leader = responses[0].generation_id, responses[0].leader
    for i, mid in enumerate(ids):
        body = {"group_id": "g", "generation_id": generation, "member_id": mid,
                "group_instance_id": f"i{i}", "assignments": [
                    {"member_id": m, "assignment": b"\x00"} for m in ids] if mid == leader else []}
        driver.dispatch(request_event("SyncGroup", 5, body, request_id=("s", i), now_ms=driver.now_ms))
    assert driver.coordinator.group("g").state.value == "Stable"
    return driver, ids, generation


def _run(coordinator: Coordinator, timers, events: list, rounds: int = 1, clock=time.perf_counter) -> float:
    handle, apply = coordinator.handle, timers.apply
    gc.collect()
    start = clock()
    for _ in range(rounds):
        for event in events:
            for command in handle(event):
                if type(command) is SetTimer:
                    apply(command)
    return clock() - start


def _heartbeat(request_id, n: int, ids: list[str], generation: int, now_ms: int) -> ev.Heartbeat:
    """The ``n``-th heartbeat of a ``stable_group``'s members, in turn."""
    member = n % len(ids)
    return ev.Heartbeat(request_id=request_id, now_ms=now_ms, version=4, group_id="g", generation_id=generation,
                        member_id=ids[member], group_instance_id=f"i{member}")


def _commit(request_id, n: int, ids: list[str], generation: int, now_ms: int) -> ev.OffsetCommit:
    """The ``n``-th commit of a ``stable_group``'s members, in turn: offset ``n`` of the member's partition."""
    member = n % len(ids)
    return ev.OffsetCommit(request_id=request_id, now_ms=now_ms, version=9, group_id="g", generation_id=generation,
                           member_id=ids[member], group_instance_id=f"i{member}",
                           topics=(("topic", (ev.CommitPartition(member, n),)),))


def bench_heartbeat(members: int, count: int, clock=time.perf_counter) -> float:
    driver, ids, generation = stable_group(members)
    events = [_heartbeat(n, n, ids, generation, driver.now_ms) for n in range(min(count, 100_000))]
    rounds = max(1, count // len(events))
    seconds = _run(driver.coordinator, driver.timers, events, rounds, clock)
    return len(events) * rounds / seconds


def bench_offset_commit(members: int, count: int, clock=time.perf_counter) -> float:
    """Commit requests per second, each with its storage write acknowledged."""
    driver, ids, generation = stable_group(members)
    coordinator, timers = driver.coordinator, driver.timers
    requests = [_commit(n, n, ids, generation, driver.now_ms) for n in range(count)]
    handle, apply = coordinator.handle, timers.apply
    now = driver.now_ms
    gc.collect()
    start = clock()
    for request in requests:
        for command in handle(request):
            if type(command) is Write:
                handle(ev.WriteCompleted(now_ms=now, write_id=command.write_id))
            elif type(command) is SetTimer:
                apply(command)
    return count / (clock() - start)


def bench_commit_values(count: int, clock=time.perf_counter) -> float:
    """The values a one-partition offset commit and its write acknowledgement build, built
    alone, per second: its timer key and SetTimer, the stored OffsetEntry, the record, the
    response (topic and partition results), the undo, the pending write, the Write, the
    acknowledgement event and the Respond. The floor under ``bench_offset_commit`` while the
    core keeps these values: no lookup, check or dispatch."""
    gc.collect()
    start = clock()
    for n in range(count):
        timer = SetTimer(HeartbeatTimer(3, "g", "m"), 45_000)
        entry = OffsetEntry(n, -1, "", 0, None)
        write = Write(n, 3, (OffsetCommitRecord("g", "topic", 0, n, -1, "", 0, None),))
        response = OffsetCommitResponse((TopicResult("topic", (PartitionResult(0, Error.NONE),)),))
        pending = PendingWrite(n, 3, (UndoOffsets((("g", ("topic", 0), None),)),), None, response)
        done = ev.WriteCompleted(now_ms=0, write_id=n)
        answer = Respond(n, response)
    del timer, entry, write, pending, done, answer
    return count / (clock() - start)


def heartbeat_values(count: int) -> list:
    """Builders of the values ``count`` heartbeat steps build (bench_heartbeat's group of 10)."""
    driver, ids, generation = stable_group(10)
    values = StepValues()
    for n in range(count):
        for command in values(driver.coordinator, _heartbeat(n, n, ids, generation, driver.now_ms)):
            if type(command) is SetTimer:
                driver.timers.apply(command)
    return values.builders()


def mix_values(config: CoordinatorConfig, inputs: list[list]) -> tuple[list, list[str]]:
    """Builders of the values each of the mix's steps builds and keeps, with their input types."""
    values = StepValues()
    run_inputs(config, inputs, step=values)
    return values.builders(), values.kinds


def bench_values(builders: list, clock=time.perf_counter) -> float:
    """Steps' values built alone, per second."""
    gc.collect()
    return len(builders) / run_builders(builders, clock)


def bench_slow_store(members: int, count: int, in_flight: int, clock=time.perf_counter) -> float:
    """Commits and heartbeats per second with ``in_flight`` commit writes always unacknowledged
    (a slow store): each commit's write is acknowledged ``in_flight`` commits later, and a
    heartbeat after each commit is held until the writes before it complete."""
    driver, ids, generation = stable_group(members)
    coordinator, timers = driver.coordinator, driver.timers
    now = driver.now_ms
    events = [e for n in range(count) for e in (_commit(("c", n), n, ids, generation, now),
                                                _heartbeat(("h", n), n, ids, generation, now))]
    handle, apply = coordinator.handle, timers.apply
    writes: deque[int] = deque()
    gc.collect()
    start = clock()
    for event in events:
        for command in handle(event):
            if type(command) is Write:
                writes.append(command.write_id)
            elif type(command) is SetTimer:
                apply(command)
        if len(writes) > in_flight:
            for command in handle(ev.WriteCompleted(now_ms=now, write_id=writes.popleft())):
                if type(command) is SetTimer:
                    apply(command)
    return len(events) / (clock() - start)


def bench_rebalance(members: int, rounds: int) -> float:
    """Full rebalances of a Stable group: every member rejoins, syncs; the leader's write
    completes. Events/s over joins, syncs and the write completion."""
    driver, ids, generation = stable_group(members)
    coordinator = driver.coordinator
    total_events, seconds = 0, 0.0
    for r in range(rounds):
        now = driver.now_ms
        joins = [ev.JoinGroup(request_id=("rj", r, i), now_ms=now, version=5, group_id="g",
                              session_timeout_ms=SESSION_MS, rebalance_timeout_ms=60_000, member_id=mid,
                              group_instance_id=f"i{i}", protocol_type="consumer", protocols=(("range", b""),),
                              new_member_uuid="") for i, mid in enumerate(ids)]
        gc.collect()
        start = time.perf_counter()
        outputs = [c for e in joins for c in coordinator.handle(e)]
        group = coordinator.group("g")
        generation, leader = group.generation_id, group.leader_id
        syncs = [ev.SyncGroup(request_id=("rs", r, i), now_ms=now, version=5, group_id="g",
                              generation_id=generation, member_id=mid, group_instance_id=f"i{i}",
                              assignments=tuple((m, b"\x01") for m in ids) if mid == leader else ())
                 for i, mid in enumerate(ids)]
        for e in syncs:
            for command in coordinator.handle(e):
                if type(command) is Write:
                    coordinator.handle(ev.WriteCompleted(now_ms=now, write_id=command.write_id))
                    total_events += 1
        seconds += time.perf_counter() - start
        total_events += len(joins) + len(syncs)
        assert coordinator.group("g").state.value == "Stable", coordinator.group("g").state
        del outputs
    return total_events / seconds


# --- KIP-848's consumer groups -------------------------------------------------------------

TOPIC_ID = "00000000-0000-0000-0000-0000000000aa"


def _consumer_heartbeat(request_id, now_ms: int, member_id: str, epoch: int, owned, join: bool = False):
    return ev.ConsumerGroupHeartbeat(
        request_id=request_id, now_ms=now_ms, version=1, group_id="g", member_id=member_id, member_epoch=epoch,
        rebalance_timeout_ms=60_000 if join else -1, subscribed_topic_names=("topic",) if join else None,
        topic_partitions=owned)


def _settle_consumers(coordinator: Coordinator, members: int, partitions: int) -> tuple[int, dict]:
    """``members`` consumer-protocol members join one group on a topic of ``partitions`` and
    heartbeat with what they own until every one is at the target; returns the events handled
    and each member's (epoch, owned)."""
    coordinator.handle(ev.LoadPartition(now_ms=0, partition=0))
    coordinator.handle(ev.TopicsChanged(now_ms=0, topics=(("topic", TOPIC_ID, partitions),)))
    state: dict[str, tuple[int, tuple]] = {}
    events = 0

    def send(event) -> None:
        nonlocal events
        events += 1
        for command in coordinator.handle(event):
            if type(command) is Write:
                events += 1
                for c in coordinator.handle(ev.WriteCompleted(now_ms=0, write_id=command.write_id)):
                    if type(c) is Respond:
                        _took(c.response)
            elif type(command) is Respond:
                _took(command.response)

    def _took(response) -> None:
        epoch, owned = state.get(response.member_id, (0, ()))
        state[response.member_id] = (response.member_epoch,
                                     owned if response.assignment is None else response.assignment)

    for i in range(members):
        send(_consumer_heartbeat(("j", i), 0, f"m{i}", 0, (), join=True))
    for r in range(50):
        if coordinator.group("g").state.value == "Stable":
            break
        for mid in sorted(state):
            epoch, owned = state[mid]
            send(_consumer_heartbeat(("h", r, mid), 0, mid, epoch, owned))
    assert coordinator.group("g").state.value == "Stable", coordinator.group("g").state
    return events, state


def bench_consumer_heartbeat(members: int, count: int, clock=time.perf_counter) -> float:
    """Steady ConsumerGroupHeartbeats of a Stable consumer group (nothing to reconcile)."""
    coordinator = Coordinator(CONFIG)
    _, state = _settle_consumers(coordinator, members, members * 2)
    ids = sorted(state)
    events = [_consumer_heartbeat(n, 0, ids[n % members], state[ids[n % members]][0], None)
              for n in range(min(count, 100_000))]
    rounds = max(1, count // len(events))
    handle = coordinator.handle
    gc.collect()
    start = clock()
    for _ in range(rounds):
        for event in events:
            handle(event)
    return len(events) * rounds / (clock() - start)


def bench_consumer_reconciliation(members: int) -> float:
    """A consumer group of ``members`` formed from nothing: every join, every heartbeat until all
    are at the target, every write acknowledged. Events/s over all of them."""
    coordinator = Coordinator(CONFIG)
    gc.collect()
    start = time.perf_counter()
    events, _ = _settle_consumers(coordinator, members, members * 2)
    return events / (time.perf_counter() - start)


def record_stream(groups: int, members: int, heartbeats: int) -> list:
    """A long input stream recorded from a Driver: groups form, heartbeat, commit, rebalance
    when a member leaves, time passes and sessions expire."""
    recorded: list = []
    driver = Driver(CONFIG, observer=lambda event, commands: recorded.append(event))
    rid = 0
    for g in range(groups):
        gid = f"group-{g}"
        for m in range(members):
            rid += 1
            body = {"group_id": gid, "session_timeout_ms": SESSION_MS, "rebalance_timeout_ms": 60_000,
                    "member_id": "", "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
            driver.dispatch(request_event("JoinGroup", 3, body, request_id=rid, now_ms=driver.now_ms,
                                          client_id=f"c{m}", new_member_uuid=driver.new_uuid()))
    driver.advance(0)
    for g in range(groups):
        gid = f"group-{g}"
        group = driver.coordinator.group(gid)
        for mid in list(group.members):
            rid += 1
            assignments = [{"member_id": m, "assignment": b"\x00"} for m in group.members] \
                if mid == group.leader_id else []
            driver.dispatch(request_event("SyncGroup", 5, {"group_id": gid, "generation_id": group.generation_id,
                                                           "member_id": mid, "assignments": assignments},
                                          request_id=rid, now_ms=driver.now_ms))
    for n in range(heartbeats):
        g = n % groups
        gid = f"group-{g}"
        group = driver.coordinator.group(gid)
        if not group.members:
            continue
        mid = list(group.members)[n // groups % len(group.members)]
        rid += 1
        if n % 10 == 9:
            body = {"group_id": gid, "generation_id_or_member_epoch": group.generation_id, "member_id": mid,
                    "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": n}]}]}
            driver.dispatch(request_event("OffsetCommit", 9, body, request_id=rid, now_ms=driver.now_ms))
        else:
            body = {"group_id": gid, "generation_id": group.generation_id, "member_id": mid}
            driver.dispatch(request_event("Heartbeat", 4, body, request_id=rid, now_ms=driver.now_ms))
        if n % (groups * members) == 0:
            driver.advance(1000)
    driver.advance(10 * SESSION_MS)  # every session expires; groups go Empty
    return recorded


def bench_recorded_stream(events: list) -> float:
    coordinator = Coordinator(CONFIG)
    handle = coordinator.handle
    gc.collect()
    start = time.perf_counter()
    for event in events:
        handle(event)
    return len(events) / (time.perf_counter() - start)


def trace_inputs(trace: str, sample_records: int | None = None) -> tuple[CoordinatorConfig, list[list], int]:
    """The decoded input events of a group-scoped trace whose groups do not span files (the
    simulator's), one list per group in ``seq`` order, from whole files taken in order until
    ``sample_records`` records (all of them when None); returns (config, inputs, records read)."""
    from groupcoord.adapters.replay.partition import json_loader
    from groupcoord.adapters.traces.records import decode_event
    from groupcoord.adapters.traces.trace_files import (
        TraceError,
        coordinator_config,
        iter_batches,
        read_manifest,
        trace_files,
    )

    meta = read_manifest(trace)
    if meta.get("scope") != "group" or meta.get("groups_span_files", True):
        raise TraceError(f"{trace}: the core-alone measurement needs a group-scoped trace whose groups "
                         f"do not span files (the simulator's)")
    loads = json_loader()
    units: dict[str, list] = {}
    records = 0
    for f in trace_files(trace):
        if sample_records is not None and records >= sample_records:
            break
        for cols in iter_batches(f):
            records += len(cols["seq"])
            for gid, seq, d, tn, data in zip(cols["group_id"], cols["seq"], cols["dir"], cols["type"], cols["data"]):
                if d == "in":
                    units.setdefault(gid, []).append((seq, decode_event(tn, data, loads)))
    inputs = [[e for _, e in sorted(u, key=lambda x: x[0])] for u in units.values()]
    return coordinator_config(meta), inputs, records


def run_inputs(config: CoordinatorConfig, inputs: list[list], clock=time.perf_counter, emitted=None,
               step=Coordinator.handle) -> float:
    """Seconds for ``Coordinator.handle`` over each group's inputs, one fresh coordinator per
    group (and per failover, as a replay makes them); ``emitted``, if given, is handed each
    step's commands; ``step(coordinator, event)`` stands in for ``handle`` (e.g. to time it)."""
    from groupcoord.adapters.replay.engine import starts_instance

    load = ev.LoadPartition
    started = clock()
    for events in inputs:
        coordinator = None
        for e in events:
            if type(e) is load and starts_instance(coordinator, e.partition):
                coordinator = Coordinator(config)
            commands = step(coordinator, e)
            if emitted is not None:
                emitted(commands)
    return clock() - started


def simulated_inputs(groups: int, duration_ms: int) -> tuple[CoordinatorConfig, list[list]]:
    """The simulator's input events (joins, syncs, heartbeats, commits with their write
    outcomes, leaves, timers, failovers) for ``groups`` groups of 3 members."""
    import tempfile

    from groupcoord.adapters.sim import simulator

    with tempfile.TemporaryDirectory(prefix="groupcoord-bench-core-") as tmp:
        simulator.simulate(tmp, groups=groups, members=3, seed=11, duration_ms=duration_ms, fmt="jsonl",
                           progress=False)
        config, inputs, _ = trace_inputs(tmp)
    return config, inputs


def bench_simulated_mix(config: CoordinatorConfig, inputs: list[list], clock=time.perf_counter) -> float:
    gc.collect()
    return sum(len(u) for u in inputs) / run_inputs(config, inputs, clock)


def mix_by_input(config: CoordinatorConfig, inputs: list[list], clock=time.perf_counter) -> dict[str, tuple[int, float]]:
    """Where the mix's time goes: for each input type, (events, seconds), every event timed
    alone around ``Coordinator.handle`` (the clock's own cost, ~0.1 µs an event, included)."""
    spent: dict[type, list] = {}
    handle = Coordinator.handle

    def timed(coordinator: Coordinator, event):
        started = clock()
        commands = handle(coordinator, event)
        seconds = clock() - started
        tally = spent.get(type(event))
        if tally is None:
            spent[type(event)] = [1, seconds]
        else:
            tally[0] += 1
            tally[1] += seconds
        return commands

    gc.collect()
    run_inputs(config, inputs, clock, step=timed)
    return {kind.__name__: (count, seconds)
            for kind, (count, seconds) in sorted(spent.items(), key=lambda item: -item[1][1])}


def print_mix_by_input(by_input: dict[str, tuple[int, float]], values_s: dict[str, float], heartbeat_s: float) -> None:
    """``values_s``: seconds each input type's values took, built alone (``builders_by_kind``)."""
    total = sum(seconds for _, seconds in by_input.values())
    width = max(len(name) for name in by_input)
    print(f"the mix by input type ({sum(n for n, _ in by_input.values()):,} events, each timed alone):")
    for name, (count, seconds) in by_input.items():
        print(f"  {name:<{width}}  {count:>7,}  {seconds / total:>6.1%} of the time  "
              f"{seconds / count * 1e6:>6.2f} µs each  {seconds / count / heartbeat_s:>5.2f}x a heartbeat step, "
              f"its values alone {values_s[name] / count / heartbeat_s:>5.2f}x")


def step_cost_ratios(mix: tuple, builders: tuple[list, list], rounds: int, scale: int) -> dict[str, float]:
    """The simulator's mix's mean input event and a commit with its write acknowledgement
    against a heartbeat step, and the floors under them (their values built alone:
    ``builders`` for the mix's steps and for heartbeat steps), each the median over ``rounds``
    rounds that measure them back to back in CPU time: a ratio of neighbouring measurements,
    which the machine's drift and other work on a shared CPU (wall-clock best-of figures taken
    minutes apart) do not skew."""
    clock = time.process_time
    mix_builders, heartbeat_builders = builders
    ratios: dict[str, list[float]] = {"mix_vs_heartbeat": [], "mix_values_vs_heartbeat": [],
                                      "heartbeat_values_vs_heartbeat": [], "commit_vs_heartbeat": [],
                                      "commit_values_vs_heartbeat": []}
    for _ in range(rounds):
        heartbeat = bench_heartbeat(10, 100_000 // scale, clock)
        ratios["commit_vs_heartbeat"].append(heartbeat / bench_offset_commit(10, 30_000 // scale, clock))
        ratios["commit_values_vs_heartbeat"].append(heartbeat / bench_commit_values(30_000 // scale, clock))
        ratios["mix_vs_heartbeat"].append(heartbeat / bench_simulated_mix(*mix, clock=clock))
        ratios["mix_values_vs_heartbeat"].append(heartbeat / bench_values(mix_builders, clock))
        ratios["heartbeat_values_vs_heartbeat"].append(heartbeat / bench_values(heartbeat_builders, clock))
    return {name: statistics.median(values) for name, values in ratios.items()}


def best_of(repeats: int, measure, *args) -> float:
    """This VM's speed drifts a lot between runs; report the best of a few."""
    return max(measure(*args) for _ in range(repeats))


def run_core_bench(quick: bool = False) -> int:
    scale, repeats = (10, 1) if quick else (1, 3)
    stream = record_stream(groups=200 // scale, members=5, heartbeats=200_000 // scale)
    mix = simulated_inputs(groups=100 // scale, duration_ms=120_000)
    results = [
        ("heartbeat_10", best_of(repeats, bench_heartbeat, 10, 300_000 // scale)),
        ("heartbeat_1000", best_of(repeats, bench_heartbeat, 1000, 300_000 // scale)),
        ("offset_commit_10", best_of(repeats, bench_offset_commit, 10, 100_000 // scale)),
        ("offset_commit_1000", best_of(repeats, bench_offset_commit, 1000, 100_000 // scale)),
        ("rebalance_100", best_of(repeats, bench_rebalance, 100, 20 // scale or 1)),
        ("consumer_heartbeat_10", best_of(repeats, bench_consumer_heartbeat, 10, 300_000 // scale)),
        ("consumer_reconciliation_100", best_of(repeats, bench_consumer_reconciliation, 100)),
        ("recorded_stream", best_of(repeats, bench_recorded_stream, stream)),
        ("simulated_mix", best_of(repeats, bench_simulated_mix, *mix)),
    ]
    # a slow store: the cost per request may not grow with the writes in flight
    results += [(f"slow_store_{n}_in_flight", best_of(repeats, bench_slow_store, 10, 20_000 // scale, n))
                for n in (1, 1000)]
    width = max(len(name) for name, _ in results)
    for name, value in results:
        print(f"{name:<{width}}  {value:>12,.0f} events/s")
    rate = dict(results)
    ratio = rate["heartbeat_10"] / rate["heartbeat_1000"]
    print(f"heartbeat per-event cost, 1000 vs 10 members: {ratio:.2f}x")
    print(f"consumer group (KIP-848) heartbeat vs classic heartbeat, groups of 10: "
          f"{rate['heartbeat_10'] / rate['consumer_heartbeat_10']:.2f}x the cost")
    slow = rate["slow_store_1_in_flight"] / rate["slow_store_1000_in_flight"]
    print(f"commit and held heartbeat cost, 1000 vs 1 writes in flight: {slow:.2f}x")
    # costs against the heartbeat step (group of 10) in this run (goals: mix <= 3x, commit <= 2x)
    rounds = 3 if quick else 7
    builders = mix_values(*mix)
    ratios = step_cost_ratios(mix, (builders[0], heartbeat_values(20_000 // scale)), rounds, scale)
    print(f"simulated mix's mean input event vs a heartbeat step: {ratios['mix_vs_heartbeat']:.2f}x "
          f"(median of {rounds} rounds, CPU time)")
    print(f"  of which the values it builds and keeps, built alone: {ratios['mix_values_vs_heartbeat']:.2f}x "
          f"(a heartbeat step's own: {ratios['heartbeat_values_vs_heartbeat']:.2f}x)")
    print(f"offset commit with its write acknowledgement vs a heartbeat step: {ratios['commit_vs_heartbeat']:.2f}x "
          f"(median of {rounds} rounds, CPU time)")
    print(f"  of which the values it builds, built alone: {ratios['commit_values_vs_heartbeat']:.2f}x")
    by_input = mix_by_input(*mix)
    values_s = builders_by_kind(*builders)
    heartbeat_s = 1 / rate["heartbeat_10"]
    print_mix_by_input(by_input, values_s, heartbeat_s)
    for name, value in results:
        print(json.dumps({"name": name, "value": round(value), "unit": "events/s"}))
    print(json.dumps({"name": "ratios", **{k: round(v, 2) for k, v in ratios.items()}, "rounds": rounds}))
    total = sum(seconds for _, seconds in by_input.values())
    print(json.dumps({"name": "mix_by_input", **{
        name: {"events": count, "share": round(seconds / total, 4),
               "vs_heartbeat": round(seconds / count / heartbeat_s, 2),
               "values_vs_heartbeat": round(values_s[name] / count / heartbeat_s, 2)}
        for name, (count, seconds) in by_input.items()}}))
    return 0
