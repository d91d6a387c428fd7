"""Tests written against mutants of core/ that the rest of the fast suite let live
(tests/mutation.py, spec/mutation.md). Each asserts Kafka's behaviour (spec/kafka-classic-semantics.md)
or the core's documented contract, on a path the property tests and scenarios did not pin down."""

from __future__ import annotations

import struct

import pytest

from groupcoord.core.classic import subscription as cp
from groupcoord.core.classic.subscription import Assignment, ConsumerProtocolError, Subscription


# ------------------------------------------------------------------ the consumer protocol's bytes
# ConsumerProtocolSubscription / ConsumerProtocolAssignment (clients/src/main/resources/common/
# message/): a version (int16), then the fields of that version, big-endian; strings as an int16
# length and UTF-8, null as length -1; bytes as an int32 length; arrays as an int32 count.

def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def s(text: str | None) -> bytes:
    if text is None:
        return i16(-1)
    raw = text.encode()
    return i16(len(raw)) + raw


def b(data: bytes | None) -> bytes:
    return i32(-1) if data is None else i32(len(data)) + data


def partitions(*by_topic: tuple[str, tuple[int, ...]]) -> bytes:
    return i32(len(by_topic)) + b"".join(s(t) + i32(len(ps)) + b"".join(i32(p) for p in ps) for t, ps in by_topic)


FULL = Subscription(("t1", "tö"), b"ud", (("t1", 0), ("tö", 7), ("t1", 2)), 5, "rack")


def test_a_subscription_is_kafkas_bytes_at_every_version():
    v0 = s("t1") + s("tö")
    assert cp.encode_subscription(FULL, 0) == i16(0) + i32(2) + v0 + b(b"ud")
    owned = partitions(("t1", (0, 2)), ("tö", (7,)))
    assert cp.encode_subscription(FULL, 1) == i16(1) + i32(2) + v0 + b(b"ud") + owned
    assert cp.encode_subscription(FULL, 2) == i16(2) + i32(2) + v0 + b(b"ud") + owned + i32(5)
    assert cp.encode_subscription(FULL) == i16(3) + i32(2) + v0 + b(b"ud") + owned + i32(5) + s("rack")
    # nulls: no user data, no rack; the default generation is -1
    bare = cp.encode_subscription(["a"])
    assert bare == i16(3) + i32(1) + s("a") + b(None) + i32(0) + i32(-1) + s(None)
    assert cp.encode_subscription(Subscription((), b"")) == i16(3) + i32(0) + b(b"") + i32(0) + i32(-1) + s(None)


def test_a_subscription_decodes_field_by_field_and_defaults_what_an_old_version_lacks():
    for version in range(4):
        back = cp.decode_subscription(cp.encode_subscription(FULL, version), group_instance_id="i")
        grouped = (("t1", 0), ("t1", 2), ("tö", 7))  # partitions come back grouped by topic
        assert back == Subscription(FULL.topics, b"ud", grouped if version >= 1 else (),
                                    5 if version >= 2 else -1, "rack" if version >= 3 else None, "i")
    nulls = cp.decode_subscription(cp.encode_subscription(["a"]))
    assert nulls == Subscription(("a",), None, (), -1, None, None)
    # a newer version is read with the v3 layout; a v3 with its tail missing defaults it
    assert cp.decode_subscription(i16(7) + cp.encode_subscription(FULL)[2:]).rack_id == "rack"
    assert cp.decode_subscription(i16(3) + i32(1) + s("a") + b(None)) == Subscription(("a",))
    assert cp.decode_subscription(i16(3) + i32(0) + b(None) + i32(0) + i32(4)).generation_id == 4


def test_an_assignment_is_kafkas_bytes():
    body = partitions(("t1", (0, 2)), ("t2", (1,)))
    assert cp.encode_assignment(Assignment((("t1", 0), ("t2", 1), ("t1", 2)), b"x")) == i16(3) + body + b(b"x")
    assert cp.encode_assignment([("t", 0)], version=0) == i16(0) + partitions(("t", (0,))) + b(None)
    assert cp.encode_assignment([]) == i16(3) + i32(0) + b(None)
    assert cp.decode_assignment(i16(0) + body + b(b"x")) == Assignment((("t1", 0), ("t1", 2), ("t2", 1)), b"x")
    assert cp.decode_assignment(i16(1) + body + b(None)) == Assignment((("t1", 0), ("t1", 2), ("t2", 1)))
    assert cp.decode_assignment(i16(1) + body) == Assignment((("t1", 0), ("t1", 2), ("t2", 1)))  # no user data


def test_a_string_longer_than_an_int16_length_cannot_be_encoded():
    # Kafka's writer refuses a string over Short.MAX_VALUE bytes
    assert cp.encode_subscription(["t" * 32767]).startswith(i16(3) + i32(1) + i16(32767))
    with pytest.raises(struct.error):
        cp.encode_subscription(["t" * 32768])


def test_topics_are_grouped_first_seen_or_in_the_order_given():
    pairs = [("b", 1), ("a", 0), ("b", 0)]
    assert cp.group_by_topic(pairs) == {"b": [1, 0], "a": [0]}
    assert list(cp.group_by_topic(pairs)) == ["b", "a"]
    assert list(cp.group_by_topic(pairs, sorted)) == ["a", "b"]
    assert cp.encode_assignment(pairs, topic_order=sorted) == i16(3) + partitions(("a", (0,)), ("b", (1, 0))) + b(None)
    sub = Subscription(("a", "b"), None, tuple(pairs))
    assert cp.encode_subscription(sub, 1, topic_order=sorted) == (
        i16(1) + i32(2) + s("a") + s("b") + b(None) + partitions(("a", (0,)), ("b", (1, 0))))


@pytest.mark.parametrize("data, message", [
    (b"", "assignment: 0 bytes, at least the version (2) expected"),
    (b"\x00", "assignment: 1 bytes"),
    (i16(-1) + i32(0), "assignment: negative version -1"),
    (i16(0) + i32(1) + s("t") + i32(1), "assignment: truncated at byte 13"),
    (i16(0) + i32(1) + i16(5) + b"ab", "assignment: truncated string at byte 8"),
    (i16(0) + i32(1) + s(None), "assignment: null where a string is required"),
    (i16(0) + i32(1) + i16(2) + b"\xff\xfe", "assignment: string is not UTF-8"),
    (i16(0) + i32(-1), "assignment: bad array length -1"),
    (i16(0) + i32(99), "assignment: bad array length 99"),
    (i16(0) + i32(0) + i32(3) + b"ab", "assignment: truncated bytes at byte 10"),
])
def test_malformed_assignments_are_refused_saying_what_is_wrong(data, message):
    with pytest.raises(ConsumerProtocolError) as e:
        cp.decode_assignment(data)
    assert str(e.value).startswith(message)


def test_an_array_count_is_checked_against_the_bytes_there_are():
    # a count equal to the message's length passes the check and then runs out of bytes
    data = i16(0) + i32(10) + b"\x00\x00\x00\x00"
    assert len(data) == 10
    with pytest.raises(ConsumerProtocolError, match="truncated"):
        cp.decode_assignment(data)
    assert cp.decode_assignment(i16(0) + i32(0) + b(b"")) == Assignment((), b"")  # empty, not null
    with pytest.raises(ConsumerProtocolError, match="^assignment: truncated at byte 2$"):
        cp.decode_assignment(i16(0))  # the version alone


@pytest.mark.parametrize("data, message", [
    (b"\x00", "subscription: truncated at byte 0"),
    (i16(-2), "subscription: negative version -2"),
    (i16(0) + i32(1) + s("t") + i32(4) + b"x", "subscription: truncated bytes at byte 13"),
])
def test_malformed_subscriptions_are_refused_saying_what_is_wrong(data, message):
    with pytest.raises(ConsumerProtocolError) as e:
        cp.decode_subscription(data)
    assert str(e.value).startswith(message)


def test_the_coordinator_reads_a_subscriptions_topics_with_the_version_0_layout():
    assert cp.subscription_topics(cp.encode_subscription(FULL)) == frozenset({"t1", "tö"})
    assert cp.subscription_topics(i16(9) + i32(1) + s("a")) == frozenset({"a"})  # nothing after the topics read
    assert cp.subscription_topics(i16(0) + i32(0)) == frozenset()
    for malformed in (b"", i16(-1) + i32(0), i16(0) + i32(2) + s("a"), i16(0) + i32(-1), i16(0) + i32(1) + s(None)):
        assert cp.subscription_topics(malformed) is None


# ------------------------------------------------------------------ frozen values (core/frozen.py)
# The faster __init__ must behave as attrs' own: the core's values are built by it everywhere,
# but at import time, so these tests apply it to classes of their own.

def test_frozen_keeps_attrs_behaviour_with_its_own_init():
    import attrs

    from groupcoord.core.frozen import evolve, frozen

    @frozen
    class Point:
        x: int
        y: int = 2
        label: str | None = None

    p = Point(1)
    assert (p.x, p.y, p.label) == (1, 2, None)
    assert Point(1, 3, "a") == Point(x=1, y=3, label="a") and hash(Point(1)) == hash(Point(1))
    assert repr(Point(1, 3)) == "Point(x=1, y=3, label=None)"
    assert Point.__init__.__qualname__.endswith("Point.__init__")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        p.x = 5
    with pytest.raises(TypeError):
        Point()
    assert evolve(p, y=9) == Point(1, 9) and evolve(p) == p

    @frozen(kw_only=True)
    class Named:
        a: int
        b: int = 0

    assert Named(a=1) == Named(a=1, b=0)
    with pytest.raises(TypeError):
        Named(1)

    @frozen(kw_only=True)
    class NamedWithFactory:  # attrs' own __init__, keyword-only too
        a: int
        items: list = attrs.Factory(list)

    assert NamedWithFactory(a=1).items == []
    with pytest.raises(TypeError):
        NamedWithFactory(1)

    @frozen
    class FieldNamed:
        a: int = attrs.field(kw_only=True, default=3)

    assert FieldNamed().a == 3 and FieldNamed(a=4).a == 4
    with pytest.raises(TypeError):
        FieldNamed(4)

    @frozen
    class Empty:
        pass

    assert Empty() == Empty()

    @frozen()
    class Called:
        a: int

    assert Called(a=5).a == 5


def test_frozen_keeps_attrs_init_where_it_does_more_than_assign():
    import attrs

    from groupcoord.core.frozen import evolve, frozen

    @frozen
    class Checked:
        n: int = attrs.field(validator=attrs.validators.instance_of(int))

    with pytest.raises(TypeError):
        Checked("x")

    @frozen
    class Converted:
        n: int = attrs.field(converter=int)

    assert Converted("4").n == 4

    @frozen
    class WithFactory:
        items: list = attrs.Factory(list)
        other: int = 0

    first, second = WithFactory(), WithFactory()
    assert first.items == [] and first.items is not second.items
    assert evolve(first, other=1) == WithFactory([], 1)


def test_frozen_init_takes_the_names_and_fields_attrs_init_takes():
    """Type checkers read ``frozen`` as attrs.frozen (core/frozen.py): the faster ``__init__``
    takes what attrs' does, a private field by its alias and no field attrs leaves out."""
    import inspect

    import attrs

    from groupcoord.core.frozen import frozen

    @frozen
    class Private:
        _a: int
        b: int = 0

    assert Private(a=1, b=2) == Private(1, 2) and Private(a=1)._a == 1
    assert list(inspect.signature(Private.__init__).parameters) == ["self", "a", "b"]
    assert "_set__a" in Private.__init__.__code__.co_names  # the faster init, not attrs'

    @frozen
    class Derived:
        a: int
        b: int = attrs.field(init=False, default=7)

    assert Derived(1).b == 7
    with pytest.raises(TypeError):
        Derived(1, 2)
    assert "_set_a" not in Derived.__init__.__code__.co_names  # attrs' own init


