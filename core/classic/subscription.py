"""The consumer protocol's bytes: a member's subscription (JoinGroup metadata) and assignment
(SyncGroup), ``ConsumerProtocolSubscription`` v0-3 and ``ConsumerProtocolAssignment`` v0-3.

The one codec of the project. The coordinator itself reads only a subscription's topics
(``subscription_topics``): Kafka reads every member's subscription with the version-0 layout (a
prefix of all later versions), and a malformed one means the topics are unknown (None). The
rest (full decoding, encoding) serves clients, the simulator and the tools.

Encoding writes a topic's partitions together, topics in the order ``topic_order`` gives
(default: first seen). Kafka's clients group them through a ``java.util.HashMap``; the client
wing passes that order (``client.java_order``) to be byte for byte what Java sends.
"""

from __future__ import annotations

import struct
from typing import Callable, Iterable, Sequence

import attrs

TopicPartition = tuple[str, int]
DEFAULT_GENERATION = -1
SUBSCRIPTION_VERSION = 3  # ConsumerProtocolSubscription.HIGHEST_SUPPORTED_VERSION
ASSIGNMENT_VERSION = 3
TopicOrder = Callable[[Sequence[str]], Sequence[str]]


class ConsumerProtocolError(ValueError):
    """Bytes that are not a valid subscription or assignment."""


@attrs.frozen
class Subscription:
    """``ConsumerPartitionAssignor.Subscription``; ``group_instance_id`` is not encoded (it
    comes from the JoinGroup response)."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = DEFAULT_GENERATION
    rack_id: str | None = None
    group_instance_id: str | None = None


@attrs.frozen
class Assignment:
    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


def group_by_topic(partitions: Iterable[TopicPartition], topic_order: TopicOrder | None = None) -> dict[str, list[int]]:
    """Partitions by topic, topics in ``topic_order`` (default: first seen)."""
    grouped: dict[str, list[int]] = {}
    for topic, partition in partitions:
        grouped.setdefault(topic, []).append(partition)
    if topic_order is None:
        return grouped
    return {t: grouped[t] for t in topic_order(list(grouped))}


class ByteWriter:
    """Big-endian fields of Kafka's classic (non-flexible) encoding."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> None:
        self.parts.append(struct.pack(">h", v))

    def int32(self, v: int) -> None:
        self.parts.append(struct.pack(">i", v))

    def string(self, s: str) -> None:
        raw = s.encode("utf-8")
        self.parts.append(struct.pack(">h", len(raw)) + raw)

    def nullable_string(self, s: str | None) -> None:
        if s is None:
            self.int16(-1)
        else:
            self.string(s)

    def nullable_bytes(self, b: bytes | None) -> None:
        if b is None:
            self.int32(-1)
        else:
            self.parts.append(struct.pack(">i", len(b)) + b)

    def topic_partitions(self, partitions: Iterable[TopicPartition], topic_order: TopicOrder | None = None) -> None:
        grouped = group_by_topic(partitions, topic_order)
        self.int32(len(grouped))
        for topic, numbers in grouped.items():
            self.string(topic)
            self.int32(len(numbers))
            for n in numbers:
                self.int32(n)

    def bytes(self) -> bytes:
        return b"".join(self.parts)


class ByteReader:
    """Reads what ByteWriter writes; anything short or malformed raises ConsumerProtocolError."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def _take(self, fmt: str, size: int):
        if self.pos + size > len(self.data):
            raise ConsumerProtocolError(f"{self.what}: truncated at byte {self.pos}")
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return v

    def int16(self) -> int:
        return self._take(">h", 2)

    def int32(self) -> int:
        return self._take(">i", 4)

    def version(self) -> int:
        """The version a subscription or assignment starts with; a negative one is malformed."""
        version = self.int16()
        if version < 0:
            raise ConsumerProtocolError(f"{self.what}: negative version {version}")
        return version

    def _slice(self, n: int, what: str):
        if self.pos + n > len(self.data):
            raise ConsumerProtocolError(f"{self.what}: truncated {what} at byte {self.pos}")
        raw = self.data[self.pos:self.pos + n]
        self.pos += n
        return raw

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        raw = self._slice(n, "string")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConsumerProtocolError(f"{self.what}: string is not UTF-8") from None

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise ConsumerProtocolError(f"{self.what}: null where a string is required")
        return s

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        if n < 0:
            return None
        return bytes(self._slice(n, "bytes"))

    def count(self) -> int:
        n = self.int32()
        if n < 0 or n > len(self.data):
            raise ConsumerProtocolError(f"{self.what}: bad array length {n}")
        return n

    def topic_partitions(self) -> tuple[TopicPartition, ...]:
        out: list[TopicPartition] = []
        for _ in range(self.count()):
            topic = self.string()
            out.extend((topic, self.int32()) for _ in range(self.count()))
        return tuple(out)


def subscription_topics(metadata: bytes) -> frozenset[str] | None:
    """What the coordinator reads of a subscription: its topics, or None if malformed."""
    r = ByteReader(metadata, "subscription")
    try:
        if r.int16() < 0:
            return None
        return frozenset(r.string() for _ in range(r.count()))
    except ConsumerProtocolError:
        return None


def encode_subscription(sub: Subscription | Sequence[str], version: int = SUBSCRIPTION_VERSION,
                        topic_order: TopicOrder | None = None) -> bytes:
    """``sub`` may be a plain list of topics (a subscription with nothing else)."""
    sub = sub if isinstance(sub, Subscription) else Subscription(tuple(sub))
    w = ByteWriter()
    w.int16(version)
    w.int32(len(sub.topics))
    for topic in sub.topics:
        w.string(topic)
    w.nullable_bytes(sub.user_data)
    if version >= 1:
        w.topic_partitions(sub.owned_partitions, topic_order)
    if version >= 2:
        w.int32(sub.generation_id)
    if version >= 3:
        w.nullable_string(sub.rack_id)
    return w.bytes()


def decode_subscription(data: bytes, group_instance_id: str | None = None) -> Subscription:
    """Newer versions are read with the v3 layout, as Kafka does; absent fields default."""
    r = ByteReader(data, "subscription")
    version = r.version()
    topics = tuple(r.string() for _ in range(r.count()))
    user_data = r.nullable_bytes()
    owned: tuple[TopicPartition, ...] = ()
    generation, rack = DEFAULT_GENERATION, None
    if version >= 1 and not r.at_end():
        owned = r.topic_partitions()
    if version >= 2 and not r.at_end():
        generation = r.int32()
    if version >= 3 and not r.at_end():
        rack = r.nullable_string()
    return Subscription(topics, user_data, owned, generation, rack, group_instance_id)


def encode_assignment(assignment: Assignment | Iterable[TopicPartition], version: int = ASSIGNMENT_VERSION,
                      topic_order: TopicOrder | None = None) -> bytes:
    """``assignment`` may be a plain iterable of (topic, partition)."""
    assignment = assignment if isinstance(assignment, Assignment) else Assignment(tuple(assignment))
    w = ByteWriter()
    w.int16(version)
    w.topic_partitions(assignment.partitions, topic_order)
    w.nullable_bytes(assignment.user_data)
    return w.bytes()


def decode_assignment(data: bytes) -> Assignment:
    if len(data) < 2:
        raise ConsumerProtocolError(f"assignment: {len(data)} bytes, at least the version (2) expected")
    r = ByteReader(data, "assignment")
    r.version()  # any version reads as version 0's fields (later ones only add at the end)
    partitions = r.topic_partitions()
    user_data = r.nullable_bytes() if not r.at_end() else None
    return Assignment(partitions, user_data)
