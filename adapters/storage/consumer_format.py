"""KIP-848's consumer group records in Kafka's ``__consumer_offsets`` bytes.

The key of each record starts with its record type as an int16 (Kafka writes a coordinator
record's key with its record type where a version would be), then the key's fields in the
non-flexible encoding (int16-length strings). The value starts with its version as an int16
(0, the only one Kafka defines for these), then the flexible encoding: compact strings and
arrays (unsigned varint length + 1; 0 is null), 16-byte uuids, big-endian integers, and a
tagged-field section closing every struct. A tombstone is the key with a null value.

=====================================  ====  =============================================
core record                            type  Kafka's key / value
=====================================  ====  =============================================
ConsumerGroupEpochRecord                  3  ConsumerGroupMetadata (group)
ConsumerSubscriptionRecord                4  ConsumerGroupPartitionMetadata (group)
ConsumerMemberRecord                      5  ConsumerGroupMemberMetadata (group, member)
ConsumerTargetEpochRecord                 6  ConsumerGroupTargetAssignmentMetadata (group)
ConsumerTargetRecord                      7  ConsumerGroupTargetAssignmentMember (group, member)
ConsumerAssignmentRecord                  8  ConsumerGroupCurrentMemberAssignment (group, member)
ConsumerRegexRecord                      16  ConsumerGroupRegularExpression (group, regex)
=====================================  ====  =============================================

Fields Kafka's records have and the core's do not are written with Kafka's default (noted at
each). Tagged fields are written only when they differ from their default, so these are
simply absent; on reading, every tagged field is skipped (the core has no use for them) but a
classic member's metadata (ClassicMemberMetadata, the member value's tag 0), which a core
holding classic members in consumer groups keeps.

Topic ids are the core's ``str(uuid.UUID)`` form; another form cannot be written (it would
not read back as itself) and fails the write with a ValueError.
"""

from __future__ import annotations

import struct
import uuid

import attrs

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

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
VALUE_VERSION = 0

# core record type -> (record type, the attribute that is None in a tombstone, key fields after the group)
_TYPES: dict = {
    ConsumerGroupEpochRecord: (GROUP_METADATA, "epoch", ()),
    ConsumerSubscriptionRecord: (PARTITION_METADATA, "topics", ()),
    ConsumerMemberRecord: (MEMBER_METADATA, "member", ("member_id",)),
    ConsumerTargetEpochRecord: (TARGET_METADATA, "epoch", ()),
    ConsumerTargetRecord: (TARGET_MEMBER, "assignment", ("member_id",)),
    ConsumerAssignmentRecord: (CURRENT_ASSIGNMENT, "member", ("member_id",)),
    ConsumerRegexRecord: (REGULAR_EXPRESSION, "topics", ("regex",)),
}
RECORD_TYPES = frozenset(t for t, _a, _k in _TYPES.values())

# Kafka's MemberState values (org.apache.kafka.coordinator.group.modern.MemberState)
_STATE_BYTE = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1,
               MemberState.UNRELEASED_PARTITIONS: 2, MemberState.UNKNOWN: 127}
_BYTE_STATE = {b: s for s, b in _STATE_BYTE.items()}

# A member speaking the classic protocol inside the group (Kafka's ClassicMemberMetadata): held
# by a core whose ConsumerMember has ``classic`` (model.ClassicMeta); by an older one, not read.
_CLASSIC = getattr(model, "ClassicMeta", None) if "classic" in attrs.fields_dict(ConsumerMember) else None

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class ConsumerFormatError(ValueError):
    """Bytes that are not one of these records (``records.FormatError`` wraps it)."""


def handles(record) -> bool:
    return type(record) in _TYPES


def is_tombstone(record) -> bool:
    return getattr(record, _TYPES[type(record)][1]) is None


# --- writing ------------------------------------------------------------------------------------

class _Writer:
    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def i8(self, v: int) -> None:
        self.out += _I8.pack(v)

    def i16(self, v: int) -> None:
        self.out += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.out += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.out += _I64.pack(v)

    def uvarint(self, n: int) -> None:
        while n > 0x7F:
            self.out.append((n & 0x7F) | 0x80)
            n >>= 7
        self.out.append(n)

    def key_str(self, s: str) -> None:  # non-flexible: int16 length
        data = s.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError(f"a string of {len(data)} bytes is longer than a key string can be")
        self.i16(len(data))
        self.out += data

    def cstr(self, s: str | None) -> None:  # compact (nullable) string
        if s is None:
            self.uvarint(0)
            return
        data = s.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError(f"a string of {len(data)} bytes is longer than Kafka's strings can be")
        self.uvarint(len(data) + 1)
        self.out += data

    def uuid(self, topic_id: str) -> None:
        try:
            value = uuid.UUID(topic_id)
        except (ValueError, TypeError, AttributeError):
            value = None
        if value is None or str(value) != topic_id:
            raise ValueError(f"topic id {topic_id!r} is not a UUID (str(uuid.UUID)): Kafka's records hold 16 bytes")
        self.out += value.bytes

    def cbytes(self, data: bytes) -> None:  # compact bytes
        self.uvarint(len(data) + 1)
        self.out += data

    def length(self, n: int) -> None:  # compact array length
        self.uvarint(n + 1)

    def no_tags(self) -> None:
        self.uvarint(0)