def test_a_group_draft_declares_the_group_fields():
    """GroupDraft's annotations (what mypy checks the draft's code against) are Group's fields."""
    import attrs

    from groupcoord.core.classic.draft import GroupDraft
    from groupcoord.core.classic.model import Group

    assert list(GroupDraft.__annotations__) == [f.name for f in attrs.fields(Group)]
    assert GroupDraft.__slots__ == tuple(GroupDraft.__annotations__)


def test_evolve_goes_through_init_or_attrs_evolve():
    import attrs

    from groupcoord.core.frozen import evolve, field_reader, frozen

    @frozen
    class One:
        a: int

    @attrs.frozen
    class Private:  # __init__ takes a=
        _a: int
        b: int = 0

    @attrs.frozen
    class NoInit:
        a: int
        b: int = attrs.field(init=False, default=7)

    @frozen
    class Two:
        a: int
        b: int

    assert field_reader(One) is None and field_reader(Private) is None and field_reader(NoInit) is None
    names, values = field_reader(Two)
    assert names == ("a", "b") and values(Two(1, 2)) == (1, 2)
    assert field_reader(Two) is field_reader(Two)  # cached
    assert evolve(One(1), a=2) == One(2)
    assert evolve(Private(1), b=5) == Private(1, 5)
    assert evolve(NoInit(1), a=3) == NoInit(3) and evolve(NoInit(1), a=3).b == 7
    assert evolve(Two(1, 2), b=3) == Two(1, 3)
    # by position where the init allows it; by name where a field is keyword-only
    @frozen
    class Converted:
        n: int = attrs.field(converter=int)
        m: int = 0

    @frozen(kw_only=True)
    class Named:
        a: int
        b: int = 0

    assert evolve(Converted(1), n="5") == Converted(5) and evolve(Named(a=1), b=2) == Named(a=1, b=2)
    for value in (Two(1, 2), Named(a=1)):
        with pytest.raises(TypeError, match="c"):
            evolve(value, c=3)


def test_field_copier_sets_every_field():
    from groupcoord.core.frozen import field_copier, frozen

    @frozen
    class Three:
        a: int
        b: str
        c: tuple = ()

    class Twin:
        __slots__ = ("a", "b", "c")

    twin = Twin()
    field_copier(Three)(twin, Three(1, "x", (2,)))
    assert (twin.a, twin.b, twin.c) == (1, "x", (2,))


# ------------------------------------------------------------------ the trace format (core/trace.py)

def test_the_type_registry_is_every_event_command_and_timer_key():
    import attrs

    from groupcoord.core import commands as cmd, events as ev, trace
    from groupcoord.core.classic.model import Parked

    expected = {name: value for module in (ev, cmd) for name, value in vars(module).items()
                if isinstance(value, type) and attrs.has(value) and value.__module__ == module.__name__}
    expected.update({"Parked": Parked, **{k.__name__: k for k in cmd.TIMER_KEYS}})
    assert trace.TYPES == expected
    assert trace._registry() == trace.TYPES  # built from the modules alone (it runs once, at import)
    assert {"JoinGroup", "TimerFired", "LoadPartition"} <= trace.EVENT_TYPES
    assert {"Respond", "SetTimer", "Write", "GroupMetadataRecord"} <= trace.COMMAND_TYPES
    assert "Error" not in trace.TYPES and "Parked" not in trace.EVENT_TYPES | trace.COMMAND_TYPES


@pytest.mark.parametrize("data, message", [
    ({"hex": "zz"}, "bad hex 'zz'"),
    ({"type": "Nope", "data": {}}, "unknown type 'Nope'"),
    ({"type": "Heartbeat", "data": []}, "Heartbeat: data must be an object"),
    ({"type": "WriteFailed", "data": {"now_ms": 0, "write_id": 1, "error": "BOGUS"}},
     "WriteFailed.error: not a Kafka error: 'BOGUS'"),
    ({"type": "WriteCompleted", "data": {"now_ms": 0}}, "WriteCompleted: "),
    ({"a": 1, "b": 2}, "unexpected object ['a', 'b']"),
])
def test_decoding_refuses_what_it_does_not_know_saying_what(data, message):
    from groupcoord.core import trace

    with pytest.raises(trace.TraceError) as e:
        trace.decode(data)
    assert str(e.value).startswith(message)


def test_error_fields_decode_to_errors_by_name():
    from groupcoord.core import commands as cmd, events as ev, trace
    from groupcoord.core.errors import Error

    failed = trace.decode({"type": "WriteFailed", "data": {"now_ms": 0, "write_id": 1, "error": "NOT_COORDINATOR"}})
    assert failed == ev.WriteFailed(now_ms=0, write_id=1, error=Error.NOT_COORDINATOR)
    assert failed.error is Error.NOT_COORDINATOR
    response = trace.decode({"type": "HeartbeatResponse", "data": {"error_code": "REBALANCE_IN_PROGRESS"}})
    assert response.error_code is Error.REBALANCE_IN_PROGRESS
    assert trace.encode(cmd.HeartbeatResponse(Error.NONE)) == {"type": "HeartbeatResponse", "data": {"error_code": "NONE"}}
    with pytest.raises(trace.TraceError, match=r"^cannot encode set: \{1\}$"):
        trace.encode({1})
    with pytest.raises(trace.TraceError, match=r"^cannot encode object: "):
        trace.encode(object())


def test_the_group_and_partition_of_a_value_come_from_its_fields_or_its_timer_key():
    from groupcoord.core import commands as cmd, events as ev, trace

    key = cmd.HeartbeatTimer(3, "g", "m")
    assert trace.group_of(cmd.SetTimer(key, 10)) == "g" and trace.partition_of(cmd.SetTimer(key, 10)) == 3
    assert trace.group_of(ev.TimerFired(now_ms=0, key=key)) == "g"
    assert trace.partition_of(ev.TimerFired(now_ms=0, key=cmd.ExpirationTimer(5))) == 5
    assert trace.group_of(ev.TimerFired(now_ms=0, key=cmd.ExpirationTimer(5))) is None
    assert trace.partition_of(cmd.Write(1, 4, ())) == 4 and trace.group_of(cmd.Write(1, 4, ())) is None
    assert trace.partition_of(cmd.CancelTimer(key)) == 3 and trace.group_of(cmd.CancelTimer(key)) == "g"
    assert trace.group_of(cmd.Respond("r", cmd.HeartbeatResponse(0))) is None
    assert trace.partition_of(cmd.Respond("r", cmd.HeartbeatResponse(0))) is None
    assert trace.group_of(ev.LoadPartition(now_ms=0, partition=2)) is None
    assert trace.partition_of(ev.LoadPartition(now_ms=0, partition=2)) == 2


def test_the_recorder_files_each_record_under_its_group_or_partition():
    from groupcoord.core import commands as cmd, events as ev, trace

    recorder = trace.Recorder()
    key = cmd.HeartbeatTimer(3, "g", "m")
    [fired, armed] = recorder.records(ev.TimerFired(now_ms=5, key=key), [cmd.SetTimer(key, 15)])
    assert (fired["group_id"], fired["partition"], fired["seq"], fired["dir"]) == ("g", 3, 0, "in")
    assert (armed["group_id"], armed["partition"], armed["seq"], armed["dir"], armed["ts_ms"]) == ("g", 3, 1, "out", 5)
    [load, write] = recorder.records(ev.LoadPartition(now_ms=6, partition=3), [cmd.Write(1, 3, ())])
    assert (load["group_id"], load["partition"], load["seq"]) == (None, 3, 0)
    assert (write["group_id"], write["partition"], write["seq"]) == (None, 3, 1)
    # an answer to a request the recorder never saw (it started late) belongs to no group
    [done, answer] = recorder.records(ev.WriteCompleted(now_ms=7, write_id=1), [cmd.Respond("r", cmd.HeartbeatResponse(0))])
    assert (answer["group_id"], answer["partition"], answer["seq"]) == (None, None, 1)
    assert (done["group_id"], done["partition"], done["seq"]) == (None, None, 0)


def test_a_json_line_is_compact_and_keeps_the_field_order():
    from groupcoord.core import trace

    record = {"v": 2, "group_id": None, "partition": 1, "seq": 0, "ts_ms": 5, "dir": "in", "type": "X", "data": {"b": 1, "a": [1, 2]}}
    assert trace.to_json_line(record) == ('{"v":2,"group_id":null,"partition":1,"seq":0,"ts_ms":5,"dir":"in",'
                                          '"type":"X","data":{"b":1,"a":[1,2]}}')


@pytest.mark.parametrize("line, message", [
    ("[1]", "<trace>: a record is an object"),
    ('{"v": 2, "group_id": null, "partition": 0, "seq": 0, "ts_ms": 0, "dir": "up", "type": "X", "data": {}}',
     "<trace>: dir must be 'in' or 'out'"),
    ('{"v": 2, "group_id": null, "partition": 0, "seq": "0", "ts_ms": 0, "dir": "in", "type": "LoadPartition", "data": {}}',
     "<trace>: seq and ts_ms must be integers"),
    ('{"v": 2, "group_id": null, "partition": 0, "seq": 0, "ts_ms": 0.5, "dir": "in", "type": "LoadPartition", "data": {}}',
     "<trace>: seq and ts_ms must be integers"),
    ("{", "<trace>: not JSON"),
])
def test_bad_lines_are_refused_naming_where(line, message):
    from groupcoord.core import trace

    with pytest.raises(trace.TraceError) as e:
        trace.parse_record(line)
    assert str(e.value).startswith(message)
    with pytest.raises(trace.TraceError) as e:
        list(trace.read_lines(["", line]))
    assert str(e.value).startswith(message.replace("<trace>", "<trace>:2"))


def test_a_bad_value_is_refused_naming_where():
    from groupcoord.core import trace

    with pytest.raises(trace.TraceError, match=r"^<trace>: unknown type 'Nope'$"):
        trace.value_of({"type": "Nope", "data": {}})


# ------------------------------------------------------------------ configuration, hashing, the table

def test_settings_by_kafka_name_keep_the_base_and_check_strings():
    from groupcoord.core.config import ConfigError, CoordinatorConfig

    base = CoordinatorConfig(node_id=7, group_max_size=4)
    config = CoordinatorConfig.from_kafka({"group.max.size": 9, "advertised.host": "broker-1"}, base=base)
    assert (config.node_id, config.group_max_size, config.advertised_host) == (7, 9, "broker-1")
    assert CoordinatorConfig.from_kafka(None, base=base) == base
    assert CoordinatorConfig.from_kafka({"advertised.port": " 9093 "}).advertised_port == 9093
    for bad in ("", 5, None):
        with pytest.raises(ConfigError, match=r"^advertised\.host must be a non-empty string, got "):
            CoordinatorConfig.from_kafka({"advertised.host": bad})
    with pytest.raises(ConfigError) as e:
        CoordinatorConfig.from_kafka({"group.mx.size": 3})
    assert str(e.value).startswith("unknown setting 'group.mx.size'; known: advertised.host, advertised.port, group.")


