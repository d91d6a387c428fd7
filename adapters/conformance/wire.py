"""Conformance scenarios (spec/conformance/FORMAT.md) run through the Kafka wire protocol.

Each scenario gets a fresh ``GroupServer`` on 127.0.0.1 with a ``ManualClock`` and
``MemoryStorage``, on an event loop in a background thread. Every ``send`` step is encoded by
kio, written to a TCP connection (one connection per outstanding request, so a parked request
holds only its own), and its response is read back, decoded by kio and matched with the same
matchers as ``groupcoord.adapters.scenarios.runner``. Time, storage outcomes and failover go through
the server's test controls (the control channel), never through the core directly.

A request counts as answered when the server has written its response; ``expect`` then reads
it from the socket. To know that, the runner asks the server (thread-safely) whether it has
received and answered the request with that correlation id on that connection; after a
``send`` it waits, through the server's test controls, until the server has handled it.
"""

from __future__ import annotations

import select
import socket
import struct
import uuid
from pathlib import Path
from typing import Callable

from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.protocol import schema
from groupcoord.adapters.scenarios.runner import (
    Result,
    Runner,
    ScenarioFailure,
    hexed,
    read_scenario,
    rewrite_topic_ids,
    run_steps,
    scenario_config,
)
from groupcoord.adapters.storage.memory import MemoryStorage
from groupcoord.adapters.wire.broker_apis import TopicCatalog
from groupcoord.adapters.wire.clock import ManualClock
from groupcoord.adapters.wire.loop_thread import LoopThread
from groupcoord.adapters.wire.options import ServerOptions
from groupcoord.adapters.wire.server import GroupServer
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.errors import Error

_WAIT_S = 5.0


class _Sent:
    def __init__(self, sock: socket.socket, api_key: int, version: int, correlation_id: int) -> None:
        self.sock = sock
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id
        self.peer = sock.getsockname()[:2]


class _Answers:
    """``driver.responses`` for the base runner: membership reads the answer off the wire."""

    def __init__(self, runner: "_WireRunner") -> None:
        self.runner = runner
        self.got: dict[str, dict] = {}

    def __contains__(self, name: str) -> bool:
        if name in self.got:
            return True
        return self.runner._collect(name)

    def __getitem__(self, name: str) -> dict:
        if name not in self:
            raise KeyError(name)
        return self.got[name]


class _GroupsView:
    def __init__(self, runner: "_WireRunner") -> None:
        self.runner = runner

    def group(self, group_id: str):
        server = self.runner.server
        return self.runner.host.call(lambda: server.core.coordinator.group(group_id))


class _WireDriver:
    """What ``Runner.step`` needs from a driver, carried out through the server's controls."""

    def __init__(self, runner: "_WireRunner") -> None:
        self.runner = runner
        self.responses = _Answers(runner)
        self.answer_counts: dict[str, int] = {}
        self.coordinator = _GroupsView(runner)

    @property
    def config(self) -> CoordinatorConfig:
        return self.runner.server.config

    def advance(self, ms: int) -> None:
        self.runner.host.call(self.runner.server.controls.advance, ms)

    def hold_writes(self) -> None:
        self.runner.host.call(self.runner.server.controls.hold_writes)

    def release_writes(self, error: Error | None = None) -> None:
        self.runner.host.call(self.runner.server.controls.release_writes, error)

    def fail_next_write(self, error: Error) -> None:
        self.runner.host.call(self.runner.server.controls.fail_next_write, error)

    def unload(self) -> None:
        self.runner.host.call(self.runner.server.controls.unload_all)

    def reload(self, config: CoordinatorConfig | None = None) -> None:
        self.runner.host.run(self.runner.server.controls.reload(config))


