"""One client connection through the proxy, and its own connection to the broker its listener
stands for.

Two pumps run side by side. Client -> broker: each request frame is forwarded byte for byte;
the group APIs are decoded first (kio, through ``codec``) and kept, by correlation id, until
their response. Broker -> client: a response is matched to its request by the correlation id
it starts with (not by order); a group API's is decoded and the pair written as one record; a
data-plane API's (Produce, Fetch, ...) is passed on undecoded and the pair only counted;
Metadata and FindCoordinator responses are re-encoded with the proxy's addresses
(``rewrite``); every other frame goes back untouched. When either side closes, so does the
other, and requests still waiting are written with no response.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

from groupcoord.adapters.observe.pairing import (
    MalformedFrame,
    Pending,
    correlation_id_of,
    decode_response,
    metadata_record,
    note_request,
    pair_record,
)
from groupcoord.adapters.observe.rewrite import REWRITTEN, Advertise, rewrite
from groupcoord.adapters.observe.trace import undecodable_text
from groupcoord.adapters.protocol import codec

MAX_REQUEST_BYTES = 104_857_600  # Kafka's socket.request.max.bytes: a larger (or negative) size is malformed
CONNECT_TIMEOUT_S = 10.0


class Hub(Protocol):
    """What a link needs of its proxy."""

    targets: dict[int, tuple[str, int]]
    advertise: Advertise

    def record(self, record: dict) -> None: ...
    def topics(self, record: dict) -> None: ...
    def passed(self, api: str) -> None: ...
    def undecoded(self, api: str) -> None: ...
    def paired(self, api: str) -> None: ...
    def log(self, line: str) -> None: ...


def now_us() -> int:
    return time.time_ns() // 1000


class Link:
    def __init__(self, number: int, broker: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 hub: Hub) -> None:
        self.number = number
        self.broker = broker
        self.client = (reader, writer)
        self.hub = hub
        self.pending: dict[int, Pending] = {}
        peer = writer.get_extra_info("peername")
        self.name = f"connection {number} from {peer[0]}:{peer[1]}" if peer else f"connection {number}"

    async def run(self) -> None:
        host, port = self.hub.targets[self.broker]
        client_reader, client_writer = self.client
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as e:
            self.hub.log(f"{self.name}: cannot reach the broker at {host}:{port} ({e or type(e).__name__}); closed")
            client_writer.close()
            return
        pumps = [asyncio.ensure_future(self._requests(client_reader, up_writer)),
                 asyncio.ensure_future(self._responses(up_reader, client_writer))]
        try:
            done, _ = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                problem = task.exception()
                if isinstance(problem, MalformedFrame):
                    self.hub.log(f"{self.name}: {problem}; closed")
                elif isinstance(problem, (OSError, EOFError)):
                    pass  # a side went away: nothing to say
                elif problem is not None:
                    raise problem
        finally:
            for task in pumps:
                task.cancel()
            # written before the next await: the proxy stopping cancels this task, and a cancel
            # landing in the await below would lose the requests still waiting
            self._abandon()
            client_writer.close()
            up_writer.close()
            await asyncio.gather(*pumps, return_exceptions=True)

    async def _requests(self, reader: asyncio.StreamReader, upstream: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readexactly(4)
            except asyncio.IncompleteReadError as e:
                if e.partial:
                    raise MalformedFrame(f"the client closed within a size prefix ({len(e.partial)} bytes)") from None
                return  # the client closed between requests
            size = int.from_bytes(head, "big", signed=True)
            if not 0 <= size <= MAX_REQUEST_BYTES:
                raise MalformedFrame(f"malformed frame: size {size}")
            try:
                frame = await reader.readexactly(size)
            except asyncio.IncompleteReadError as e:
                raise MalformedFrame(f"the client closed within a frame ({len(e.partial)} of {size} bytes)") from None
            self._note(frame, now_us())
            upstream.write(head + frame)
            await upstream.drain()

    def _note(self, frame: bytes, recv_us: int) -> None:
        note_request(frame, recv_us, self.pending, self.hub)

    async def _responses(self, reader: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readexactly(4)
            except asyncio.IncompleteReadError:
                return  # the broker closed
            size = int.from_bytes(head, "big", signed=True)
            if size < 4:
                raise MalformedFrame(f"the broker sent a malformed frame (size {size})")
            frame = await reader.readexactly(size)
            correlation_id = correlation_id_of(frame)
            pending = self.pending.pop(correlation_id, None)
            if pending is not None and pending.counted is not None:  # a data-plane pair: counted, passed on as it is
                client.write(head + frame)
                await client.drain()
                self.hub.paired(pending.counted)
                continue
            out, response, body = head + frame, None, None
            if pending is not None:
                out, response, body = await self._decoded(pending, correlation_id, frame, out)
            client.write(out)
            await client.drain()
            if pending is not None and pending.request is not None:
                self._write(correlation_id, pending, now_us(), response,
                            undecodable=undecodable_text(frame) if response is None else None)
            elif pending is not None and body is not None:
                topics = metadata_record(self.number, self.broker, correlation_id, pending, now_us(), body)
                if topics is not None:  # the topics image of consumer groups (meta.json's "topics")
                    self.hub.topics(topics)

    async def _decoded(self, pending: Pending, correlation_id: int, frame: bytes,
                       out: bytes) -> tuple[bytes, Any, Any]:
        """(the frame for the client, the response's fields or None, kio's body or None):
        rewritten when it names brokers."""
        try:
            body, fields = decode_response(pending, frame)
        except codec.FrameError as e:
            self.hub.log(f"{self.name}: passed on a response kio cannot decode: {e}")
            return out, None, None
        if pending.api_key in REWRITTEN:
            moved = await rewrite(pending.api_key, body, self.hub.advertise)
            out = codec.encode_response(pending.api_key, pending.version, correlation_id, moved)
        return out, fields, body

    def _write(self, correlation_id: int, pending: Pending, send_us: int | None, response: dict | None,
               open_until_us: int | None = None, undecodable: str | None = None) -> None:
        self.hub.record(pair_record(self.number, self.broker, correlation_id, pending, send_us, response,
                                    open_until_us, undecodable))

    def _abandon(self) -> None:
        """Requests that got no response (the connection closed, or the proxy stopped)."""
        until = now_us()
        for correlation_id, pending in self.pending.items():
            if pending.request is not None:
                self._write(correlation_id, pending, None, None, until)
        self.pending.clear()