def test_java_string_hash_is_string_hashcode_over_utf16_units():
    from groupcoord.core.partitioning import java_string_hash

    # partition_for caches its answers, so the hash itself is checked here
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("group") == 98629247
    assert java_string_hash("my-group") == (-1906497762) % (1 << 32)
    assert java_string_hash("polygenelubricants") == 1 << 31
    assert java_string_hash("\U0001f600") == (31 * 0xD83D + 0xDE00)  # a surrogate pair: two units


def test_an_event_crossing_preparing_rebalance_takes_both_edges_or_none():
    from groupcoord.core.classic.states import (COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE,
                                        edges_between)

    assert edges_between(STABLE, PREPARING_REBALANCE) == ((STABLE, PREPARING_REBALANCE),)
    assert edges_between(STABLE, COMPLETING_REBALANCE) == (
        (STABLE, PREPARING_REBALANCE), (PREPARING_REBALANCE, COMPLETING_REBALANCE))
    assert edges_between(EMPTY, EMPTY) == ((EMPTY, PREPARING_REBALANCE), (PREPARING_REBALANCE, EMPTY))
    # the first hop is legal (Stable -> PreparingRebalance) but not the second (-> Stable)
    assert edges_between(STABLE, STABLE) == ()
    # the second hop is legal (PreparingRebalance -> Empty) but not the first (Dead ->)
    assert edges_between(DEAD, EMPTY) == ()


# ------------------------------------------------------------------ the coordinator, driven
# Driver: the core with in-memory storage and a manual clock (adapters/runtime/driver.py).

def _driver(**config):
    from groupcoord.adapters.runtime.driver import Driver
    from groupcoord.core.config import CoordinatorConfig

    return Driver(CoordinatorConfig(**{"offsets_topic_num_partitions": 1, **config}))


def _join(d, group="g", member_id="", instance=None, version=5, session=10_000, rebalance=20_000,
          protocols=(("range", b"m"),), protocol_type="consumer"):
    body = {"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
            "member_id": member_id, "protocol_type": protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in protocols]}
    if instance is not None:
        body["group_instance_id"] = instance
    return d.send("JoinGroup", body, version=version)


def _sync(d, member_id, generation, group="g", assignments=(), instance=None, version=5):
    body = {"group_id": group, "generation_id": generation, "member_id": member_id,
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments]}
    if instance is not None:
        body["group_instance_id"] = instance
    return d.send("SyncGroup", body, version=version)