class _WireRunner(Runner):
    def __init__(self, host: LoopThread, observer: Callable | None = None) -> None:
        super().__init__(observer)
        self.host = host
        self.server: GroupServer | None = None
        self.idle: dict[str, list[socket.socket]] = {}
        self.inflight: dict[str, _Sent] = {}
        self.sockets: list[socket.socket] = []
        self.correlation = 0
        self.storage: MemoryStorage | None = None
        # The server derives a topic's id from its name (TopicCatalog.topic_id); a scenario names
        # its own ids (topics_image): requests and answers are translated between the two.
        self.to_wire: dict[str, uuid.UUID] = {}
        self.from_wire: dict[uuid.UUID, str] = {}

    def start(self, config: dict, topics: dict | None) -> None:
        cfg = scenario_config(config, topics)
        catalog = TopicCatalog(dict(topics)) if topics is not None else TopicCatalog(open=True)
        options = ServerOptions(host="127.0.0.1", port=0, advertise_bound_port=False, track_requests=True)
        self.storage = storage = MemoryStorage()
        self.server = self.host.call(lambda: GroupServer(cfg, catalog, options=options, clock=ManualClock(0),
                                                         storage=storage))
        self.host.run(self.server.start())
        self.driver = _WireDriver(self)  # type: ignore[assignment]

    def close(self) -> None:
        for sock in self.sockets:
            try:
                sock.close()
            except OSError:
                pass
        if self.server is not None:
            self.host.run(self.server.shutdown("scenario done"))

    # --- the topics image and the records -----------------------------------------------------

    def _feed_image(self, image: tuple) -> None:
        """The scenario's topics become the server's catalog (which feeds the core its image)."""
        for name, scenario_id, _ in image:
            wire_id = self.server.catalog.topic_id(name)
            if self.to_wire.get(scenario_id, wire_id) != wire_id or self.from_wire.get(wire_id, scenario_id) != scenario_id:
                raise ScenarioFailure(f"topic {name} changes its id: the wire server derives a topic's id from "
                                      f"its name, so this cannot be run through the wire")
            self.to_wire[scenario_id] = wire_id
            self.from_wire[wire_id] = scenario_id
        server = self.server

        def apply() -> None:
            server.catalog.topics.clear()
            server.catalog.topics.update({name: count for name, _, count in image})
            server.core.topics_changed()

        self.host.call(apply)

    def _after_reload(self) -> None:
        pass  # a new core instance is fed the catalog's image when it starts

    def _stored_records(self) -> tuple:
        storage = self.storage
        return self.host.call(lambda: storage.records(0))

    def _record_view(self, record) -> dict:
        return rewrite_topic_ids(super()._record_view(record), self._unmap_id)

    def _unmap_id(self, topic_id):
        if isinstance(topic_id, str):
            try:
                topic_id = uuid.UUID(topic_id)
            except ValueError:
                return topic_id
        if isinstance(topic_id, uuid.UUID):
            return self.from_wire.get(topic_id, str(topic_id))
        return topic_id

    def _map_id(self, topic_id):
        if isinstance(topic_id, uuid.UUID):
            return self.to_wire.get(str(topic_id), topic_id)
        return topic_id

    # --- send ------------------------------------------------------------------------------

    def _send(self, step: dict) -> None:
        api, name, version, body = self._read_send(step)
        if api == "ConsumerGroupHeartbeat":
            body = rewrite_topic_ids(body, self._map_id)
        try:
            fields = schema.request_with_defaults(api, version, body)
        except schema.SchemaError as e:
            raise ScenarioFailure(f"bad request: {e}") from None
        if api == "SyncGroup" and version >= 5 and (fields["protocol_type"] is None or fields["protocol_name"] is None):
            # A scenario speaks to the coordinator; KafkaApis answers a v5+ SyncGroup without these
            # 23 before the coordinator sees it (D12), so the wire runner sends them, as clients do.
            group = self.host.call(self.server.core.coordinator.group, fields["group_id"])
            if group is not None:
                fields["protocol_type"] = fields["protocol_type"] or group.protocol_type
                fields["protocol_name"] = fields["protocol_name"] or group.protocol_name
        client_host = step.get("client_host", "/127.0.0.1")
        if not (isinstance(client_host, str) and client_host.startswith("/127.")):
            raise ScenarioFailure(f"client_host {client_host!r} cannot be sent from this machine "
                                  f"(only loopback addresses /127.x.y.z)")
        api_key = schema.API_KEYS[api]
        self.correlation += 1
        frame = kc.encode_request(api_key, version, self.correlation, step.get("client_id", "client"),
                                  kc.request_body(api_key, version, fields))
        sock = self._socket(client_host[1:])
        sent = _Sent(sock, api_key, version, self.correlation)
        self.sent[name] = (api, version)
        sock.sendall(frame)
        # Wait until the server has handled it (answered or parked).
        status = self._wait_handled(sent, name)
        if status == "closed":
            raise ScenarioFailure(f"the server closed the connection on {name}")
        self.inflight[name] = sent
        if status == "answered":
            self._collect(name)

    def _socket(self, local_ip: str) -> socket.socket:
        pool = self.idle.setdefault(local_ip, [])
        if pool:
            return pool.pop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.bind((local_ip, 0))
            sock.connect(("127.0.0.1", self.server.port))
        except OSError as e:
            sock.close()
            raise ScenarioFailure(f"cannot connect from {local_ip}: {e}") from None
        sock.settimeout(_WAIT_S)
        self.sockets.append(sock)
        return sock

    def _status(self, sent: _Sent) -> str:
        server = self.server
        return self.host.call(lambda: server.listener.request_status(sent.peer, sent.correlation_id))

    def _wait_handled(self, sent: _Sent, name: str) -> str:
        controls = self.server.controls
        try:
            return self.host.run(controls.request_handled(sent.peer, sent.correlation_id, _WAIT_S), _WAIT_S + 5)
        except TimeoutError:
            status = self._status(sent)
            raise ScenarioFailure(f"timed out waiting for the server to receive {name} (status {status})") from None

    def _collect(self, name: str) -> bool:
        """Read ``name``'s response if the server has answered it; True if it has one."""
        sent = self.inflight.get(name)
        if sent is None:
            return False
        if self._status(sent) != "answered":
            return False
        frame = _read_frame(sent.sock)
        correlation_id, body = kc.decode_response(sent.api_key, sent.version, frame)
        if correlation_id != sent.correlation_id:
            raise ScenarioFailure(f"{name}: response has correlation id {correlation_id}, "
                                  f"expected {sent.correlation_id}")
        del self.inflight[name]
        self.driver.responses.got[name] = kc.to_fields(body)
        self.driver.answer_counts[name] = self.driver.answer_counts.get(name, 0) + 1
        self.idle.setdefault(sent.peer[0], []).append(sent.sock)
        return True

    # --- expectations ------------------------------------------------------------------------

    def _shown(self, name: str) -> dict:
        return hexed(rewrite_topic_ids(self.driver.responses[name], self._unmap_id))

    def _check_answered_once(self) -> None:
        """A connection whose request was answered must carry nothing more."""
        idle = [s for pool in self.idle.values() for s in pool]
        if idle:
            readable, _, _ = select.select(idle, [], [], 0)
            if readable:
                raise ScenarioFailure("the server sent a response nobody asked for (answered twice?)")


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            chunk = sock.recv(n - got)
            if not chunk:
                raise ScenarioFailure("the server closed the connection")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


class WireScenarioRunner:
    """Runs scenarios through the wire; reuse one for many scenarios (one loop thread)."""

    def __init__(self) -> None:
        self.host = LoopThread("wire-conformance")

    def run_scenario(self, scenario: dict, path: str = "<scenario>") -> Result:
        return run_steps(_WireRunner(self.host), scenario, path)

    def run_file(self, path: str | Path) -> Result:
        scenario, unreadable = read_scenario(path)
        return unreadable or self.run_scenario(scenario, str(path))

    def close(self) -> None:
        self.host.close()


def run_files_wire(paths: list[Path]) -> list[Result]:
    runner = WireScenarioRunner()
    try:
        return [runner.run_file(p) for p in paths]
    finally:
        runner.close()
