"""SQLite storage: compaction by Kafka key, durability across reopen, clear failures."""

import asyncio

import pytest

from groupcoord.adapters.runtime.driver import Driver
from groupcoord.adapters.storage.interface import StorageError
from groupcoord.adapters.storage.sqlite import SqliteStorage, StorageOpenError
from groupcoord.core.commands import (
    GroupMetadataRecord,
    GroupTombstone,
    MemberRecord,
    OffsetCommitRecord,
    OffsetTombstone,
)
from groupcoord.core.coordinator import Coordinator
from groupcoord.core.errors import Error
from groupcoord.core.events import LoadPartition


def group(gid, generation, members=()):
    return GroupMetadataRecord(gid, "consumer", generation, "range" if members else None,
                               members[0].member_id if members else None, 1000, tuple(members))


def member(mid):
    return MemberRecord(mid, None, "client", "/127.0.0.1", 30000, 10000, b"\x00", b"\x01")


def offset(gid, topic, p, value):
    return OffsetCommitRecord(gid, topic, p, value, -1, "", 1000)


def run(coro):
    return asyncio.run(coro)


async def _write(storage, partition, *batches):
    for records in batches:
        await storage.append(partition, tuple(records))


def test_latest_record_per_key_survives_in_write_order(tmp_path):
    async def scenario():
        s = SqliteStorage(tmp_path)
        await _write(s, 3, [group("a", 1, [member("m1")]), offset("a", "t", 0, 5)],
                     [offset("a", "t", 0, 9), group("b", 0)], [group("a", 2)], [GroupTombstone("b")],
                     [offset("a", "t", 1, 3), OffsetTombstone("a", "t", 1)])
        await s.close()
        s = SqliteStorage(tmp_path)  # a new process would see exactly this
        records = s.records(3)
        await s.close()
        return records

    assert run(scenario()) == (offset("a", "t", 0, 9), group("a", 2))


def test_reload_through_the_core_load_path(tmp_path):
    """What a Driver wrote, the core rebuilds from SQLite: the Stable group and its offsets."""
    async def scenario():
        driver = Driver()
        from groupcoord.adapters.protocol.translate import request_event
        join = {"group_id": "g", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000, "member_id": "",
                "group_instance_id": "i", "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
        driver.dispatch(request_event("JoinGroup", 9, join, request_id=1, now_ms=0, new_member_uuid="u"))
        driver.advance(3000)
        mid = driver.responses[1].member_id
        driver.dispatch(request_event("SyncGroup", 5, {"group_id": "g", "generation_id": 1, "member_id": mid,
                                                       "group_instance_id": "i",
                                                       "assignments": [{"member_id": mid, "assignment": b"\x07"}]},
                                      request_id=2, now_ms=driver.now_ms))
        driver.dispatch(request_event("OffsetCommit", 9, {"group_id": "g", "generation_id_or_member_epoch": 1,
                                                          "member_id": mid, "group_instance_id": "i",
                                                          "topics": [{"name": "t", "partitions": [
                                                              {"partition_index": 0, "committed_offset": 42}]}]},
                                      request_id=3, now_ms=driver.now_ms))
        s = SqliteStorage(tmp_path)
        for partition, records in driver.storage.log.items():
            await s.append(partition, tuple(records))
        await s.close()
        s = SqliteStorage(tmp_path)
        coordinator = Coordinator(driver.config)
        for partition in range(driver.config.offsets_topic_num_partitions):
            coordinator.handle(LoadPartition(now_ms=0, partition=partition, records=s.records(partition)))
        await s.close()
        return coordinator, mid

    coordinator, mid = run(scenario())
    g = coordinator.group("g")
    assert g.state.value == "Stable" and g.generation_id == 1 and list(g.members) == [mid]
    assert g.members[mid].assignment == b"\x07"
    assert coordinator.offsets("g")[("t", 0)].offset == 42


def test_full_disk_fails_the_write_with_a_storage_error_and_keeps_what_was_acknowledged(tmp_path):
    async def scenario():
        s = SqliteStorage(tmp_path, max_bytes=64 * 1024)
        await s.append(0, (offset("g", "t", 0, 1),))
        big = tuple(OffsetCommitRecord("g", "t", p, p, -1, "x" * 2000, 0) for p in range(200))
        with pytest.raises(StorageError) as failure:
            await s.append(0, big)
        await s.close()
        s = SqliteStorage(tmp_path)
        records = s.records(0)
        await s.close()
        return failure.value.error, records

    error, records = run(scenario())
    assert error is Error.KAFKA_STORAGE_ERROR
    assert records == (offset("g", "t", 0, 1),)  # the failed batch left nothing behind


def test_a_corrupt_file_is_refused_at_start_up(tmp_path):
    (tmp_path / "groupcoord.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(StorageOpenError, match="not a usable groupcoord database"):
        SqliteStorage(tmp_path)


def test_an_unusable_data_directory_is_refused_at_start_up(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StorageOpenError, match="cannot create data directory"):
        SqliteStorage(blocker / "data")


def test_concurrent_appends_are_committed_in_order(tmp_path):
    async def scenario():
        s = SqliteStorage(tmp_path)
        futures = [s.append(0, (offset("g", "t", 0, n),)) for n in range(500)]
        await asyncio.gather(*futures)
        records = s.records(0)
        await s.close()
        return records

    assert run(scenario()) == (offset("g", "t", 0, 499),)
