"""Systems under test for ``CoordinatorStateMachine``: where its requests go and how time moves.

* ``CoreSystem``: the core in this process, driven with a manual clock (the default).
* ``ServerSystem``: a ``GroupServer`` (what ``groupcoord serve`` runs) in this process, on an
  event loop thread, with a manual clock; requests go over real sockets.
* ``BrokerSystem``: any broker at a bootstrap address; real time, bounded waits.

Every system records each request as the pair ``groupcoord verify`` reads (``Sent.obs()``), with
the times of the system's clock: the manual clock (a counter orders what happens in one
millisecond), or the client's wall clock (a request is stamped before it is written, its answer
when it is read: wider than the broker's own times, never narrower)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import attrs

from groupcoord.adapters.client.kafka_client import Cluster, KafkaClient, KafkaError
from groupcoord.adapters.protocol import schema
from groupcoord.adapters.protocol.translate import response_fields
from groupcoord.adapters.runtime.driver import Driver
from groupcoord.adapters.verify.observed import Obs, to_json
from groupcoord.adapters.wire.loop_thread import LoopThread
from groupcoord.core.config import CoordinatorConfig


class Unreachable(Exception):
    """The broker cannot be reached (or does not speak the group APIs): one line saying why."""


class ConnectionClosed(Unreachable):
    """The broker closed the connection of a request in flight (``sent``) instead of answering."""

    def __init__(self, message: str, sent: "Sent") -> None:
        super().__init__(message)
        self.sent = sent


@attrs.define
class Sent:
    """One request and, once it came, its answer (fields as a trace holds them)."""

    index: int
    conn: int
    api: str
    version: int
    client_id: str
    request: dict  # every field of the version, bytes as bytes
    recv_us: int
    response: dict | None = None
    send_us: int | None = None
    open_until_us: int | None = None  # unanswered: known to be still waiting then

    def obs(self) -> Obs:
        return Obs(index=self.index, conn=self.conn, recv_us=self.recv_us, send_us=self.send_us, api=self.api,
                   version=self.version, client_id=self.client_id, request=self.request,
                   response=self.response, open_until_us=None if self.response is not None else self.open_until_us)


class System:
    """What the machine needs from a system under test. ``config``: the settings the spec is
    judged with (the broker's); ``timer_tolerance_ms``: how late the broker may fire a timer."""

    config: CoordinatorConfig
    # A manual clock fires a timer when time is moved past its deadline, and requests sent in
    # one millisecond may meet it either side: 1 ms lets the checker try both.
    timer_tolerance_ms: int = 1
    manual_clock: bool = True

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self._last_us = 0
        self._stamp = threading.Lock()

    def versions(self, api: str) -> tuple[int, int]:
        return schema.SUPPORTED_VERSIONS[api]

    def topic_image(self, topics: dict[str, int]) -> tuple | None:
        """The topics image consumer groups are assigned from, ((name, topic id, partitions),
        ...), as the system knows it (None: it cannot tell)."""
        return None

    def send(self, api: str, version: int, body: dict, client_id: str, wait: bool = True) -> Sent:
        """Send a request; with ``wait``, return once the system has handled it (answered or
        parked), else at once (requests in flight together: ``settle`` then)."""
        raise NotImplementedError

    def settle(self) -> None:
        """Wait until every request sent is answered or known to wait (bounded)."""

    def advance(self, ms: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def group(self, group_id: str):
        """The coordinator's group (``core.model.Group``) where the system shows it, else None."""
        return None

    def _record(self, api: str, version: int, body: dict, client_id: str, conn: int) -> Sent:
        fields = schema.request_with_defaults(api, version, body)
        sent = Sent(len(self.sent) + 1, conn, api, version, client_id, fields, self._now_us())
        self.sent.append(sent)
        return sent

    def _clock_ms(self) -> int:
        raise NotImplementedError

    def _now_us(self) -> int:
        """The clock in µs, strictly increasing: a manual clock's millisecond, then a counter
        (answers are stamped on the loop thread, requests on the caller's)."""
        with self._stamp:
            us = max(self._clock_us(), self._last_us + 1)
            self._last_us = us
            return us

    def _clock_us(self) -> int:
        return self._clock_ms() * 1000

    def _answer(self, sent: Sent, fields: dict) -> None:
        sent.response = to_json(fields)
        sent.send_us = self._now_us()


class CoreSystem(System):
    """The core with a manual clock (``runtime.Driver``): answers at once, timers fire only
    when ``advance`` moves time."""

    def __init__(self, config: CoordinatorConfig | None = None) -> None:
        super().__init__()
        self.config = config or CoordinatorConfig()
        self.driver = Driver(self.config)
        self._waiting: dict[Any, Sent] = {}

    def _clock_ms(self) -> int:
        return self.driver.now_ms

    def send(self, api: str, version: int, body: dict, client_id: str, wait: bool = True) -> Sent:
        sent = self._record(api, version, body, client_id, len(self.sent) + 1)
        rid = self.driver.send(api, sent.request, version=version, client_id=client_id)
        self._waiting[rid] = sent
        self.driver.advance(0)  # a timer due now fires now (a broker's timer does not wait for the clock to move)
        self._collect()
        return sent

    def advance(self, ms: int) -> None:
        self.driver.advance(ms)
        self._collect()

    def settle(self) -> None:
        self._collect()
        # No "still waiting at" mark on a manual clock: the checker reads one as the broker up
        # until then with its timers fired on time, but ``advance`` jumps, firing them late.

    def group(self, group_id: str):
        return self.driver.coordinator.group(group_id)

    def topic_image(self, topics: dict[str, int]) -> tuple | None:
        """``topics`` under the ids a server's catalog gives them, fed to the core."""
        from groupcoord.adapters.wire.broker_apis import TopicCatalog
        from groupcoord.core import events as ev

        image = tuple((n, str(TopicCatalog.topic_id(n)), c) for n, c in sorted(topics.items()))
        self.driver.dispatch(ev.TopicsChanged(now_ms=self.driver.now_ms, topics=image))
        return image

    def _collect(self) -> None:
        for rid in [r for r in self._waiting if r in self.driver.responses]:
            sent = self._waiting.pop(rid)
            self._answer(sent, response_fields(sent.api, sent.version, self.driver.responses[rid]))


class _WireSystem(System):
    """Requests over real connections from an event loop thread: one connection per request
    in flight (as Kafka handles one request of a connection at a time, a parked JoinGroup holds
    only its own), reused once answered, per client id (the broker sees it)."""

    host: str
    port: int
    answer_wait_s: float = 10.0
    connect_timeout_s: float = 10.0  # a connection and its ApiVersions, on a loaded machine too

    def __init__(self, loop: Any = None) -> None:
        """``loop``: where the clients run (``run``/``call``), a ``LoopThread`` of their own if None."""
        super().__init__()
        self.loop = loop or LoopThread("groupcoord-clients")
        self._idle: dict[str, list[KafkaClient]] = {}
        self._clients: list[KafkaClient] = []
        self._waiting: dict[int, tuple[Sent, KafkaClient, asyncio.Future]] = {}
        self._versions: dict[int, tuple[int, int]] | None = None

    def versions(self, api: str) -> tuple[int, int]:
        lo, hi = schema.SUPPORTED_VERSIONS[api]
        theirs = (self._versions or {}).get(schema.API_KEYS[api])
        if theirs is None:
            return lo, hi
        return max(lo, theirs[0]), min(hi, theirs[1])

    async def _client(self, client_id: str) -> KafkaClient:
        pool = self._idle.setdefault(client_id, [])
        if pool:
            return pool.pop()
        try:
            client = await KafkaClient.connect(self.host, self.port, client_id, timeout=self.connect_timeout_s,
                                               local_addr=("127.0.0.1", 0) if self.host.startswith("127.") else None)
        except (OSError, asyncio.TimeoutError, KafkaError) as e:
            raise Unreachable(f"cannot connect to {self.host}:{self.port}: {e or type(e).__name__}") from None
        self._clients.append(client)
        if self._versions is None:
            self._versions = client.versions
        return client

    def send(self, api: str, version: int, body: dict, client_id: str, wait: bool = True) -> Sent:
        async def go():
            client = await self._client(client_id)
            sent = self._record(api, version, body, client_id, self._clients.index(client) + 1)
            future = client.send(schema.API_KEYS[api], sent.request, version)
            future.add_done_callback(lambda f: self._done(sent, f))
            self._waiting[sent.index] = (sent, client, future)
            return sent, client
        sent, client = self.loop.run(go(), self.connect_timeout_s + 5)
        if wait:
            self._handled(sent, client)
        return sent

    def _done(self, sent: Sent, future: asyncio.Future) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        self._answer(sent, future.result())

    def _handled(self, sent: Sent, client: KafkaClient) -> None:
        """Wait until the broker has handled ``sent`` (answered or parked)."""

    def settle(self) -> None:
        async def collect():
            now = self._now_us()
            for index, (sent, client, future) in list(self._waiting.items()):
                if future.done():
                    del self._waiting[index]
                    if future.cancelled() or future.exception() is not None:
                        raise ConnectionClosed(f"{sent.api} to {self.host}:{self.port}: "
                                               f"{future.exception() if not future.cancelled() else 'cancelled'}",
                                               sent)
                    self._idle.setdefault(sent.client_id, []).append(client)
                elif not self.manual_clock:  # (CoreSystem.settle says why not on a manual clock)
                    sent.open_until_us = now
        self.loop.run(collect(), self.answer_wait_s + 5)

    def close(self) -> None:
        async def shut():
            for client in self._clients:
                await client.close()
        try:
            self.loop.run(shut(), 30)
        finally:
            self._stop()

    def _stop(self) -> None:
        self.loop.close()


class ServerSystem(_WireSystem):
    """A ``GroupServer`` in this process (memory storage, a manual clock), on 127.0.0.1."""

    def __init__(self, config: CoordinatorConfig | None = None, topics: dict[str, int] | None = None) -> None:
        from groupcoord.adapters.wire.broker_apis import TopicCatalog
        from groupcoord.adapters.wire.clock import ManualClock
        from groupcoord.testing.servers import InProcessServer

        self.config = config or CoordinatorConfig()
        self.clock = ManualClock(0)
        catalog = TopicCatalog(dict(topics)) if topics is not None else TopicCatalog(open=True)
        # The clients share the server's loop: a request is known handled on the loop that read it.
        self.instance = InProcessServer(config=self.config, catalog=catalog, clock=self.clock,
                                        advertise_bound_port=True, track_requests=True)
        super().__init__(self.instance)
        self.server = self.instance.server
        self.host, self.port = self.instance.host, self.instance.port

    def _clock_ms(self) -> int:
        return self.clock.now_ms()

    def group(self, group_id: str):
        return self.loop.call(lambda: self.server.core.coordinator.group(group_id))

    def topic_image(self, topics: dict[str, int]) -> tuple | None:
        """The catalog's topics, which the server fed its core."""
        from groupcoord.adapters.wire.broker_apis import TopicCatalog

        return tuple((n, str(TopicCatalog.topic_id(n)), c) for n, c in sorted(topics.items()))

    def _handled(self, sent: Sent, client: KafkaClient) -> None:
        controls = self.server.controls
        status = self.loop.run(controls.request_handled(client.local_address, client.last_correlation_id,
                                                        self.answer_wait_s), self.answer_wait_s + 5)
        if status == "closed":
            raise Unreachable(f"the server closed the connection on {sent.api}")
        self.loop.call(controls.advance, 0)  # a timer due now fires now, as a broker's does
        self._read_answers()

    def advance(self, ms: int) -> None:
        self.loop.call(self.server.controls.advance, ms)
        self._read_answers()

    def _read_answers(self) -> None:
        """Every answer the server has written is read before the machine goes on."""
        listener = self.server.listener

        async def read():
            for sent, client, future in list(self._waiting.values()):
                if future.done():
                    continue
                status = listener.request_status(client.local_address, client.last_correlation_id)
                if status == "answered":
                    await asyncio.wait_for(asyncio.shield(future), self.answer_wait_s)
        self.loop.run(read(), self.answer_wait_s + 5)

    def settle(self) -> None:
        for sent, client, _future in list(self._waiting.values()):
            self._handled(sent, client)
        self._read_answers()
        super().settle()

    def _stop(self) -> None:
        self.instance.stop()


class BrokerSystem(_WireSystem):
    """A running broker at ``bootstrap`` (the group's coordinator found with FindCoordinator).
    Real time: ``advance`` waits that long; an answer not read within ``answer_wait_s`` of
    being asked for counts as parked (the tolerance covers one that was late)."""

    manual_clock = False

    def __init__(self, bootstrap: str, group_id: str, config: CoordinatorConfig | None = None, *,
                 timer_tolerance_ms: int = 1000, answer_wait_s: float = 0.3, max_advance_ms: int = 60_000) -> None:
        super().__init__()
        self.config = config or CoordinatorConfig()
        self.timer_tolerance_ms = timer_tolerance_ms
        self.answer_wait_s = answer_wait_s
        self.max_advance_ms = max_advance_ms

        async def find():
            cluster = Cluster(bootstrap, "probe", timeout=5.0)
            try:
                coordinator = await cluster.coordinator(group_id)
                return coordinator.host, coordinator.port, dict(coordinator.versions)
            finally:
                await cluster.close()
        try:
            # the coordinator's versions known before the first request (its version is drawn
            # within them)
            self.host, self.port, self._versions = self.loop.run(find(), 60)
        except (OSError, asyncio.TimeoutError, KafkaError, ValueError) as e:
            self.loop.close()
            raise Unreachable(f"cannot reach a group coordinator at {bootstrap}: {e or type(e).__name__}") from None

    def _clock_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def topic_image(self, topics: dict[str, int]) -> tuple | None:
        """``topics`` as the coordinator's Metadata answer shows them (ids from v10); None when it
        does not show every one of them with an id."""
        async def ask():
            client = await KafkaClient.connect(self.host, self.port, client_id="probe-metadata")
            try:
                return await client.request(3, {"topics": [{"name": n, "topic_id": None} for n in sorted(topics)],
                                                 "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False}, 12)
            finally:
                await client.close()
        try:
            answer = self.loop.run(ask(), 30)
        except (OSError, asyncio.TimeoutError, KafkaError, ValueError):
            return None
        image = []
        for t in answer.get("topics") or ():
            tid, count = t.get("topic_id"), len(t.get("partitions") or ())
            if t.get("error_code") == 0 and tid and int(getattr(tid, "int", 1)) and count:
                image.append((t["name"], str(tid), count))
        return tuple(sorted(image)) if len(image) == len(topics) else None

    def _clock_us(self) -> int:
        return time.time_ns() // 1000

    def _handled(self, sent: Sent, client: KafkaClient) -> None:
        # Nothing says a remote broker parked a request: its answer is awaited, briefly
        future = self._waiting[sent.index][2]

        async def wait():
            await asyncio.wait([future], timeout=self.answer_wait_s)
        self.loop.run(wait(), self.answer_wait_s + 5)

    def advance(self, ms: int) -> None:
        time.sleep(min(ms, self.max_advance_ms) / 1000)

    def settle(self) -> None:
        async def wait():
            pending = [f for _, _, f in self._waiting.values() if not f.done()]
            if pending:
                await asyncio.wait(pending, timeout=self.answer_wait_s)
        self.loop.run(wait(), self.answer_wait_s + 5)
        super().settle()

