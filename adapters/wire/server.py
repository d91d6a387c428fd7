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
from typing import Any

import attrs

from groupcoord.adapters.replay.trace_files import InstanceRecorder
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.errors import Error

from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.wire.clock import ManualClock, RealClock
from groupcoord.adapters.wire.core_loop import CoreLoop
from groupcoord.adapters.wire.handlers import RequestHandler
from groupcoord.adapters.wire.listener import Listener
from groupcoord.adapters.wire.log import Log, NullLog
from groupcoord.adapters.wire.options import ServerOptions
from groupcoord.adapters.wire.partitions import Partitions
from groupcoord.adapters.wire.pipeline import StoragePipeline
from groupcoord.adapters.wire.replies import Replies
from groupcoord.adapters.storage.interface import Storage
from groupcoord.adapters.storage.memory import MemoryStorage

# --- the server -----------------------------------------------------------------------------------

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
        self.advertise_bound_port = options.advertise_bound_port
        # Several servers sharing a broker-backed storage: which partitions this one owns is
        # agreed by ``ownership`` (adapters/wire/ownership.py); None = this server owns them all.
        self.ownership = ownership
        self.node_id_from_port = options.node_id_from_port
        self._loop: asyncio.AbstractEventLoop | None = None  # set by start()
        self.listener: Listener | None = None  # the units, made by start()
        self.replies: Replies | None = None
        self.pipeline: StoragePipeline | None = None
        self.core: CoreLoop | None = None
        self.handler: RequestHandler | None = None
        self.partitions: Partitions | None = None
        self._trace: InstanceRecorder | None = None
        self._trace_flusher: asyncio.TimerHandle | None = None
        self._closing = False
        self._stopped: asyncio.Event | None = None  # created in start()

    # --- life cycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stopped = asyncio.Event()
        if self.clock is None:
            self.clock = RealClock(loop)
        self.listener = Listener(self.options, self.log)
        self.port = await self.listener.bind()
        if self.advertise_bound_port and self._config.advertised_port != self.port:
            self._config = attrs.evolve(self._config, advertised_port=self.port)
        if self.node_id_from_port:
            self._config = attrs.evolve(self._config, node_id=self._config.advertised_port)
        opener = getattr(self.storage, "open", None)
        if opener is not None:  # a storage that connects somewhere (the broker-backed one)
            try:
                await opener()
            except BaseException:
                self.listener.stop_listening()
                raise
        if self.trace_path:
            self._trace = InstanceRecorder(self.trace_path, f"trace-{self.clock.now_ms()}.jsonl", self.config)
            self._schedule_trace_flush()
        self.replies = Replies(self.log)
        self.pipeline = StoragePipeline(self.storage, self.clock, self.log)
        self.core = CoreLoop(self._config, self.clock, self.log, self.pipeline, self.replies.respond, self._trace)
        self.handler = RequestHandler(self.core, self.replies, self.catalog, self.options, self.log, self.ownership)
        self.partitions = Partitions(self.core, self.storage, self.log)
        self.core.start()
        if self.ownership is None:  # else partitions are loaded as the ownership protocol assigns them
            await self.partitions.load_all()
        await self.listener.serve(self.handler)
        self.log("info", "listening", host=self.host, port=self.port, node_id=self.config.node_id,
                 advertised=f"{self.config.advertised_host}:{self.config.advertised_port}",
                 storage=self.storage.name, durable=self.storage.durable,
                 data=str(getattr(self.storage, "path", "")) or None,
                 offsets_partitions=self.config.offsets_topic_num_partitions,
                 topics=("*" if self.catalog.open else dict(self.catalog.topics)),
                 trace=self._trace and str(self._trace.path))
        if self.ownership is not None:
            await self.ownership.start(self.partitions, self.handler.node())
        if not self.storage.durable:
            self.log("warning", "storage_not_durable", storage=self.storage.name,
                     detail="groups and committed offsets are kept in memory only and are lost when the server stops")

    @property
    def config(self) -> CoordinatorConfig:
        """The coordinator's configuration (the core loop's once started: a reload may replace it)."""
        return self.core.config if self.core is not None else self._config

    async def shutdown(self, reason: str = "requested") -> None:
        """Unload every partition (parked requests are answered NOT_COORDINATOR), flush the
        responses, close the connections and the storage."""
        if self._closing:
            await self._stopped.wait()
            return
        self._closing = True
        self.core.closing = self.handler.closing = self.partitions.closing = True
        self.log("info", "shutting_down", reason=reason, connections=len(self.listener.connections))
        self.listener.stop_listening()
        if self.ownership is not None:
            try:  # hand the partitions over: unload them, wait for their writes, leave the group
                await self.ownership.stop()
            except Exception as e:
                self.log("error", "ownership_stop_failed", error=f"{type(e).__name__}: {e}")
        self.partitions.stop()
        self.core.cancel_alarm()
        await self.listener.close_all()
        if self._trace is not None:
            if self._trace_flusher is not None:
                self._trace_flusher.cancel()
            self._trace.close()
        await self.storage.close()
        stats = self.listener.stats
        self.log("info", "stopped", requests=stats["requests"], connections=stats["connections"])
        self._stopped.set()

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
        await self.partitions.load_all()

    # --- partitions assigned by the ownership protocol ----------------------------------------

    # --- carrying out the core's commands ------------------------------------------------------

    # --- timers ------------------------------------------------------------------------------------

    def _schedule_trace_flush(self) -> None:
        def flush() -> None:
            if self._trace is not None:
                self._trace.flush()
                self._trace_flusher = self._loop.call_later(0.5, flush)
        self._trace_flusher = self._loop.call_later(0.5, flush)

    # --- requests ------------------------------------------------------------------------------------
