"""Heartbeat and OffsetCommit requests read straight from their bytes: almost all of a busy
server's traffic (a heartbeat every 3 s and, with auto-commit, a commit every 5 s per member).

kio reads any request generically (a dataclass, then a dict of fields, then the schema's
defaults); for a Heartbeat that was about a quarter of the server's time per request, for an
OffsetCommit a third. ``read_heartbeat`` and ``read_offset_commit`` read these requests
themselves and give up (None) on anything they do not expect: another API or version, a null
or truncated string, a null or long array, tagged fields, bytes left over, invalid UTF-8. The
caller then takes the general path, which answers or refuses such a frame exactly as before.
tests/wire/test_heartbeat_frame.py and test_commit_frame.py check they agree with kio.
"""

from __future__ import annotations

import struct

from groupcoord.adapters.storage.batches import put_unsigned_varint
from groupcoord.core.events import CommitPartition

HEARTBEAT_KEY = 12
OFFSET_COMMIT_KEY = 8
COMMIT_FLEXIBLE_FROM = 8  # OffsetCommit v8
FLEXIBLE_FROM = 4  # Heartbeat v4: compact strings and tagged fields (request header v2)
_HEAD = struct.Struct(">hhi")  # api key, version, correlation id
_INT32 = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_INT64 = struct.Struct(">q")
_PARTITION = struct.Struct(">iq")  # partition index, committed offset
# kio reads a retention time as a timedelta: beyond ~2**63 µs it cannot hold one (the general path
# closes the connection, spec/deviations.md D16), and near that its arithmetic may go through a
# float. A retention beyond 2**52 ms (~140,000 years) is left to the general path.
RETENTION_LIMIT_MS = 2**52


class HeartbeatReader:
    """``read_heartbeat`` with a memory: a member's heartbeats differ only in their correlation
    id, so what follows it is looked up before it is read (at most ``limit`` frames kept)."""

    def __init__(self, max_version: int, limit: int = 200_000) -> None:
        self.max_version = max_version
        self.limit = limit
        self._known: dict[bytes, tuple] = {}

    def read(self, frame: bytes) -> tuple | None:
        rest = frame[8:]
        known = self._known.get(rest)
        if known is not None and frame[:4] == known[0]:
            return (known[1], int.from_bytes(frame[4:8], "big", signed=True)) + known[2]
        fields = read_heartbeat(frame, self.max_version)
        if fields is not None:
            if len(self._known) >= self.limit:
                self._known.clear()
            self._known[rest] = (frame[:4], fields[0], fields[2:])
        return fields


def read_heartbeat(frame: bytes, max_version: int) -> tuple | None:
    """(version, correlation id, client id, group id, generation id, member id, group instance
    id) of a Heartbeat frame (size prefix stripped) up to ``max_version``, or None."""
    head = _head(frame, HEARTBEAT_KEY, 0, max_version)
    if head is None:
        return None
    version, correlation_id = head
    try:
        flexible = version >= FLEXIBLE_FROM
        client_id, at = _header_rest(frame, flexible)
        if flexible:
            group_id, at = _compact(frame, at)
            (generation_id,) = _INT32.unpack_from(frame, at)
            member_id, at = _compact(frame, at + 4)
            instance_id, at = _compact(frame, at, nullable=True)
            if frame[at] != 0:  # body tagged fields
                return None
            at += 1
        else:
            group_id, at = _string(frame, at)
            (generation_id,) = _INT32.unpack_from(frame, at)
            member_id, at = _string(frame, at + 4)
            instance_id = None
            if version >= 3:
                instance_id, at = _string(frame, at, nullable=True)
    except (_Unexpected, IndexError, struct.error, UnicodeDecodeError):
        return None
    if at != len(frame):
        return None
    return version, correlation_id, client_id, group_id, generation_id, member_id, instance_id


