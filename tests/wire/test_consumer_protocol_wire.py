"""KIP-848's two APIs on the wire: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

* the codec: the schema table against kio's classes (both generated from Kafka's JSON), every
  version through encode and decode, and frames built here byte by byte from Kafka's message
  definitions (flexible versions: compact strings and arrays, tagged-field bytes, a nullable
  struct's -1/1 marker), decoded and compared with what our encoder writes;
* the translation: request bodies into core events (topic ids as ``str(uuid)``), core responses
  into bodies (a None assignment is a null Assignment);
* the server: ApiVersions advertises 68 and 69, Metadata answers topic ids, the core is fed the
  catalog as ``TopicsChanged``; and, once the core handles the consumer protocol, two
  librdkafka consumers (``group.protocol=consumer``) sharing six partitions.
"""

from __future__ import annotations

import asyncio
import struct
import uuid

import pytest
from kip848_clients import owned, poll_until
from server_harness import InProcessServer, ServerProcess

from groupcoord.adapters.client.kafka_client import KafkaClient
from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.protocol import schema
from groupcoord.adapters.protocol import translate as tr
from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.wire import core_loop
from groupcoord.adapters.wire.core_loop import CoreLoop, core_handles
from groupcoord.core import commands as cmd
from groupcoord.core import events as ev
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.errors import Error

HB, DESCRIBE = 68, 69
T6 = apis.TopicCatalog.topic_id("t6")
T1 = apis.TopicCatalog.topic_id("t1")

CORE_READY = all(core_handles(k) for k in (ev.ConsumerGroupHeartbeat, ev.ConsumerGroupDescribe, ev.TopicsChanged))
needs_core = pytest.mark.skipif(
    not CORE_READY, reason="Coordinator.handle does not take ConsumerGroupHeartbeat, ConsumerGroupDescribe and "
                           "TopicsChanged yet (the KIP-848 core, core/consumer/, is being written)")


# --- bytes by hand, from Kafka's message definitions ---------------------------------------------

def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def i8(n):
    return struct.pack(">b", n)


def i16(n):
    return struct.pack(">h", n)


def i32(n):
    return struct.pack(">i", n)


def cstr(s):  # COMPACT_STRING / COMPACT_NULLABLE_STRING: length + 1, 0 for null
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


def carray(items):  # COMPACT_ARRAY of already encoded items; None: null
    if items is None:
        return uvarint(0)
    return uvarint(len(items) + 1) + b"".join(items)


def i32s(ns):
    return carray([i32(n) for n in ns])


NO_TAGS = uvarint(0)


def request_header_v2(api_key, version, correlation_id, client_id):
    # request header v2: the client id is a (non-compact) nullable string, then tagged fields
    cid = client_id.encode()
    return i16(api_key) + i16(version) + i32(correlation_id) + i16(len(cid)) + cid + NO_TAGS


def response_header_v1(correlation_id):
    return i32(correlation_id) + NO_TAGS


def framed(b):
    return i32(len(b)) + b


def hand_heartbeat_request(version):
    body = (cstr("grp") + cstr("member-1") + i32(0) + cstr(None) + cstr("rack-a") + i32(45000)
            + carray([cstr("t6"), cstr("t1")]))
    if version >= 1:
        body += cstr("^t.*")  # SubscribedTopicRegex, v1+
    body += cstr("uniform")
    body += carray([T6.bytes + i32s([0, 3]) + NO_TAGS, T1.bytes + i32s([]) + NO_TAGS])
    return request_header_v2(HB, version, 11, "cli") + body + NO_TAGS


def hand_heartbeat_response(assigned):
    body = i32(0) + i16(0) + cstr(None) + cstr("member-1") + i32(4) + i32(5000)
    if assigned is None:
        body += i8(-1)  # a null struct
    else:
        body += i8(1) + carray([tid.bytes + i32s(ps) + NO_TAGS for tid, ps in assigned]) + NO_TAGS
    return response_header_v1(11) + body + NO_TAGS


