"""The listener and its connections.

* ``Listener``: binds the port (retrying a port that only a previous process's connections
  still hold), accepts connections once the server serves, and closes them all on shutdown.
  ``listen_problem`` checks beforehand that the server can listen at all.
* ``Connection`` (an ``asyncio.Protocol``): frames are cut by their size prefix (over
  ``socket.request.max.bytes`` or negative: the connection is closed, as Kafka does) and
  handed to the request handler **one at a time per connection**: like Kafka, which mutes a
  channel until its request is answered, the next request on a connection is only read once
  the previous one has been answered. So responses go out in request order, and a parked
  JoinGroup/SyncGroup holds only its own connection.

Tests see what happens to their requests (``ServerOptions.track_requests``): each
connection remembers the correlation ids it handled and answered (``request_status``), the
listener the order of all answers (``answers``), and every change is told to the server's
``watch.Changes`` so that a test waits for the status it needs rather than sleeping.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from typing import Any

from groupcoord.adapters.wire.options import ServerOptions
from groupcoord.adapters.wire.watch import Changes

_PAUSE_ABOVE = 1 << 20  # buffered bytes of later requests before reading pauses


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
    before anything is opened, the way ``Listener.bind`` binds (every address of the name,
    SO_REUSEADDR). A port held only by connections of a previous process passes (``bind``
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


class Listener:
    def __init__(self, options: ServerOptions, log: Any, changes: Changes | None = None) -> None:
        self.log = log
        self.changes = changes if changes is not None else Changes()
        self.host = options.host
        self.port = options.port
        self.bind_retry_s = options.bind_retry_s
        self.max_request_bytes = options.max_request_bytes  # read by every connection, per frame
        self.track_requests = options.track_requests
        self.handler: Any = None  # the request handler, given by serve()
        self.loop: asyncio.AbstractEventLoop | None = None  # bind()'s
        self.connections: dict[int, Connection] = {}
        self.finished: dict[tuple, Connection] = {}  # closed connections by peer (track_requests)
        self.answers: list[tuple[tuple, int]] = []  # (peer, correlation id) in answer order (track_requests)
        self.stats = {"requests": 0, "connections": 0, "writes": 0}  # writes: answers written, alone or together
        self._next_conn = 0
        self._tcp: asyncio.base_events.Server | None = None
        self._to_flush: list[Connection] = []  # connections with answers to write at the next turn's start

    def flush_soon(self, conn: Connection) -> None:
        """``conn``'s answers go out at the start of the loop's next turn, with those of every
        connection this turn answered."""
        if not self._to_flush:
            self.loop.call_soon(self._flush)
        self._to_flush.append(conn)

    def _flush(self) -> None:
        conns, self._to_flush = self._to_flush, []
        for conn in conns:
            conn.flush()

    async def bind(self) -> int:
        """Bind the listening socket (not accepting yet); returns the bound port. After a crash,
        connections of the previous process can linger on the port (orphaned sockets in
        FIN-WAIT, which SO_REUSEADDR does not cover) and refuse the bind for a while: when
        nothing listens on the port, keep trying for up to ``bind_retry_s``. A port another
        server listens on fails at once."""
        loop = self.loop = asyncio.get_running_loop()
        deadline = loop.time() + self.bind_retry_s
        warned = False
        while True:
            try:
                self._tcp = await loop.create_server(lambda: Connection(self), self.host, self.port,
                                                     reuse_address=True, backlog=1024, start_serving=False)
                return self._tcp.sockets[0].getsockname()[1]
            except OSError as e:
                if e.errno != errno.EADDRINUSE or not self.port or loop.time() > deadline \
                        or await _someone_listens(self.host, self.port):
                    raise
                if not warned:
                    warned = True
                    self.log("warning", "port_busy_retrying", host=self.host, port=self.port,
                             detail="connections of a previous process still hold the port; nothing listens on it")
                await asyncio.sleep(0.1)  # retry interval

    async def serve(self, handler: Any) -> None:
        """Accept connections; their requests go to ``handler.handle_frame``."""
        self.handler = handler
        await self._tcp.start_serving()

    def stop_listening(self) -> None:
        if self._tcp is not None:
            self._tcp.close()

    async def close_all(self) -> None:
        """Answer the held Fetches and close every connection (aborted if still open after 5 s)."""
        for conn in list(self.connections.values()):
            conn.finish_fetch()  # a held Fetch is answered now
        for conn in list(self.connections.values()):
            conn.close()
        deadline = self.loop.time() + 5
        while self.connections and self.loop.time() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections.values()):
            conn.abort()

    def opened(self, conn: Connection) -> int:
        self._next_conn += 1
        self.connections[self._next_conn] = conn
        self.stats["connections"] += 1
        self.finished.pop(conn.peer, None)  # an earlier connection from the same address and port
        return self._next_conn

    def lost(self, conn: Connection) -> None:
        self.connections.pop(conn.id, None)
        if self.track_requests:
            self.finished[conn.peer] = conn
        self.handler.connection_lost(conn)

    def _connection(self, peer: tuple) -> Connection | None:
        """The connection from ``peer``: the open one, else the last one lost (track_requests)."""
        for conn in self.connections.values():
            if conn.peer == peer:
                return conn
        return self.finished.get(peer)

    def request_status(self, peer: tuple, correlation_id: int) -> str:
        """Tests (``track_requests``), for a request from ``peer``:

        * "answered": its answer was written (or, Produce with acks=0, it needs none);
        * "pending": handled and waiting for its answer (parked in the core, a held Fetch);
        * "queued": a whole frame in the connection's buffer, behind the request in progress;
        * "closed": the connection was closed with it unanswered (by either side);
        * "unknown": not (wholly) received yet."""
        conn = self._connection(peer)
        if conn is None:
            return "unknown"
        if correlation_id in conn.answered:
            return "answered"
        if correlation_id in conn.received or conn.closed:
            return "closed" if conn.closed else "pending"
        return "queued" if conn.holds_frame(correlation_id) else "unknown"

    def connection_status(self, peer: tuple) -> str:
        """Tests (``track_requests``), for the connection from ``peer``: "open", "closing" (the
        server closed it), "lost" (gone, whoever closed it) or "unknown" (not accepted yet)."""
        conn = self._connection(peer)
        if conn is None:
            return "unknown"
        if conn.id not in self.connections:
            return "lost"
        return "closing" if conn.closed else "open"

    def frames_handled(self, peer: tuple) -> int:
        """Tests (``track_requests``): how many frames the connection from ``peer`` handed to
        the request handler (a frame without a correlation id too)."""
        conn = self._connection(peer)
        return 0 if conn is None else conn.frames


class Connection(asyncio.Protocol):
    """One client connection: frames in, one request at a time, responses in order.

    Answers are not written as they are given but at the start of the loop's next turn, every
    connection's together (``Listener.flush_soon``):
    * a connection's answers of one turn go in one ``send`` system call, not one per answer
      (a pipelining client, or the members ``bench load`` puts on one connection);
    * on loopback the ``send`` also wakes the client's process, which, woken for each answer
      apart, took ~3 µs more of the server's kernel time per answer than when the answers of a
      turn go out back to back (spec/benchmarks.md). The wait is the rest of the turn."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.buf = bytearray()
        self.busy = False
        self.closed = False
        self.in_pump = False
        self.unsent: list[bytes] = []  # answers given, written at the start of the loop's next turn
        self.flush_queued = False  # this connection is in its listener's flush list
        self.paused = False
        self.abandoned = False
        self.pending_rid: tuple | None = None
        self.correlation_id: int | None = None
        self.fetch_timer: Any = None
        self.fetch_data: Any = None  # a held Fetch's answer: bytes, or a function making them
        self.received: list[int] = []   # correlation ids, when the server tracks requests
        self.answered: list[int] = []
        self.frames = 0  # frames handed to the request handler
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
        self.id = self.listener.opened(self)
        if self.listener.log.threshold <= 10:
            self.listener.log("debug", "connection_open", conn=self.id, peer=self.peer_text)
        self.listener.changes.changed()

    def data_received(self, data: bytes) -> None:
        if not self.buf and not self.busy and not self.in_pump and not self.closed and len(data) >= 4:
            # The common case, one whole request and nothing before it: no buffering.
            size = int.from_bytes(data[:4], "big", signed=True)
            if len(data) == 4 + size and 0 <= size <= self.listener.max_request_bytes:
                self.in_pump = True
                try:
                    self._take(data[4:])
                finally:
                    self.in_pump = False
                self.listener.changes.changed()
                return
        self.buf += data
        self._pump()

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.fetch_timer is not None:
            self.fetch_timer.cancel()
            self.fetch_timer = self.fetch_data = None
        self.listener.lost(self)
        if self.listener.log.threshold <= 10:
            self.listener.log("debug", "connection_closed", conn=self.id, peer=self.peer_text,
                              parked=self.busy, error=str(exc) if exc else None)
        self.listener.changes.changed()

    # requests
    def _pump(self) -> None:
        if self.in_pump or self.closed:
            return
        self.in_pump = True
        try:
            buf = self.buf
            listener = self.listener
            while not self.busy and not self.closed and len(buf) >= 4:
                size = int.from_bytes(buf[:4], "big", signed=True)
                if size < 0 or size > listener.max_request_bytes:
                    listener.log("warning", "bad_frame", conn=self.id, peer=self.peer_text, size=size,
                                 limit=listener.max_request_bytes, error="frame size out of range", action="close")
                    self.close()
                    break
                if len(buf) < 4 + size:
                    break
                frame = bytes(buf[4:4 + size])
                del buf[:4 + size]
                self._take(frame)
            if not self.closed:
                if self.busy and len(buf) > _PAUSE_ABOVE and not self.paused:
                    self.paused = True
                    self.transport.pause_reading()
                elif self.paused and not (self.busy and len(buf) > _PAUSE_ABOVE):
                    self.paused = False
                    self.transport.resume_reading()
        finally:
            self.in_pump = False
        self.listener.changes.changed()

    def flush(self) -> None:
        """Write the answers given so far, in one ``send``."""
        self.flush_queued = False
        unsent = self.unsent
        if unsent:
            self.unsent = []
            if not self.closed:
                self.listener.stats["writes"] += 1
                self.transport.write(unsent[0] if len(unsent) == 1 else b"".join(unsent))

    def _take(self, frame: bytes) -> None:
        """Hand one request frame to the request handler (called with ``in_pump`` set)."""
        listener = self.listener
        self.busy = True
        listener.stats["requests"] += 1
        listener.handler.handle_frame(self, frame)
        self.frames += 1
        if listener.track_requests and self.correlation_id is not None:
            self.received.append(self.correlation_id)

    def holds_frame(self, correlation_id: int) -> bool:
        """A whole request frame with ``correlation_id`` waits in the buffer (tests)."""
        buf, at = self.buf, 0
        while len(buf) - at >= 12:
            size = int.from_bytes(buf[at:at + 4], "big", signed=True)
            if size < 8 or len(buf) - at - 4 < size:
                return False
            if int.from_bytes(buf[at + 8:at + 12], "big", signed=True) == correlation_id:
                return True
            at += 4 + size
        return False

    def send(self, data: bytes | None) -> None:
        """The answer to the current request (None: a request Kafka does not answer)."""
        if not self.closed and data is not None:
            self.unsent.append(data)
            if not self.flush_queued:
                self.flush_queued = True
                self.listener.flush_soon(self)
            if self.listener.log.threshold <= 10:
                self.listener.log("debug", "response", conn=self.id, correlation_id=self.correlation_id, size=len(data))
        if self.listener.track_requests and self.correlation_id is not None:
            self.answered.append(self.correlation_id)
            self.listener.answers.append((self.peer, self.correlation_id))
        self.busy = False
        self.pending_rid = None
        if not self.in_pump and len(self.buf) >= 4 and not self.closed:
            # Never handle the next request from inside another event's command loop.
            self.listener.loop.call_soon(self._pump)
        self.listener.changes.changed()

    def hold_fetch(self, timer: Any, data: Any) -> None:
        """Hold the current Fetch's answer: ``data`` (its bytes, or a function making them when
        it is answered) goes out at ``finish_fetch``; ``timer`` (with ``cancel()``) calls it."""
        self.fetch_timer, self.fetch_data = timer, data

    def finish_fetch(self) -> None:
        if self.fetch_data is None:
            return
        data, self.fetch_data = self.fetch_data, None
        if self.fetch_timer is not None:
            self.fetch_timer.cancel()
            self.fetch_timer = None
        self.send(data() if callable(data) else data)

    def close(self) -> None:
        if not self.closed:
            if self.transport is not None:
                self.flush()  # answers given before the request that closes it go first, as in Kafka
            self.closed = True
            if self.transport is not None:
                self.transport.close()
            self.listener.changes.changed()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
