"""Results held behind writes (spec/contract.md rules 3 and 4) when the newest write fails
before an older one: a result held after the failure waits for fewer writes than one held
before it, and each is released once the writes it waits for have their outcomes, in the
order they were held, while a later write is still in flight."""

from __future__ import annotations

from groupcoord.core import events as ev
from groupcoord.core.commands import Respond, Write
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator
from groupcoord.core.errors import Error


def commit(request_id, offset: int) -> ev.OffsetCommit:
    return ev.OffsetCommit(request_id=request_id, now_ms=0, version=8, group_id="g",
                           topics=(("t", (ev.CommitPartition(0, offset),)),))


def rejected(request_id) -> ev.OffsetCommit:
    """A commit whose only partition is rejected (its metadata is too large): answered with no
    record, after the writes in flight on its partition."""
    return ev.OffsetCommit(request_id=request_id, now_ms=0, version=8, group_id="g", topics=(
        ("t", (ev.CommitPartition(0, 9, committed_metadata="m" * 5000),)),))


def write_of(out: list) -> int:
    (write,) = [c for c in out if type(c) is Write]
    return write.write_id


def test_results_held_out_of_order_are_released_when_their_writes_are_done():
    coordinator = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=1))
    handle = coordinator.handle
    handle(ev.LoadPartition(now_ms=0, partition=0))
    first = write_of(handle(commit("a", 1)))
    second = write_of(handle(commit("b", 2)))
    assert handle(rejected("r2")) == []  # held behind the second write
    # the newest write fails first: its own answer goes, r2 still waits for the first write
    failed = handle(ev.WriteFailed(now_ms=1, write_id=second, error=Error.NOT_LEADER_OR_FOLLOWER))
    assert [c.request_id for c in failed if type(c) is Respond] == ["b"]
    assert handle(rejected("r3")) == []  # held behind the first write only
    third = write_of(handle(commit("c", 3)))

    released = handle(ev.WriteCompleted(now_ms=2, write_id=first))
    assert [(c.request_id, type(c.response).__name__) for c in released if type(c) is Respond] == [
        ("a", "OffsetCommitResponse"), ("r2", "OffsetCommitResponse"), ("r3", "OffsetCommitResponse")]
    for c in released:
        if c.request_id in ("r2", "r3"):
            assert c.response.topics[0].partitions[0].error_code is Error.OFFSET_METADATA_TOO_LARGE
    assert [c.request_id for c in handle(ev.WriteCompleted(now_ms=3, write_id=third))] == ["c"]