def hand_describe_request():
    return request_header_v2(DESCRIBE, 0, 12, "cli") + carray([cstr("grp"), cstr("other")]) + b"\x01" + NO_TAGS


def hand_describe_response(version):
    def assignment(tps):
        return carray([tid.bytes + cstr(name) + i32s(ps) + NO_TAGS for tid, name, ps in tps]) + NO_TAGS
    member = (cstr("member-1") + cstr("inst") + cstr(None) + i32(4) + cstr("cli") + cstr("/127.0.0.1")
              + carray([cstr("t6")]) + cstr(None) + assignment([(T6, "t6", [0, 1, 2])]) + assignment([]))
    if version >= 1:
        member += i8(1)  # MemberType: consumer
    member += NO_TAGS
    group = (i16(0) + cstr(None) + cstr("grp") + cstr("Stable") + i32(7) + i32(7) + cstr("uniform")
             + carray([member]) + i32(328) + NO_TAGS)
    missing = (i16(69) + cstr("no such group") + cstr("other") + cstr("Dead") + i32(0) + i32(0) + cstr("")
               + carray([]) + i32(-2147483648) + NO_TAGS)
    return response_header_v1(12) + i32(0) + carray([group, missing]) + NO_TAGS


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_request_built_by_hand_decodes_into_the_event(version):
    decoded = kc.decode_request(hand_heartbeat_request(version))
    assert (decoded.api_key, decoded.version, decoded.correlation_id, decoded.client_id) == (HB, version, 11, "cli")
    event = tr.request_event("ConsumerGroupHeartbeat", version, kc.to_fields(decoded.body), request_id=("c", 11),
                             now_ms=5, client_id="cli", new_member_uuid="new-uuid")
    assert event == ev.ConsumerGroupHeartbeat(
        request_id=("c", 11), now_ms=5, version=version, client_id="cli", group_id="grp", member_id="member-1",
        member_epoch=0, instance_id=None, rack_id="rack-a", rebalance_timeout_ms=45000,
        subscribed_topic_names=("t6", "t1"), subscribed_topic_regex="^t.*" if version else None,
        server_assignor="uniform", topic_partitions=((str(T6), (0, 3)), (str(T1), ())), new_member_uuid="new-uuid")
    # and back: the event is the request the client sent, byte for byte
    api, body = tr.request_body(event)
    assert kc.encode_request(HB, version, 11, "cli", kc.request_body(HB, version, body))[4:] == \
        hand_heartbeat_request(version)


def test_describe_request_built_by_hand_decodes_into_the_event():
    for version in (0, 1):  # v1's request is v0's
        frame = bytearray(hand_describe_request())
        frame[2:4] = i16(version)
        decoded = kc.decode_request(bytes(frame))
        event = tr.request_event("ConsumerGroupDescribe", version, kc.to_fields(decoded.body), request_id=1,
                                 now_ms=0)
        assert event.group_ids == ("grp", "other") and event.include_authorized_operations is True


@pytest.mark.parametrize("assigned", [None, [], [(T6, [0, 1]), (T1, [0])]], ids=["null", "empty", "two-topics"])
@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_response_matches_bytes_built_by_hand(version, assigned):
    assignment = None if assigned is None else tuple((str(t), tuple(ps)) for t, ps in assigned)
    response = cmd.ConsumerGroupHeartbeatResponse(member_id="member-1", member_epoch=4, heartbeat_interval_ms=5000,
                                                  assignment=assignment)
    fields = tr.response_fields("ConsumerGroupHeartbeat", version, response)
    ours = kc.encode_response(HB, version, 11, kc.response_body(HB, version, fields))
    hand = hand_heartbeat_response(assigned)
    assert ours == framed(hand)
    correlation, body = kc.decode_response(HB, version, hand)
    got = kc.to_fields(body)
    assert correlation == 11 and got == fields
    if assigned is None:
        assert got["assignment"] is None
    else:
        assert got["assignment"]["topic_partitions"] == [{"topic_id": t, "partitions": ps} for t, ps in assigned]