def _commit(d, group="g", offsets=(("t", 0, 5),), generation=-1, member_id="", version=8, metadata=""):
    topics = {}
    for topic, partition, offset in offsets:
        topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                             "committed_metadata": metadata})
    return d.send("OffsetCommit", {"group_id": group, "generation_id_or_member_epoch": generation,
                                   "member_id": member_id,
                                   "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
                  version=version)


def _stable(d, group="g", members=1, instance=None):
    """A Stable group of ``members`` dynamic members (the first static if ``instance``), each
    assigned ``b"a-" + member id``; returns (generation, member ids, leader id)."""
    requests = [_join(d, group, instance=instance, version=5) if i == 0 and instance else _join(d, group, version=3)
                for i in range(members)]
    while not all(r in d.responses for r in requests):  # the initial delay, extended per new member
        d.advance(max(1, d.config.group_initial_rebalance_delay_ms))
    joined = [d.responses[r] for r in requests]
    leader = joined[0].leader
    ids = [j.member_id for j in joined]
    generation = joined[0].generation_id
    for j in joined:
        assignments = [(m, b"a-" + m.encode()) for m in ids] if j.member_id == leader else ()
        _sync(d, j.member_id, generation, group, assignments, instance=instance if j.member_id == ids[0] else None)
    assert d.coordinator.group(group).state.value == "Stable"
    return generation, ids, leader


def test_requests_held_behind_a_write_are_answered_not_coordinator_when_the_partition_unloads():
    """Kafka fails the operations still waiting on the partition's writes with NOT_COORDINATOR
    when it loses the partition (CoordinatorRuntime: the deferred events complete exceptionally)."""
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error

    d = _driver(offset_metadata_max_bytes=1)
    generation, [member], _ = _stable(d)
    d.hold_writes()
    first = _commit(d, "s")  # its write is held: what follows on the partition waits behind it
    too_large = _commit(d, "s", offsets=(("t", 1, 6), ("u", 0, 1)), metadata="xx")
    fetch = d.send("OffsetFetch", {"groups": [{"group_id": "s", "topics": None}], "require_stable": True}, version=8)
    delete = d.send("OffsetDelete", {"group_id": "s", "topics": [{"name": "x", "partitions": [{"partition_index": 0}]}]},
                    version=0)
    leave = d.send("LeaveGroup", {"group_id": "g", "members": [{"member_id": "nobody"}]}, version=3)
    heartbeat = d.send("Heartbeat", {"group_id": "g", "generation_id": generation, "member_id": member}, version=4)
    held = (first, too_large, fetch, delete, leave, heartbeat)
    assert not any(r in d.responses for r in held)
    d.dispatch(ev.UnloadPartition(now_ms=d.now_ms, partition=0))
    nc = Error.NOT_COORDINATOR
    assert d.responses[first] == c.OffsetCommitResponse((c.TopicResult("t", (c.PartitionResult(0, nc),)),))
    assert d.responses[too_large] == c.OffsetCommitResponse((c.TopicResult("t", (c.PartitionResult(1, nc),)),
                                                              c.TopicResult("u", (c.PartitionResult(0, nc),))))
    assert d.responses[fetch] == c.OffsetFetchResponse((c.FetchedGroup("s", (), nc),))
    assert d.responses[delete] == c.OffsetDeleteResponse(nc)
    assert d.responses[leave] == c.LeaveGroupResponse(nc)
    assert d.responses[heartbeat] == c.HeartbeatResponse(nc)
    assert all(d.answer_counts[r] == 1 for r in held)


def test_describe_answers_per_group_for_partitions_not_owned_or_loading():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error

    d = _driver(offsets_topic_num_partitions=2)
    d.unload()
    d.dispatch(ev.LoadPartition(now_ms=0, partition=1, loading=True))
    from groupcoord.core.partitioning import partition_for

    on = {partition_for(g, 2): g for g in ("a", "b", "c", "d")}
    request = d.send("DescribeGroups", {"groups": [on[0], on[1]]}, version=5)
    assert d.responses[request] == c.DescribeGroupsResponse((
        c.DescribedGroup(group_id=on[0], error_code=Error.NOT_COORDINATOR),
        c.DescribedGroup(group_id=on[1], error_code=Error.COORDINATOR_LOAD_IN_PROGRESS)))


def test_a_snapshot_restores_to_a_coordinator_that_carries_on_alike():
    from groupcoord.core.coordinator import Coordinator

    d = _driver()
    generation, ids, leader = _stable(d, members=2)
    _commit(d, "s")
    d.hold_writes()
    _commit(d, "s", offsets=(("t", 0, 9),))
    held = d.send("DeleteGroups", {"groups_names": ["s"]}, version=2)
    heartbeat = d.send("Heartbeat", {"group_id": "g", "generation_id": generation, "member_id": ids[1]}, version=4)
    state = d.coordinator.snapshot()
    copy = Coordinator.restore(state, d.config)
    assert copy.snapshot() == state
    assert copy.groups() == d.coordinator.groups() and copy.offsets("s") == d.coordinator.offsets("s")
    assert copy.owned_partitions() == d.coordinator.owned_partitions()
    from groupcoord.core import events as ev

    # the same inputs give the same outputs: the held writes complete, a fetch follows
    def carry_on(coordinator):
        # a plain fetch reads the committed offset of a key whose write is in flight (5, not 9)
        out = coordinator.handle(ev.OffsetFetch(request_id="before", now_ms=d.now_ms, version=8,
                                                groups=(ev.FetchGroup("s"),)))
        for w in d.in_flight:
            out += coordinator.handle(ev.WriteCompleted(now_ms=d.now_ms, write_id=w.write_id))
        return out + coordinator.handle(ev.OffsetFetch(request_id="f", now_ms=d.now_ms, version=8,
                                                       groups=(ev.FetchGroup("s"), ev.FetchGroup("g"))))

    original, restored = carry_on(d.coordinator), carry_on(copy)
    assert restored == original
    assert restored[0].response.groups[0].topics[0].partitions[0].committed_offset == 5
    answered = {getattr(cmd, "request_id", None) for cmd in restored}
    assert {held, heartbeat, "f"} <= answered


def test_a_failed_static_replacement_brings_the_old_member_back_with_its_session():
    """§6: on write failure the old id comes back with its old protocols and timeouts, its
    heartbeat re-armed: it stays valid and still expires when it stops heartbeating."""
    from groupcoord.core import commands as c
    from groupcoord.core.errors import Error

    d = _driver()
    generation, [old], _ = _stable(d, instance="i")
    d.advance(9_000)
    d.fail_next_write(Error.NOT_LEADER_OR_FOLLOWER)
    rejoin = _join(d, instance="i", session=30_000, protocols=(("range", b"new"),))
    assert d.responses[rejoin] == c.JoinGroupResponse(
        error_code=Error.NOT_COORDINATOR, generation_id=generation, protocol_type="consumer",
        protocol_name="range", leader=old, member_id="")
    group = d.coordinator.group("g")
    assert dict(group.static_members) == {"i": old} and list(group.members) == [old]
    member = group.members[old]
    assert (member.session_timeout_ms, member.rebalance_timeout_ms, member.protocols) == (
        10_000, 20_000, (("range", b"m"),))
    d.advance(9_999)  # past the session the old member had before the replacement
    assert old in d.coordinator.group("g").members
    d.advance(1)  # its session timeout from the failure on
    assert d.coordinator.group("g").members == {} and d.coordinator.group("g").state.value == "Empty"


def _settle(d, write, error=None):
    """Complete (error None) or fail one held write of ``d``."""
    from groupcoord.core import events as ev

    d.in_flight.remove(write)
    if error is None:
        d.storage.store(write.partition, write.records)
        return d.dispatch(ev.WriteCompleted(now_ms=d.now_ms, write_id=write.write_id))
    return d.dispatch(ev.WriteFailed(now_ms=d.now_ms, write_id=write.write_id, error=error))


def _empty_group(d, group):
    """Creates ``group`` Empty (a member id handed out with MEMBER_ID_REQUIRED, nothing joined)."""
    _join(d, group, version=4)
    assert d.coordinator.group(group).state.value == "Empty"


def test_a_deletion_and_a_new_groups_creation_that_both_fail_bring_the_deleted_group_back():
    """Kafka reverts a failed write's operation and everything after it: the tombstone failing
    while a new group of the same id is being created, then that creation failing, leaves the
    deleted group as it was (writes.py: RestoreGroup onto the creation's AfterNewGroup)."""
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "g", offsets=(("t", 0, 1),))
    deleted = d.coordinator.group("g")
    d.hold_writes()
    _commit(d, "x")  # an unrelated write in flight first (offsets, a simple group)
    _join(d, "h", version=4)  # and another group's creation
    tombstone = d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    _join(d, "g", version=4)
    commit_x, create_h, delete_g, create_g = d.in_flight
    assert d.coordinator.group("g") is not deleted and d.coordinator.offsets("g") == {}
    _settle(d, delete_g, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.responses[tombstone].results[0].error_code is Error.NOT_COORDINATOR
    assert d.coordinator.group("g") is not deleted  # the new group holds the id while its creation is in flight
    _settle(d, create_g, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g") == deleted
    _settle(d, create_h, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("h") is None
    _settle(d, commit_x)
    assert d.coordinator.group("g") == deleted and d.coordinator.offsets("g") != {}


def test_a_failed_creation_of_a_group_deleted_meanwhile_does_not_bring_it_back():
    """A new group, deleted while its creation is in flight: when the creation fails the group
    never existed, so the failure of its tombstone must not restore it; a later incarnation's
    tombstone still restores that one."""
    from groupcoord.core.errors import Error

    d = _driver()
    d.hold_writes()
    _empty_group(d, "g")
    _join(d, "h", version=4)  # another group's creation in flight between them
    first_delete = d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    create_g, create_h, delete_g = d.in_flight
    _empty_group(d, "g")  # a new incarnation
    third = d.coordinator.group("g")
    d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    create_g2, delete_g2 = d.in_flight[3:]
    assert d.coordinator.group("g") is None
    _settle(d, create_g, Error.NOT_LEADER_OR_FOLLOWER)
    _settle(d, delete_g, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g") is None  # the first incarnation never existed
    assert d.responses[first_delete].results[0].error_code is Error.NOT_COORDINATOR
    _settle(d, create_h)
    _settle(d, create_g2)
    _settle(d, delete_g2, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g") == third  # the second one did, and its deletion failed


def test_each_kind_of_held_response_has_its_error_form():
    """error_like: the answer to a held response's request when its partition goes (the
    coordinator holds only some kinds; the others are answered at once, never held)."""
    from groupcoord.core import commands as c
    from groupcoord.core.error_responses import error_like
    from groupcoord.core.errors import Error

    nc = Error.NOT_COORDINATOR
    held = c.DeleteGroupsResponse((c.DeletableGroupResult("a", Error.NONE), c.DeletableGroupResult("b", Error.NONE)))
    assert error_like(held, nc) == c.DeleteGroupsResponse((c.DeletableGroupResult("a", nc), c.DeletableGroupResult("b", nc)))
    assert error_like(c.OffsetDeleteResponse(Error.NONE, (c.TopicResult("t", ()),)), nc) == c.OffsetDeleteResponse(nc)
    with pytest.raises(TypeError, match="^no error form for SyncGroupResponse$"):
        error_like(c.SyncGroupResponse(error_code=Error.NONE), nc)


def test_a_groups_subscribed_topics_are_every_members_topics():
    """ClassicGroup.computeSubscribedTopics: the union of the members' subscriptions; an offset
    of a topic any member subscribes to cannot be deleted (GROUP_SUBSCRIBED_TO_TOPIC)."""
    from groupcoord.core import commands as c
    from groupcoord.core.errors import Error

    d = _driver()
    requests = [_join(d, version=3, protocols=(("range", cp.encode_subscription(topics)),))
                for topics in (["a"], ["b", "c"])]
    while not all(r in d.responses for r in requests):
        d.advance(3_000)
    joined = [d.responses[r] for r in requests]
    for j in joined:
        _sync(d, j.member_id, j.generation_id, assignments=[(m.member_id, b"") for m in j.members])
    assert d.coordinator.group("g").subscribed_topics == frozenset({"a", "b", "c"})
    _commit(d, offsets=(("a", 0, 1), ("c", 0, 1), ("z", 0, 1)), generation=joined[0].generation_id,
            member_id=joined[0].member_id)
    request = d.send("OffsetDelete", {"group_id": "g", "topics": [
        {"name": t, "partitions": [{"partition_index": 0}]} for t in ("a", "c", "z")]}, version=0)
    subscribed = Error.GROUP_SUBSCRIBED_TO_TOPIC
    assert d.responses[request] == c.OffsetDeleteResponse(Error.NONE, (
        c.TopicResult("a", (c.PartitionResult(0, subscribed),)), c.TopicResult("c", (c.PartitionResult(0, subscribed),)),
        c.TopicResult("z", (c.PartitionResult(0, Error.NONE),))))


@pytest.mark.parametrize("error", [None, "NOT_LEADER_OR_FOLLOWER"])
def test_a_static_replacement_whose_member_left_and_group_went_meanwhile_ends_quietly(error):
    """The replaced-in member leaves (by instance id) while the replacement's write is in flight
    and the now Empty group is deleted: the write's outcome finds no member to answer."""
    from groupcoord.core.errors import Error

    d = _driver()
    _stable(d, instance="i")
    d.hold_writes()
    rejoin = _join(d, instance="i")
    [replace] = d.in_flight
    leave = d.send("LeaveGroup", {"group_id": "g", "members": [{"member_id": "", "group_instance_id": "i"}]},
                   version=3)
    assert d.responses[rejoin].error_code is Error.UNKNOWN_MEMBER_ID
    if error is None:
        _settle(d, replace)
        assert d.coordinator.group("g").members == {}
    d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    assert d.coordinator.group("g") is None
    if error is not None:
        _settle(d, replace, error)
    assert d.coordinator.group("g") is None
    d.release_writes()
    assert d.answer_counts[rejoin] == 1 and d.answer_counts[leave] == 1


def test_a_static_member_that_rejoins_before_its_replacement_is_written_is_answered_by_the_new_join():
    """The new member id rejoins while the replacement's write is in flight (a leader's rejoin
    rebalances); the write's success then finds the member no longer parked on it."""
    d = _driver()
    _stable(d, instance="i")
    d.hold_writes()
    _join(d, instance="i")
    [replace] = d.in_flight
    new = d.coordinator.group("g").static_members["i"]
    again = _join(d, member_id=new, instance="i")
    assert d.responses[again].member_id == new and d.responses[again].generation_id == 2
    _settle(d, replace)
    group = d.coordinator.group("g")
    assert group.state.value == "CompletingRebalance" and dict(group.static_members) == {"i": new}
    assert d.answer_counts[again] == 1 and group.members[new].awaiting_join is None


def test_a_pending_member_expires_from_a_deleted_group_held_by_a_new_groups_creation():
    """D15, with the deleted group waiting on the creation write of a new group of its id (its
    tombstone failed first): the pending member's expiry reaches that copy too."""
    from groupcoord.core.errors import Error

    d = _driver()
    _empty_group(d, "g")  # one pending member (MEMBER_ID_REQUIRED), session 10 s
    [pending] = d.coordinator.group("g").pending_members
    d.hold_writes()
    d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    _join(d, "g", version=4, session=30_000)  # a new group of the id (Empty, generation 0)
    delete_g, create_g = d.in_flight
    _settle(d, delete_g, Error.NOT_LEADER_OR_FOLLOWER)  # the old group now waits on create_g
    d.advance(10_000)  # the pending member's session
    _settle(d, create_g, Error.NOT_LEADER_OR_FOLLOWER)  # the old group comes back
    group = d.coordinator.group("g")
    assert group is not None and group.state.value == "Empty" and pending not in group.pending_members
    assert group.pending_members == frozenset()


def test_a_deleted_group_comes_back_when_the_creation_it_waits_on_fails_after_that_group_went_too():
    """The old group's tombstone fails while a new group of its id is being created; the new
    group is deleted in turn; then its creation fails: it never existed, and the old one is back."""
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "g", offsets=(("t", 0, 1),))
    old = d.coordinator.group("g")
    d.hold_writes()
    d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    _empty_group(d, "g")
    delete_old, create_new = d.in_flight
    _settle(d, delete_old, Error.NOT_LEADER_OR_FOLLOWER)
    d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    [delete_new] = d.in_flight[1:]
    assert d.coordinator.group("g") is None
    _settle(d, create_new, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g") == old
    _settle(d, delete_new)
    assert d.coordinator.group("g") == old


def test_list_groups_while_a_partition_loads_and_find_coordinator_for_keys_not_here():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error
    from groupcoord.core.partitioning import partition_for

    d = _driver(offsets_topic_num_partitions=2, node_id=3, advertised_host="h", advertised_port=9)
    d.dispatch(ev.UnloadPartition(now_ms=0, partition=1))
    here, there = (next(g for g in map(str, range(100)) if partition_for(g, 2) == p) for p in (0, 1))
    find = d.send("FindCoordinator", {"key_type": 0, "coordinator_keys": [here, there]}, version=4)
    assert d.responses[find] == c.FindCoordinatorResponse((
        c.Coordinator(here, 3, "h", 9, Error.NONE),
        c.Coordinator(there, -1, "", -1, Error.COORDINATOR_NOT_AVAILABLE)))
    transaction = d.send("FindCoordinator", {"key_type": 1, "coordinator_keys": [here]}, version=4)
    assert d.responses[transaction] == c.FindCoordinatorResponse((c.Coordinator(here, -1, "", -1, Error.INVALID_REQUEST),))
    d.dispatch(ev.LoadPartition(now_ms=0, partition=1, loading=True))
    listing = d.send("ListGroups", {}, version=4)
    assert d.responses[listing] == c.ListGroupsResponse(Error.COORDINATOR_LOAD_IN_PROGRESS)
    d.dispatch(ev.LoadPartition(now_ms=0, partition=1))
    listing = d.send("ListGroups", {}, version=4)
    assert d.responses[listing] == c.ListGroupsResponse(Error.NONE)


# ------------------------------------------------------------------ load and unload (§3.11)

def _record(group="g", protocol_type="consumer", members=(), timestamp=1234, generation=3):
    from groupcoord.core import commands as c

    return c.GroupMetadataRecord(group_id=group, protocol_type=protocol_type, generation_id=generation,
                                 protocol_name="range" if members else None,
                                 leader_id=members[0].member_id if members else None,
                                 current_state_timestamp_ms=timestamp, members=tuple(members))


def test_a_group_loads_as_its_record_says():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.coordinator import Coordinator

    from groupcoord.core.partitioning import partition_for

    member = c.MemberRecord("m", None, "client", "/10.0.0.1", -1, 7000, cp.encode_subscription(["a", "b"]), b"x")
    other = c.MemberRecord("n", "i", "other", "/10.0.0.2", 9000, 8000, cp.encode_subscription(["c"]), b"y")
    coordinator = Coordinator()
    for gid, record in (("g", _record(members=(member, other))), ("e", _record("e", "", timestamp=-1)),
                        ("k", _record("k", "consumer", timestamp=5))):
        coordinator.handle(ev.LoadPartition(now_ms=0, partition=partition_for(gid, 50), records=(record,)))
    g = coordinator.group("g")
    assert (g.state.value, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id, g.state_timestamp_ms) == (
        "Stable", 3, "consumer", "range", "m", 1234)
    assert g.subscribed_topics == frozenset({"a", "b", "c"}) and dict(g.static_members) == {"i": "n"}
    m, n = g.members["m"], g.members["n"]
    # a rebalance timeout of -1 (records of old versions) is the session timeout
    assert (m.rebalance_timeout_ms, m.session_timeout_ms, m.assignment, m.client_id, m.client_host) == (
        7000, 7000, b"x", "client", "/10.0.0.1")
    assert (n.rebalance_timeout_ms, n.session_timeout_ms, n.assignment, n.client_id, n.group_instance_id) == (
        9000, 8000, b"y", "other", "i")
    assert m.protocols == (("range", cp.encode_subscription(["a", "b"])),)
    e = coordinator.group("e")
    assert (e.state.value, e.protocol_type, e.state_timestamp_ms, e.subscribed_topics) == ("Empty", None, None, None)
    k = coordinator.group("k")  # Empty, but a consumer group: its offsets expire by the state's time
    assert (k.state.value, k.protocol_type, k.state_timestamp_ms, k.subscribed_topics) == (
        "Empty", "consumer", 5, frozenset())


def test_assemble_group_sets_the_fields_it_is_given():
    from groupcoord.core.classic.draft import assemble_group
    from groupcoord.core.classic.model import Group, Member

    member = Member("m", None, "c", "/h", 10, 10, "consumer", (("range", cp.encode_subscription(["t"])),))
    group = assemble_group(Group("g", 0, protocol_type="consumer", protocol_name="range", leader_id="m"), [member],
                           pending_members=frozenset({"p"}), new_member_added=True)
    assert group.pending_members == frozenset({"p"}) and group.new_member_added is True
    assert list(group.members) == ["m"] and group.subscribed_topics == frozenset({"t"})


def test_unloading_one_partition_leaves_the_others_alone():
    """onUnloaded for one partition: its writes fail, its held responses get NOT_COORDINATOR,
    its groups and offsets are forgotten and its timers cancelled; another partition's writes,
    held responses, groups and offsets carry on."""
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error
    from groupcoord.core.partitioning import partition_for

    d = _driver(offsets_topic_num_partitions=2)
    names = {p: [g for g in map(str, range(200)) if partition_for(g, 2) == p][:2] for p in (0, 1)}
    # groups in the map alternate between the partitions, one of partition 1 first
    for gid in (names[1][0], names[0][0], names[1][1], names[0][1]):
        _commit(d, gid)
    d.hold_writes()
    stay, go = names[1][0], names[0][0]
    commits = {gid: _commit(d, gid, offsets=(("t", 0, 9),)) for gid in (stay, go)}
    behind = {gid: _commit(d, gid, offsets=(("t", 1, 1),), metadata="x" * 5000) for gid in (stay, go)}
    assert not any(r in d.responses for r in (*commits.values(), *behind.values()))
    out = d.dispatch(ev.UnloadPartition(now_ms=d.now_ms, partition=0))
    assert out[-1] == c.CancelPartitionTimers(0)
    nc = Error.NOT_COORDINATOR
    assert d.responses[commits[go]].topics[0].partitions[0].error_code is nc
    assert d.responses[behind[go]].topics[0].partitions[0].error_code is nc
    assert commits[stay] not in d.responses and behind[stay] not in d.responses
    assert d.coordinator.group(go) is None and d.coordinator.group(names[0][1]) is None
    assert d.coordinator.offsets(go) == {} and d.coordinator.offsets(names[0][1]) == {}
    state = d.coordinator.snapshot()
    assert go not in state.offsets and go not in state.committed_offsets
    assert d.coordinator.group(stay) is not None and d.coordinator.group(names[1][1]) is not None
    assert d.coordinator.offsets(stay)[("t", 0)].offset == 9
    d.release_writes()
    assert d.responses[commits[stay]].topics[0].partitions[0].error_code is Error.NONE
    assert d.responses[behind[stay]].topics[0].partitions[0].error_code is Error.OFFSET_METADATA_TOO_LARGE
    assert all(d.answer_counts[r] == 1 for r in (*commits.values(), *behind.values()))


# ------------------------------------------------------------------ describe, offset deletion and expiry

def test_describe_answers_each_group_in_order_with_what_it_is():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error

    d = _driver()
    generation, [member], _ = _stable(d, instance="i")
    _commit(d, "s")  # a simple group: no protocol type
    d.dispatch(ev.DescribeGroups(request_id="dg", now_ms=d.now_ms, version=5, groups=(None, "s", "g", "none")))
    invalid, simple, stable, missing = d.responses["dg"].groups
    assert invalid == c.DescribedGroup(group_id=None, error_code=Error.INVALID_GROUP_ID)
    assert simple == c.DescribedGroup(group_id="s", group_state="Empty", protocol_type="", protocol_data="")
    assert (stable.group_state, stable.protocol_type, stable.protocol_data) == ("Stable", "consumer", "range")
    assert stable.members == (c.DescribedMember(member, "i", "client", "/127.0.0.1", b"m", b"a-" + member.encode()),)
    assert missing == c.DescribedGroup(group_id="none", group_state="Dead")


def test_deleted_offsets_are_tombstoned_in_storage():
    """OffsetDelete writes an offset tombstone per deleted offset: a reload does not bring them back."""
    from groupcoord.core.errors import Error

    d = _driver(offsets_topic_num_partitions=3)
    _commit(d, "s", offsets=(("a", 0, 1), ("a", 1, 2), ("b", 0, 3)))
    request = d.send("OffsetDelete", {"group_id": "s", "topics": [
        {"name": "a", "partitions": [{"partition_index": 1}, {"partition_index": 7}]}]}, version=0)
    assert d.responses[request].error_code is Error.NONE
    assert set(d.coordinator.offsets("s")) == {("a", 0), ("b", 0)}
    d.reload()
    assert set(d.coordinator.offsets("s")) == {("a", 0), ("b", 0)}


def test_expiry_removes_unsubscribed_offsets_of_a_stable_group_and_whole_empty_groups_on_every_partition():
    """§5.3: a Stable consumer group's offsets of topics no member subscribes to expire by their
    commit time; a simple group's all do, and the group goes with them (tombstones, kept on reload)."""
    from groupcoord.core.partitioning import partition_for

    d = _driver(offsets_topic_num_partitions=2, offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000)
    on = {p: [g for g in map(str, range(100)) if partition_for(g, 2) == p] for p in (0, 1)}
    stable = on[0][0]
    request = _join(d, stable, version=3, session=200_000, protocols=(("range", cp.encode_subscription(["a"])),))
    d.advance(3_000)
    joined = d.responses[request]
    _sync(d, joined.member_id, joined.generation_id, stable, [(joined.member_id, b"")])
    _commit(d, stable, offsets=(("a", 0, 1), ("z", 0, 2)), generation=joined.generation_id, member_id=joined.member_id)
    simple = [on[1][0], on[0][1], on[1][1]]  # groups of both partitions, one of partition 1 first
    for gid in simple:
        _commit(d, gid)
    d.advance(70_000)
    assert set(d.coordinator.offsets(stable)) == {("a", 0)}
    assert all(d.coordinator.group(gid) is None and d.coordinator.offsets(gid) == {} for gid in simple)
    d.reload()
    assert set(d.coordinator.offsets(stable)) == {("a", 0)}
    assert all(d.coordinator.group(gid) is None for gid in simple)


def test_an_empty_group_without_a_state_time_expires_its_offsets_by_their_commit_time():
    """§5.3: base = the time the group became Empty, or the commit timestamp when absent (a record
    written with -1)."""
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.coordinator import Coordinator
    from groupcoord.core.config import CoordinatorConfig

    coordinator = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=1, offsets_retention_minutes=1))
    records = (_record("k", "consumer", timestamp=-1),
               c.OffsetCommitRecord("k", "t", 0, 5, -1, "", 1_000), c.OffsetCommitRecord("k", "t", 1, 6, -1, "", 50_000))
    coordinator.handle(ev.LoadPartition(now_ms=0, partition=0, records=records))
    out = coordinator.handle(ev.TimerFired(now_ms=61_000, key=c.ExpirationTimer(0)))
    [write] = [cmd for cmd in out if isinstance(cmd, c.Write)]
    assert write.records == (c.OffsetTombstone("k", "t", 0),)
    assert set(coordinator.offsets("k")) == {("t", 1)} and coordinator.group("k") is not None


def test_each_request_kind_has_its_whole_failure_form():
    """error_response: what Kafka answers a request that fails whole (GroupCoordinatorService);
    the coordinator uses some kinds, the others answer per group, but the forms are Kafka's."""
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.error_responses import error_response
    from groupcoord.core.errors import Error

    e = Error.COORDINATOR_LOAD_IN_PROGRESS
    common = dict(request_id="r", now_ms=0, version=8)
    fetch = ev.OffsetFetch(**common, groups=(ev.FetchGroup("a"), ev.FetchGroup("b", (("t", (0,)),))))
    assert error_response(fetch, e) == c.OffsetFetchResponse((c.FetchedGroup("a", (), e), c.FetchedGroup("b", (), e)))
    describe = ev.DescribeGroups(**common, groups=("a", "b"))
    assert error_response(describe, e) == c.DescribeGroupsResponse((c.DescribedGroup(group_id="a", error_code=e),
                                                                     c.DescribedGroup(group_id="b", error_code=e)))
    assert error_response(ev.ListGroups(**common), e) == c.ListGroupsResponse(e)
    delete = ev.DeleteGroups(**common, groups_names=("a", "b"))
    assert error_response(delete, e) == c.DeleteGroupsResponse((c.DeletableGroupResult("a", e),
                                                                 c.DeletableGroupResult("b", e)))
    find = ev.FindCoordinator(**common, coordinator_keys=("a",))
    assert error_response(find, e) == c.FindCoordinatorResponse((c.Coordinator("a", -1, "", -1, e),))
    with pytest.raises(TypeError, match="^not a request: "):
        error_response(ev.WriteCompleted(now_ms=0, write_id=1), e)


def test_a_join_rejected_by_the_service_echoes_its_member_id_and_one_failed_at_runtime_does_not():
    from groupcoord.core.errors import Error

    d = _driver()
    bad_session = _join(d, member_id="m-1", session=1)
    assert (d.responses[bad_session].error_code, d.responses[bad_session].member_id) == (
        Error.INVALID_SESSION_TIMEOUT, "m-1")
    d.unload()
    not_here = _join(d, member_id="m-1")
    assert (d.responses[not_here].error_code, d.responses[not_here].member_id) == (Error.NOT_COORDINATOR, "")


# ------------------------------------------------------------------ what the records keep

def _persisted(group):
    """What a GroupMetadata record keeps of a group (§4.5): a reload must give it back."""
    members = tuple((m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                     m.session_timeout_ms, m.protocol_type, m.metadata(group.protocol_name), m.assignment)
                    for m in group.members.values())
    return (group.state, group.generation_id, group.protocol_type, group.protocol_name, group.leader_id,
            dict(group.static_members), group.subscribed_topics, members)


def test_a_reload_gives_back_the_groups_and_offsets_the_records_hold():
    from groupcoord.core import events as ev
    from groupcoord.core.offsets import OffsetEntry

    d = _driver()
    subscription = cp.encode_subscription(["t"])
    static = d.send("JoinGroup", {"group_id": "g", "session_timeout_ms": 11_000, "rebalance_timeout_ms": 21_000,
                                  "member_id": "", "group_instance_id": "i", "protocol_type": "consumer",
                                  "protocols": [{"name": "range", "metadata": subscription}]},
                    version=5, client_id="static-client")
    dynamic = d.send("JoinGroup", {"group_id": "g", "session_timeout_ms": 12_000, "rebalance_timeout_ms": 22_000,
                                   "member_id": "", "protocol_type": "consumer",
                                   "protocols": [{"name": "range", "metadata": subscription},
                                                 {"name": "rr", "metadata": b"other"}]},
                     version=3, client_id="dynamic-client")
    while static not in d.responses or dynamic not in d.responses:
        d.advance(3_000)
    leader, follower = d.responses[static], d.responses[dynamic]
    _sync(d, follower.member_id, follower.generation_id)
    _sync(d, leader.member_id, leader.generation_id, assignments=[(leader.member_id, b"A"), (follower.member_id, b"B")],
          instance="i")
    replaced = _join(d, instance="i", session=11_000, rebalance=21_000, protocols=(("range", subscription),))
    assert d.responses[replaced].error_code == 0  # a static replacement in Stable, written
    d.dispatch(ev.OffsetCommit(request_id="oc", now_ms=d.now_ms, version=4, group_id="g",
                               generation_id=leader.generation_id, member_id=follower.member_id,
                               retention_time_ms=90_000,
                               topics=(("t", (ev.CommitPartition(3, 42, 7, "meta"),)),)))
    _commit(d, "s", offsets=(("u", 1, 5),), metadata="simple")
    before = {gid: _persisted(d.coordinator.group(gid)) for gid in ("g", "s")}
    offsets = {gid: d.coordinator.offsets(gid) for gid in ("g", "s")}
    assert offsets["g"][("t", 3)] == OffsetEntry(42, 7, "meta", d.now_ms, d.now_ms + 90_000)
    d.reload()
    assert {gid: _persisted(d.coordinator.group(gid)) for gid in ("g", "s")} == before
    assert {gid: d.coordinator.offsets(gid) for gid in ("g", "s")} == offsets
    assert isinstance(d.coordinator.group("g").state_timestamp_ms, int)


def test_delete_groups_answers_every_group_in_order_and_tombstones_their_offsets():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error
    from groupcoord.core.partitioning import partition_for

    d = _driver(offsets_topic_num_partitions=3)
    on = {p: [g for g in map(str, range(200)) if partition_for(g, 3) == p] for p in range(3)}
    gone, loading, here = on[0][0], on[1][0], on[2][0]
    _commit(d, here, offsets=(("t", 0, 1), ("u", 2, 3)))
    d.dispatch(ev.UnloadPartition(now_ms=0, partition=0))
    d.dispatch(ev.UnloadPartition(now_ms=0, partition=1))
    d.dispatch(ev.LoadPartition(now_ms=0, partition=1, loading=True))
    fetch = ev.OffsetFetch(request_id="fetch", now_ms=0, version=8,
                           groups=tuple(ev.FetchGroup(g) for g in (gone, loading, here)))
    d.dispatch(fetch)
    assert d.responses["fetch"].groups[:2] == (c.FetchedGroup(gone, (), Error.NOT_COORDINATOR),
                                               c.FetchedGroup(loading, (), Error.COORDINATOR_LOAD_IN_PROGRESS))
    assert len(d.responses["fetch"].groups[2].topics) == 2
    d.dispatch(ev.DeleteGroups(request_id="del", now_ms=0, version=2, groups_names=(None, gone, loading, here)))
    assert d.responses["del"] == c.DeleteGroupsResponse((
        c.DeletableGroupResult(None, Error.INVALID_GROUP_ID), c.DeletableGroupResult(gone, Error.NOT_COORDINATOR),
        c.DeletableGroupResult(loading, Error.COORDINATOR_LOAD_IN_PROGRESS), c.DeletableGroupResult(here, Error.NONE)))
    # Kafka's records for a deletion: a tombstone per offset, then the group's
    assert d.storage.records(2)[-3:] == (c.OffsetTombstone(here, "t", 0), c.OffsetTombstone(here, "u", 2),
                                         c.GroupTombstone(here))
    d.reload()
    assert d.coordinator.group(here) is None and d.coordinator.offsets(here) == {}


def test_offset_fetch_answers_an_invalid_group_id_and_goes_on():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "s")
    d.dispatch(ev.OffsetFetch(request_id="f", now_ms=0, version=8, groups=(ev.FetchGroup(None), ev.FetchGroup("s"))))
    assert d.responses["f"] == c.OffsetFetchResponse((
        c.FetchedGroup(None, (), Error.INVALID_GROUP_ID),
        c.FetchedGroup("s", (c.FetchedTopic("t", (c.FetchedPartition(0, 5, -1, ""),)),))))


@pytest.mark.parametrize("generation, member, instance, error", [
    (-1, "", "i", "FENCED_INSTANCE_ID"),  # an instance id alone is validated (it maps to another member)
    (-1, "", "nobody", "UNKNOWN_MEMBER_ID"),
    (-1, "<member>", None, "ILLEGAL_GENERATION"),  # a member id alone is validated, then the generation
    (-1, "", None, "UNKNOWN_MEMBER_ID"),  # neither: only an Empty group takes it
    (0, "<member>", None, "ILLEGAL_GENERATION"),
])
def test_offset_commit_validation_in_a_stable_group(generation, member, instance, error):
    """ClassicGroup.validateOffsetCommit: a generation >= 0, a member id or an instance id each
    make the commit a member's, validated as such."""
    from groupcoord.core.errors import Error

    d = _driver()
    _, [mid], _ = _stable(d, instance="i")
    request = d.send("OffsetCommit", {"group_id": "g", "generation_id_or_member_epoch": generation,
                                      "member_id": mid if member == "<member>" else member,
                                      "group_instance_id": instance,
                                      "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]},
                     version=8)
    assert d.responses[request].topics[0].partitions[0].error_code is Error[error]


def test_an_empty_group_takes_a_commit_of_generation_minus_one_only():
    """validateOffsetCommit: generation -1 commits to an Empty group; generation 0 with no member
    id is a member's commit, and there is no such member."""
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "s")
    assert d.responses[_commit(d, "s", generation=-1)].topics[0].partitions[0].error_code is Error.NONE
    assert d.responses[_commit(d, "s", generation=0)].topics[0].partitions[0].error_code is Error.UNKNOWN_MEMBER_ID


def test_a_plain_fetch_does_not_see_a_new_offset_whose_commit_and_deletion_are_both_in_flight():
    """Reads see committed offsets (D3): a key committed and then deleted, both writes in flight,
    was never committed."""
    from groupcoord.core import events as ev

    d = _driver()
    _commit(d, "s", offsets=(("t", 0, 1),))
    d.hold_writes()
    _commit(d, "s", offsets=(("x", 0, 9),))
    d.send("OffsetDelete", {"group_id": "s", "topics": [{"name": "x", "partitions": [{"partition_index": 0}]}]},
           version=0)
    d.dispatch(ev.OffsetFetch(request_id="f", now_ms=0, version=8, groups=(ev.FetchGroup("s"),)))
    assert [t.name for t in d.responses["f"].groups[0].topics] == ["t"]


def test_a_require_stable_fetch_reads_the_latest_offsets_and_waits_for_their_write():
    """D11 (Kafka: a write operation reading the latest state): require_stable during an
    in-flight commit answers with that commit's offset once it is written; a plain fetch reads
    the committed one at once."""
    from groupcoord.core import events as ev

    d = _driver()
    _commit(d, "s", offsets=(("t", 0, 5),))
    d.hold_writes()
    _commit(d, "s", offsets=(("t", 0, 9),))
    d.dispatch(ev.OffsetFetch(request_id="plain", now_ms=0, version=8, groups=(ev.FetchGroup("s"),)))
    d.dispatch(ev.OffsetFetch(request_id="stable", now_ms=0, version=8, groups=(ev.FetchGroup("s"),),
                              require_stable=True))
    assert d.responses["plain"].groups[0].topics[0].partitions[0].committed_offset == 5
    assert "stable" not in d.responses
    d.release_writes()
    assert d.responses["stable"].groups[0].topics[0].partitions[0].committed_offset == 9


def _offsets_seen(d, request_id):
    """A plain OffsetFetch of group s, as {(topic, partition): offset}."""
    from groupcoord.core import events as ev

    d.dispatch(ev.OffsetFetch(request_id=request_id, now_ms=d.now_ms, version=8, groups=(ev.FetchGroup("s"),)))
    return {(t.name, p.partition_index): p.committed_offset for t in d.responses[request_id].groups[0].topics
            for p in t.partitions}


def _latest(d):
    return {key: entry.offset for key, entry in d.coordinator.offsets("s").items()}


@pytest.mark.parametrize("first, second, committed, latest", [
    # committed view (a plain fetch) after each outcome; latest offsets (what operations see) after each
    (None, None, ({("t", 0): 6, ("t", 1): 1}, {("t", 0): 7, ("t", 1): 1, ("t", 2): 2}),
     ({("t", 0): 7, ("t", 1): 1, ("t", 2): 2},) * 2),
    (None, "fail", ({("t", 0): 6, ("t", 1): 1},) * 2,
     ({("t", 0): 7, ("t", 1): 1, ("t", 2): 2}, {("t", 0): 6, ("t", 1): 1})),
    ("fail", None, ({("t", 0): 5}, {("t", 0): 7, ("t", 2): 2}), ({("t", 0): 7, ("t", 2): 2},) * 2),
    ("fail", "fail", ({("t", 0): 5},) * 2, ({("t", 0): 7, ("t", 2): 2}, {("t", 0): 5})),
])
def test_two_commits_in_flight_on_one_key_settle_one_by_one(first, second, committed, latest):
    """D3/D6: commits change the offsets operations see at once and readers see the committed
    ones; each write's outcome stands alone: a failed write reverts its offsets to the committed
    value when no other write of the key is in flight, and otherwise only where it is still the
    latest."""
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "s", offsets=(("t", 0, 5),))
    d.hold_writes()
    _commit(d, "s", offsets=(("t", 0, 6), ("t", 1, 1)))
    _commit(d, "s", offsets=(("t", 0, 7), ("t", 2, 2)))
    w1, w2 = d.in_flight
    assert _offsets_seen(d, "before") == {("t", 0): 5}
    for n, (write, outcome) in enumerate(((w1, first), (w2, second))):
        _settle(d, write, Error.NOT_LEADER_OR_FOLLOWER if outcome else None)
        assert (_offsets_seen(d, n), _latest(d)) == (committed[n], latest[n])
    assert d.coordinator.snapshot().committed_offsets == {}  # nothing left in flight


def test_a_failed_commit_of_one_key_twice_reverts_to_the_committed_value():
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "s", offsets=(("t", 0, 5),))
    d.fail_next_write(Error.NOT_LEADER_OR_FOLLOWER)
    _commit(d, "s", offsets=(("t", 0, 6), ("t", 0, 7)))
    assert _latest(d) == {("t", 0): 5} and _offsets_seen(d, "f") == {("t", 0): 5}