def _topic_partitions(w: _Writer, assignment) -> None:
    """Kafka's TopicPartitions / TopicPartition struct array: topic id, partitions, no tagged
    fields (the current assignment's AssignmentEpochs, tag 0, default null: the core keeps no
    per-partition assignment epochs)."""
    topics = sorted(assignment.items())
    w.length(len(topics))
    for topic_id, partitions in topics:
        w.uuid(topic_id)
        parts = sorted(partitions)
        w.length(len(parts))
        for p in parts:
            w.i32(p)
        w.no_tags()


def encode_key(record) -> bytes:
    record_type, _payload, fields = _TYPES[type(record)]
    w = _Writer()
    w.i16(record_type)
    w.key_str(record.group_id)
    for name in fields:
        w.key_str(getattr(record, name))
    return bytes(w.out)


def encode_value(record) -> bytes | None:
    kind = type(record)
    record_type, payload, _fields = _TYPES[kind]
    value = getattr(record, payload)
    if value is None:
        return None
    w = _Writer()
    w.i16(VALUE_VERSION)
    if record_type == GROUP_METADATA:
        w.i32(value)
        # MetadataHash (tag 0, default 0) and CreationTimeMs (tag 1, default -1) are left at
        # Kafka's defaults: the core tracks its subscribed topics in ConsumerGroupPartitionMetadata
        # instead of a hash, and keeps no creation time.
    elif record_type == PARTITION_METADATA:
        w.length(len(value))
        for name, topic_id, partitions in value:
            w.uuid(topic_id)
            w.cstr(name)
            w.i32(partitions)
            # PartitionMetadata (the racks of each partition): the core has no racks; Kafka
            # stores an empty list when it has no rack information.
            w.length(0)
            w.no_tags()
    elif record_type == MEMBER_METADATA:
        m: ConsumerMember = value
        w.cstr(m.instance_id)
        w.cstr(m.rack_id)
        w.cstr(m.client_id)
        w.cstr(m.client_host)
        w.length(len(m.subscribed_topic_names))
        for name in m.subscribed_topic_names:
            w.cstr(name)
        w.cstr(m.subscribed_topic_regex)
        w.i32(m.rebalance_timeout_ms)
        w.cstr(m.server_assignor)
        classic = getattr(m, "classic", None)
        if classic is not None:
            # ClassicMemberMetadata, tag 0, a nullable struct: its size + 1, then 1 (present),
            # then SessionTimeoutMs and SupportedProtocols [{Name, Metadata}]
            c = _Writer()
            c.i32(classic.session_timeout_ms)
            c.length(len(classic.protocols))
            for name, metadata in classic.protocols:
                c.cstr(name)
                c.cbytes(metadata)
                c.no_tags()
            c.no_tags()
            w.uvarint(1)  # one tagged field
            w.uvarint(0)  # its tag
            w.uvarint(len(c.out) + 1)
            w.uvarint(1)
            w.out += c.out
            return bytes(w.out)
        # (without it: ClassicMemberMetadata left at its default, null: a consumer-protocol member)
    elif record_type == TARGET_METADATA:
        w.i32(value)
    elif record_type == TARGET_MEMBER:
        _topic_partitions(w, value)
    elif record_type == CURRENT_ASSIGNMENT:
        m = value
        w.i32(m.member_epoch)
        w.i32(m.previous_member_epoch)
        w.i8(_STATE_BYTE[m.state])
        _topic_partitions(w, m.assigned)
        _topic_partitions(w, m.pending_revocation)
    else:  # REGULAR_EXPRESSION
        topics = sorted(value)
        w.length(len(topics))
        for name in topics:
            w.cstr(name)
        # Version (the metadata image version the regex was resolved at) and Timestamp (when):
        # the core keeps neither; Kafka's default for an int64 is 0, so Kafka resolves the regex
        # again at the group's next heartbeat after a load.
        w.i64(0)
        w.i64(0)
    w.no_tags()
    return bytes(w.out)


# --- reading ------------------------------------------------------------------------------------