def read_offset_commit(frame: bytes, max_version: int) -> tuple | None:
    """(version, correlation id, client id, group id, generation id or member epoch, member id,
    group instance id, retention time ms, topics) of an OffsetCommit frame (size prefix
    stripped) from v2 up to ``max_version``, or None; topics as ``events.OffsetCommit`` holds
    them: ((name, (CommitPartition, ...)), ...)."""
    head = _head(frame, OFFSET_COMMIT_KEY, 2, max_version)
    if head is None:
        return None
    version, correlation_id = head
    try:
        flexible = version >= COMMIT_FLEXIBLE_FROM
        client_id, at = _header_rest(frame, flexible)
        text = _compact if flexible else _string
        group_id, at = text(frame, at)
        (generation_id,) = _INT32.unpack_from(frame, at)
        member_id, at = text(frame, at + 4)
        instance_id = None
        retention_time_ms = -1
        if version >= 7:
            instance_id, at = text(frame, at, nullable=True)
        elif version <= 4:
            (retention_time_ms,) = _INT64.unpack_from(frame, at)
            if not -RETENTION_LIMIT_MS <= retention_time_ms <= RETENTION_LIMIT_MS:
                return None
            at += 8
        topics = []
        count, at = _count(frame, at, flexible)
        for _ in range(count):
            name, at = text(frame, at)
            partitions = []
            n, at = _count(frame, at, flexible)
            for _ in range(n):
                index, offset = _PARTITION.unpack_from(frame, at)
                at += 12
                epoch = -1
                if version >= 6:
                    (epoch,) = _INT32.unpack_from(frame, at)
                    at += 4
                metadata, at = text(frame, at, nullable=True)
                if flexible:
                    if frame[at] != 0:  # the partition's tagged fields
                        return None
                    at += 1
                partitions.append(CommitPartition(index, offset, epoch, metadata))
            if flexible:
                if frame[at] != 0:  # the topic's tagged fields
                    return None
                at += 1
            topics.append((name, tuple(partitions)))
        if flexible:
            if frame[at] != 0:  # body tagged fields
                return None
            at += 1
    except (_Unexpected, IndexError, struct.error, UnicodeDecodeError):
        return None
    if at != len(frame):
        return None
    return (version, correlation_id, client_id, group_id, generation_id, member_id, instance_id, retention_time_ms,
            tuple(topics))


_PARTITION_RESULT = struct.Struct(">ih")  # partition index, error code


def offset_commit_response_body(version: int, topics: tuple) -> bytes:
    """The body of an OffsetCommit v2+ response answering ``topics`` (``TopicResult``s): what
    kio writes for it, without kio (each member's commit names its own partitions, so these
    answers repeat too little to cache)."""
    flexible = version >= COMMIT_FLEXIBLE_FROM
    out = bytearray(_INT32.pack(0) if version >= 3 else b"")  # throttle time, from v3
    _put_count(out, len(topics), flexible)
    for topic in topics:
        name = topic.name.encode()
        if flexible:
            put_unsigned_varint(out, len(name) + 1)
        else:
            out += _SHORT.pack(len(name))
        out += name
        _put_count(out, len(topic.partitions), flexible)
        for p in topic.partitions:
            out += _PARTITION_RESULT.pack(p.partition_index, p.error_code)
            if flexible:
                out.append(0)  # the partition's tagged fields
        if flexible:
            out.append(0)  # the topic's tagged fields
    if flexible:
        out.append(0)  # body tagged fields
    return bytes(out)


def _put_count(out: bytearray, n: int, compact: bool) -> None:
    if compact:
        put_unsigned_varint(out, n + 1)
    else:
        out += _INT32.pack(n)


def _count(frame: bytes, at: int, compact: bool) -> tuple[int, int]:
    """An array's length: a null array, or a compact one of 127 elements or more, is left to
    the general path."""
    if compact:
        n = frame[at]
        if n == 0 or n >= 0x80:
            raise _Unexpected
        return n - 1, at + 1
    (n,) = _INT32.unpack_from(frame, at)
    if n < 0:
        raise _Unexpected
    return n, at + 4


def _head(frame: bytes, api_key: int, lowest: int, highest: int) -> tuple[int, int] | None:
    """(version, correlation id) of a request of ``api_key`` at a version from ``lowest`` to
    ``highest``, or None."""
    if len(frame) < 10:
        return None
    key, version, correlation_id = _HEAD.unpack_from(frame, 0)
    if key != api_key or not lowest <= version <= highest:
        return None
    return version, correlation_id


def _header_rest(frame: bytes, flexible: bool) -> tuple[str | None, int]:
    """(client id, where the body starts): the request header after the correlation id (the
    client id is a nullable string in every header version; header v2 adds tagged fields)."""
    client_id, at = _string(frame, 8, nullable=True)
    if flexible:
        if frame[at] != 0:  # header tagged fields
            raise _Unexpected
        at += 1
    return client_id, at


class _Unexpected(Exception):
    pass


def _string(frame: bytes, at: int, nullable: bool = False) -> tuple[str | None, int]:
    (n,) = _SHORT.unpack_from(frame, at)
    at += 2
    if n < 0:
        if nullable and n == -1:
            return None, at
        raise _Unexpected
    if at + n > len(frame):
        raise _Unexpected
    return frame[at:at + n].decode(), at + n


def _compact(frame: bytes, at: int, nullable: bool = False) -> tuple[str | None, int]:
    n = frame[at]  # length + 1; a longer string (a multi-byte varint) takes the general path
    if n >= 0x80:
        raise _Unexpected
    at += 1
    if n == 0:
        if nullable:
            return None, at
        raise _Unexpected
    end = at + n - 1
    if end > len(frame):
        raise _Unexpected
    return frame[at:end].decode(), end
