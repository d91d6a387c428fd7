"""A single-node partition log: topics of N partitions, each an ordered list of record batches
v2 kept as the bytes the client sent (its base offset and leader epoch rewritten: the CRC does
not cover them), offsets assigned by the log. What Kafka's ``UnifiedLog`` and ``LogValidator``
do on a leader with one replica, for the Produce, Fetch, ListOffsets and DeleteRecords paths:

* ``append``: one batch per partition (Produce v3+ carries exactly one), magic 2, CRC-32C
  checked (CORRUPT_MESSAGE), not a control batch, not transactional (transactions are not
  served: INVALID_TXN_STATE), within ``max_message_bytes`` (MESSAGE_TOO_LARGE); an
  uncompressed batch's records are read to check their offset deltas (INVALID_RECORD),
  a compressed one (attributes bits 0-2) is passed through whole; then the idempotent
  producer checks (``producers``). The batch gets offsets ``log end .. log end + count - 1``.
* The high watermark is the log end once the batch is durable (``backend``: at once in
  memory, after the SQLite commit), and only then is the append answered and readers woken
  (``watch``): a Fetch never returns a record the log could still lose.
* The log start moves forward by DeleteRecords and by retention (``expire``: a batch whose
  largest timestamp is older than the topic's ``retention.ms`` before ``now``, batch by
  batch, as if each batch were a segment). Time comes from the injected ``clock`` only.

Everything is held in memory; a durable backend (``sqlite``) keeps a copy and gives it back at
start (``DataLog.open``). Errors are Kafka's codes (``Code``).
"""

from __future__ import annotations

import bisect
from typing import Any, Callable, NamedTuple

from groupcoord.adapters.data import compression
from groupcoord.adapters.data.producers import BatchMetadata, ProducerEntry, ProducerIds, check_append
from groupcoord.adapters.storage import batches as fmt


class Code:
    """Kafka's error codes the data plane answers with."""

    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    MESSAGE_TOO_LARGE = 10
    KAFKA_STORAGE_ERROR = 56
    INVALID_TXN_STATE = 48
    INVALID_RECORD = 87


DEFAULT_RETENTION_MS = 604_800_000  # log.retention.hours=168
DEFAULT_MAX_MESSAGE_BYTES = 1_048_588  # message.max.bytes
LEADER_EPOCH = 0  # one replica, never re-elected: the epoch Metadata gives every partition


class Stored(NamedTuple):
    """A batch in the log: its offsets, largest timestamp and bytes (offsets rewritten)."""

    base_offset: int
    last_offset: int
    max_timestamp: int
    data: bytes | bytearray  # bytearray when appended here (the offsets rewritten in a copy)


class AppendResult(NamedTuple):
    error: int
    base_offset: int = -1
    log_start_offset: int = -1
    message: str | None = None


