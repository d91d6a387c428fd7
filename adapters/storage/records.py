"""The byte format of the records topic: Kafka's own ``__consumer_offsets`` records.

The broker-backed storage writes the core's records exactly as Kafka's group coordinator
writes them, so compaction by key behaves as Kafka's does and Kafka's tools can read the
topic:

* **keys** (``GroupCoordinatorRecordHelpers``): ``OffsetCommitKey`` version 1 = int16 1,
  group, topic (int16-length UTF-8 strings), int32 partition; ``GroupMetadataKey`` version 2 =
  int16 2, group.
* **values**: ``OffsetCommitValue`` version 3 (offset int64, leader epoch int32, metadata,
  commit timestamp int64), or version 1 when the offset has an explicit expiry (offset,
  metadata, commit timestamp, expire timestamp); ``GroupMetadataValue`` version 3 (protocol
  type, generation, protocol, leader, current-state timestamp, members with member id,
  instance id, client id/host, rebalance and session timeouts, subscription and assignment
  bytes). Reading also accepts offset values v0-v3 and group values v0-v3 (older Kafka).
* **tombstones** (``GroupTombstone``, ``OffsetTombstone``): the key with a null value.
* **KIP-848's consumer group records** (key versions 3 to 8 and 16, each key's version being
  its record type; flexible values): ``consumer_format``. A consumer record whose value is
  None is its key's tombstone.

And the container: a Kafka record batch, magic v2 (``DefaultRecordBatch``, read and written by
``batches``), uncompressed, no producer id, CRC-32C checked on read. One write of the core is one batch, so a write is
appended whole or not at all.
"""

from __future__ import annotations

import struct

from groupcoord.adapters.storage import consumer_format
from groupcoord.adapters.storage.batches import (  # noqa: F401 - the container, re-exported for the records' users
    Batch,
    FormatError,
    decode_batches,
    encode_batch,
    iter_records,
    put_unsigned_varint,
)
from groupcoord.core.commands import (
    GroupMetadataRecord,
    GroupTombstone,
    MemberRecord,
    OffsetCommitRecord,
    OffsetTombstone,
)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_OFFSET_V3 = struct.Struct(">qi")  # offset, leader epoch (metadata string follows)

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3


# --- primitive writers/readers ------------------------------------------------------------

def _str(out: list, value: str) -> None:
    data = value.encode("utf-8")
    out.append(_I16.pack(len(data)))
    out.append(data)


def _nstr(out: list, value: str | None) -> None:
    if value is None:
        out.append(_I16.pack(-1))
    else:
        _str(out, value)


