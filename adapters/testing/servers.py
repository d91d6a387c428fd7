"""Servers for tests (spec/testing.md, "Server fixtures"): a ``groupcoord serve`` inside the
test's own process, and a stand-in with the same attributes for a broker that is already
running.

* ``start_server(topics=None, *, manual_clock=False, **settings)``: a ``GroupServer`` with
  memory storage on 127.0.0.1, a free port, on its own event-loop thread; Kafka settings as
  keywords, dots as underscores (``group_min_session_timeout_ms=500``).
* ``InProcessServer``: that server (``.bootstrap``, ``.host``, ``.port``, ``str()``,
  ``stop()``; ``advance(ms)`` on a manual clock; ``produce(topic, values, key=...)`` and
  ``records(topic)`` straight to and from its partition log).
* ``ExistingServer``: a broker at ``HOST:PORT`` (``--groupcoord-bootstrap``); the topics a
  test asks for are checked there, not created.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterable, Mapping

from groupcoord.adapters.storage.memory import MemoryStorage
from groupcoord.adapters.wire.clock import ManualClock
from groupcoord.adapters.wire.loop_thread import LoopThread
from groupcoord.adapters.wire.options import ServerOptions
from groupcoord.adapters.wire.server import GroupServer
from groupcoord.adapters.wire.settings import KNOWN_NAMES, read_settings
from groupcoord.core.config import ConfigError

# As Kafka's own config/server.properties for development and testing: a new group's first
# rebalance is not delayed by 3 s.
TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": 0}
_PARTS = ("config", "catalog", "storage", "clock", "log", "ownership", "data_backend", "data_settings")


def kafka_settings(keywords: Mapping[str, Any]) -> dict[str, Any]:
    """Kafka setting names from keywords (``num_partitions`` -> ``num.partitions``); an unknown
    one raises ConfigError, one line listing the known keywords."""
    settings = {}
    for keyword, value in keywords.items():
        name = keyword.replace("_", ".")
        if name not in KNOWN_NAMES:
            known = ", ".join(n.replace(".", "_") for n in KNOWN_NAMES)
            raise ConfigError(f"unknown setting {keyword}= (Kafka's {name!r}); known: {known}")
        settings[name] = value
    return settings


class InProcessServer:
    """A ``GroupServer`` on an event loop in a background thread. Keywords: the server's parts
    (``config``, ``catalog``, ``storage``, ``clock``, ``log``, ``ownership``) and
    ``ServerOptions`` fields (host 127.0.0.1 and port 0 unless given)."""

    def __init__(self, **kwargs: Any) -> None:
        parts = {k: kwargs.pop(k) for k in _PARTS if k in kwargs}
        parts.setdefault("storage", MemoryStorage())
        kwargs.setdefault("host", "127.0.0.1")
        kwargs.setdefault("port", 0)
        options = ServerOptions(**kwargs)
        self.host = options.host
        self._thread = LoopThread("groupcoord-server")
        self.loop = self._thread.loop
        try:
            self.server = self.call(lambda: GroupServer(**parts, options=options))
            self.run(self.server.start())
        except BaseException:
            self._thread.close()
            raise
        self.port = self.server.port
        self.bootstrap = f"{self.host}:{self.port}"
        self._stopped = False

    def __str__(self) -> str:
        return self.bootstrap

    def __repr__(self) -> str:
        return f"<InProcessServer {self.bootstrap}>"

    @property
    def manual_clock(self) -> bool:
        return bool(self.server.clock.manual)

    def run(self, coro, timeout: float = 30) -> Any:
        """``coro`` run on the server's loop; its result."""
        return self._thread.run(coro, timeout)

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 30) -> Any:
        """``fn(*args)`` called on the server's loop; its result."""
        return self._thread.call(fn, *args, timeout=timeout)

    def on_loop(self, coro) -> "asyncio.Future":
        """``coro`` run on the server's loop, awaitable from another event loop (a test's)
        without blocking it."""
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def until(self, condition: Callable[[], Any], timeout: float = 10, what: str = "the condition") -> Any:
        """``condition()``'s first true value (run on the server's loop), checked after every
        change the server makes; TimeoutError after ``timeout`` seconds."""
        return self.run(self.server.controls.until(condition, timeout, what), timeout + 5)

    def advance(self, ms: int) -> None:
        """Manual clock only: move the server's time by ``ms`` and fire every session, rebalance
        and retention timeout now due, in Kafka's order. Returns once the coordinator has
        handled them (their answers are on their way to the clients)."""
        if not self.manual_clock:
            raise RuntimeError("advance(ms) needs a server with a manual clock "
                               "(groupcoord_manual_server, or start_server(manual_clock=True))")
        self.call(self.server.controls.advance, ms)

    def produce(self, topic: str, values: Iterable[bytes | str], key: bytes | str | None = None,
                partition: int | None = None, headers: Iterable[tuple[str, bytes]] | None = None) -> list[int]:
        """Append ``values`` to ``topic`` straight to the log (no client), with ``key`` (the
        partition: Kafka's default partitioner, murmur2 of the key; no key: partition 0, unless
        ``partition`` is given) and ``headers`` on each, stamped with the server's time; returns
        their offsets. A topic that does not exist is created as Kafka's auto-creation would
        (``num_partitions`` partitions), or, with ``auto_create_topics_enable=False``, is an
        error. Consumers see them at once (held Fetches are woken)."""
        def encode(v: bytes | str | None) -> bytes | None:
            return v.encode("utf-8") if isinstance(v, str) else v

        raw = [encode(v) for v in values]

        def append() -> list[int]:
            server = self.server
            count = server.catalog.partitions(topic)
            if count is None:
                if server.catalog.auto_create_partitions is None:
                    raise ValueError(f"no topic {topic!r} (auto.create.topics.enable is false)")
                server.catalog.create(topic)
                server.handler.data.sync_topics()
                server.core.topics_changed()
                count = server.catalog.partitions(topic)
            return server.data_log.produce(topic, count, raw, encode(key), partition,
                                           [(k, encode(v)) for k, v in headers or ()])
        return self.call(append) if raw else []

    def records(self, topic: str, partition: int | None = None) -> list:
        """The records of ``topic`` (of one ``partition``, or of all, by partition then offset)
        now readable, straight from the log: each with ``offset``, ``key``, ``value``,
        ``headers`` (``(str, bytes)`` pairs), ``timestamp`` and ``partition``."""
        return self.call(self.server.data_log.records, topic, partition)

    def stop(self) -> None:
        """Shut the server down (its connections are closed) and end its thread; again: nothing."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self.run(self.server.shutdown("test"), timeout=30)
        finally:
            self._thread.close()

    def __enter__(self) -> "InProcessServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_server(topics: Mapping[str, int] | None = None, *, manual_clock: bool = False,
                 **settings: Any) -> InProcessServer:
    """An ``InProcessServer`` serving ``topics`` (name -> partition count), with Kafka settings
    given as keywords (dots as underscores) over Kafka's defaults and ``TEST_DEFAULTS``; on a
    ``ManualClock`` (time moves only by ``advance``) if ``manual_clock``."""
    broker = read_settings({**TEST_DEFAULTS, **kafka_settings(settings)}, topics)
    return InProcessServer(config=broker.config, catalog=broker.catalog, max_request_bytes=broker.max_request_bytes,
                           clock=ManualClock(0, fire_due_at_once=True) if manual_clock else None,
                           data_settings=broker.data)


class ExistingServer:
    """A broker already running at ``bootstrap`` (``HOST:PORT``), with the attributes of an
    ``InProcessServer``. Its settings are its own; ``stop()`` leaves it running."""

    manual_clock = False

    def __init__(self, bootstrap: str) -> None:
        host, sep, port = bootstrap.strip().rpartition(":")
        self.host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        self.port = int(port) if port.isdigit() else -1
        if not sep or not self.host or any(c.isspace() for c in self.host) or not 0 < self.port <= 65535:
            raise ConfigError(f"--groupcoord-bootstrap: expected HOST:PORT, got {bootstrap!r}")
        self.bootstrap = f"{host}:{self.port}"

    def __str__(self) -> str:
        return self.bootstrap

    def __repr__(self) -> str:
        return f"<ExistingServer {self.bootstrap}>"

    def check_topics(self, topics: Mapping[str, int] | None, timeout_s: float = 10.0) -> None:
        """Each topic exists there with that many partitions, or ConfigError saying which."""
        if not topics:
            return
        from groupcoord.adapters.client.kafka_client import Cluster

        async def counts() -> dict[str, int | None]:
            cluster = Cluster(self.bootstrap, "groupcoord-testing", timeout_s)
            try:
                answer = await asyncio.wait_for(cluster.metadata(list(topics)), timeout_s)
            finally:
                await cluster.close()
            return {t["name"]: (len(t["partitions"]) if t["error_code"] == 0 else None) for t in answer["topics"]}

        found = asyncio.run(counts())
        for name, wanted in topics.items():
            if found.get(name) != wanted:
                has = "no such topic" if found.get(name) is None else f"{found[name]} partitions"
                raise ConfigError(f"--groupcoord-bootstrap {self.bootstrap}: the test needs topic {name!r} with "
                                  f"{wanted} partitions; the broker has {has}")

    def advance(self, ms: int) -> None:
        raise RuntimeError(f"advance(ms) needs an in-process server with a manual clock; the broker at "
                           f"{self.bootstrap} (--groupcoord-bootstrap) keeps its own time")

    def produce(self, *args: Any, **kwargs: Any) -> list[int]:
        raise RuntimeError(f"produce() writes to an in-process server's log; for the broker at {self.bootstrap} "
                           "(--groupcoord-bootstrap) use a producer")

    def records(self, *args: Any, **kwargs: Any) -> list:
        raise RuntimeError(f"records() reads an in-process server's log; for the broker at {self.bootstrap} "
                           "(--groupcoord-bootstrap) use a consumer")

    def stop(self) -> None:
        """Nothing: the broker is not ours to stop."""

