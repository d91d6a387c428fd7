"""Memory storage keeps each partition within twice its live records (and a floor), whatever
the number of partitions: a server committing the same offsets over and over stays flat."""

from __future__ import annotations

from groupcoord.adapters.storage.memory import MemoryStorage
from groupcoord.core.commands import OffsetCommitRecord


def commit(group: int, partition: int, offset: int) -> OffsetCommitRecord:
    return OffsetCommitRecord(f"g{group}", "t", partition, offset, -1, "", 0)


def test_each_partition_stays_within_twice_its_live_records():
    storage = MemoryStorage(compact_above=100)
    live_per_partition = 300  # 30 groups x 10 partitions of t, on each of 5 offsets partitions
    for offset in range(20):
        for p in range(5):
            for g in range(30):
                for tp in range(10):
                    storage.store(p, (commit(g, tp, offset),))
            assert len(storage.log[p]) <= 2 * live_per_partition
    for p in range(5):  # the last offset of each key survives, once
        kept = {(r.group_id, r.partition): r.offset for r in storage.log[p]}
        assert len(kept) == live_per_partition and set(kept.values()) == {19}
        assert len(storage.records(p)) <= 2 * live_per_partition


def test_a_small_partition_is_not_compacted_below_the_floor():
    storage = MemoryStorage(compact_above=100)
    for offset in range(100):
        storage.store(0, (commit(0, 0, offset),))
    assert len(storage.log[0]) == 100  # all kept until the floor is passed
    storage.store(0, (commit(0, 0, 100),))
    assert [r.offset for r in storage.log[0]] == [100]