@pytest.mark.parametrize("version", [0, 1])
def test_describe_response_matches_bytes_built_by_hand(version):
    member = cmd.DescribedConsumerMember(
        member_id="member-1", instance_id="inst", rack_id=None, member_epoch=4, client_id="cli",
        client_host="/127.0.0.1", subscribed_topic_names=("t6",), subscribed_topic_regex=None,
        assignment=(cmd.DescribedTopicPartitions(str(T6), "t6", (0, 1, 2)),), target_assignment=())
    response = cmd.ConsumerGroupDescribeResponse((
        cmd.DescribedConsumerGroup(group_id="grp", group_state="Stable", group_epoch=7, assignment_epoch=7,
                                   assignor_name="uniform", members=(member,), authorized_operations=328),
        cmd.DescribedConsumerGroup(group_id="other", error_code=Error.GROUP_ID_NOT_FOUND,
                                   error_message="no such group", group_state="Dead")))
    fields = tr.response_fields("ConsumerGroupDescribe", version, response)
    hand = hand_describe_response(version)
    assert kc.encode_response(DESCRIBE, version, 12, kc.response_body(DESCRIBE, version, fields)) == framed(hand)
    _correlation, body = kc.decode_response(DESCRIBE, version, hand)
    got = kc.to_fields(body)
    assert got == fields
    assert ("member_type" in got["groups"][0]["members"][0]) == (version >= 1)


# --- the schema table and the translation at every version ---------------------------------------

def _kio_keys(cls) -> list:
    return [f.key for f in kc._spec(cls)]


def _table_keys(fields, v) -> list:
    return [f[0] for f in fields if schema._in(f[1], v)]


def _compare(fields, cls, v, where):
    assert _table_keys(fields, v) == _kio_keys(cls), where
    by_key = {f.key: f for f in kc._spec(cls)}
    for f in fields:
        if not schema._in(f[1], v):
            continue
        typ, nested = f[2], by_key[f[0]].nested
        if isinstance(typ, (list, schema.Struct)):
            _compare(typ, nested, v, f"{where}.{f[0]}")
        else:
            assert nested is None, f"{where}.{f[0]}"


@pytest.mark.parametrize("api", ["ConsumerGroupHeartbeat", "ConsumerGroupDescribe"])
def test_schema_table_has_kios_fields_in_kios_order(api):
    """kio's classes are generated from the same JSON: every field, nested ones too, in order."""
    assert schema.SUPPORTED_VERSIONS[api] == schema.SCHEMA_VERSIONS[api] == (0, 1)
    assert schema.FLEXIBLE_FROM[api] == 0
    key = schema.API_KEYS[api]
    for v in (0, 1):
        _compare(schema.SCHEMAS[api][2], kc.request_class(key, v), v, f"{api}Request v{v}")
        _compare(schema.SCHEMAS[api][3], kc.response_class(key, v), v, f"{api}Response v{v}")
    assert "subscribed_topic_regex" not in schema.request_fields("ConsumerGroupHeartbeat", 0)
    assert "subscribed_topic_regex" in schema.request_fields("ConsumerGroupHeartbeat", 1)


def test_heartbeat_request_defaults_are_kafkas():
    b = schema.request_with_defaults("ConsumerGroupHeartbeat", 1, {"group_id": "g"})
    assert b == {"group_id": "g", "member_id": "", "member_epoch": 0, "instance_id": None, "rack_id": None,
                 "rebalance_timeout_ms": -1, "subscribed_topic_names": None, "subscribed_topic_regex": None,
                 "server_assignor": None, "topic_partitions": None}
    with pytest.raises(schema.SchemaError, match="subscribed_topic_regex"):
        schema.request_with_defaults("ConsumerGroupHeartbeat", 0, {"subscribed_topic_regex": "x"})


