"""The recording proxy: a bootstrap listener that forwards to the upstream broker, and one more
listener per broker node, opened the first time a Metadata or FindCoordinator response names
that node, each forwarding to that node's real address. Connections are numbered from 1 in
accept order across all listeners; each is a ``Link``.

``bind()`` opens the bootstrap listener without accepting yet (so a caller can refuse to start
before it writes anything), ``serve()`` starts accepting, ``stop()`` stops accepting and
closes every connection (their waiting requests are written with no response).
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from typing import Callable

from groupcoord.adapters.observe.link import Link, now_us
from groupcoord.adapters.observe.trace import FORMAT

BOOTSTRAP = -1  # the ``broker`` of connections to the bootstrap listener
_WILDCARDS = ("", "0.0.0.0", "::")


def address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def topic_runs(runs: dict[str, list[dict]], record: dict) -> bool:
    """Fold a Metadata answer's topics into ``runs`` (name -> its states in order, each with the
    first and last answer's time showing it); True when a state changed. A topic whose answer
    tells nothing of it (an error other than UNKNOWN_TOPIC_OR_PARTITION, no id) is skipped."""
    changed = False
    at = record.get("send_us")
    for t in record.get("topics") or ():
        present = bool(t.get("topic_id")) and (t.get("partitions") or 0) > 0
        if not present and t.get("error_code") != 3:
            continue
        state = {"name": t.get("name"), "topic_id": t.get("topic_id") if present else None,
                 "partitions": t.get("partitions") if present else 0, "error_code": 0 if present else 3}
        seq = runs.setdefault(state["name"], [])
        if seq and all(seq[-1][k] == v for k, v in state.items()):
            seq[-1]["last_us"] = at
        else:
            seq.append({**state, "first_us": at, "last_us": at})
            changed = True
    return changed


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class RecordingProxy:
    def __init__(self, upstream: tuple[str, int], listen: tuple[str, int], record: Callable[[dict], None],
                 log: Callable[[str], None] = _stderr, on_brokers: Callable[[], None] | None = None) -> None:
        self.upstream = upstream
        self.host, self.port = listen
        # what clients are told to connect to: a wildcard address is no address to connect to
        self.advertised_host = "127.0.0.1" if self.host in _WILDCARDS else self.host
        self.record = record
        self.log = log
        self.on_brokers = on_brokers  # a new broker listener opened (the caller rewrites meta.json)
        self.targets: dict[int, tuple[str, int]] = {BOOTSTRAP: upstream}  # node -> its real address
        self.listeners: dict[int, tuple[str, int]] = {}  # node -> the proxy's address for it
        self.passed_through: Counter[str] = Counter()
        self.not_decoded: Counter[str] = Counter()
        self.data_plane_pairs: Counter[str] = Counter()  # Produce, Fetch, ... pairs: counted, not recorded
        self.started_us: int | None = None
        # what the Metadata answers showed of each topic, as runs of one state (topic_runs)
        self.topic_runs: dict[str, list[dict]] = {}
        self.every_topic = False  # some Metadata request asked for every topic
        self.connections = 0
        self._servers: dict[int, asyncio.AbstractServer] = {}
        self._opening: dict[int, asyncio.Future] = {}
        self._links: set[asyncio.Task] = set()
        self._stopping = False

    async def bind(self) -> None:
        """Open the bootstrap listener (OSError when it cannot); it accepts once ``serve()``."""
        self._servers[BOOTSTRAP] = await asyncio.start_server(self._accepting(BOOTSTRAP), self.host, self.port,
                                                              start_serving=False)
        self.port = self._servers[BOOTSTRAP].sockets[0].getsockname()[1]

    async def serve(self) -> None:
        self.started_us = now_us()
        await self._servers[BOOTSTRAP].start_serving()

    def _accepting(self, broker: int):
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if self._stopping:
                writer.close()
                return
            self.connections += 1
            number = self.connections
            task = asyncio.current_task()
            self._links.add(task)
            try:
                await Link(number, broker, reader, writer, self).run()
            except Exception as e:
                self.log(f"connection {number}: closed on an unexpected {type(e).__name__}: {e}")
                writer.close()
            finally:
                self._links.discard(task)
        return accept

    # --- what links call --------------------------------------------------------------------

    def passed(self, api: str) -> None:
        self.passed_through[api] += 1

    def undecoded(self, api: str) -> None:
        self.not_decoded[api] += 1

    def paired(self, api: str) -> None:
        self.data_plane_pairs[api] += 1

    def topics(self, record: dict) -> None:
        """A Metadata answer's topics (``pairing.metadata_record``): each topic's state kept as
        runs (first and last answer showing it so), in meta.json, rewritten at once."""
        topic_runs(self.topic_runs, record)
        self.every_topic = self.every_topic or bool(record.get("all"))
        if self.on_brokers is not None:
            self.on_brokers()

    async def advertise(self, node: int, host: str, port: int) -> tuple[str, int]:
        """The proxy's address for broker ``node`` (really at ``host``:``port``), its listener
        opened on first sight; the real address when no listener can be opened."""
        if self.targets.get(node, (host, port)) != (host, port):
            self.log(f"broker {node} moved from {address(*self.targets[node])} to {address(host, port)}")
        self.targets[node] = (host, port)
        if node not in self._opening:
            self._opening[node] = asyncio.ensure_future(self._open(node))
        opened = await asyncio.shield(self._opening[node])
        return opened or (host, port)

    async def _open(self, node: int) -> tuple[str, int] | None:
        if self._stopping:
            return None
        try:
            server = await asyncio.start_server(self._accepting(node), self.host, 0)
        except OSError as e:
            self.log(f"cannot open a listener for broker {node} on {self.host}: {e}; its clients go direct")
            return None
        self._servers[node] = server
        self.listeners[node] = (self.advertised_host, server.sockets[0].getsockname()[1])
        self.log(f"broker {node} ({address(*self.targets[node])}) through {address(*self.listeners[node])}")
        if self.on_brokers is not None:
            self.on_brokers()
        return self.listeners[node]

    # --- the whole proxy --------------------------------------------------------------------

    def meta(self, stopped: bool = False) -> dict:
        return {"format": FORMAT, "upstream": address(*self.upstream), "listen": address(self.host, self.port),
                "started_us": self.started_us,
                "brokers": {str(node): address(*a) for node, a in sorted(self.listeners.items())},
                "passed_through": dict(sorted(self.passed_through.items())),
                "undecoded": dict(sorted(self.not_decoded.items())),
                "data_plane_pairs": dict(sorted(self.data_plane_pairs.items())),
                "topics": [run for name in sorted(self.topic_runs) for run in self.topic_runs[name]],
                "metadata_every_topic": self.every_topic,
                "stopped_us": now_us() if stopped else None}

    async def stop(self) -> None:
        """Stop accepting, then close every connection (each writes its waiting requests)."""
        self._stopping = True
        for server in self._servers.values():
            server.close()
        for task in list(self._links):
            task.cancel()
        await asyncio.gather(*self._links, return_exceptions=True)
        for server in self._servers.values():
            await server.wait_closed()
