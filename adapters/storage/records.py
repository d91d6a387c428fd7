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

And the container: a Kafka record batch, magic v2 (``DefaultRecordBatch``), uncompressed,
no producer id, CRC-32C checked on read. One write of the core is one batch, so a write is
appended whole or not at all.
"""

from __future__ import annotations

import struct
import time
from typing import Iterator

import crc32c

from groupcoord.adapters.storage import consumer_format
from groupcoord.core.commands import (
    GroupMetadataRecord,
    GroupTombstone,
    MemberRecord,
    OffsetCommitRecord,
    OffsetTombstone,
)


class FormatError(ValueError):
    """Bytes that are not a record (batch) of this format."""


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_OFFSET_V3 = struct.Struct(">qi")  # offset, leader epoch (metadata string follows)
_BATCH_HEAD = struct.Struct(">qiibI")  # base offset, batch length, leader epoch, magic, crc
_BATCH_REST = struct.Struct(">hiqqqhii")  # attributes .. record count

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


# --- record batches (magic v2) -----------------------------------------------------------------

def _varint(out: bytearray, n: int) -> None:
    put_unsigned_varint(out, (n << 1) ^ (n >> 63))  # zigzag


def put_unsigned_varint(out: bytearray, n: int) -> None:
    """``n`` >= 0 in 7-bit groups, lowest first (also the protocol's compact lengths)."""
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def encode_batch(records: list[tuple[bytes, bytes | None]], timestamp_ms: int | None = None) -> bytes:
    """One uncompressed record batch (v2) holding ``(key, value)`` pairs, base offset 0."""
    if not records:
        raise ValueError("an empty batch")
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    body = bytearray()
    for delta, (key, value) in enumerate(records):
        rec = bytearray(b"\x00")  # attributes
        _varint(rec, 0)  # timestamp delta
        _varint(rec, delta)  # offset delta
        _varint(rec, len(key))
        rec += key
        if value is None:
            _varint(rec, -1)
        else:
            _varint(rec, len(value))
            rec += value
        _varint(rec, 0)  # headers
        _varint(body, len(rec))
        body += rec
    rest = _BATCH_REST.pack(0, len(records) - 1, ts, ts, -1, -1, -1, len(records)) + bytes(body)
    crc = crc32c.crc32c(rest)
    # batch length counts everything after itself: epoch(4) + magic(1) + crc(4) + rest
    return _BATCH_HEAD.pack(0, len(rest) + 9, -1, 2, crc) + rest


def _read_varint(buf, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise FormatError("varint too long")


class Batch:
    __slots__ = ("base_offset", "last_offset", "control", "records")

    def __init__(self, base_offset: int, last_offset: int, control: bool, records: list) -> None:
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.control = control
        self.records = records  # (offset, key, value)


def decode_batches(data: bytes) -> tuple[list[Batch], int]:
    """The complete batches at the start of ``data`` (a Fetch answer may end with a partial
    one) and how many bytes they took. Raises FormatError on a bad CRC or layout."""
    view = memoryview(data)
    pos = 0
    out: list[Batch] = []
    n = len(data)
    while pos + 12 <= n:
        base_offset, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if length < 49 or end > n:
            break  # partial batch at the end
        _base, _len, _epoch, magic, crc = _BATCH_HEAD.unpack_from(data, pos)
        if magic != 2:
            raise FormatError(f"record batch magic {magic} at offset {base_offset} (only v2 is read)")
        if crc32c.crc32c(view[pos + 21:end]) != crc:
            raise FormatError(f"record batch at offset {base_offset}: CRC mismatch")
        attributes, last_delta, _ts, _max_ts, _pid, _pepoch, _seq, count = _BATCH_REST.unpack_from(data, pos + 21)
        if attributes & 0x07:
            raise FormatError(f"record batch at offset {base_offset} is compressed (codec {attributes & 7})")
        control = bool(attributes & 0x20)
        records = []
        p = pos + 21 + _BATCH_REST.size
        for _ in range(count):
            length_r, p = _read_varint(data, p)
            rec_end = p + length_r
            p += 1  # attributes
            _tsd, p = _read_varint(data, p)
            offset_delta, p = _read_varint(data, p)
            klen, p = _read_varint(data, p)
            key = None if klen < 0 else bytes(view[p:p + klen])
            p += max(klen, 0)
            vlen, p = _read_varint(data, p)
            value = None if vlen < 0 else bytes(view[p:p + vlen])
            p = rec_end  # headers are skipped
            records.append((base_offset + offset_delta, key, value))
        if p != end:
            raise FormatError(f"record batch at offset {base_offset}: records do not fill the batch")
        out.append(Batch(base_offset, base_offset + last_delta, control, records))
        pos = end
    return out, pos


def iter_records(batches: list[Batch]) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    for batch in batches:
        if not batch.control:
            yield from batch.records
