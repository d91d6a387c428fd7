"""The serving process's collector settings (``wire.collector``) and the pause meter."""

from __future__ import annotations

import gc

import pytest

from groupcoord.adapters.wire import collector


@pytest.fixture
def restored_collector():
    thresholds, callbacks = gc.get_threshold(), list(gc.callbacks)
    yield
    gc.set_threshold(*thresholds)
    gc.callbacks[:] = callbacks
    gc.unfreeze()


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


def test_settling_freezes_what_exists_and_what_survives_each_full_collection(restored_collector):
    kept = [_Node() for _ in range(100)]
    collector.settle_collector()
    assert gc.get_threshold()[0] == collector.YOUNG_THRESHOLD
    assert gc.get_threshold()[2] == collector.OLDEST_THRESHOLD
    frozen = gc.get_freeze_count()
    assert frozen >= len(kept)
    later = [_Node() for _ in range(100)]
    gc.collect()
    assert gc.get_freeze_count() >= frozen + len(later)  # survivors of a full collection are frozen
    assert gc.get_count()[0] < 100
    del kept, later


def test_a_frozen_cycle_is_not_collected_but_a_later_one_is(restored_collector):
    collector.settle_collector()
    garbage = _Node()
    del garbage
    assert gc.collect() >= 1  # born after the freeze: still collected


def test_the_pause_meter_counts_collections_and_their_time(restored_collector):
    pauses = collector.GcPauses()
    pauses.start()
    try:
        for _ in range(3):
            gc.collect()
    finally:
        pauses.stop()
    assert pauses.full_collections == pauses.collections == 3
    assert sum(pauses.cpu_ms_by_generation) == pauses.cpu_ms_by_generation[2] >= pauses.longest_cpu_since_mark_ms
    assert pauses.longest_ms > 0
    gc.collect()
    assert pauses.collections == 3  # stopped: no longer counting