def _delete_offset(d, topic="t", partition=0):
    return d.send("OffsetDelete", {"group_id": "s", "topics": [{"name": topic, "partitions": [
        {"partition_index": partition}]}]}, version=0)


def test_a_failed_deletion_keeps_a_later_commit_of_its_key():
    """An offset deleted, then committed again, both in flight; the deletion fails: the later
    commit's offset stays (it is still in flight and is the latest change of the key)."""
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "s", offsets=(("t", 0, 5),))
    d.hold_writes()
    _delete_offset(d)
    _commit(d, "s", offsets=(("t", 0, 8),))
    deletion, commit = d.in_flight
    _settle(d, deletion, Error.NOT_LEADER_OR_FOLLOWER)
    assert _latest(d) == {("t", 0): 8} and _offsets_seen(d, "f1") == {("t", 0): 5}
    _settle(d, commit)
    assert _latest(d) == {("t", 0): 8} and _offsets_seen(d, "f2") == {("t", 0): 8}


def test_a_failed_first_commit_of_a_key_deleted_meanwhile_leaves_it_absent():
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "s", offsets=(("t", 0, 5),))
    d.hold_writes()
    _commit(d, "s", offsets=(("x", 0, 1),))
    _delete_offset(d, "x")
    commit, deletion = d.in_flight
    _settle(d, commit, Error.NOT_LEADER_OR_FOLLOWER)
    assert _latest(d) == {("t", 0): 5}
    _settle(d, deletion)
    assert _latest(d) == {("t", 0): 5} and _offsets_seen(d, "f") == {("t", 0): 5}