HEARTBEATS = [
    dict(group_id="g", member_id="m", member_epoch=0, subscribed_topic_names=("t6",), rebalance_timeout_ms=300000,
         server_assignor="range", topic_partitions=()),
    dict(group_id="g", member_id="m", member_epoch=7),  # a partial heartbeat: every list null
    dict(group_id="g", member_id="m", member_epoch=-1, instance_id="i", rack_id="r",
         topic_partitions=((str(T6), (5, 1)), (str(uuid.UUID(int=0)), ()))),
    dict(group_id="g", member_id="m", member_epoch=0, subscribed_topic_regex="t[0-9]", subscribed_topic_names=()),
]


@pytest.mark.parametrize("version, fields", [(v, f) for v in (0, 1) for f in HEARTBEATS
                                             if v >= 1 or f.get("subscribed_topic_regex") is None])
def test_heartbeat_event_round_trips_through_the_wire(version, fields):
    event = ev.ConsumerGroupHeartbeat(request_id=(1, 2), now_ms=9, version=version, client_id="c", **fields)
    api, body = tr.request_body(event)
    frame = kc.encode_request(HB, version, 2, "c", kc.request_body(HB, version, body))
    decoded = kc.decode_request(frame[4:])
    assert tr.request_event(api, version, kc.to_fields(decoded.body), request_id=(1, 2), now_ms=9,
                            client_id="c") == event


@pytest.mark.parametrize("version", [0, 1])
def test_describe_event_round_trips_through_the_wire(version):
    event = ev.ConsumerGroupDescribe(request_id=3, now_ms=0, version=version, client_id="c", group_ids=("a", "b"),
                                     include_authorized_operations=True)
    api, body = tr.request_body(event)
    decoded = kc.decode_request(kc.encode_request(DESCRIBE, version, 3, "c", kc.request_body(DESCRIBE, version,
                                                                                            body))[4:])
    assert tr.request_event(api, version, kc.to_fields(decoded.body), request_id=3, now_ms=0,
                            client_id="c") == event


@pytest.mark.parametrize("version", [0, 1])
def test_responses_round_trip_with_errors_and_messages(version):
    hb = cmd.ConsumerGroupHeartbeatResponse(error_code=Error.FENCED_MEMBER_EPOCH, error_message="fenced: epoch 3",
                                            member_epoch=-1)
    fields = tr.response_fields("ConsumerGroupHeartbeat", version, hb)
    got = kc.to_fields(kc.decode_response(HB, version, kc.encode_response(
        HB, version, 1, kc.response_body(HB, version, fields))[4:])[1])
    assert got["error_code"] == int(Error.FENCED_MEMBER_EPOCH) and got["error_message"] == "fenced: epoch 3"
    assert got["member_id"] is None and got["assignment"] is None and got == fields
    described = cmd.ConsumerGroupDescribeResponse((cmd.DescribedConsumerGroup(
        group_id="g", error_code=Error.GROUP_ID_NOT_FOUND, error_message="Group g not found."),))
    fields = tr.response_fields("ConsumerGroupDescribe", version, described)
    got = kc.to_fields(kc.decode_response(DESCRIBE, version, kc.encode_response(
        DESCRIBE, version, 1, kc.response_body(DESCRIBE, version, fields))[4:])[1])
    assert got["groups"][0]["error_message"] == "Group g not found." and got == fields


# --- the server -------------------------------------------------------------------------------------

CONFIG = CoordinatorConfig(group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=3)


@pytest.fixture
def server():
    s = InProcessServer(config=CONFIG, catalog=apis.TopicCatalog({"t6": 6, "t1": 1}), track_requests=True)
    yield s
    s.stop()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def connect(server) -> KafkaClient:
    return await KafkaClient.connect("127.0.0.1", server.port, client_id="kip848")


def test_api_versions_lists_the_consumer_protocol(server):
    assert apis.served_versions()[HB] == (0, 1) and apis.served_versions()[DESCRIBE] == (0, 1)

    async def main():
        c = await connect(server)
        try:
            r = await c.request(18, {"client_software_name": "t", "client_software_version": "1"}, 3)
        finally:
            await c.close()
        return {k["api_key"]: (k["min_version"], k["max_version"]) for k in r["api_keys"]}
    keys = run(main())
    assert keys[HB] == (0, 1) and keys[DESCRIBE] == (0, 1)


