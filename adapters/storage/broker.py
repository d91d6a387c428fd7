"""Storage on a Kafka-compatible broker: the coordinator's records in a compacted topic
partitioned like ``__consumer_offsets``.

* **Layout.** One topic (default ``groupcoord-offsets``), created at start-up if missing with
  ``offsets.topic.num.partitions`` partitions and ``cleanup.policy=compact``; an existing
  topic must have exactly that many partitions. The core's write for offsets partition ``p``
  goes to topic partition ``p`` (the core puts a group on ``partition_for(group_id, n)``).
  Records are Kafka's own ``__consumer_offsets`` records (``offsets_format``): Kafka's keys,
  so the broker compacts them as Kafka compacts its offsets topic, and Kafka's values.
* **Writes.** One write of the core = one record batch (appended whole or not at all),
  produced with ``acks=all``; the write completes only when the broker acknowledged it. A
  writer task per partition leader sends one Produce at a time, holding every write queued
  meanwhile (group commit: one batch per partition per request, so a partition's writes are
  stored in the order they were emitted). Errors become Kafka append errors for the core
  (the broker's error code; a lost connection is NOT_LEADER_OR_FOLLOWER, no answer within
  ``request_timeout_ms`` is REQUEST_TIMED_OUT), which the core translates for clients.
* **Fencing.** ``lease`` (set by the ownership protocol) says until when this process may
  still acknowledge writes: a Produce answer that arrives after the lease ran out fails the
  write instead (NOT_LEADER_OR_FOLLOWER), because another coordinator may already have loaded
  the partition.
* **Loading** reads a partition from its log start to its high watermark (taken from the
  Fetch answers: Tansu 0.6's ListOffsets(latest) answers the last batch's base offset + 1,
  not the end of the log), decodes every record and returns them oldest first, compacted by
  key like ``MemoryStorage`` compacts.

It speaks the protocol itself with kio (``kafka_client``) rather than through a client
library: a core write must be one record batch (kafka-python and librdkafka split or merge
records into batches as they like, so a multi-record write could be half stored), and the
end of a partition must come from Fetch (both libraries ask ListOffsets, which Tansu answers
wrongly). Everything stays on the server's event loop: no threads, no callbacks to marshal.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any, Callable

from groupcoord.adapters.client.kafka_client import KafkaClient, KafkaError, cancel_and_wait, parse_bootstrap
from groupcoord.adapters.storage import records as fmt
from groupcoord.adapters.storage.interface import StorageError, StorageOpenError, compact
from groupcoord.core.commands import GroupTombstone
from groupcoord.core.errors import Error

DEFAULT_TOPIC = "groupcoord-offsets"
_PRODUCE_MAX_BYTES = 4 * 1024 * 1024  # per Produce request (several writes coalesced)
_FETCH_MAX_BYTES = 16 * 1024 * 1024
_FETCH_PARTITION_MAX_BYTES = 8 * 1024 * 1024
_PRODUCE_VERSION_MAX = 9
_FETCH_VERSION_MAX = 12  # topic names (v13+ needs topic ids)
_FETCH_WAIT_MAX_MS = 5000


class BrokerStorage:
    name = "broker"
    durable = True

    def __init__(self, bootstrap: str, topic: str = DEFAULT_TOPIC, partitions: int = 50, *,
                 client_id: str = "groupcoord-storage", request_timeout_ms: int = 10_000,
                 replication_factor: int = -1, create_topic: bool = True, log: Any = None) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.topic = topic
        self.partitions = partitions
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self.replication_factor = replication_factor
        self.create_topic = create_topic
        self.path = f"{bootstrap}/{topic}"  # for logs ("where the data is")
        self.log = log
        # The ownership protocol's lease: a loop-time deadline for acknowledging writes.
        self.lease: Callable[[], float] | None = None
        self._leaders: dict[int, tuple[str, int]] = {}  # partition -> leader address
        self._producers: dict[tuple[str, int], _Producer] = {}
        self._readers: dict[tuple[str, int], KafkaClient] = {}
        self._reader_lock = asyncio.Lock()
        self._closed = False
        self.stats = {"produce_requests": 0, "writes": 0, "records_loaded": 0}

    # --- start-up --------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, create the topic if it is missing and check its partition count; raises
        StorageOpenError with the reason."""
        try:
            client = await self._bootstrap_client()
            try:
                await self._ensure_topic(client)
                await self._refresh_leaders(client)
            finally:
                await client.close()
        except (OSError, asyncio.TimeoutError, KafkaError, ConnectionError) as e:
            raise StorageOpenError(f"broker {self.path}: {type(e).__name__}: {e}") from None

    async def _bootstrap_client(self) -> KafkaClient:
        last: Exception | None = None
        for host, port in self.bootstrap:
            try:
                return await KafkaClient.connect(host, port, self.client_id, timeout=self.request_timeout)
            except (OSError, asyncio.TimeoutError, KafkaError) as e:
                last = e
        raise KafkaError(f"cannot reach any bootstrap server {self.bootstrap}: {last}")

    async def _ensure_topic(self, client: KafkaClient) -> None:
        count = await self._partition_count(client)
        if count is None and self.create_topic:
            v = client.version(19)
            response = await client.request(19, {
                "topics": [{"name": self.topic, "num_partitions": self.partitions,
                            "replication_factor": self.replication_factor, "assignments": [],
                            "configs": [{"name": "cleanup.policy", "value": "compact"}]}],
                "timeout_ms": int(self.request_timeout * 1000), "validate_only": False}, v,
                timeout=self.request_timeout)
            code = response["topics"][0]["error_code"]
            if code not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS (another coordinator made it)
                raise KafkaError(f"cannot create topic {self.topic}: error {code} "
                                 f"{response['topics'][0].get('error_message') or ''}".strip(), code)
            count = await self._partition_count(client)
        if count is None:
            raise KafkaError(f"topic {self.topic} does not exist")
        if count != self.partitions:
            raise KafkaError(f"topic {self.topic} has {count} partitions but offsets.topic.num.partitions is "
                             f"{self.partitions}; groups would land on other partitions than they were written to")

    async def _metadata(self, client: KafkaClient) -> dict:
        v = client.version(3)
        return await client.request(3, {"topics": [{"name": self.topic, "topic_id": None}],
                                        "allow_auto_topic_creation": False}, v, timeout=self.request_timeout)

    async def _partition_count(self, client: KafkaClient) -> int | None:
        meta = await self._metadata(client)
        topic = meta["topics"][0]
        if topic["error_code"] == 3 or (topic["error_code"] == 0 and not topic["partitions"]):
            return None
        if topic["error_code"]:
            raise KafkaError(f"metadata for {self.topic}: error {topic['error_code']}", topic["error_code"])
        return len(topic["partitions"])

    async def _refresh_leaders(self, client: KafkaClient | None = None) -> None:
        own = client is None
        if own:
            client = await self._bootstrap_client()
        try:
            meta = await self._metadata(client)
        finally:
            if own:
                await client.close()
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in meta["brokers"]}
        topic = meta["topics"][0]
        for p in topic["partitions"]:
            address = brokers.get(p["leader_id"])
            if address is not None:
                self._leaders[p["partition_index"]] = address

    async def _leader(self, partition: int) -> tuple[str, int]:
        address = self._leaders.get(partition)
        if address is None:
            await self._refresh_leaders()
            address = self._leaders.get(partition)
            if address is None:
                raise KafkaError(f"{self.topic}-{partition} has no leader", 5)
        return address

    # --- the Storage interface ----------------------------------------------------------------

    async def load(self, partition: int) -> tuple:
        """Every record of the partition, oldest first, compacted by key."""
        records: list = []
        offset = 0
        max_bytes = _FETCH_PARTITION_MAX_BYTES
        empty_answers = 0
        # 1 ms: an empty partition is answered at once, with its high watermark. Below the high
        # watermark a long wait costs nothing (the broker answers as soon as it has records).
        wait_ms = 1
        while True:
            client = await self._reader(partition)
            try:
                response = await client.request(1, _fetch_request(self.topic, partition, offset, max_bytes, wait_ms),
                                                 client.version(1, _FETCH_VERSION_MAX),
                                                 timeout=self.request_timeout + wait_ms / 1000)
            except (OSError, asyncio.TimeoutError, KafkaError, ConnectionError) as e:
                await self._drop_reader(partition)
                raise StorageError(Error.NOT_LEADER_OR_FOLLOWER) from e
            if response.get("error_code"):
                raise KafkaError(f"Fetch {self.topic}-{partition}: error {response['error_code']}",
                                 response["error_code"])
            parts = [d for t in response["responses"] for d in t["partitions"] if d["partition_index"] == partition]
            if not parts:  # Tansu 0.6 can answer with no partitions at all: ask again, waiting longer
                empty_answers += 1
                if empty_answers > 20:
                    raise StorageError(Error.REQUEST_TIMED_OUT)
                wait_ms = min(wait_ms * 10, _FETCH_WAIT_MAX_MS)
                continue
            data = parts[0]
            if data["error_code"]:
                if data["error_code"] in (6, 3):  # NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION
                    self._leaders.pop(partition, None)
                    await self._drop_reader(partition)
                if data["error_code"] == 1:  # OFFSET_OUT_OF_RANGE: start at the log start
                    offset = max(offset, data.get("log_start_offset", 0))
                    continue
                raise StorageError(Error.parse(data["error_code"]) if _known(data["error_code"])
                                   else Error.UNKNOWN_SERVER_ERROR)
            high = data["high_watermark"]
            if self.log and self.log.enabled("debug"):
                self.log("debug", "broker_fetch", partition=partition, offset=offset, high_watermark=high,
                         bytes=len(data.get("records") or b""))
            if offset < data.get("log_start_offset", 0) and data.get("log_start_offset", 0) > 0:
                offset = data["log_start_offset"]
            raw = data.get("records") or b""
            try:
                batches, used = fmt.decode_batches(raw)
            except fmt.FormatError as e:
                raise StorageOpenError(f"{self.topic}-{partition} from offset {offset}: {e}") from None
            if batches:
                empty_answers = 0
            for batch in batches:
                for rec_offset, key, value in batch.records:
                    if batch.control or rec_offset < offset:
                        continue
                    try:
                        records.append(fmt.decode(key, value))
                    except fmt.FormatError as e:
                        raise StorageOpenError(f"{self.topic}-{partition} offset {rec_offset}: {e}") from None
                offset = max(offset, batch.last_offset + 1)
            if offset >= high:
                break
            if not batches:
                if raw and used == 0:  # one batch larger than we asked for
                    max_bytes *= 2
                    continue
                # Nothing although the high watermark is further: Tansu 0.6 answers with no records
                # when reading them takes longer than max_wait_ms. Ask again, letting it wait longer
                # (it answers as soon as it has the records).
                empty_answers += 1
                if empty_answers > 20:
                    raise StorageError(Error.REQUEST_TIMED_OUT)
                wait_ms = _FETCH_WAIT_MAX_MS
                continue
        self.stats["records_loaded"] += len(records)
        # Compacted as the SQLite storage keeps them: the newest record per key, a tombstone
        # deleting its key (a group tombstone only the group's own record).
        return tuple(r for r in compact(records) if type(r) is not GroupTombstone)

    def append(self, partition: int, records: tuple) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if self._closed:
            future.set_exception(StorageError(Error.NOT_LEADER_OR_FOLLOWER))
            return future
        try:
            pairs = [(fmt.encode_key(r), fmt.encode_value(r)) for r in records]
        except (TypeError, ValueError, OverflowError) as e:  # a value the format cannot hold
            future.set_exception(StorageError(Error.UNKNOWN_SERVER_ERROR))
            if self.log:
                self.log("error", "storage_encode_error", partition=partition, error=str(e))
            return future
        self.stats["writes"] += 1
        address = self._leaders.get(partition)
        producer = self._producers.get(address) if address is not None else None
        if producer is None:
            producer = self._producer_for(address)
        producer.submit(partition, pairs, future)
        return future

    async def flush(self, partitions: set[int] | None = None, timeout: float | None = None) -> bool:
        """Wait until every write started so far (on ``partitions``, or all) has an outcome.
        Returns False if that took longer than ``timeout``."""
        waiting = [f for p in self._producers.values() for f in p.pending(partitions)]
        if not waiting:
            return True
        done, pending = await asyncio.wait(waiting, timeout=timeout or self.request_timeout * 2)
        return not pending

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self.flush(timeout=self.request_timeout)
        for producer in list(self._producers.values()):
            await producer.close()
        for client in list(self._readers.values()):
            await client.close()
        self._readers.clear()

    # --- connections ------------------------------------------------------------------------

    def _producer_for(self, address: tuple[str, int] | None) -> "_Producer":
        key = address or ("?", 0)
        producer = self._producers.get(key)
        if producer is None:
            producer = self._producers[key] = _Producer(self, address)
        return producer

    async def _reader(self, partition: int) -> KafkaClient:
        address = await self._leader(partition)
        async with self._reader_lock:  # concurrent loads share one connection per leader
            client = self._readers.get(address)
            if client is None or client._reader_task is None or client._reader_task.done():
                if client is not None:
                    await client.close()
                client = await KafkaClient.connect(*address, client_id=self.client_id + "-loader",
                                                   timeout=self.request_timeout)
                self._readers[address] = client
        return client

    async def _drop_reader(self, partition: int) -> None:
        address = self._leaders.get(partition)
        client = self._readers.pop(address, None) if address is not None else None
        if client is not None:
            await client.close()

    def lease_valid(self) -> bool:
        return self.lease is None or asyncio.get_running_loop().time() < self.lease()