class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise ConsumerFormatError("runs past the end")
        data = self.buf[self.pos:end]
        self.pos = end
        return bytes(data)

    def i8(self) -> int:
        return _I8.unpack(self._take(1))[0]

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise ConsumerFormatError("varint too long")

    def key_str(self) -> str:
        n = self.i16()
        if n < 0:
            raise ConsumerFormatError("null where a key string is required")
        return self._take(n).decode("utf-8")

    def ncstr(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._take(n - 1).decode("utf-8")

    def cstr(self) -> str:
        s = self.ncstr()
        if s is None:
            raise ConsumerFormatError("null where a string is required")
        return s

    def uuid(self) -> str:
        return str(uuid.UUID(bytes=self._take(16)))

    def cbytes(self) -> bytes:
        n = self.uvarint()
        if n == 0:
            raise ConsumerFormatError("null where bytes are required")
        return self._take(n - 1)

    def length(self) -> int:
        n = self.uvarint()
        if n == 0:
            raise ConsumerFormatError("null where an array is required")
        return n - 1

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # the tag
            self._take(self.uvarint())

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise ConsumerFormatError(f"{len(self.buf) - self.pos} bytes left over")


def _read_topic_partitions(r: _Reader) -> dict:
    out = {}
    for _ in range(r.length()):
        topic_id = r.uuid()
        out[topic_id] = frozenset(r.i32() for _ in range(r.length()))
        r.skip_tags()  # AssignmentEpochs (tag 0) among them
    return out


def decode(key: bytes, value: bytes | None):
    """The core's record of a key whose record type is one of ``RECORD_TYPES``."""
    try:
        return _decode(key, value)
    except (struct.error, UnicodeDecodeError, ValueError) as e:
        if isinstance(e, ConsumerFormatError):
            raise
        raise ConsumerFormatError(str(e)) from None


def _member_tags(r: _Reader):
    """The member value's tagged fields: ClassicMemberMetadata (tag 0) if present and not
    null, as the core's ``ClassicMeta`` (None when the core has none); other tags skipped."""
    classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        if tag != 0 or _CLASSIC is None:
            r._take(size)
            continue
        t = _Reader(r._take(size))
        if t.uvarint() > 0:  # a nullable struct: 0 is null
            session_timeout_ms = t.i32()
            protocols = []
            for _ in range(t.length()):
                protocols.append((t.cstr(), t.cbytes()))
                t.skip_tags()
            t.skip_tags()
            classic = _CLASSIC(session_timeout_ms=session_timeout_ms, protocols=tuple(protocols))
        t.done()
    return classic


def _decode(key: bytes, value: bytes | None):
    k = _Reader(key)
    record_type = k.i16()
    group_id = k.key_str()
    second = k.key_str() if record_type in (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT,
                                            REGULAR_EXPRESSION) else None
    k.done()
    r = None
    if value is not None:
        r = _Reader(value)
        version = r.i16()
        if version != VALUE_VERSION:
            raise ConsumerFormatError(f"record type {record_type}: value version {version} is not supported")
    if record_type == GROUP_METADATA:
        out = ConsumerGroupEpochRecord(group_id, None if r is None else r.i32())
    elif record_type == PARTITION_METADATA:
        topics = None
        if r is not None:
            found = []
            for _ in range(r.length()):
                topic_id, name, partitions = r.uuid(), r.cstr(), r.i32()
                for _ in range(r.length()):  # the racks of each partition: not kept
                    r.i32()
                    for _ in range(r.length()):
                        r.cstr()
                    r.skip_tags()
                r.skip_tags()
                found.append((name, topic_id, partitions))
            topics = tuple(found)
        out = ConsumerSubscriptionRecord(group_id, topics)
    elif record_type == MEMBER_METADATA:
        member = None
        if r is not None:
            instance_id, rack_id, client_id, client_host = r.ncstr(), r.ncstr(), r.cstr(), r.cstr()
            names = tuple(sorted(r.cstr() for _ in range(r.length())))
            fields = dict(
                member_id=second, instance_id=instance_id, rack_id=rack_id, client_id=client_id,
                client_host=client_host, subscribed_topic_names=names, subscribed_topic_regex=r.ncstr(),
                rebalance_timeout_ms=r.i32(), server_assignor=r.ncstr())
            classic = _member_tags(r)
            if classic is not None and _CLASSIC is not None:
                fields["classic"] = classic
            member = ConsumerMember(**fields)
            r.done()
            return ConsumerMemberRecord(group_id, second, member)
        out = ConsumerMemberRecord(group_id, second, member)
    elif record_type == TARGET_METADATA:
        out = ConsumerTargetEpochRecord(group_id, None if r is None else r.i32())
    elif record_type == TARGET_MEMBER:
        out = ConsumerTargetRecord(group_id, second, None if r is None else _read_topic_partitions(r))
    elif record_type == CURRENT_ASSIGNMENT:
        member = None
        if r is not None:
            epoch, previous, state = r.i32(), r.i32(), r.i8()
            member = ConsumerMember(
                member_id=second, member_epoch=epoch, previous_member_epoch=previous,
                # a state this coordinator does not know (a newer Kafka's) is UNKNOWN, as Kafka reads it
                state=_BYTE_STATE.get(state, MemberState.UNKNOWN),
                assigned=_read_topic_partitions(r), pending_revocation=_read_topic_partitions(r))
        out = ConsumerAssignmentRecord(group_id, second, member)
    elif record_type == REGULAR_EXPRESSION:
        topics = None
        if r is not None:
            topics = frozenset(r.cstr() for _ in range(r.length()))
            r.i64()  # Version
            r.i64()  # Timestamp
        out = ConsumerRegexRecord(group_id, second, topics)
    else:
        raise ConsumerFormatError(f"record type {record_type} is not a consumer group record")
    if r is not None:
        r.skip_tags()
        r.done()
    return out
