"""``bench core``'s floor under a commit (adapters/bench/core.py, ``bench_commit_values``):
the values it builds are those a real one-partition commit and its acknowledgement build; its
breakdown of the simulator's mix by input type accounts for every input."""

from __future__ import annotations

from collections import Counter

from groupcoord.adapters.bench.core import (
    _commit,
    bench_commit_values,
    mix_by_input,
    simulated_inputs,
    stable_group,
)
from groupcoord.core import commands as c
from groupcoord.core import events as ev
from groupcoord.core.continuations import UndoOffsets
from groupcoord.core.offsets import OffsetEntry
from groupcoord.core.writes import PendingWrite


def test_the_commit_floor_builds_the_values_a_real_commit_builds():
    driver, ids, generation = stable_group(3)
    coordinator = driver.coordinator
    commands = coordinator.handle(_commit(("c", 1), 1, ids, generation, driver.now_ms))
    assert [type(command) for command in commands] == [c.SetTimer, c.Write]
    timer, write = commands
    assert type(timer.key) is c.HeartbeatTimer
    assert [type(r) for r in write.records] == [c.OffsetCommitRecord]
    [entry] = coordinator.offsets("g").values()
    assert type(entry) is OffsetEntry
    [pending] = coordinator.snapshot().writes.values()
    assert type(pending) is PendingWrite and [type(callback) for callback in pending.continuations] == [UndoOffsets]
    response = pending.response
    assert type(response) is c.OffsetCommitResponse
    assert [type(t) for t in response.topics] == [c.TopicResult]
    assert [type(p) for p in response.topics[0].partitions] == [c.PartitionResult]
    [answer] = coordinator.handle(ev.WriteCompleted(now_ms=driver.now_ms, write_id=write.write_id))
    assert type(answer) is c.Respond and answer.response is response
    assert bench_commit_values(1000) > 0


def test_the_mix_breakdown_times_every_input_once_through_the_core():
    config, inputs = simulated_inputs(groups=3, duration_ms=30_000)
    by_input = mix_by_input(config, inputs)
    assert {name: count for name, (count, _) in by_input.items()} == \
        Counter(type(e).__name__ for events in inputs for e in events)
    assert all(seconds > 0 for _, seconds in by_input.values())
    assert list(by_input) == sorted(by_input, key=lambda name: -by_input[name][1])  # the costliest first