def test_a_replaced_static_member_is_no_new_member_and_keeps_its_parked_join():
    """§6: the member replacing a static member has isNew = false: a parked JoinGroup counts as
    its heartbeat, so it outlives its session while the join phase lasts."""
    from groupcoord.core.errors import Error

    d = _driver(group_initial_rebalance_delay_ms=20_000)
    first = _join(d, instance="i", session=6_000, rebalance=60_000)
    d.advance(1_000)
    second = _join(d, instance="i", session=6_000, rebalance=60_000)
    assert d.responses[first].error_code is Error.FENCED_INSTANCE_ID
    d.advance(10_000)  # past its session, before the join phase ends
    assert len(d.coordinator.group("g").members) == 1
    d.advance(10_000)
    assert d.responses[second].error_code is Error.NONE and d.responses[second].generation_id == 1


def test_the_member_replacing_a_static_member_expires_with_its_session():
    from groupcoord.core.errors import Error

    d = _driver()
    _stable(d, instance="i")
    rejoin = _join(d, instance="i", session=10_000)
    assert d.responses[rejoin].error_code is Error.NONE
    new = d.responses[rejoin].member_id
    d.advance(9_999)
    assert new in d.coordinator.group("g").members
    d.advance(1)
    assert d.coordinator.group("g").members == {}


