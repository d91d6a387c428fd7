"""A failed core is not used again (spec/contract.md, "A failed instance"): an exception inside
``Coordinator.handle`` fails the instance. ``handle`` raises ``CoordinatorFailed`` with the
exception as its cause, ``failed`` keeps the event, and every later event is refused at once,
changing nothing. A new instance loaded from the records of the writes that completed has
everything that was acknowledged."""

from __future__ import annotations

import pytest

from groupcoord.core import CoordinatorFailed
from groupcoord.core import events as ev
from groupcoord.core.commands import Respond, Write
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator
from groupcoord.core.errors import Error
from groupcoord.core.offsets import OffsetStore

CONFIG = CoordinatorConfig(group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=1)


def commit(request_id, offset: int, now_ms: int = 0) -> ev.OffsetCommit:
    return ev.OffsetCommit(request_id=request_id, now_ms=now_ms, version=8, group_id="g",
                           topics=(("t", (ev.CommitPartition(0, offset),)),))


def fetch(request_id) -> ev.OffsetFetch:
    return ev.OffsetFetch(request_id=request_id, now_ms=0, version=8, groups=(ev.FetchGroup("g"),))


def loaded() -> Coordinator:
    coordinator = Coordinator(CONFIG)
    coordinator.handle(ev.LoadPartition(now_ms=0, partition=0))
    return coordinator


def test_a_raising_step_fails_the_instance_and_every_later_event_is_refused(monkeypatch):
    coordinator = loaded()
    assert coordinator.failed is None
    real = OffsetStore.set

    def half_done(self, changes):
        real(self, changes)  # the step changed the offsets, then raises
        raise RuntimeError("planted")

    monkeypatch.setattr(OffsetStore, "set", half_done)
    event = commit(1, 5)
    with pytest.raises(CoordinatorFailed, match=r"^RuntimeError: planted \(handling OffsetCommit\)$") as raised:
        coordinator.handle(event)
    assert type(raised.value.__cause__) is RuntimeError and raised.value.event is event
    assert coordinator.failed is event
    monkeypatch.undo()

    state = coordinator.snapshot()
    for later in (fetch(2), ev.WriteCompleted(now_ms=1, write_id=1), ev.UnloadPartition(now_ms=1, partition=0),
                  ev.LoadPartition(now_ms=1, partition=0)):
        with pytest.raises(CoordinatorFailed, match=f"^refused {type(later).__name__}: this coordinator failed "
                                                    "handling OffsetCommit; start a new one from storage$") as refused:
            coordinator.handle(later)
        assert refused.value.__cause__ is None and refused.value.event is event
    assert coordinator.snapshot() == state and coordinator.failed is event


def test_an_interrupt_inside_a_step_fails_the_instance_too(monkeypatch):
    coordinator = loaded()

    def interrupted(self, *args):
        raise KeyboardInterrupt

    monkeypatch.setattr(Coordinator, "_commit", interrupted)
    with pytest.raises(KeyboardInterrupt):
        coordinator.handle(commit(1, 5))
    assert isinstance(coordinator.failed, ev.OffsetCommit)
    with pytest.raises(CoordinatorFailed):
        coordinator.handle(fetch(2))


def test_a_new_instance_loaded_from_the_completed_writes_has_what_was_acknowledged(monkeypatch):
    """The embedder's recovery: what the failed instance held is answered with a retriable
    error by the embedder; a new instance is loaded from storage (the records of the writes that
    completed) and serves every acknowledged commit."""
    coordinator = loaded()
    storage: list = []
    (write,) = [c for c in coordinator.handle(commit(1, 5)) if type(c) is Write]
    storage.extend(write.records)
    acknowledged = coordinator.handle(ev.WriteCompleted(now_ms=1, write_id=write.write_id))
    assert [(type(c), c.request_id) for c in acknowledged] == [(Respond, 1)]
    (second,) = [c for c in coordinator.handle(commit(2, 9, now_ms=2)) if type(c) is Write]

    def broken(self, write, error):
        raise RuntimeError("planted")

    monkeypatch.setattr(Coordinator, "_finish_write", broken)
    with pytest.raises(CoordinatorFailed):
        coordinator.handle(ev.WriteCompleted(now_ms=3, write_id=second.write_id))
    monkeypatch.undo()

    fresh = Coordinator(CONFIG)
    fresh.handle(ev.LoadPartition(now_ms=4, partition=0, records=tuple(storage)))
    (answer,) = fresh.handle(fetch(3))
    (group,) = answer.response.groups
    assert group.error_code is Error.NONE
    assert [(p.partition_index, p.committed_offset) for t in group.topics for p in t.partitions] == [(0, 5)]
