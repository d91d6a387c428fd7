"""The consumer protocol's bytes (core/classic/subscription.py): ConsumerProtocolSubscription and
ConsumerProtocolAssignment as Kafka writes and reads them, and what is refused, saying why."""

from __future__ import annotations

import struct

import pytest

from groupcoord.core.classic import subscription as cp
from groupcoord.core.classic.subscription import Assignment, ConsumerProtocolError, Subscription


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