def test_leaving_cancels_the_heartbeat_of_each_member_and_pending_member_that_leaves():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev

    d = _driver()
    _, [member], _ = _stable(d)
    pending = d.responses[_join(d, version=4)].member_id
    out = d.dispatch(ev.LeaveGroup(request_id="leave", now_ms=d.now_ms, version=3, group_id="g",
                                   members=(ev.MemberIdentity(pending), ev.MemberIdentity(member))))
    cancelled = [cmd.key for cmd in out if isinstance(cmd, c.CancelTimer) and isinstance(cmd.key, c.HeartbeatTimer)]
    assert cancelled == [c.HeartbeatTimer(0, "g", pending), c.HeartbeatTimer(0, "g", member)]


def test_an_offset_refused_for_its_metadata_does_not_stop_the_rest_of_its_topic():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error

    d = _driver(offset_metadata_max_bytes=2)
    d.dispatch(ev.OffsetCommit(request_id="oc", now_ms=0, version=8, group_id="s", topics=(
        ("t", (ev.CommitPartition(0, 1, -1, "long"), ev.CommitPartition(1, 2, -1, "ok"))),)))
    assert d.responses["oc"] == c.OffsetCommitResponse((c.TopicResult("t", (
        c.PartitionResult(0, Error.OFFSET_METADATA_TOO_LARGE), c.PartitionResult(1, Error.NONE))),))
    assert set(d.coordinator.offsets("s")) == {("t", 1)}


# ------------------------------------------------------------------ joining and syncing

def test_a_pending_member_refused_for_the_group_size_is_no_longer_pending():
    """acceptJoiningMember: the refused id is removed as a member and as a pending id (ref §3.1
    step 2), so the next join phase does not wait for it."""
    from groupcoord.core.errors import Error

    d = _driver(group_max_size=1)
    pending = d.responses[_join(d, version=4)].member_id  # while the group is Empty
    first = _join(d, version=3)
    refused = _join(d, member_id=pending, version=4)
    assert d.responses[refused].error_code is Error.GROUP_MAX_SIZE_REACHED
    assert d.coordinator.group("g").pending_members == frozenset()
    d.advance(3_000)
    assert d.responses[first].error_code is Error.NONE


def test_a_rejoin_updates_the_members_rebalance_timeout():
    """updateMember: the rejoining member's timeouts replace its old ones; the join phase then
    lasts the group's (largest) rebalance timeout."""
    from groupcoord.core.errors import Error

    d = _driver()
    joins = [_join(d, version=3, session=100_000, rebalance=20_000) for _ in range(2)]
    while not all(j in d.responses for j in joins):
        d.advance(3_000)
    leader, follower = (d.responses[j] for j in joins)
    _sync(d, follower.member_id, 1)
    _sync(d, leader.member_id, 1, assignments=[(leader.member_id, b"x"), (follower.member_id, b"y")])
    rejoin = _join(d, member_id=leader.member_id, version=3, session=100_000, rebalance=40_000)
    d.advance(30_000)  # past the old rebalance timeout: the follower has not rejoined, the phase goes on
    assert rejoin not in d.responses
    d.advance(10_000)
    assert d.responses[rejoin].error_code is Error.NONE and d.responses[rejoin].generation_id == 2


def test_a_member_the_leader_leaves_out_gets_an_empty_assignment():
    """The leader's assignment covers members it lists; the others get empty bytes (Kafka:
    assignment.getOrDefault(memberId, new byte[0]))."""
    from groupcoord.core import commands as c
    from groupcoord.core.errors import Error

    d = _driver()
    joins = [_join(d, version=3) for _ in range(2)]
    while not all(j in d.responses for j in joins):
        d.advance(3_000)
    leader, follower = (d.responses[j] for j in joins)
    parked = _sync(d, follower.member_id, 1)
    _sync(d, leader.member_id, 1, assignments=[(leader.member_id, b"x")])
    assert d.responses[parked] == c.SyncGroupResponse(error_code=Error.NONE, protocol_type="consumer",
                                                      protocol_name="range", assignment=b"")
    assert d.coordinator.group("g").members[follower.member_id].assignment == b""
    # the record holds the time of the generation (here the join phase ended when the leader synced)
    record = d.storage.records(0)[-1]
    assert isinstance(record, c.GroupMetadataRecord) and record.current_state_timestamp_ms == d.now_ms > 0


def test_a_failed_assignment_write_answers_with_no_assignment_and_rebalances():
    """resetAndPropagateAssignmentWithError: every member's assignment is cleared and each parked
    SyncGroup gets the error with empty bytes, even members that held the last generation's."""
    from groupcoord.core import commands as c
    from groupcoord.core.errors import Error

    d = _driver()
    _, [leader, follower], _ = _stable(d, members=2)
    again = [_join(d, member_id=m, version=3) for m in (leader, follower)]
    assert all(d.responses[j].generation_id == 2 for j in again)
    parked = _sync(d, follower, 2)
    d.fail_next_write(Error.NOT_LEADER_OR_FOLLOWER)
    failed = _sync(d, leader, 2, assignments=[(leader, b"new"), (follower, b"new")])
    expected = c.SyncGroupResponse(error_code=Error.NOT_COORDINATOR, assignment=b"")
    assert d.responses[parked] == expected and d.responses[failed] == expected
    group = d.coordinator.group("g")
    assert group.state.value == "PreparingRebalance"
    assert all(m.assignment == b"" for m in group.members.values())


def _commands(d, act):
    """The commands the coordinator emitted while ``act()`` ran."""
    seen = []
    d.observer = lambda event, commands: seen.extend(commands)
    try:
        act()
    finally:
        d.observer = None
    return seen


def test_the_last_sync_cancels_the_sync_timer_and_its_expiry_cancels_the_heartbeats_of_those_it_removes():
    from groupcoord.core import commands as c

    d = _driver()
    joins = [_join(d, version=3, session=100_000) for _ in range(3)]
    while not all(j in d.responses for j in joins):
        d.advance(3_000)
    a, b, late = (d.responses[j] for j in joins)
    out = _commands(d, lambda: _sync(d, b.member_id, 1))
    assert c.CancelTimer(c.SyncTimer(0, "g")) not in out  # two members have not synced
    _sync(d, a.member_id, 1, assignments=[(a.member_id, b""), (b.member_id, b"")])
    out = _commands(d, lambda: d.advance(20_000))  # the sync timeout (the rebalance timeout)
    assert c.CancelTimer(c.HeartbeatTimer(0, "g", late.member_id)) in out
    assert late.member_id not in d.coordinator.group("g").members

    d = _driver()
    joins = [_join(d, version=3) for _ in range(2)]
    while not all(j in d.responses for j in joins):
        d.advance(3_000)
    leader, follower = (d.responses[j] for j in joins)
    _sync(d, follower.member_id, 1)
    out = _commands(d, lambda: _sync(d, leader.member_id, 1))
    assert c.CancelTimer(c.SyncTimer(0, "g")) in out


def test_the_leader_gets_every_members_metadata_for_the_chosen_protocol():
    from groupcoord.core import commands as c

    d = _driver()
    first = _join(d, version=3, protocols=(("range", b"r1"), ("rr", b"x1")))
    second = _join(d, version=5, instance="i", protocols=(("range", b"r2"),))
    while first not in d.responses or second not in d.responses:
        d.advance(3_000)
    leader = d.responses[first]
    assert leader.protocol_name == "range"
    assert leader.members == (c.JoinGroupResponseMember(leader.member_id, None, b"r1"),
                              c.JoinGroupResponseMember(d.responses[second].member_id, "i", b"r2"))
    assert d.responses[second].members == ()


def test_the_initial_delay_extends_while_any_rebalance_time_remains():
    """InitialDelayedJoin: a member added during the delay extends it by min(delay, remaining),
    even when only 1 ms of the rebalance timeout remains."""
    d = _driver()
    first = _join(d, version=3, rebalance=3_001)
    second = _join(d, version=3, rebalance=3_001)
    d.advance(3_000)
    assert first not in d.responses and second not in d.responses
    d.advance(1)
    assert d.responses[first].generation_id == 1 and d.responses[second].generation_id == 1


def test_the_initial_delay_extends_again_for_a_member_added_during_an_extension():
    d = _driver()
    joins = [_join(d, version=3)]
    d.advance(1_000)
    joins.append(_join(d, version=3))
    d.advance(2_000)  # 3 s: the delay is extended (to 6 s) for the member added at 1 s
    d.advance(1_000)
    joins.append(_join(d, version=3))
    d.advance(2_000)  # 6 s: extended again, for the member added at 4 s
    assert not any(j in d.responses for j in joins)
    d.advance(3_000)
    assert all(d.responses[j].generation_id == 1 for j in joins)


def test_errors_parse_from_their_kafka_name_or_number_only():
    from groupcoord.core.errors import Error

    assert Error.parse(16) is Error.NOT_COORDINATOR and Error.parse(-1) is Error.UNKNOWN_SERVER_ERROR
    assert Error.parse("NOT_COORDINATOR") is Error.NOT_COORDINATOR and Error.parse(Error.NONE) is Error.NONE
    for bad, message in ((True, "not a Kafka error: True"), ("nope", "not a Kafka error: 'nope'"),
                         (2.0, "not a Kafka error: 2.0")):
        with pytest.raises(ValueError) as e:
            Error.parse(bad)
        assert str(e.value) == message
    with pytest.raises(ValueError):
        Error.parse(999)


def test_join_completion_cancels_the_join_timer_and_the_heartbeats_of_members_it_drops():
    """completeClassicGroupJoin: the join timer is cancelled, and each dynamic member that did
    not rejoin is removed with its heartbeat cancelled."""
    from groupcoord.core import commands as c

    d = _driver()
    joins = [_join(d, version=3, session=100_000) for _ in range(2)]
    while not all(j in d.responses for j in joins):
        d.advance(3_000)
    leader, follower = (d.responses[j].member_id for j in joins)
    _sync(d, follower, 1)
    _sync(d, leader, 1, assignments=[(leader, b""), (follower, b"")])
    rejoin = _join(d, member_id=leader, version=3, session=100_000)
    out = _commands(d, lambda: d.advance(20_000))  # the rebalance timeout: the follower did not rejoin
    assert d.responses[rejoin].generation_id == 2
    assert c.CancelTimer(c.JoinTimer(0, "g")) in out
    assert c.CancelTimer(c.HeartbeatTimer(0, "g", follower)) in out
    assert list(d.coordinator.group("g").members) == [leader]


