"""The data-plane APIs on the wire, answered from the partition log (``groupcoord.adapters.data``):
Produce, Fetch, ListOffsets, InitProducerId, CreateTopics, DeleteTopics, DeleteRecords, and the
transactional APIs refused (spec/data-plane.md). As Kafka's ``KafkaApis`` (handleProduceRequest,
handleFetchRequest, handleListOffsetRequest, handleInitProducerIdRequest, handleCreateTopicsRequest,
handleDeleteTopicsRequest, handleDeleteRecordsRequest) and ``ReplicaManager`` answer on a broker
that leads every partition alone:

* Produce is answered once every partition's batch is durable (acks 1 and -1 alike; acks=0:
  no answer); a partition the catalog does not have gets UNKNOWN_TOPIC_OR_PARTITION (Produce
  creates no topic; Metadata does, as Kafka's auto.create.topics.enable).
* Fetch reads from the log up to the high watermark; with fewer than ``min_bytes`` it is held
  (``FetchWaits``) until data arrives on one of its partitions or ``max_wait_ms`` passes on the
  server's clock (on a manual clock: by ``advance``), capped by ``fetch_wait_cap_ms``. A
  partition error answers at once. No fetch sessions: every answer has session id 0, so
  clients send full requests.
* CreateTopics and DeleteTopics change the catalog (Metadata lists it) and the log; the core's
  topics image follows (``topics_changed``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import Any, Callable

from groupcoord.adapters.data.log import LEADER_EPOCH, Code, DataLog
from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.core.errors import Error

UNKNOWN_LEADER_EPOCH = 74
UNKNOWN_TOPIC_ID = apis.UNKNOWN_TOPIC_ID
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5

NO_TRANSACTIONS = "transactions are not served by groupcoord (spec/data-plane.md)"

# Topic configs CreateTopics takes (Kafka's LogConfig names); only retention.ms has an effect.
TOPIC_CONFIGS = frozenset({
    "cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "index.interval.bytes", "max.compaction.lag.ms", "max.message.bytes", "message.downconversion.enable",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.difference.max.ms",
    "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas",
    "preallocate", "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms",
    "segment.ms", "unclean.leader.election.enable", "local.retention.bytes", "local.retention.ms",
    "remote.storage.enable"})


class FetchWaits:
    """Deadlines of held Fetches on the server's clock: the event loop's timers on a real clock;
    on a manual one a heap that ``fire_due`` (the test controls' ``advance``) empties."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self._heap: list = []
        self._seq = itertools.count()

    def later(self, ms: int, callback: Callable[[], None]) -> Any:
        if not self.clock.manual:
            return asyncio.get_running_loop().call_later(ms / 1000, callback)
        handle = _Handle(callback)
        heapq.heappush(self._heap, (self.clock.now_ms() + ms, next(self._seq), handle))
        return handle

    def fire_due(self) -> None:
        now = self.clock.now_ms()
        while self._heap and self._heap[0][0] <= now:
            _due, _n, handle = heapq.heappop(self._heap)
            handle.fire()


class _Handle:
    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback: Callable[[], None] | None = callback

    def cancel(self) -> None:
        self.callback = None

    def fire(self) -> None:
        callback, self.callback = self.callback, None
        if callback is not None:
            callback()


def _leader_epoch_error(epoch: int | None) -> int:
    """The partition's epoch is always LEADER_EPOCH: a client ahead of it is told so."""
    if epoch is None or epoch < 0 or epoch == LEADER_EPOCH:
        return Code.NONE
    return UNKNOWN_LEADER_EPOCH


class DataPlane:
    """The data-plane requests of a ``RequestHandler`` (``send(conn, request, fields)`` answers)."""

    def __init__(self, log: DataLog, catalog: apis.TopicCatalog, clock: Any, options: Any,
                 send: Callable[[Any, Any, dict], None], topics_changed: Callable[[], None],
                 default_partitions: int = 1) -> None:
        self.log = log
        self.catalog = catalog
        self.options = options
        self.send = send
        self.topics_changed = topics_changed
        self.default_partitions = default_partitions
        self.waits = FetchWaits(clock)
        self.closing = False
        for name, config in log.topics.items():  # topics created before a restart
            catalog.topics.setdefault(name, config["partitions"])

    def handlers(self) -> dict:
        k = kc.API_KEYS
        return {k["Produce"]: self.produce, k["Fetch"]: self.fetch, k["ListOffsets"]: self.list_offsets,
                k["InitProducerId"]: self.init_producer_id, k["CreateTopics"]: self.create_topics,
                k["DeleteTopics"]: self.delete_topics, k["DeleteRecords"]: self.delete_records,
                k["AddPartitionsToTxn"]: self.transactions, k["AddOffsetsToTxn"]: self.transactions,
                k["EndTxn"]: self.transactions, k["TxnOffsetCommit"]: self.transactions}

    def sync_topics(self) -> None:
        """Topics the catalog gained (Metadata's auto-creation) join the log, kept across restarts."""
        for name, count in list(self.catalog.topics.items()):
            if count is not None and name not in self.log.topics:
                self.log.create_topic(name, count)

    def advanced(self) -> None:
        """The manual clock moved: held Fetches due are answered, retention runs."""
        self.log.expire()
        self.waits.fire_due()

    # --- Produce ------------------------------------------------------------------------------

    def produce(self, conn: Any, request: kc.DecodedRequest) -> None:
        fields = kc.to_fields(request.body)
        acks = fields.get("acks")
        topics: list = []
        pending = [1]  # the submitting loop itself, released at its end

        def finished() -> None:
            pending[0] -= 1
            if pending[0] == 0 and acks != 0:
                self.send(conn, request, {"responses": topics, "throttle_time_ms": 0})

        for topic in fields.get("topic_data") or ():
            name = topic.get("name")
            parts: list = []
            topics.append({"name": name, "partition_responses": parts})
            for p in topic.get("partition_data") or ():
                index = p["index"]
                slot = len(parts)
                parts.append(None)
                if acks not in (0, 1, -1):
                    error, message = Error.INVALID_REQUIRED_ACKS, None
                elif not self.catalog.has_partition(name, index):
                    error, message = Error.UNKNOWN_TOPIC_OR_PARTITION, None
                else:
                    pending[0] += 1

                    def done(result, parts=parts, slot=slot, index=index) -> None:
                        parts[slot] = _produced(index, result.error, result.base_offset, result.log_start_offset,
                                                result.message)
                        finished()
                    self.log.append(name, index, p.get("records"), done)
                    continue
                parts[slot] = _produced(index, int(error), -1, -1, message)
        if acks == 0:
            conn.send(None)  # Kafka sends nothing back
        finished()

    # --- Fetch --------------------------------------------------------------------------------

    def _fetch_answer(self, version: int, fields: dict) -> tuple[dict, int, bool]:
        """(response fields, record bytes in it, whether a partition has an error)."""
        remaining = max(fields.get("max_bytes", 0x7FFFFFFF), 0)
        min_one = True
        size, errors = 0, False
        responses = []
        for topic in fields.get("topics") or ():
            if version >= 13:
                name = self.catalog.name_of(topic.get("topic_id"))
                unknown_topic = UNKNOWN_TOPIC_ID
            else:
                name = topic.get("topic")
                unknown_topic = int(Error.UNKNOWN_TOPIC_OR_PARTITION)
            parts = []
            for p in topic.get("partitions") or ():
                index = p["partition"]
                records, start, end = b"", -1, -1
                if name is None or self.catalog.partitions(name) is None:
                    error = unknown_topic
                elif not self.catalog.has_partition(name, index):
                    error = int(Error.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    error = _leader_epoch_error(p.get("current_leader_epoch"))
                    start, end = self.log.bounds(name, index)
                    if error == 0:
                        limit = min(max(p.get("partition_max_bytes", 0), 0), remaining)
                        error, records = self.log.read(name, index, p.get("fetch_offset", 0), limit, min_one)
                if records:
                    min_one = False
                    remaining = max(remaining - len(records), 0)
                    size += len(records)
                errors = errors or error != 0
                parts.append({"partition_index": index, "error_code": error, "high_watermark": end,
                              "last_stable_offset": end, "log_start_offset": start, "aborted_transactions": None,
                              "preferred_read_replica": -1, "records": records})
            responses.append({"topic": name or "", "topic_id": topic.get("topic_id"), "partitions": parts})
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}, size, errors

    def fetch(self, conn: Any, request: kc.DecodedRequest) -> None:
        fields = kc.to_fields(request.body)
        version = request.version
        session_id, epoch = fields.get("session_id", 0), fields.get("session_epoch", -1)
        if session_id != 0 or epoch > 0:  # no session was ever handed out
            code = 70 if session_id != 0 else 71  # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
            self.send(conn, request, {"throttle_time_ms": 0, "error_code": code, "session_id": 0, "responses": []})
            return
        answer, size, errors = self._fetch_answer(version, fields)
        wait_ms = min(max(fields.get("max_wait_ms", 0), 0), self.options.fetch_wait_cap_ms)
        if size >= fields.get("min_bytes", 1) or wait_ms == 0 or errors or self.closing:
            self.send(conn, request, answer)
            return
        keys = [(name, p["partition"]) for t in fields.get("topics") or ()
                if (name := self.catalog.name_of(t.get("topic_id")) if version >= 13 else t.get("topic")) is not None
                for p in t.get("partitions") or ()]
        held: dict = {}

        def encoded() -> bytes:
            held["unwatch"]()
            held["timer"].cancel()
            body = kc.response_body(request.api_key, version, self._fetch_answer(version, fields)[0])
            return kc.encode_response(request.api_key, version, request.correlation_id, body)

        def woken() -> None:
            if conn.fetch_data is not encoded:
                held["unwatch"]()
            elif self._fetch_answer(version, fields)[1] >= fields.get("min_bytes", 1):
                conn.finish_fetch()

        held["unwatch"] = self.log.watch(keys, woken)
        held["timer"] = self.waits.later(wait_ms, conn.finish_fetch)
        conn.hold_fetch(held["timer"], encoded)

    # --- ListOffsets --------------------------------------------------------------------------

    def list_offsets(self, conn: Any, request: kc.DecodedRequest) -> None:
        fields = kc.to_fields(request.body)
        topics = []
        for topic in fields.get("topics") or ():
            name = topic["name"]
            parts = []
            for p in topic.get("partitions") or ():
                index = p["partition_index"]
                found = (-1, -1)
                if not self.catalog.has_partition(name, index):
                    error = int(Error.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    error = _leader_epoch_error(p.get("current_leader_epoch"))
                if error == 0:
                    ts = p.get("timestamp", LATEST)
                    start, end = self.log.bounds(name, index)
                    if ts == LATEST:
                        found = (-1, end)
                    elif ts in (EARLIEST, EARLIEST_LOCAL):
                        found = (-1, start)
                    elif ts >= 0 or ts == MAX_TIMESTAMP:
                        found = self.log.offset_for_timestamp(name, index, ts) or (-1, -1)
                parts.append({"partition_index": index, "error_code": error, "timestamp": found[0],
                              "offset": found[1], "leader_epoch": LEADER_EPOCH if found[1] >= 0 else -1})
            topics.append({"name": name, "partitions": parts})
        self.send(conn, request, {"throttle_time_ms": 0, "topics": topics})

    # --- InitProducerId and the transactional APIs --------------------------------------------

    def init_producer_id(self, conn: Any, request: kc.DecodedRequest) -> None:
        fields = kc.to_fields(request.body)
        if fields.get("transactional_id") is not None:
            answer = {"error_code": int(Error.UNSUPPORTED_VERSION), "producer_id": -1, "producer_epoch": -1}
        else:
            pid, epoch = self.log.init_producer_id()
            answer = {"error_code": 0, "producer_id": pid, "producer_epoch": epoch}
        self.send(conn, request, {"throttle_time_ms": 0, **answer})

    def transactions(self, conn: Any, request: kc.DecodedRequest) -> None:
        fields = kc.to_fields(request.body)
        code = int(Error.UNSUPPORTED_VERSION)
        answer: dict = {"throttle_time_ms": 0, "error_code": code}
        if "v3_and_below_topics" in fields:  # AddPartitionsToTxn
            answer["results_by_topic_v3_and_below"] = [
                {"name": t["name"], "results_by_partition": [{"partition_index": p, "partition_error_code": code}
                                                             for p in t.get("partitions") or ()]}
                for t in fields.get("v3_and_below_topics") or ()]
        elif "topics" in fields:  # TxnOffsetCommit
            answer["topics"] = [{"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": code} for p in t.get("partitions") or ()]}
                for t in fields.get("topics") or ()]
        self.send(conn, request, answer)

    # --- topics -------------------------------------------------------------------------------

    def create_topics(self, conn: Any, request: kc.DecodedRequest) -> None:
        fields = kc.to_fields(request.body)
        out = []
        created = False
        seen: set = set()
        for topic in fields.get("topics") or ():
            name = topic["name"]
            error, message, count, retention = self._topic_to_create(topic, seen)
            seen.add(name)
            if error == 0 and not fields.get("validate_only"):
                self.catalog.topics[name] = count
                self.log.create_topic(name, count, retention)
                created = True
            out.append({"name": name, "topic_id": self.catalog.topic_id(name) if error == 0 else apis.ZERO_UUID,
                        "error_code": error, "error_message": message, "topic_config_error_code": 0,
                        "num_partitions": count if error == 0 else -1, "replication_factor": 1 if error == 0 else -1,
                        "configs": []})
        if created:
            self.topics_changed()
        self.send(conn, request, {"throttle_time_ms": 0, "topics": out})

    def _topic_to_create(self, topic: dict, seen: set) -> tuple[int, str | None, int, int | None]:
        """(error, message, partitions, retention.ms) as KafkaApis and the controller judge it."""
        name = topic["name"]
        count, factor = topic.get("num_partitions", -1), topic.get("replication_factor", -1)
        assignments = topic.get("assignments") or []
        if name in seen:
            return int(Error.INVALID_REQUEST), "Create topics request from client contains a duplicate topic", 0, None
        problem = apis.topic_name_problem(name)
        if problem:
            return int(Error.INVALID_TOPIC_EXCEPTION), f"Topic name {name!r} is invalid: {problem}", 0, None
        if name in self.catalog.topics:
            return int(Error.TOPIC_ALREADY_EXISTS), f"Topic '{name}' already exists.", 0, None
        if assignments:
            if count != -1 or factor != -1:
                return (int(Error.INVALID_REQUEST), "Both numPartitions or replicationFactor and replicasAssignments "
                        "were set. Both cannot be used at the same time.", 0, None)
            if any(a.get("broker_ids") != [0] and len(a.get("broker_ids") or ()) != 1 for a in assignments):
                return int(Error.INVALID_REPLICA_ASSIGNMENT), "this broker is the only one: one replica each", 0, None
            count, factor = len(assignments), 1
        if count == -1:
            count = self.default_partitions
        if count <= 0:
            return int(Error.INVALID_PARTITIONS), "Number of partitions was set to an invalid non-positive value.", 0, None
        if factor == -1:
            factor = 1
        if factor <= 0:
            return (int(Error.INVALID_REPLICATION_FACTOR), "Replication factor must be larger than 0, or -1 to use "
                    "the default value.", 0, None)
        if factor > 1:
            return (int(Error.INVALID_REPLICATION_FACTOR), f"Unable to replicate the partition {factor} time(s): The "
                    f"target replication factor of {factor} cannot be reached because only 1 broker(s) are "
                    "registered.", 0, None)
        retention = None
        for config in topic.get("configs") or ():
            key, value = config.get("name"), config.get("value")
            if key not in TOPIC_CONFIGS:
                return int(Error.INVALID_CONFIG), f"Unknown topic config name: {key}", 0, None
            if key == "retention.ms":
                try:
                    retention = int(value)
                except (TypeError, ValueError):
                    retention = None
                if retention is None or retention < -1:
                    return (int(Error.INVALID_CONFIG), f"Invalid value {value} for configuration retention.ms",
                            0, None)
        return 0, None, count, retention

    def delete_topics(self, conn: Any, request: kc.DecodedRequest) -> None:
        fields = kc.to_fields(request.body)
        wanted = [(name, None) for name in fields.get("topic_names") or ()]
        wanted += [(t.get("name"), t.get("topic_id")) for t in fields.get("topics") or ()]
        out = []
        for name, topic_id in wanted:
            if name is None:
                name = self.catalog.name_of(topic_id)
                if name is None:
                    out.append({"name": None, "topic_id": topic_id, "error_code": UNKNOWN_TOPIC_ID,
                                "error_message": None})
                    continue
            if name not in self.catalog.topics:
                out.append({"name": name, "topic_id": apis.ZERO_UUID,
                            "error_code": int(Error.UNKNOWN_TOPIC_OR_PARTITION), "error_message": None})
                continue
            topic_id = self.catalog.topic_id(name)
            del self.catalog.topics[name]
            self.log.delete_topic(name)
            out.append({"name": name, "topic_id": topic_id, "error_code": 0, "error_message": None})
        self.topics_changed()
        self.send(conn, request, {"throttle_time_ms": 0, "responses": out})

    def delete_records(self, conn: Any, request: kc.DecodedRequest) -> None:
        fields = kc.to_fields(request.body)
        topics: list = []
        pending = [1]

        def finished() -> None:
            pending[0] -= 1
            if pending[0] == 0:
                self.send(conn, request, {"throttle_time_ms": 0, "topics": topics})

        for topic in fields.get("topics") or ():
            name = topic["name"]
            parts: list = []
            topics.append({"name": name, "partitions": parts})
            for p in topic.get("partitions") or ():
                index = p["partition_index"]
                entry = {"partition_index": index, "low_watermark": -1,
                         "error_code": int(Error.UNKNOWN_TOPIC_OR_PARTITION)}
                parts.append(entry)
                if self.catalog.has_partition(name, index):
                    pending[0] += 1

                    def done(error: int, low: int, entry=entry) -> None:
                        entry.update(error_code=error, low_watermark=low)
                        finished()
                    self.log.delete_records(name, index, p["offset"], done)
        finished()


def _produced(index: int, error: int, base_offset: int, log_start: int, message: str | None) -> dict:
    return {"index": index, "error_code": error, "base_offset": base_offset, "log_append_time": -1,
            "log_start_offset": log_start, "record_errors": [], "error_message": message}