class Record(NamedTuple):
    """A record read back (``DataLog.records``)."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple  # ((str, bytes | None), ...)
    timestamp: int
    partition: int


class MemoryBackend:
    """No copy: everything is durable as soon as it is appended (the fixture's log)."""

    name = "memory"
    durable = False

    def write(self, op: tuple, done: Callable[[int | None], None]) -> None:
        done(None)

    def reserve_producer_ids(self, upto: int) -> None:
        pass

    def load(self) -> dict:
        return {"topics": {}, "batches": [], "starts": {}, "next_producer_id": 0}

    async def close(self) -> None:
        pass


class Partition:
    __slots__ = ("topic", "index", "batches", "bases", "log_start", "log_end", "high_watermark", "producers")

    def __init__(self, topic: str, index: int) -> None:
        self.topic = topic
        self.index = index
        self.batches: list[Stored] = []
        self.bases: list[int] = []  # base offsets, for bisect
        self.log_start = 0
        self.log_end = 0  # the next offset to assign (appended, maybe not yet durable)
        self.high_watermark = 0  # durable end: what readers see
        self.producers: dict[int, ProducerEntry] = {}

    def add(self, stored: Stored) -> None:
        self.batches.append(stored)
        self.bases.append(stored.base_offset)

    def move_start(self, offset: int) -> None:
        """Drop the batches wholly below ``offset`` and the producers with no batch left."""
        self.log_start = max(self.log_start, offset)
        n = 0
        while n < len(self.batches) and self.batches[n].last_offset < self.log_start:
            n += 1
        del self.batches[:n]
        del self.bases[:n]
        for pid in [p for p, e in self.producers.items() if e.last_offset < self.log_start]:
            del self.producers[pid]


class DataLog:
    """Topics -> partitions. ``clock()``: now in ms (the server's clock). ``backend``: where a
    durable copy goes (``MemoryBackend``: none)."""

    def __init__(self, clock: Callable[[], int], backend: Any = None, *,
                 default_retention_ms: int = DEFAULT_RETENTION_MS,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.clock = clock
        self.backend = backend if backend is not None else MemoryBackend()
        self.default_retention_ms = default_retention_ms
        self.max_message_bytes = max_message_bytes
        self.topics: dict[str, dict] = {}  # name -> {"partitions": n, "retention_ms": ms}
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.producer_ids = ProducerIds(0, self.backend.reserve_producer_ids)
        self._watchers: dict[tuple[str, int], set] = {}
        self.failed: str | None = None  # a durable write failed: every later append is refused
        self._load()

    def _load(self) -> None:
        state = self.backend.load()
        self.topics.update(state["topics"])
        self.producer_ids = ProducerIds(state["next_producer_id"], self.backend.reserve_producer_ids)
        for topic, index, data in state["batches"]:
            part = self.partition(topic, index)
            header = fmt.read_header(data)
            stored = Stored(header.base_offset, header.base_offset + header.last_offset_delta, header.max_timestamp,
                            data)
            part.add(stored)
            part.log_end = part.high_watermark = stored.last_offset + 1
            if header.producer_id >= 0:
                self._remember(part, header, stored)
        for (topic, index), start in state["starts"].items():
            part = self.partition(topic, index)
            part.log_end = part.high_watermark = max(part.log_end, start)
            part.move_start(start)

    # --- topics -------------------------------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition:
        part = self.partitions.get((topic, index))
        if part is None:
            part = self.partitions[(topic, index)] = Partition(topic, index)
        return part

    def retention_ms(self, topic: str) -> int:
        return self.topics.get(topic, {}).get("retention_ms", self.default_retention_ms)

    def create_topic(self, name: str, partitions: int, retention_ms: int | None = None) -> None:
        """A topic (a durable backend keeps it across restarts); an existing one is left alone."""
        if name in self.topics:
            return
        config = {"partitions": partitions}
        if retention_ms is not None:
            config["retention_ms"] = retention_ms
        self.topics[name] = config
        self.backend.write(("topic", name, partitions, retention_ms), lambda error: None)

    def delete_topic(self, name: str) -> None:
        self.topics.pop(name, None)
        for key in [k for k in self.partitions if k[0] == name]:
            del self.partitions[key]
            self._wake(key)
        self.backend.write(("delete_topic", name), lambda error: None)

    # --- appending ----------------------------------------------------------------------------

    def append(self, topic: str, index: int, data: bytes | None, done: Callable[[AppendResult], None]) -> None:
        """Append the one batch of ``data`` to the partition; ``done(result)`` once it is durable
        (at once when refused, or when it is a duplicate already durable)."""
        refusal = self._refusal(data)
        if refusal is not None:
            done(AppendResult(refusal[0], message=refusal[1]))
            return
        if self.failed is not None:
            done(AppendResult(Code.KAFKA_STORAGE_ERROR, message=self.failed))
            return
        header = fmt.read_header(data)
        part = self.partition(topic, index)
        if header.producer_id >= 0:
            entry = part.producers.get(header.producer_id)
            duplicate = entry.duplicate_of(header.producer_epoch, header.base_sequence,
                                           header.last_sequence) if entry is not None else None
            if duplicate is not None:
                base = duplicate.first_offset
                self.backend.write(("barrier",), lambda error: done(self._outcome(error, part, base)))
                return
            problem = check_append(entry, header.producer_id, header.producer_epoch, header.base_sequence)
            if problem is not None:
                done(AppendResult(problem[0], message=problem[1]))
                return
        base = part.log_end
        stored = Stored(base, base + header.last_offset_delta, header.max_timestamp,
                        fmt.with_base_offset(data, base, LEADER_EPOCH))
        part.add(stored)
        part.log_end = stored.last_offset + 1
        if header.producer_id >= 0:
            self._remember(part, header, stored)

        def durable(error: int | None) -> None:
            if error is None and part.high_watermark < stored.last_offset + 1:
                part.high_watermark = stored.last_offset + 1
                self._wake((topic, index))
            done(self._outcome(error, part, base))

        self.backend.write(("batch", topic, index, stored), durable)

    def _outcome(self, error: int | None, part: Partition, base: int) -> AppendResult:
        if error is not None:
            self.failed = self.failed or f"the log's storage failed ({getattr(self.backend, 'last_error', '')})"
            return AppendResult(Code.KAFKA_STORAGE_ERROR, message=self.failed)
        return AppendResult(Code.NONE, base, part.log_start)

    @staticmethod
    def _remember(part: Partition, header: fmt.BatchHeader, stored: Stored) -> None:
        entry = part.producers.get(header.producer_id)
        if entry is None:
            entry = part.producers[header.producer_id] = ProducerEntry()
        entry.add(header.producer_epoch, BatchMetadata(header.base_sequence, header.last_sequence, stored.base_offset,
                                                       stored.last_offset, header.max_timestamp))

    def _refusal(self, data: bytes | None) -> tuple[int, str] | None:
        """Why a Produce partition's records cannot be appended (Kafka's code and message)."""
        if not data:
            return Code.INVALID_RECORD, "a produce request v3+ must hold exactly one record batch (it holds none)"
        if len(data) < fmt.HEADER_SIZE:
            return Code.CORRUPT_MESSAGE, f"record batch of {len(data)} bytes is truncated"
        header = fmt.read_header(data)
        if header.size > len(data) or header.length < fmt.HEADER_SIZE - fmt.LOG_OVERHEAD:
            return Code.CORRUPT_MESSAGE, "record batch is truncated"
        if header.size < len(data):
            return Code.INVALID_RECORD, "a produce request v3+ must hold exactly one record batch"
        if header.magic != 2:
            return Code.INVALID_RECORD, f"record batch magic {header.magic}: produce v3+ needs magic 2"
        if len(data) > self.max_message_bytes:
            return Code.MESSAGE_TOO_LARGE, (f"the record batch is {len(data)} bytes, larger than the largest "
                                            f"allowed ({self.max_message_bytes})")
        if not fmt.crc_matches(data, 0, header):
            return Code.CORRUPT_MESSAGE, "record batch CRC-32C mismatch: the batch is corrupt"
        if header.control:
            return Code.INVALID_RECORD, "clients may not write control records"
        if header.transactional:
            return Code.INVALID_TXN_STATE, "transactions are not served: a transactional batch cannot be appended"
        if header.count < 1 or header.last_offset_delta != header.count - 1:
            return Code.INVALID_RECORD, (f"record batch of {header.count} records with last offset delta "
                                         f"{header.last_offset_delta}")
        if header.compression == 0:
            problem, sequential = fmt.check_records(data, fmt.HEADER_SIZE, header.count)
            if problem is not None:
                return Code.CORRUPT_MESSAGE, f"record batch: {problem}"
            if not sequential:
                return Code.INVALID_RECORD, "record offset deltas are not 0, 1, 2, ..."
        elif header.compression > 4:
            return Code.CORRUPT_MESSAGE, f"unknown compression codec {header.compression}"
        return None

    # --- reading ------------------------------------------------------------------------------

    def read(self, topic: str, index: int, offset: int, max_bytes: int, min_one: bool) -> tuple[int, bytes]:
        """(error, the batches from the one holding ``offset`` up to the high watermark, within
        ``max_bytes`` unless ``min_one`` and none fits: then the first whole)."""
        part = self.partitions.get((topic, index)) or Partition(topic, index)
        if offset < part.log_start or offset > part.high_watermark:
            return Code.OFFSET_OUT_OF_RANGE, b""
        i = max(bisect.bisect_right(part.bases, offset) - 1, 0)
        out: list[bytes] = []
        size = 0
        for stored in part.batches[i:]:
            if stored.base_offset >= part.high_watermark:
                break
            if stored.last_offset < offset:
                continue
            if size + len(stored.data) > max_bytes and not (min_one and not out):
                break
            out.append(stored.data)
            size += len(stored.data)
        return Code.NONE, b"".join(out)

    def bounds(self, topic: str, index: int) -> tuple[int, int]:
        """(log start, high watermark)."""
        part = self.partitions.get((topic, index))
        return (part.log_start, part.high_watermark) if part is not None else (0, 0)

    def offset_for_timestamp(self, topic: str, index: int, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or after ``timestamp``; None if none.
        ``MAX_TIMESTAMP`` (-3): the first record with the largest timestamp."""
        part = self.partitions.get((topic, index))
        if part is None:
            return None
        visible = [s for s in part.batches if s.base_offset < part.high_watermark]
        if timestamp == -3:
            if not visible:
                return None
            best = max(visible, key=lambda s: s.max_timestamp)
            target = best.max_timestamp
            candidates = [best]
        else:
            candidates = [s for s in visible if s.max_timestamp >= timestamp]
            target = timestamp
        for stored in candidates[:1]:
            for record in self._batch_records(stored):
                if record.offset >= part.log_start and record.timestamp >= target:
                    return record.timestamp, record.offset
            return stored.max_timestamp, max(stored.base_offset, part.log_start)
        return None

    @staticmethod
    def _batch_records(stored: Stored) -> list[fmt.Record]:
        header = fmt.read_header(stored.data)
        try:
            body = compression.decompress(header.compression, bytes(stored.data[fmt.HEADER_SIZE:]))
            return fmt.read_records(body, header.count, header.base_offset, header.base_timestamp)
        except fmt.FormatError:
            return []

    def records(self, topic: str, index: int | None = None) -> list[Record]:
        """Every record readable now (log start to high watermark), by partition then offset.
        A compressed batch whose codec's library is missing raises ``compression.NeedsCodec``."""
        out = []
        indexes = [index] if index is not None else sorted(i for t, i in self.partitions if t == topic)
        for i in indexes:
            part = self.partitions.get((topic, i))
            if part is None:
                continue
            for stored in part.batches:
                header = fmt.read_header(stored.data)
                if header.control:
                    continue
                body = compression.decompress(header.compression, bytes(stored.data[fmt.HEADER_SIZE:]))
                for r in fmt.read_records(body, header.count, header.base_offset, header.base_timestamp):
                    if part.log_start <= r.offset < part.high_watermark:
                        out.append(Record(r.offset, r.key, r.value, r.headers, r.timestamp, i))
        return out

    # --- waking readers -----------------------------------------------------------------------

    def watch(self, keys: list[tuple[str, int]], callback: Callable[[], None]) -> Callable[[], None]:
        """``callback()`` whenever one of ``keys`` gets durable data; returns the unwatch."""
        for key in keys:
            self._watchers.setdefault(key, set()).add(callback)

        def unwatch() -> None:
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(callback)
                    if not watchers:
                        del self._watchers[key]
        return unwatch

    def _wake(self, key: tuple[str, int]) -> None:
        for callback in list(self._watchers.get(key, ())):
            callback()

    # --- the log start: DeleteRecords, retention ----------------------------------------------

    def delete_records(self, topic: str, index: int, offset: int, done: Callable[[int, int], None]) -> None:
        """Move the log start to ``offset`` (-1: the high watermark); ``done(error, low
        watermark)`` once durable. Beyond the high watermark: OFFSET_OUT_OF_RANGE."""
        part = self.partition(topic, index)
        if offset == -1:
            offset = part.high_watermark
        if offset < 0 or offset > part.high_watermark:
            done(Code.OFFSET_OUT_OF_RANGE, -1)
            return
        if offset > part.log_start:
            part.move_start(offset)
            self.backend.write(("start", topic, index, part.log_start),
                               lambda error: done(Code.KAFKA_STORAGE_ERROR if error else Code.NONE, part.log_start))
        else:
            done(Code.NONE, part.log_start)

    def expire(self) -> int:
        """Retention: each partition's log start moves past its batches whose largest timestamp
        is older than ``retention.ms`` before now (-1: kept forever). Returns batches dropped."""
        now = self.clock()
        dropped = 0
        for (topic, index), part in list(self.partitions.items()):
            retention = self.retention_ms(topic)
            if retention < 0:
                continue
            limit = now - retention
            n = 0
            while n < len(part.batches) and part.batches[n].max_timestamp < limit \
                    and part.batches[n].last_offset < part.high_watermark:
                n += 1
            if n:
                dropped += n
                part.move_start(part.batches[n - 1].last_offset + 1)
                self.backend.write(("start", topic, index, part.log_start), lambda error: None)
        return dropped

    # --- writing without a client (the test fixtures' produce) ---------------------------------

    def produce(self, topic: str, partitions: int, values: list, key: bytes | None = None,
                partition: int | None = None, headers: list | None = None) -> list[int]:
        """Append ``values`` as a producer would, with ``key`` (partitioned by Kafka's default
        partitioner: murmur2 of the key; no key: partition 0 unless given), stamped with the
        clock's now; one batch per call. Returns their offsets. Durable at once only with the
        memory backend (the fixture's): raises if the append is refused or not yet durable."""
        if partition is None:
            partition = (murmur2(key) & 0x7FFFFFFF) % partitions if key is not None else 0
        if not 0 <= partition < partitions:
            raise ValueError(f"topic {topic!r} has no partition {partition} (it has {partitions})")
        data = fmt.encode_batch([(key, v) for v in values], self.clock(),
                                headers=[list(headers or ())] * len(values) if headers else None)
        got: list[AppendResult] = []
        self.append(topic, partition, data, got.append)
        if not got or got[0].error:
            raise RuntimeError(f"produce to {topic}-{partition} failed: {got[0] if got else 'not durable yet'}")
        return list(range(got[0].base_offset, got[0].base_offset + len(values)))

    # --- idempotent producers -----------------------------------------------------------------

    def init_producer_id(self) -> tuple[int, int]:
        """(producer id, epoch) for an idempotent producer: always a new id, epoch 0 (Kafka's
        TransactionCoordinator.handleInitProducerId without a transactional id)."""
        return self.producer_ids.allocate(), 0

    async def close(self) -> None:
        await self.backend.close()


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c), as a signed 32-bit int: the default
    partitioner's hash of a record's key."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    rest = length % 4
    tail = length - rest
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h