@pytest.mark.parametrize("version", [10, 12])
def test_metadata_answers_topic_ids(server, version):
    """A KIP-848 assignment names partitions by topic id: clients learn the ids from Metadata
    (v10+), and look an unknown one up by id (v12)."""
    async def main():
        c = await connect(server)
        try:
            by_name = await c.request(3, {"topics": [{"name": "t6"}], "allow_auto_topic_creation": False}, version)
            by_id = (await c.request(3, {"topics": [{"name": None, "topic_id": T1}]}, version)
                     if version >= 12 else None)
        finally:
            await c.close()
        return by_name, by_id
    by_name, by_id = run(main())
    (topic,) = by_name["topics"]
    assert topic["name"] == "t6" and topic["topic_id"] == T6 and len(topic["partitions"]) == 6
    if by_id is not None:
        assert [(t["name"], t["error_code"]) for t in by_id["topics"]] == [("t1", 0)]


def test_catalog_image_is_the_topics_changed_shape():
    catalog = apis.TopicCatalog({"t6": 6, "a": 1})
    assert catalog.image() == (("a", str(catalog.topic_id("a")), 1), ("t6", str(T6), 6))


class _Clock:
    manual = True
    fire_due_at_once = False

    def now_ms(self):
        return 1234


def test_core_is_fed_the_topics_image_at_start_and_on_change(monkeypatch):
    """Each coordinator instance is given the image first; later only a changed image."""
    monkeypatch.setattr(core_loop, "core_handles", lambda kind: kind is ev.TopicsChanged)
    catalog = apis.TopicCatalog({"t6": 6}, auto_create_partitions=3)
    fed = []
    loop = CoreLoop(CONFIG, _Clock(), None, None, None, topics=catalog.image)
    loop.dispatch = fed.append  # what the core would be given
    loop.topics_changed()
    loop.topics_changed()
    assert fed == [ev.TopicsChanged(now_ms=1234, topics=(("t6", str(T6), 6),))]
    catalog.create("fresh")  # what a Metadata request auto-creating a topic does
    loop.topics_changed()
    assert fed[-1].topics == (("fresh", str(catalog.topic_id("fresh")), 3), ("t6", str(T6), 6)) and len(fed) == 2
    monkeypatch.setattr(core_loop, "core_handles", lambda kind: False)
    catalog.create("later")
    loop.topics_changed()  # a core without TopicsChanged is never given one
    assert len(fed) == 2


@pytest.mark.skipif(CORE_READY, reason="the core handles the consumer protocol")
def test_without_the_consumer_core_requests_get_unsupported_version(server):
    async def main():
        c = await connect(server)
        try:
            hb = await c.request(HB, {"group_id": "g", "member_id": str(uuid.uuid4()), "member_epoch": 0,
                                      "subscribed_topic_names": ["t6"], "rebalance_timeout_ms": 5000,
                                      "topic_partitions": []}, 1)
            described = await c.request(DESCRIBE, {"group_ids": ["g", "h"], "include_authorized_operations": False},
                                        1)
        finally:
            await c.close()
        return hb, described
    hb, described = run(main())
    assert hb["error_code"] == int(Error.UNSUPPORTED_VERSION) and hb["assignment"] is None
    assert [(g["group_id"], g["error_code"]) for g in described["groups"]] == [
        ("g", int(Error.UNSUPPORTED_VERSION)), ("h", int(Error.UNSUPPORTED_VERSION))]


