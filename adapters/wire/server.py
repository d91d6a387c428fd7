"""The Kafka wire server: one asyncio process owning one ``Coordinator``, made of units that
each have their own module in this package:

* ``listener``: the listening socket and the connections, one request at a time on each;
* ``handlers``: each request decoded, checked against the served versions, answered by the
  broker APIs (``broker_apis``) or made into a core event;
* ``replies``: requests parked until the core answers them, the answers encoded;
* ``core_loop``: the coordinator, the command runner carrying out its commands, the alarm
  that fires its timers; a coordinator that raises is replaced by a new one loaded from
  storage, every request it held answered NOT_COORDINATOR;
* ``pipeline``: the core's writes to the storage, their outcomes fed back in write order;
* ``partitions``: the partitions served, all of them or as ``ownership`` assigns them;
* ``controls``: the test controls (manual clock, write outcomes, unload and reload) and what
  tests wait on (``watch``: the listener and the core loop tell it of each change);
* ``data_plane``: Produce, Fetch, ListOffsets, topics and DeleteRecords on the partition log
  (``groupcoord.adapters.data``: in memory, or beside the group records in SQLite);
* ``clock``, ``log``, ``options``: the clocks, the log lines, the server's own settings.

``GroupServer`` builds the units in ``start`` (they share the clock, which a real one takes
from the running loop) and takes them down in ``shutdown``: every owned partition is unloaded
(the core answers parked requests NOT_COORDINATOR, as Kafka does when a coordinator goes
away), held Fetches are answered, connections closed. With ``ServerOptions.trace`` every
event and command is recorded in trace format v1 (``core.trace``) by the one trace writer,
``traces.trace_files.InstanceRecorder``; it only observes. With ``ServerOptions.kafka_log``
the groups' changes are appended to that file in Kafka 4.x's own words and log4j layout
(``kafka_lines.KafkaGroupLog``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import attrs

from groupcoord.adapters.data.log import DataLog
from groupcoord.adapters.storage.interface import Storage
from groupcoord.adapters.storage.memory import MemoryStorage
from groupcoord.adapters.traces.trace_files import InstanceRecorder
from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.wire.clock import ManualClock, RealClock
from groupcoord.adapters.wire.controls import Controls
from groupcoord.adapters.wire.core_loop import CoreLoop
from groupcoord.adapters.wire.handlers import RequestHandler
from groupcoord.adapters.wire.kafka_lines import KafkaGroupLog
from groupcoord.adapters.wire.listener import Listener
from groupcoord.adapters.wire.log import Log, NullLog
from groupcoord.adapters.wire.options import DataSettings, ServerOptions
from groupcoord.adapters.wire.partitions import Partitions
from groupcoord.adapters.wire.pipeline import StoragePipeline
from groupcoord.adapters.wire.replies import Replies
from groupcoord.adapters.wire.watch import Changes
from groupcoord.core.config import CoordinatorConfig

_TRACE_FLUSH_S = 0.5  # a trace is buffered; this keeps a killed server's recording nearly whole


class GroupServer:
    """A Kafka-protocol server around one ``Coordinator``. ``await start()``, then
    ``await shutdown()``; ``port`` is the bound port (``ServerOptions(port=0)``: a free one).
    ``clock`` None: a ``RealClock``. ``ownership``: several servers sharing a broker-backed
    storage agree through it on who owns which partition (``ownership.Ownership``); None:
    this server owns them all."""

    def __init__(self, config: CoordinatorConfig | None = None, catalog: apis.TopicCatalog | None = None, *,
                 options: ServerOptions | None = None, storage: Storage | None = None,
                 clock: RealClock | ManualClock | None = None, log: Log | None = None, ownership: Any = None,
                 data_backend: Any = None, data_settings: DataSettings | None = None) -> None:
        self.options = options or ServerOptions()
        self.catalog = catalog or apis.TopicCatalog()
        self.storage: Storage = storage if storage is not None else MemoryStorage()
        self.clock = clock
        self.log = log or NullLog()
        self.ownership = ownership
        self.host = self.options.host
        self.port = self.options.port
        self._config = config or CoordinatorConfig()  # until start() hands it to the core loop
        # the partition log (made by start(), on the server's clock): its durable copy, if any
        self.data_backend = data_backend
        self.data_settings = data_settings or DataSettings()
        self.data_log: DataLog | None = None
        self._retention_timer: asyncio.TimerHandle | None = None
        # The units, made by start().
        self.listener: Listener | None = None
        self.replies: Replies | None = None
        self.pipeline: StoragePipeline | None = None
        self.core: CoreLoop | None = None
        self.handler: RequestHandler | None = None
        self.partitions: Partitions | None = None
        self.controls: Controls | None = None
        self.changes = Changes()  # what tests wait on: told of each change by the listener and the core loop
        self.trace: InstanceRecorder | None = None
        self.kafka_log: KafkaGroupLog | None = None
        self._trace_flusher: asyncio.TimerHandle | None = None
        self._closing = False
        self._stopped: asyncio.Event | None = None

    @property
    def config(self) -> CoordinatorConfig:
        """The coordinator's configuration: the core loop's once started (a reload may replace
        it), with the bound port advertised."""
        return self.core.config if self.core is not None else self._config

    async def start(self) -> None:
        self._stopped = asyncio.Event()
        if self.clock is None:
            self.clock = RealClock(asyncio.get_running_loop())
        self.listener = Listener(self.options, self.log, self.changes)
        self.port = await self.listener.bind()
        if self.options.advertise_bound_port and self._config.advertised_port != self.port:
            self._config = attrs.evolve(self._config, advertised_port=self.port)
        if self.options.node_id_from_port:
            self._config = attrs.evolve(self._config, node_id=self._config.advertised_port)
        opener = getattr(self.storage, "open", None)
        if opener is not None:  # a storage that connects somewhere (the broker-backed one)
            try:
                await opener()
            except BaseException:
                self.listener.stop_listening()
                raise
        if self.options.trace:
            self.trace = InstanceRecorder(self.options.trace, f"trace-{self.clock.now_ms()}.jsonl", self._config)
            self._flush_trace_later()
        if self.options.kafka_log:
            # appended to, as log4j does; line-buffered, so a killed server's lines are all there
            self.kafka_log = KafkaGroupLog(open(self.options.kafka_log, "a", encoding="utf-8", buffering=1),
                                           node_id=self._config.node_id)
        settings = self.data_settings
        self.data_log = DataLog(self.clock.now_ms, self.data_backend, default_retention_ms=settings.retention_ms,
                                max_message_bytes=settings.max_message_bytes)
        self._make_units()
        if not self.clock.manual:
            self._check_retention_later()
        self.core.start()
        if self.ownership is None:  # else partitions are loaded as the ownership protocol assigns them
            await self.partitions.load_all()
        await self.listener.serve(self.handler)
        config = self.config
        self.log("info", "listening", host=self.host, port=self.port, node_id=config.node_id,
                 advertised=f"{config.advertised_host}:{config.advertised_port}",
                 storage=self.storage.name, durable=self.storage.durable,
                 data=str(getattr(self.storage, "path", "")) or None,
                 offsets_partitions=config.offsets_topic_num_partitions,
                 topics=("*" if self.catalog.open else dict(self.catalog.topics)),
                 trace=self.trace and str(self.trace.path),
                 **({"kafka_log": self.options.kafka_log} if self.options.kafka_log else {}))
        if self.ownership is not None:
            await self.ownership.start(self.partitions, self.handler.node())
        if not self.storage.durable:
            self.log("warning", "storage_not_durable", storage=self.storage.name,
                     detail="groups and committed offsets are kept in memory only and are lost when the server stops")

    def _make_units(self) -> None:
        self.replies = Replies(self.log)
        self.pipeline = StoragePipeline(self.storage, self.clock, self.log)
        # the core's topics image (KIP-848's server-side assignment): fed when the core starts,
        # before any request, and again when a topic is created
        self.core = CoreLoop(self._config, self.clock, self.log, self.pipeline, self.replies.respond, self.trace,
                             self.changes, self.kafka_log, topics=self.catalog.image)
        self.handler = RequestHandler(self.core, self.replies, self.catalog, self.options, self.log, self.ownership,
                                      self.data_log, self.data_settings.num_partitions)
        self.partitions = Partitions(self.core, self.storage, self.log)
        # a failed core's replacement: what it held is answered, its partitions loaded again
        self.core.answer_parked = self.replies.answer_all
        self.core.reload_partitions = self.partitions.reload
        self.controls = Controls(self.core, self.pipeline, self.replies, self.partitions, self.listener,
                                 self.changes, after_advance=[self.handler.data.advanced])

    def _check_retention_later(self) -> None:
        """Retention on a real clock: every ``log.retention.check.interval.ms``, as Kafka's."""
        def check() -> None:
            self.data_log.expire()
            self._check_retention_later()
        self._retention_timer = asyncio.get_running_loop().call_later(
            self.data_settings.retention_check_interval_ms / 1000, check)

    def _flush_trace_later(self) -> None:
        self._trace_flusher = asyncio.get_running_loop().call_later(_TRACE_FLUSH_S, self._flush_trace)

    def _flush_trace(self) -> None:
        self.trace.flush()
        self._flush_trace_later()

    async def shutdown(self, reason: str = "requested") -> None:
        """Unload every partition (parked requests are answered NOT_COORDINATOR), flush the
        responses, close the connections and the storage."""
        if self._closing:
            await self._stopped.wait()
            return
        self._closing = True
        # From here on: no new alarms, no held Fetches, no partition loads.
        self.core.closing = self.handler.closing = self.handler.data.closing = self.partitions.closing = True
        if self._retention_timer is not None:
            self._retention_timer.cancel()
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
        if self.trace is not None:
            if self._trace_flusher is not None:
                self._trace_flusher.cancel()
            self.trace.close()
        await self.storage.close()
        await self.data_log.close()
        if self.kafka_log is not None:  # after the storage: the writes' last outcomes are told
            self.kafka_log.close()
        stats = self.listener.stats
        self.log("info", "stopped", requests=stats["requests"], connections=stats["connections"])
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