class _Producer:
    """Sends the writes for one leader: one Produce in flight, everything queued meanwhile
    goes in the next one (one batch per partition)."""

    def __init__(self, storage: BrokerStorage, address: tuple[str, int] | None) -> None:
        self.storage = storage
        self.address = address
        self.queue: deque = deque()  # (partition, pairs, future)
        self.in_flight: list = []
        self.client: KafkaClient | None = None
        self.wake = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._run())

    def submit(self, partition: int, pairs: list, future: asyncio.Future) -> None:
        self.queue.append((partition, pairs, future))
        self.wake.set()

    def pending(self, partitions: set[int] | None) -> list[asyncio.Future]:
        return [f for p, _pairs, f in list(self.queue) + self.in_flight
                if not f.done() and (partitions is None or p in partitions)]

    async def close(self) -> None:
        await cancel_and_wait(self.task)
        for _p, _pairs, future in list(self.queue) + self.in_flight:
            if not future.done():
                future.set_exception(StorageError(Error.NOT_LEADER_OR_FOLLOWER))
        if self.client is not None:
            await self.client.close()

    async def _run(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            while self.queue:
                batch, size = [], 0
                while self.queue and (not batch or size < _PRODUCE_MAX_BYTES):
                    item = self.queue.popleft()
                    batch.append(item)
                    size += sum(len(k) + len(v or b"") + 16 for k, v in item[1])
                self.in_flight = batch
                try:
                    await self._send(batch)
                finally:
                    self.in_flight = []

    async def _send(self, batch: list) -> None:
        storage = self.storage
        by_partition: dict[int, list] = {}
        for partition, pairs, future in batch:
            by_partition.setdefault(partition, []).append((pairs, future))
        now_ms = int(time.time() * 1000)
        topic_data = [{"name": storage.topic, "partition_data": [
            {"index": p, "records": fmt.encode_batch([pair for pairs, _f in items for pair in pairs], now_ms)}
            for p, items in sorted(by_partition.items())]}]
        failed: Error | None = None
        failure = ""
        results: dict[int, int] = {}
        try:
            if self.client is None or self.client._reader_task is None or self.client._reader_task.done():
                address = self.address or await storage._leader(next(iter(by_partition)))
                self.client = await KafkaClient.connect(*address, client_id=storage.client_id,
                                                        timeout=storage.request_timeout)
            v = self.client.version(0, _PRODUCE_VERSION_MAX)
            storage.stats["produce_requests"] += 1
            response = await self.client.request(0, {"transactional_id": None, "acks": -1,
                                                     "timeout_ms": int(storage.request_timeout * 1000),
                                                     "topic_data": topic_data}, v, timeout=storage.request_timeout)
            for topic in response["responses"]:
                for pr in topic["partition_responses"]:
                    results[pr["index"]] = pr["error_code"]
        except asyncio.TimeoutError:
            failed = Error.REQUEST_TIMED_OUT
            failure = f"no answer to Produce within {storage.request_timeout}s"
        except (OSError, KafkaError, ConnectionError) as e:
            failed = Error.NOT_LEADER_OR_FOLLOWER
            failure = f"{type(e).__name__}: {e}"
        if failed is not None and self.client is not None:
            client, self.client = self.client, None
            await client.close()
        lease_ok = storage.lease_valid()
        for partition, items in by_partition.items():
            code = results.get(partition, -1) if failed is None else -1
            detail = failure
            if failed is not None:
                error: Error | None = failed
            elif code == 0:
                error = None if lease_ok else Error.NOT_LEADER_OR_FOLLOWER
                detail = "the broker's answer came after the ownership lease ran out"
            elif code == -1:
                error = Error.UNKNOWN_SERVER_ERROR
                detail = "the broker's answer does not mention the partition"
            else:
                error = Error.parse(code) if _known(code) else Error.UNKNOWN_SERVER_ERROR
                detail = f"the broker answered error {code}"
                if code in (3, 6):
                    storage._leaders.pop(partition, None)
            for _pairs, future in items:
                if future.done():
                    continue
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(StorageError(error, f"{storage.topic}-{partition}: {detail}"))


def _known(code: int) -> bool:
    try:
        Error.parse(code)
        return True
    except ValueError:
        return False


def _fetch_request(topic: str, partition: int, offset: int, max_bytes: int, wait_ms: int = 1) -> dict:
    # max_wait_ms at least 1: Tansu 0.6 answers a zero wait with an empty response.
    return {"replica_id": -1, "max_wait_ms": max(1, wait_ms), "min_bytes": 1, "max_bytes": _FETCH_MAX_BYTES,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": ""}