@needs_core
def test_one_member_heartbeats_its_way_to_every_partition(server):
    """The raw protocol: a v1 member (its own id) joins, is given t6's partitions by topic id,
    and ConsumerGroupDescribe shows it with them."""
    member_id = str(uuid.uuid4())

    async def main():
        c = await connect(server)
        try:
            r = await c.request(HB, {"group_id": "raw", "member_id": member_id, "member_epoch": 0,
                                     "subscribed_topic_names": ["t6"], "rebalance_timeout_ms": 5000,
                                     "topic_partitions": []}, 1)
            assert r["error_code"] == 0, r
            epoch, owned = r["member_epoch"], r["assignment"]
            for _ in range(20):  # bounded: until the member owns all six
                if owned is not None and [(t["topic_id"], sorted(t["partitions"])) for t in
                                          owned["topic_partitions"]] == [(T6, list(range(6)))]:
                    break
                r = await c.request(HB, {"group_id": "raw", "member_id": member_id, "member_epoch": epoch,
                                         "topic_partitions": (owned or {"topic_partitions": []})["topic_partitions"]},
                                    1)
                assert r["error_code"] == 0, r
                epoch, owned = r["member_epoch"], r["assignment"] if r["assignment"] is not None else owned
            described = await c.request(DESCRIBE, {"group_ids": ["raw"], "include_authorized_operations": True}, 1)
        finally:
            await c.close()
        return r, epoch, owned, described
    r, epoch, owned, described = run(main())
    assert r["member_id"] == member_id and epoch >= 1
    assert [(t["topic_id"], sorted(t["partitions"])) for t in owned["topic_partitions"]] == [(T6, list(range(6)))]
    (group,) = described["groups"]
    assert group["error_code"] == 0 and group["authorized_operations"] == apis.GROUP_OPERATIONS
    (member,) = group["members"]
    assert member["member_id"] == member_id and member["member_type"] == 1
    assert [(t["topic_name"], sorted(t["partitions"])) for t in member["assignment"]["topic_partitions"]] == \
        [("t6", list(range(6)))]


# --- real clients -----------------------------------------------------------------------------------



@needs_core
def test_two_librdkafka_consumers_share_six_partitions():
    confluent_kafka = pytest.importorskip("confluent_kafka")
    server = ServerProcess(topics=("t6=6",), settings={"group.consumer.heartbeat.interval.ms": 500,
                                                       "group.consumer.session.timeout.ms": 10000})
    consumers = []
    try:
        def consumer(name):
            c = confluent_kafka.Consumer({
                "bootstrap.servers": server.bootstrap, "group.id": "kip848", "group.protocol": "consumer",
                "client.id": name, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "broker.address.family": "v4"})
            c.subscribe(["t6"])
            consumers.append(c)
            return c

        a, b = consumer("a"), consumer("b")
        poll_until(consumers, lambda: (owned(a) and owned(b) and sorted(owned(a) + owned(b)) == list(range(6))),
                    "both consumers to share t6's six partitions")

        async def describe():
            c = await KafkaClient.connect("127.0.0.1", server.port, client_id="describe")
            try:
                return await c.request(DESCRIBE, {"group_ids": ["kip848"], "include_authorized_operations": False}, 1)
            finally:
                await c.close()
        (group,) = run(describe())["groups"]
        assert group["error_code"] == 0 and len(group["members"]) == 2, group
        assert sorted(p for m in group["members"] for t in m["assignment"]["topic_partitions"]
                      for p in t["partitions"]) == list(range(6))

        partition = owned(a)[0]
        a.commit(offsets=[confluent_kafka.TopicPartition("t6", partition, 42)], asynchronous=False)
        (read,) = b.committed([confluent_kafka.TopicPartition("t6", partition)], timeout=20)
        assert read.offset == 42 and read.error is None

        a.close()  # leaves the group (member epoch -1)
        consumers.remove(a)
        poll_until(consumers, lambda: owned(b) == list(range(6)), "the remaining consumer to own all six")
    finally:
        for c in consumers:
            c.close()
        code = server.stop()
    assert code == 143, server.log_text()  # stopped by SIGTERM
    errors = [row for row in server.lines if row.get("level") == "error"]
    assert not errors, errors
