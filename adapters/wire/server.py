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
from typing import Any

import attrs

from groupcoord.adapters.replay.trace_files import InstanceRecorder
from groupcoord.core import events as ev
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.errors import Error

from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.wire.clock import ManualClock, RealClock
from groupcoord.adapters.wire.core_loop import CoreLoop
from groupcoord.adapters.wire.handlers import RequestHandler
from groupcoord.adapters.wire.log import Log, NullLog
from groupcoord.adapters.wire.options import ServerOptions
from groupcoord.adapters.wire.pipeline import StoragePipeline
from groupcoord.adapters.wire.replies import Replies
from groupcoord.adapters.storage.interface import StorageOpenError
from groupcoord.adapters.storage.interface import Storage
from groupcoord.adapters.storage.memory import MemoryStorage

_PAUSE_ABOVE = 1 << 20  # buffered bytes of later requests before reading pauses


# --- the server -----------------------------------------------------------------------------------

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
        self.replies: Replies | None = None  # the units, made by start()
        self.pipeline: StoragePipeline | None = None
        self.core: CoreLoop | None = None
        self.handler: RequestHandler | None = None
        self.connections: dict[int, _Connection] = {}
        self.finished: dict[tuple, _Connection] = {}  # closed connections by peer (track_requests)
        self._next_conn = 0
        self._tcp: asyncio.base_events.Server | None = None
        self._trace: InstanceRecorder | None = None
        self._trace_flusher: asyncio.TimerHandle | None = None
        self._closing = False
        self._stopped: asyncio.Event | None = None  # created in start()
        self.stats = {"requests": 0, "connections": 0}

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
        self.replies = Replies(self.log)
        self.pipeline = StoragePipeline(self.storage, self.clock, self.log)
        self.core = CoreLoop(self._config, self.clock, self.log, self.pipeline, self.replies.respond, self._trace)
        self.handler = RequestHandler(self.core, self.replies, self.catalog, self.options, self.log, self.ownership)
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
            await self.ownership.start(self, self.handler.node())
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
        self.core.closing = self.handler.closing = True
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
        self.replies.abandon_all()
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
        self.handler.connection_lost(conn)


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
                server.stats["requests"] += 1
                server.handler.handle_frame(self, frame)
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