def _bytes(out: list, value: bytes) -> None:
    out.append(_I32.pack(len(value)))
    out.append(value)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def i16(self) -> int:
        (v,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return v

    def i32(self) -> int:
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def i64(self) -> int:
        (v,) = _I64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return v

    def nstr(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        end = self.pos + n
        if end > len(self.buf):
            raise FormatError("string runs past the end")
        value = self.buf[self.pos:end].decode("utf-8")
        self.pos = end
        return value

    def str(self) -> str:
        value = self.nstr()
        if value is None:
            raise FormatError("null where a string is required")
        return value

    def bytes(self) -> bytes:
        n = self.i32()
        if n < 0:
            return b""
        end = self.pos + n
        if end > len(self.buf):
            raise FormatError("bytes run past the end")
        value = bytes(self.buf[self.pos:end])
        self.pos = end
        return value

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise FormatError(f"{len(self.buf) - self.pos} bytes left over")


# --- records <-> (key, value) ------------------------------------------------------------------

def encode_key(record) -> bytes:
    out: list = []
    if type(record) in (OffsetCommitRecord, OffsetTombstone):
        out.append(_I16.pack(OFFSET_KEY_VERSION))
        _str(out, record.group_id)
        _str(out, record.topic)
        out.append(_I32.pack(record.partition))
    elif type(record) in (GroupMetadataRecord, GroupTombstone):
        out.append(_I16.pack(GROUP_KEY_VERSION))
        _str(out, record.group_id)
    elif consumer_format.handles(record):
        return consumer_format.encode_key(record)
    else:
        raise TypeError(f"not a coordinator record: {record!r}")
    return b"".join(out)


def is_tombstone(record) -> bool:
    """A record whose value is null: its key is deleted (compacted away)."""
    kind = type(record)
    if kind is GroupTombstone or kind is OffsetTombstone:
        return True
    return consumer_format.handles(record) and consumer_format.is_tombstone(record)


def encode_value(record) -> bytes | None:
    kind = type(record)
    if kind is OffsetCommitRecord:
        out: list = []
        if record.expire_timestamp_ms is None:
            out.append(_I16.pack(3))
            out.append(_OFFSET_V3.pack(record.offset, record.leader_epoch))
            _str(out, record.metadata)
            out.append(_I64.pack(record.commit_timestamp_ms))
        else:
            out.append(_I16.pack(1))
            out.append(_I64.pack(record.offset))
            _str(out, record.metadata)
            out.append(_I64.pack(record.commit_timestamp_ms))
            out.append(_I64.pack(record.expire_timestamp_ms))
        return b"".join(out)
    if kind is GroupMetadataRecord:
        out = [_I16.pack(GROUP_VALUE_VERSION)]
        _str(out, record.protocol_type)
        out.append(_I32.pack(record.generation_id))
        _nstr(out, record.protocol_name)
        _nstr(out, record.leader_id)
        out.append(_I64.pack(record.current_state_timestamp_ms))
        out.append(_I32.pack(len(record.members)))
        for m in record.members:
            _str(out, m.member_id)
            _nstr(out, m.group_instance_id)
            _str(out, m.client_id)
            _str(out, m.client_host)
            out.append(_I32.pack(m.rebalance_timeout_ms))
            out.append(_I32.pack(m.session_timeout_ms))
            _bytes(out, m.subscription)
            _bytes(out, m.assignment)
        return b"".join(out)
    if kind in (GroupTombstone, OffsetTombstone):
        return None
    if consumer_format.handles(record):
        return consumer_format.encode_value(record)
    raise TypeError(f"not a coordinator record: {record!r}")


_H = _I16.unpack_from
_V3_HEAD = struct.Struct(">qih")  # offset, leader epoch, metadata length


def decode(key: bytes | None, value: bytes | None):
    """One record of the topic as the core's record value."""
    if key is None:
        raise FormatError("a record without a key")
    try:
        fast = _decode_offset_v3(key, value)
        if fast is not None:
            return fast
        r = _Reader(key)
        version = r.i16()
        if version in (0, 1):
            group, topic, partition = r.str(), r.str(), r.i32()
            r.done()
            return OffsetTombstone(group, topic, partition) if value is None else \
                _offset_value(group, topic, partition, value)
        if version == 2:
            group = r.str()
            r.done()
            return GroupTombstone(group) if value is None else _group_value(group, value)
        if version in consumer_format.RECORD_TYPES:
            return consumer_format.decode(key, value)
    except consumer_format.ConsumerFormatError as e:
        raise FormatError(f"bad record: {e}") from None
    except (struct.error, UnicodeDecodeError) as e:
        raise FormatError(f"bad record: {e}") from None
    raise FormatError(f"unknown record key version {version}")


def _decode_offset_v3(key: bytes, value: bytes | None) -> OffsetCommitRecord | None:
    """The common case, unpacked directly: an offset key and a version 3 value (None: other)."""
    if len(key) < 10 or key[0] != 0 or key[1] not in (0, 1) or value is None or value[:2] != b"\x00\x03":
        return None
    glen = _H(key, 2)[0]
    t = 4 + glen
    tlen = _H(key, t)[0]
    p = t + 2 + tlen
    if glen < 0 or tlen < 0 or p + 4 != len(key):
        return None
    offset, epoch, mlen = _V3_HEAD.unpack_from(value, 2)
    m = 16 + mlen
    if mlen < 0 or m + 8 != len(value):
        return None
    return OffsetCommitRecord(key[4:t].decode("utf-8"), key[t + 2:p].decode("utf-8"), _I32.unpack_from(key, p)[0],
                              offset, epoch, value[16:m].decode("utf-8"), _I64.unpack_from(value, m)[0], None)


def _offset_value(group: str, topic: str, partition: int, value: bytes) -> OffsetCommitRecord:
    r = _Reader(value)
    version = r.i16()
    if version not in (0, 1, 2, 3):
        raise FormatError(f"offset commit value version {version} is not supported")
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.str()
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    r.done()
    return OffsetCommitRecord(group, topic, partition, offset, epoch, metadata, commit_ts,
                              None if expire_ts == -1 else expire_ts)


def _group_value(group: str, value: bytes) -> GroupMetadataRecord:
    r = _Reader(value)
    version = r.i16()
    if version not in (0, 1, 2, 3):
        raise FormatError(f"group metadata value version {version} is not supported")
    protocol_type = r.str()
    generation = r.i32()
    protocol = r.nstr()
    leader = r.nstr()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.str()
        instance_id = r.nstr() if version >= 3 else None
        client_id, client_host = r.str(), r.str()
        rebalance_ms = r.i32() if version >= 1 else -1
        session_ms = r.i32()
        members.append(MemberRecord(member_id, instance_id, client_id, client_host, rebalance_ms, session_ms,
                                    r.bytes(), r.bytes()))
    r.done()
    return GroupMetadataRecord(group, protocol_type, generation, protocol, leader, state_ts, tuple(members))