def test_with_nobody_rejoined_the_join_timer_is_rearmed_for_at_least_a_millisecond():
    """D14: only static members that did not rejoin, with a 0 ms rebalance timeout: the join
    timer is re-armed for 1 ms, not 0 (a group loaded over group.max.size rebalances at once)."""
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.config import CoordinatorConfig
    from groupcoord.core.coordinator import Coordinator

    members = tuple(c.MemberRecord(f"{i}-m", i, "c", "/h", 0, 30_000, b"", b"") for i in ("a", "b"))
    coordinator = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=1, group_max_size=1))
    out = coordinator.handle(ev.LoadPartition(now_ms=100, partition=0, records=(_record(members=members),)))
    assert c.SetTimer(c.JoinTimer(0, "g"), 100) in out  # the rebalance timeout is 0 ms
    out = coordinator.handle(ev.TimerFired(now_ms=100, key=c.JoinTimer(0, "g")))
    assert out == [c.CancelTimer(c.JoinTimer(0, "g")), c.SetTimer(c.JoinTimer(0, "g"), 101)]


def test_a_group_emptied_by_its_join_phase_keeps_its_state_time_on_reload():
    """The empty GroupMetadata record written when a join phase ends with no members carries the
    time the group became Empty; offsets then expire from that time (§5.3)."""
    d = _driver()
    _, [member], _ = _stable(d)
    d.advance(5_000)
    d.send("LeaveGroup", {"group_id": "g", "members": [{"member_id": member}]}, version=3)
    emptied = d.now_ms
    group = d.coordinator.group("g")
    assert group.state.value == "Empty" and group.state_timestamp_ms == emptied
    d.advance(1_000)
    d.reload()
    assert d.coordinator.group("g").state_timestamp_ms == emptied


def test_a_simple_group_whose_first_commit_fails_is_gone():
    """A group created by its first commit (generation -1) exists only if that commit is
    written: when the write fails, Kafka reverts the group's creation with the offsets."""
    from groupcoord.adapters.runtime.driver import Driver
    from groupcoord.core.config import CoordinatorConfig
    from groupcoord.core.errors import Error

    driver = Driver(CoordinatorConfig(offsets_topic_num_partitions=1))
    driver.fail_next_write(Error.NOT_LEADER_OR_FOLLOWER)
    commit = driver.send("OffsetCommit", {"group_id": "simple", "generation_id_or_member_epoch": -1, "member_id": "",
                                          "topics": [{"name": "t", "partitions": [{"partition_index": 0,
                                                                                   "committed_offset": 5}]}]},
                         version=9)
    assert driver.responses[commit].topics[0].partitions[0].error_code is Error.NOT_COORDINATOR
    assert driver.coordinator.group("simple") is None and driver.coordinator.offsets("simple") == {}


def test_a_removed_simple_group_keeps_the_committed_value_of_a_key_still_being_written():
    """Found by the spec's committed_counts_writes (tla/README.md, Findings): a simple group's
    first commit fails while a deletion of its key is in flight, so the group goes; a new
    commit of the key must stay unread by a plain fetch until its own write is done, also after
    the deletion's write completes."""
    from groupcoord.core.errors import Error

    d = _driver()
    d.hold_writes()
    _commit(d, "s", offsets=(("t", 0, 5),))  # creates the simple group s
    _delete_offset(d)
    first, deletion = d.in_flight
    _settle(d, first, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("s") is None
    _commit(d, "s", offsets=(("t", 0, 9),))  # s again
    (again,) = [w for w in d.in_flight if w is not deletion]
    _settle(d, deletion)
    assert _offsets_seen(d, "f1") == {} and _latest(d) == {("t", 0): 9}
    _settle(d, again)
    assert _offsets_seen(d, "f2") == {("t", 0): 9}


def test_unloading_a_partition_drops_the_offsets_of_a_group_no_longer_held():
    """A new group's creation fails while a commit to it is in flight: the group is gone but
    the commit's offset is held; unloading the partition drops it with everything else."""
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error

    d = _driver()
    d.hold_writes()
    _join(d, "s", version=4)  # s created Empty (MEMBER_ID_REQUIRED), its record in flight
    _commit(d, "s", offsets=(("t", 0, 5),))
    creation, commit = d.in_flight
    _settle(d, creation, Error.NOT_LEADER_OR_FOLLOWER)
    _settle(d, commit)
    assert d.coordinator.group("s") is None and _latest(d) == {("t", 0): 5}
    d.dispatch(ev.UnloadPartition(now_ms=d.now_ms, partition=0))
    assert "s" not in d.coordinator.snapshot().offsets and "s" not in d.coordinator.snapshot().committed_offsets


@pytest.mark.parametrize("deletion_fails", [True, False])
def test_a_new_commit_after_a_removed_simple_group_survives_the_old_deletion(deletion_fails):
    """A simple group's first commit fails while a deletion of its offsets is in flight; a new
    commit recreates it. Whatever the old deletion's outcome, the new commit's offset stays, in
    memory and (once written) in storage."""
    from groupcoord.core.errors import Error

    d = _driver()
    d.hold_writes()
    _commit(d, "s", offsets=(("t", 0, 5), ("t", 1, 6)))
    d.send("OffsetDelete", {"group_id": "s", "topics": [{"name": "t", "partitions": [
        {"partition_index": 0}, {"partition_index": 1}]}]}, version=0)
    first, deletion = d.in_flight
    _settle(d, first, Error.NOT_LEADER_OR_FOLLOWER)
    _commit(d, "s", offsets=(("t", 1, 9),))
    again = d.in_flight[-1]
    _settle(d, deletion, Error.NOT_LEADER_OR_FOLLOWER if deletion_fails else None)
    assert _latest(d) == {("t", 1): 9}
    _settle(d, again)
    assert _latest(d) == {("t", 1): 9}
    d.reload()
    assert _latest(d) == {("t", 1): 9}


def test_a_static_member_replaced_before_it_synced_leaves_the_sync_timer_to_rebalance():
    """Kafka's ClassicGroup.replaceStaticMember leaves the old member id in pendingSyncMembers:
    a static member replaced in Stable before its SyncGroup keeps the sync phase open, and the
    sync timer rebalances the group although the new member synced."""
    d = _driver(group_initial_rebalance_delay_ms=0)
    first = _join(d, version=4, session=60_000)
    leader = d.responses[first].member_id
    _join(d, member_id=leader, version=4, session=60_000)
    static = _join(d, instance="i", session=60_000)
    d.advance(1)
    static_id = d.responses[static].member_id
    assert d.coordinator.group("g").state.value == "CompletingRebalance"
    _sync(d, leader, 1, assignments=((leader, b"a"), (static_id, b"b")))
    assert d.coordinator.group("g").state.value == "Stable"
    again = _join(d, instance="i", session=60_000)
    new_id = d.responses[again].member_id
    assert d.responses[again].error_code.name == "NONE" and new_id != static_id
    synced = _sync(d, new_id, 1, instance="i")
    assert d.responses[synced].error_code.name == "NONE" and d.responses[synced].assignment == b"b"
    assert static_id in d.coordinator.group("g").pending_sync
    d.advance(20_000)  # the sync timer: the rebalance timeout from the join phase's end (sessions: 60 s)
    assert d.coordinator.group("g").state.value == "PreparingRebalance"


def test_a_failed_tombstone_brings_the_group_back_over_a_simple_group_holding_its_id():
    """A simple group (OffsetCommits alone) writes no group record, so after the deleted group's
    tombstone fails the log holds that group, with the simple group's offsets: memory follows
    the log, as a reload of it shows."""
    from groupcoord.core.errors import Error

    d = _driver()
    _, (member,), _ = _stable(d, "g")
    d.send("LeaveGroup", {"group_id": "g", "members": [{"member_id": member}]}, version=3)
    deleted = d.coordinator.group("g")  # Empty, with a record of generation 1
    assert deleted.state.value == "Empty" and deleted.protocol_type == "consumer"
    d.hold_writes()
    d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    _commit(d, "g", offsets=(("t", 0, 7),))  # a simple group takes the id
    delete_g, commit_g = d.in_flight
    assert d.coordinator.group("g").protocol_type is None
    _settle(d, delete_g, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g") == deleted
    _settle(d, commit_g)
    in_memory = (d.coordinator.group("g"), d.coordinator.offsets("g"))
    d.reload()
    reloaded = (d.coordinator.group("g"), d.coordinator.offsets("g"))
    assert in_memory[0].protocol_type == reloaded[0].protocol_type == "consumer"
    assert in_memory[0].generation_id == reloaded[0].generation_id
    assert {k: e.offset for k, e in in_memory[1].items()} == {k: e.offset for k, e in reloaded[1].items()} != {}


def test_a_failed_tombstone_leaves_a_simple_group_someone_is_joining():
    """With a member id handed out on the simple group (MEMBER_ID_REQUIRED), the holder stays:
    its pending member is not the log's to drop."""
    from groupcoord.core.errors import Error

    d = _driver()
    _empty_group(d, "g")
    d.advance(5 * 60_000 + 1)
    d.hold_writes()
    d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    _commit(d, "g", offsets=(("t", 0, 7),))
    holder = d.coordinator.group("g")
    delete_g, _ = d.in_flight
    d.send("JoinGroup", {"group_id": "g", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 20_000,
                         "member_id": "", "protocol_type": "consumer",
                         "protocols": [{"name": "range", "metadata": b"m"}]}, version=4)
    joining = d.coordinator.group("g")
    if joining.protocol_type is not None:  # the join made it a group of its own: nothing to test
        pytest.skip("a JoinGroup sets the protocol type of a simple group")
    assert joining.pending_members and joining is not holder
    _settle(d, delete_g, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g").pending_members == joining.pending_members


def _completed_join_with_creation_in_flight(d):
    """A new group whose join phase completed (generation 1) while its creation write waits."""
    d.hold_writes()
    join = _join(d, "g", version=3)
    d.advance(3_000)  # group.initial.rebalance.delay.ms
    assert d.responses[join].generation_id == 1 and d.coordinator.group("g").state.value == "CompletingRebalance"
    (create,) = d.in_flight
    return create, d.responses[join].member_id


def test_a_failed_creation_removes_the_group_even_after_its_join_completed():
    """Kafka's revert removes a new group whose creation write failed, whatever its generation
    (GroupMetadataManager.classicGroupJoin: "This will revert the snapshot, removing the newly
    created group"); its sync timer goes with it."""
    from groupcoord.core.commands import CancelTimer, SyncTimer
    from groupcoord.core.errors import Error

    d = _driver()
    create, _ = _completed_join_with_creation_in_flight(d)
    emitted = _settle(d, create, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g") is None
    assert CancelTimer(SyncTimer(0, "g")) in emitted


def test_a_failed_creation_keeps_the_group_when_a_later_write_may_record_it():
    """Outcomes in order (D6): a later write of the partition, here the leader's assignment,
    may still record the group, so the failed creation leaves it."""
    from groupcoord.core.errors import Error

    d = _driver()
    create, member = _completed_join_with_creation_in_flight(d)
    sync = _sync(d, member, 1, assignments=((member, b"a"),))
    assert len(d.in_flight) == 2
    _settle(d, create, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g") is not None and d.coordinator.group("g").generation_id == 1
    _settle(d, d.in_flight[0])
    assert d.responses[sync].error_code is Error.NONE
