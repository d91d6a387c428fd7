"""The Kafka wire server: one asyncio process owning one ``Coordinator``.

* **Connections** (``_Connection``, an ``asyncio.Protocol``): frames are cut by their size
  prefix (over ``socket.request.max.bytes`` or negative: the connection is closed, as Kafka
  does), decoded by kio (``kafka_codec``) and handled **one at a time per connection**: like
  Kafka, which mutes a channel until its request is answered, the next request on a
  connection is only read once the previous one has been answered. So responses go out in
  request order, and a parked JoinGroup/SyncGroup holds only its own connection.
* **The coordinator**: group and offset APIs become core events (``core.wire.request_event``;
  request ids are ``(connection id, correlation id)``); its commands are carried out in
  order: ``Respond`` encodes the answer for the request's version and sends it, ``Write`` goes
  to the storage (``adapters.storage``; outcomes fed back in write order), timer commands go to a
  ``TimerTable`` driven by one alarm on the clock.
* **Broker APIs** around it (``broker_apis``): ApiVersions, Metadata (a topic catalog from
  configuration, this server as the only broker), ListOffsets/Fetch on empty logs, Produce
  refused, KafkaApis' unknown-topic checks for OffsetCommit/OffsetDelete.
* **Clock**: ``RealClock`` (wall-clock milliseconds, never going backwards, alarms on the event
  loop) or ``ManualClock`` (tests: time moves only by ``advance``).
* **Shutdown**: every owned partition is unloaded (the core answers parked requests
  NOT_COORDINATOR, as Kafka does when a coordinator goes away), responses are flushed,
  connections closed.
* **Trace**: with ``trace`` set, every event and command is recorded in trace format v1
  (``core.trace``) as JSON lines. The recorder only observes.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import traceback
from typing import Any

import attrs

from groupcoord.adapters.replay.trace_files import InstanceRecorder
from groupcoord.core import events as ev
from groupcoord.core.commands import Coordinator as CoordinatorEndpoint
from groupcoord.core.commands import FindCoordinatorResponse, HeartbeatResponse, OffsetCommitResponse
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.errors import Error
from groupcoord.adapters.protocol.schema import SchemaError
from groupcoord.adapters.protocol.translate import request_event, response_fields

from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.wire.clock import ManualClock, RealClock
from groupcoord.adapters.wire.core_loop import CoreFailure, CoreLoop
from groupcoord.adapters.wire.log import Log, NullLog
from groupcoord.adapters.wire.options import ServerOptions
from groupcoord.adapters.wire.pipeline import StoragePipeline
from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.storage.interface import StorageOpenError
from groupcoord.adapters.storage.interface import Storage
from groupcoord.adapters.storage.memory import MemoryStorage

_PAUSE_ABOVE = 1 << 20  # buffered bytes of later requests before reading pauses

_CORE_APIS = {kc.API_KEYS[name]: name for name in
              ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch",
               "DescribeGroups", "ListGroups", "DeleteGroups", "OffsetDelete", "FindCoordinator")}
# Responses whose encoding is worth caching (the same value answers many requests).
_CACHEABLE = (HeartbeatResponse, OffsetCommitResponse)


# --- the server -----------------------------------------------------------------------------------

@attrs.define(slots=True)
class _Pending:
    conn: "_Connection"
    api_key: int
    api: str
    version: int
    correlation_id: int
    extra: Any = None


async def _someone_listens(host: str, port: int) -> bool:
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host or "127.0.0.1", port), 1)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True


def listen_problem(host: str, port: int) -> str | None:
    """Why the server could not listen on ``host``:``port`` (a name that does not resolve, an
    address this machine does not have, a port another server listens on), or None: checked
    before anything is opened, the way ``start`` binds (every address of the name,
    SO_REUSEADDR). A port held only by connections of a previous process passes (``start``
    retries it); the bind itself can still fail later (the port taken meanwhile)."""
    try:
        addresses = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        return f"--host {host}: {getattr(e, 'strerror', None) or e}"
    for family, kind, proto, _name, address in addresses:
        try:
            s = socket.socket(family, kind, proto)
        except OSError:  # e.g. no IPv6 on this machine: asyncio skips such an address too
            continue
        with s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                s.bind(address)
            except OSError as e:
                if e.errno == errno.EADDRINUSE and port and not _listens_at(address, family):
                    continue
                shown = f"[{address[0]}]" if family == socket.AF_INET6 else address[0]
                return f"cannot listen on {shown}:{port}: {e.strerror or e}"
    return None


def _listens_at(address: tuple, family: int) -> bool:
    """A server accepts connections at ``address`` (the wildcard address: on this machine)."""
    target = ("::1" if family == socket.AF_INET6 else "127.0.0.1") if address[0] in ("0.0.0.0", "::") else address[0]
    try:
        with socket.create_connection((target, address[1]), timeout=1):
            return True
    except OSError:
        return False


class GroupServer:
    """A Kafka-protocol server around one ``Coordinator``. ``await start()``, then
    ``await shutdown()``; ``port`` is the bound port (``ServerOptions(port=0)``: a free one)."""

    def __init__(self, config: CoordinatorConfig | None = None, catalog: apis.TopicCatalog | None = None, *,
                 options: ServerOptions | None = None, storage: Storage | None = None,
                 clock: RealClock | ManualClock | None = None, log: Log | None = None, ownership: Any = None) -> None:
        self._config = config or CoordinatorConfig()  # the core loop's once started
        self.catalog = catalog or apis.TopicCatalog()
        self.options = options = options or ServerOptions()
        self.host = options.host
        self.port = options.port
        self.storage: Storage = storage if storage is not None else MemoryStorage()
        self.clock = clock
        self.trace_path = options.trace
        self.log = log or NullLog()
        self.max_request_bytes = options.max_request_bytes
        self.advertise_bound_port = options.advertise_bound_port
        self.fetch_wait_cap_ms = options.fetch_wait_cap_ms
        self.track_requests = options.track_requests
        # Several servers sharing a broker-backed storage: which partitions this one owns is
        # agreed by ``ownership`` (adapters/wire/ownership.py); None = this server owns them all.
        self.ownership = ownership
        self.node_id_from_port = options.node_id_from_port
        self.bind_retry_s = options.bind_retry_s
        self._loads: dict[int, asyncio.Task] = {}
        self._new_uuid = options.new_uuid
        self._loop: asyncio.AbstractEventLoop | None = None  # set by start()
        self.served = apis.served_versions()
        self.pipeline: StoragePipeline | None = None  # the units, made by start()
        self.core: CoreLoop | None = None
        self.connections: dict[int, _Connection] = {}
        self.finished: dict[tuple, _Connection] = {}  # closed connections by peer (track_requests)
        self._pending: dict[tuple, _Pending] = {}
        self._next_conn = 0
        self._tcp: asyncio.base_events.Server | None = None
        self._trace: InstanceRecorder | None = None
        self._trace_flusher: asyncio.TimerHandle | None = None
        self._encoded: dict[tuple, bytes] = {}  # encoded bodies of frequent, repeated responses
        self._closing = False
        self._stopped: asyncio.Event | None = None  # created in start()
        self.stats = {"requests": 0, "connections": 0}
        self._handlers = {
            apis.API_VERSIONS_KEY: self._api_versions, kc.API_KEYS["Metadata"]: self._metadata,
            kc.API_KEYS["ListOffsets"]: self._list_offsets, kc.API_KEYS["Fetch"]: self._fetch,
            kc.API_KEYS["Produce"]: self._produce,
            **{key: self._core_request for key in _CORE_APIS},
        }

    # --- life cycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stopped = asyncio.Event()
        if self.clock is None:
            self.clock = RealClock(loop)
        self._tcp = await self._bind(loop)
        self.port = self._tcp.sockets[0].getsockname()[1]
        if self.advertise_bound_port and self._config.advertised_port != self.port:
            self._config = attrs.evolve(self._config, advertised_port=self.port)
        if self.node_id_from_port:
            self._config = attrs.evolve(self._config, node_id=self._config.advertised_port)
        opener = getattr(self.storage, "open", None)
        if opener is not None:  # a storage that connects somewhere (the broker-backed one)
            try:
                await opener()
            except BaseException:
                self._tcp.close()
                raise
        if self.trace_path:
            self._trace = InstanceRecorder(self.trace_path, f"trace-{self.clock.now_ms()}.jsonl", self.config)
            self._schedule_trace_flush()
        self.pipeline = StoragePipeline(self.storage, self.clock, self.log)
        self.core = CoreLoop(self._config, self.clock, self.log, self.pipeline, self._respond, self._trace)
        self.core.start()
        if self.ownership is None:  # else partitions are loaded as the ownership protocol assigns them
            await self._load_all()
        await self._tcp.start_serving()
        self.log("info", "listening", host=self.host, port=self.port, node_id=self.config.node_id,
                 advertised=f"{self.config.advertised_host}:{self.config.advertised_port}",
                 storage=self.storage.name, durable=self.storage.durable,
                 data=str(getattr(self.storage, "path", "")) or None,
                 offsets_partitions=self.config.offsets_topic_num_partitions,
                 topics=("*" if self.catalog.open else dict(self.catalog.topics)),
                 trace=self._trace and str(self._trace.path))
        if self.ownership is not None:
            await self.ownership.start(self, self._node())
        if not self.storage.durable:
            self.log("warning", "storage_not_durable", storage=self.storage.name,
                     detail="groups and committed offsets are kept in memory only and are lost when the server stops")

    async def _bind(self, loop: asyncio.AbstractEventLoop) -> asyncio.base_events.Server:
        """Bind the listener. After a crash, connections of the previous process can linger on
        the port (orphaned sockets in FIN-WAIT, which SO_REUSEADDR does not cover) and refuse
        the bind for a while: when nothing listens on the port, keep trying for up to
        ``bind_retry_s``. A port another server listens on fails at once."""
        deadline = loop.time() + self.bind_retry_s
        warned = False
        while True:
            try:
                return await loop.create_server(lambda: _Connection(self), self.host, self.port,
                                                reuse_address=True, backlog=1024, start_serving=False)
            except OSError as e:
                if e.errno != errno.EADDRINUSE or not self.port or loop.time() > deadline \
                        or await _someone_listens(self.host, self.port):
                    raise
                if not warned:
                    warned = True
                    self.log("warning", "port_busy_retrying", host=self.host, port=self.port,
                             detail="connections of a previous process still hold the port; nothing listens on it")
                await asyncio.sleep(0.1)  # retry interval

    @property
    def config(self) -> CoordinatorConfig:
        """The coordinator's configuration (the core loop's once started: a reload may replace it)."""
        return self.core.config if self.core is not None else self._config

    async def _load_all(self) -> None:
        for partition in range(self.config.offsets_topic_num_partitions):
            records = await self.storage.load(partition)
            self.core.dispatch(ev.LoadPartition(now_ms=self.clock.now_ms(), partition=partition, records=tuple(records)))
        self.log("info", "partitions_loaded", count=self.config.offsets_topic_num_partitions,
                 groups=len(self.core.coordinator.groups()))

    async def shutdown(self, reason: str = "requested") -> None:
        """Unload every partition (parked requests are answered NOT_COORDINATOR), flush the
        responses, close the connections and the storage."""
        if self._closing:
            await self._stopped.wait()
            return
        self._closing = True
        self.core.closing = True
        self.log("info", "shutting_down", reason=reason, connections=len(self.connections))
        if self._tcp is not None:
            self._tcp.close()
        if self.ownership is not None:
            try:  # hand the partitions over: unload them, wait for their writes, leave the group
                await self.ownership.stop()
            except Exception as e:
                self.log("error", "ownership_stop_failed", error=f"{type(e).__name__}: {e}")
        for task in self._loads.values():
            task.cancel()
        self._loads.clear()
        self.core.unload_owned()
        self.core.cancel_alarm()
        for conn in list(self.connections.values()):
            conn.finish_fetch()  # a held Fetch is answered now
        for conn in list(self.connections.values()):
            conn.close()
        deadline = self._loop.time() + 5
        while self.connections and self._loop.time() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections.values()):
            conn.abort()
        if self._trace is not None:
            if self._trace_flusher is not None:
                self._trace_flusher.cancel()
            self._trace.close()
        await self.storage.close()
        self.log("info", "stopped", requests=self.stats["requests"], connections=self.stats["connections"])
        self._stopped.set()

    def request_status(self, peer: tuple, correlation_id: int) -> str:
        """Tests (``track_requests``): "answered", "pending", "closed" (the server closed the
        connection on it) or "unknown" (not received yet) for a request from ``peer``."""
        for conn in list(self.connections.values()) + [self.finished.get(peer)]:
            if conn is not None and conn.peer == peer:
                if correlation_id in conn.answered:
                    return "answered"
                if correlation_id in conn.received or conn.closed:
                    return "closed" if conn.closed else "pending"
                return "unknown"
        return "unknown"

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    # --- test controls (manual clock, storage, failover) ---------------------------------------

    def advance(self, ms: int) -> None:
        """Manual clock only: move time by ``ms`` and fire every due timer in Kafka's order."""
        if not self.clock.manual:
            raise RuntimeError("advance needs a ManualClock")
        if ms < 0:
            raise ValueError("time cannot go backwards")
        self.clock.set(self.clock.now_ms() + ms)
        self.core.fire_due()

    def hold_writes(self) -> None:
        self.storage.hold()

    def fail_next_write(self, error: Error) -> None:
        self.storage.fail_next(error)

    def release_writes(self, error: Error | None = None) -> None:
        self.storage.release(error)
        self.core.drain_writes()
        self.core.set_alarm()

    def unload_all(self) -> None:
        self.core.unload_owned()

    async def reload(self, config: CoordinatorConfig | None = None) -> None:
        """A new coordinator instance takes over from storage; requests parked in the old one
        are never answered (their connections stay waiting), in-flight writes are forgotten."""
        self.pipeline.forget()
        for rid, pending in list(self._pending.items()):
            pending.conn.abandoned = True
        self._pending.clear()
        self.core.cancel_alarm()
        self.core.start(config)
        await self._load_all()

    # --- partitions assigned by the ownership protocol ----------------------------------------

    def assign_partitions(self, partitions: set[int]) -> None:
        """Start serving ``partitions``: each is marked loading at once (requests get
        COORDINATOR_LOAD_IN_PROGRESS), read from storage in the background, then activated."""
        for partition in sorted(partitions):
            if partition in self._loads or self._closing:
                continue
            self.core.dispatch(ev.LoadPartition(now_ms=self.clock.now_ms(), partition=partition, loading=True))
            self._loads[partition] = self._loop.create_task(self._load_partition(partition))

    async def _load_partition(self, partition: int) -> None:
        backoff = 0.05
        started = self._loop.time()
        self.log("info", "partition_loading", partition=partition)
        try:
            while True:
                try:
                    records = await self.storage.load(partition)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # the broker is away: keep trying while the partition is ours
                    # (unreadable records: an error, and the partition stays loading; nothing is dropped)
                    self.log("error" if isinstance(e, StorageOpenError) else "warning", "partition_load_retry",
                             partition=partition, error=f"{type(e).__name__}: {e}", backoff_s=backoff)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
            if self._loads.get(partition) is not asyncio.current_task() or self._closing:
                return
            self.core.dispatch(ev.LoadPartition(now_ms=self.clock.now_ms(), partition=partition, records=tuple(records)))
            self.log("info", "partition_loaded", partition=partition, records=len(records),
                     groups=sum(1 for g in self.core.coordinator.groups().values() if g.partition == partition),
                     ms=round((self._loop.time() - started) * 1000))
        finally:
            if self._loads.get(partition) is asyncio.current_task():
                del self._loads[partition]

    async def revoke_partitions(self, partitions: set[int]) -> None:
        """Stop serving ``partitions`` (parked requests are answered NOT_COORDINATOR) and wait
        until every write already sent for them has its answer, so that the next owner's
        load sees them."""
        self.unload_partitions(partitions)
        flush = getattr(self.storage, "flush", None)
        if flush is not None:
            if not await flush(set(partitions)):
                self.log("warning", "revoke_flush_timeout", partitions=sorted(partitions))
        self.log("info", "partitions_revoked", partitions=sorted(partitions))

    def unload_partitions(self, partitions: set[int]) -> None:
        for partition in sorted(partitions):
            task = self._loads.pop(partition, None)
            if task is not None:
                task.cancel()
            if self.core.coordinator is not None and partition in self.core.coordinator.owned_partitions():
                self.core.dispatch(ev.UnloadPartition(now_ms=self.clock.now_ms(), partition=partition))

    def fence(self, reason: str) -> None:
        """Ownership is lost (the lease ran out, the broker forgot this member): unload everything now."""
        owned = set(self.core.coordinator.owned_partitions()) | set(self._loads) if self.core.coordinator else set(self._loads)
        self.log("warning", "fenced", reason=reason, partitions=sorted(owned))
        self.unload_partitions(owned)

    # --- carrying out the core's commands ------------------------------------------------------

    def _respond(self, request_id: Any, response: Any) -> None:
        pending = self._pending.pop(request_id, None)
        if pending is None:
            return  # its connection is gone (or the instance that parked it was replaced)
        conn = pending.conn
        try:
            data = self._encode_core(pending, response)
        except Exception as e:
            self.log("error", "encode_error", api=pending.api, version=pending.version, conn=conn.id,
                     error=f"{type(e).__name__}: {e}", response=repr(response)[:2000])
            conn.close()
            return
        conn.send(data)

    def _encode_core(self, p: _Pending, response: Any) -> bytes:
        cacheable = not p.extra and type(response) in _CACHEABLE
        if cacheable:
            key = (p.api_key, p.version, response)
            body = self._encoded.get(key)
            if body is None:
                if len(self._encoded) > 4096:
                    self._encoded.clear()
                body = self._encoded[key] = kc.encode_response_body(
                    p.api_key, p.version, kc.response_body(p.api_key, p.version,
                                                           response_fields(p.api, p.version, response)))
            return kc.frame_response(p.api_key, p.version, p.correlation_id, body)
        fields = response_fields(p.api, p.version, response)
        if p.api == "OffsetCommit" and p.extra:
            fields["topics"] = apis.merge_topic_results(p.extra, fields["topics"])
        elif p.api == "OffsetDelete":
            fields["topics"] = ([] if fields["error_code"] else
                                apis.merge_topic_results(p.extra or [], fields["topics"]))
        elif p.api == "DescribeGroups" and p.extra:
            for group in fields["groups"]:
                if group["error_code"] == 0:
                    group["authorized_operations"] = apis.GROUP_OPERATIONS
        body = kc.response_body(p.api_key, p.version, fields)
        return kc.encode_response(p.api_key, p.version, p.correlation_id, body)

    # --- timers ------------------------------------------------------------------------------------

    def _schedule_trace_flush(self) -> None:
        def flush() -> None:
            if self._trace is not None:
                self._trace.flush()
                self._trace_flusher = self._loop.call_later(0.5, flush)
        self._trace_flusher = self._loop.call_later(0.5, flush)

    # --- requests ------------------------------------------------------------------------------------

    def _new_connection(self, conn: "_Connection") -> int:
        self._next_conn += 1
        self.connections[self._next_conn] = conn
        self.stats["connections"] += 1
        return self._next_conn

    def _connection_lost(self, conn: "_Connection") -> None:
        self.connections.pop(conn.id, None)
        if self.track_requests:
            self.finished[conn.peer] = conn
        if conn.pending_rid is not None:
            self._pending.pop(conn.pending_rid, None)
            conn.pending_rid = None

    def handle_frame(self, conn: "_Connection", frame: bytes) -> None:
        """One request frame (size prefix stripped); the answer goes to ``conn.send``."""
        self.stats["requests"] += 1
        conn.correlation_id = int.from_bytes(frame[4:8], "big", signed=True) if len(frame) >= 8 else None
        try:
            request = kc.decode_request(frame)
        except kc.UnsupportedRequest as e:
            if e.api_key == apis.API_VERSIONS_KEY:
                self._api_versions_unsupported(conn, e.correlation_id)
            else:
                self.log("warning", "unsupported_request", conn=conn.id, peer=conn.peer_text, api_key=e.api_key,
                         version=e.version, client_id=e.client_id, action="close")
                conn.close()
            return
        except kc.FrameError as e:
            self.log("warning", "bad_frame", conn=conn.id, peer=conn.peer_text, error=str(e), action="close")
            conn.close()
            return
        if self.log.threshold <= 10:
            self.log("debug", "request", conn=conn.id, api_key=request.api_key, version=request.version,
                     correlation_id=request.correlation_id, client_id=request.client_id)
        versions = self.served.get(request.api_key)
        if versions is None or not versions[0] <= request.version <= versions[1]:
            if request.api_key == apis.API_VERSIONS_KEY:
                self._api_versions_unsupported(conn, request.correlation_id)
            else:  # Kafka: "api key .. with version .. which is not enabled" -> close
                self.log("warning", "unsupported_request", conn=conn.id, peer=conn.peer_text,
                         api_key=request.api_key, version=request.version, client_id=request.client_id,
                         action="close")
                conn.close()
            return
        try:
            self._handlers[request.api_key](conn, request)
        except CoreFailure:
            conn.close()
        except Exception as e:
            self.log("error", "request_error", conn=conn.id, peer=conn.peer_text, api_key=request.api_key,
                     version=request.version, error=f"{type(e).__name__}: {e}",
                     traceback=traceback.format_exc()[-4000:], action="close")
            conn.close()

    def _send_fields(self, conn: "_Connection", request: kc.DecodedRequest, fields: dict) -> None:
        body = kc.response_body(request.api_key, request.version, fields)
        conn.send(kc.encode_response(request.api_key, request.version, request.correlation_id, body))

    def _api_versions_unsupported(self, conn: "_Connection", correlation_id: int) -> None:
        body = kc.response_body(apis.API_VERSIONS_KEY, 0, apis.api_versions_unsupported())
        conn.send(kc.encode_response(apis.API_VERSIONS_KEY, 0, correlation_id, body))

    def _api_versions(self, conn: "_Connection", request: kc.DecodedRequest) -> None:
        self._send_fields(conn, request, apis.api_versions(request.version, kc.to_fields(request.body), self.served))

    def _node(self) -> apis.Node:
        return apis.Node(self.config.node_id, self.config.advertised_host, self.config.advertised_port)

    def _metadata(self, conn: "_Connection", request: kc.DecodedRequest) -> None:
        fields = apis.metadata(request.version, kc.to_fields(request.body), self.catalog, self._node())
        if self.ownership is not None and fields.get("brokers"):
            # every coordinator sharing the storage is a broker of this cluster (ListGroups asks them all)
            fields["brokers"] = [{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": None}
                                 for n in self.ownership.peers()]
        self._send_fields(conn, request, fields)

    def _list_offsets(self, conn: "_Connection", request: kc.DecodedRequest) -> None:
        self._send_fields(conn, request, apis.list_offsets(request.version, kc.to_fields(request.body), self.catalog))

    def _produce(self, conn: "_Connection", request: kc.DecodedRequest) -> None:
        fields = apis.produce(request.version, kc.to_fields(request.body), self.catalog)
        if fields is None:
            conn.send(None)  # acks=0: no response
        else:
            self._send_fields(conn, request, fields)

    def _fetch(self, conn: "_Connection", request: kc.DecodedRequest) -> None:
        fields = kc.to_fields(request.body)
        response = apis.fetch(request.version, fields, self.catalog)
        body = kc.response_body(request.api_key, request.version, response)
        data = kc.encode_response(request.api_key, request.version, request.correlation_id, body)
        wait_ms = min(max(fields.get("max_wait_ms", 0), 0), self.fetch_wait_cap_ms)
        if wait_ms == 0 or self._closing:
            conn.send(data)
        else:
            conn.hold_fetch(self._loop.call_later(wait_ms / 1000, conn.finish_fetch), data)

    def _core_request(self, conn: "_Connection", request: kc.DecodedRequest) -> None:
        api = _CORE_APIS[request.api_key]
        fields = kc.to_fields(request.body)
        extra = None
        if api == "OffsetCommit":
            known, rejected = apis.split_known_partitions(fields["topics"], self.catalog, "partition_index")
            if not known:  # KafkaApis answers without the coordinator
                self._send_fields(conn, request, {"throttle_time_ms": 0, "topics": rejected})
                return
            fields["topics"], extra = known, rejected
        elif api == "OffsetDelete":
            fields["topics"], extra = apis.split_known_partitions(fields["topics"], self.catalog, "partition_index")
        elif api == "DescribeGroups":
            extra = fields.get("include_authorized_operations", False)
        rid = (conn.id, request.correlation_id)
        try:
            if api == "Heartbeat":  # the hot path: kio's fields are already complete and typed
                event = heartbeat_event(fields, request.version, rid, self.clock.now_ms(),
                                        request.client_id or "", conn.client_host)
            else:
                event = request_event(api, request.version, fields, request_id=rid, now_ms=self.clock.now_ms(),
                                      client_id=request.client_id or "", client_host=conn.client_host,
                                      new_member_uuid=self._new_uuid() if api == "JoinGroup" else "")
        except SchemaError as e:
            self.log("warning", "bad_request", conn=conn.id, peer=conn.peer_text, api=api, version=request.version,
                     error=str(e), action="close")
            conn.close()
            return
        self._pending[rid] = _Pending(conn, request.api_key, api, request.version, request.correlation_id, extra)
        conn.pending_rid = rid
        if api == "FindCoordinator" and self.ownership is not None:
            self._respond(rid, self._find_coordinator(event))
            return
        self.core.dispatch(event)

    def _find_coordinator(self, event: ev.FindCoordinator) -> FindCoordinatorResponse:
        """Several coordinators: the owner of the group's partition, wherever it is (Kafka's
        KafkaApis answers from the partition leaders; the core knows only itself, D7)."""
        out = []
        for key in event.coordinator_keys:
            node = None
            error = Error.INVALID_REQUEST
            if event.key_type == 0:
                node = self.ownership.owner_of(self.core.coordinator.partition_of(key))
                error = Error.NONE if node is not None else Error.COORDINATOR_NOT_AVAILABLE
            if node is None:
                out.append(CoordinatorEndpoint(key, -1, "", -1, error))
            else:
                out.append(CoordinatorEndpoint(key, node.node_id, node.host, node.port, Error.NONE))
        return FindCoordinatorResponse(tuple(out))


def heartbeat_event(fields: dict, version: int, request_id: Any, now_ms: int, client_id: str,
                    client_host: str) -> ev.Heartbeat:
    """``wire.request_event("Heartbeat", ...)`` for a body kio decoded (every field of the
    version present and typed), without re-validating it: Heartbeat is most of the traffic.
    tests/wire/test_server_wire.py checks it equals request_event at every version."""
    return ev.Heartbeat(request_id=request_id, now_ms=now_ms, version=version, client_id=client_id,
                        client_host=client_host, group_id=fields["group_id"], generation_id=fields["generation_id"],
                        member_id=fields["member_id"], group_instance_id=fields.get("group_instance_id"))


class _Connection(asyncio.Protocol):
    """One client connection: frames in, one request at a time, responses in order."""

    def __init__(self, server: GroupServer) -> None:
        self.server = server
        self.buf = bytearray()
        self.busy = False
        self.closed = False
        self.in_pump = False
        self.paused = False
        self.abandoned = False
        self.pending_rid: tuple | None = None
        self.correlation_id: int | None = None
        self.fetch_timer: asyncio.TimerHandle | None = None
        self.fetch_data: bytes | None = None
        self.received: list[int] = []   # correlation ids, when the server tracks requests
        self.answered: list[int] = []
        self.transport: asyncio.Transport | None = None
        self.id = 0
        self.peer: tuple = ("?", 0)
        self.peer_text = "?"
        self.client_host = "/?"

    # asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.peer = tuple(peer[:2])
        self.peer_text = f"{peer[0]}:{peer[1]}"
        self.client_host = "/" + str(peer[0])
        self.id = self.server._new_connection(self)
        if self.server.log.threshold <= 10:
            self.server.log("debug", "connection_open", conn=self.id, peer=self.peer_text)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._pump()

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.fetch_timer is not None:
            self.fetch_timer.cancel()
            self.fetch_timer = self.fetch_data = None
        self.server._connection_lost(self)
        if self.server.log.threshold <= 10:
            self.server.log("debug", "connection_closed", conn=self.id, peer=self.peer_text,
                            parked=self.busy, error=str(exc) if exc else None)

    # requests
    def _pump(self) -> None:
        if self.in_pump or self.closed:
            return
        self.in_pump = True
        try:
            buf = self.buf
            server = self.server
            while not self.busy and not self.closed and len(buf) >= 4:
                size = int.from_bytes(buf[:4], "big", signed=True)
                if size < 0 or size > server.max_request_bytes:
                    server.log("warning", "bad_frame", conn=self.id, peer=self.peer_text, size=size,
                               limit=server.max_request_bytes, error="frame size out of range", action="close")
                    self.close()
                    break
                if len(buf) < 4 + size:
                    break
                frame = bytes(buf[4:4 + size])
                del buf[:4 + size]
                self.busy = True
                server.handle_frame(self, frame)
                if server.track_requests and self.correlation_id is not None:
                    self.received.append(self.correlation_id)
            if not self.closed:
                if self.busy and len(buf) > _PAUSE_ABOVE and not self.paused:
                    self.paused = True
                    self.transport.pause_reading()
                elif self.paused and not (self.busy and len(buf) > _PAUSE_ABOVE):
                    self.paused = False
                    self.transport.resume_reading()
        finally:
            self.in_pump = False

    def send(self, data: bytes | None) -> None:
        """The answer to the current request (None: a request Kafka does not answer)."""
        if not self.closed and data is not None:
            self.transport.write(data)
            if self.server.log.threshold <= 10:
                self.server.log("debug", "response", conn=self.id, correlation_id=self.correlation_id, size=len(data))
        if self.server.track_requests and self.correlation_id is not None:
            self.answered.append(self.correlation_id)
        self.busy = False
        self.pending_rid = None
        if not self.in_pump and len(self.buf) >= 4 and not self.closed:
            # Never handle the next request from inside another event's command loop.
            self.server._loop.call_soon(self._pump)

    def hold_fetch(self, timer: asyncio.TimerHandle, data: bytes) -> None:
        self.fetch_timer, self.fetch_data = timer, data

    def finish_fetch(self) -> None:
        if self.fetch_data is None:
            return
        data, self.fetch_data = self.fetch_data, None
        if self.fetch_timer is not None:
            self.fetch_timer.cancel()
            self.fetch_timer = None
        self.send(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
