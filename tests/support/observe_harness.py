"""Helpers for the recording proxy's tests: ``groupcoord record`` in a subprocess, a fake
broker of canned answers that keeps every byte it receives, and blocking raw-socket requests.

Every process and thread started here is stopped by its ``stop()``; every wait polls a
condition with a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

from server_harness import wait_until

from groupcoord.adapters.observe.trace import read_meta, read_observed
from groupcoord.adapters.protocol import codec

HOLD_GROUP = "hold"  # the fake broker never answers a Heartbeat of this group


class RecorderProcess:
    """``groupcoord record --upstream UPSTREAM --out OUT`` on a free port; its stderr collected."""

    def __init__(self, upstream: str, out: Path, fmt: str = "jsonl") -> None:
        self.out = Path(out)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "groupcoord.adapters.cli.main", "record", "--upstream", upstream,
             "--listen", "127.0.0.1:0", "--out", str(out), "--format", fmt],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        wait_until(lambda: self.proc.poll() is not None or any(row.startswith("recording ") for row in self.log()), 30,
                   "the recorder to listen")
        assert self.proc.poll() is None, self.log()
        self.bootstrap = read_meta(out)["listen"]
        self.port = int(self.bootstrap.rsplit(":", 1)[1])

    def _read(self) -> None:
        for line in self.proc.stderr:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def log(self) -> list[str]:
        with self._lock:
            return list(self.lines)

    def meta(self) -> dict:
        return read_meta(self.out)

    def records(self) -> list[dict]:
        return read_observed(self.out)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._reader.join(5)
        return self.proc.returncode


# --- raw requests -------------------------------------------------------------------------------------------

def connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.settimeout(10)
    return s


def read_frame(s: socket.socket) -> bytes:
    """One frame with its size prefix; b"" when the peer closed."""
    head = _read_exactly(s, 4)
    if len(head) < 4:
        return b""
    (size,) = struct.unpack(">i", head)
    return head + _read_exactly(s, size)


def _read_exactly(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def request(api_key: int, version: int, correlation_id: int, fields: dict, client_id: str = "raw") -> bytes:
    return codec.encode_request(api_key, version, correlation_id, client_id,
                                codec.request_body(api_key, version, fields))


def response_fields(api_key: int, version: int, frame: bytes) -> dict:
    return codec.to_fields(codec.decode_response(api_key, version, frame[4:])[1])


class RawMember:
    """One client connection sending Kafka requests by hand (as no consumer library would:
    several in flight on one connection, a member that goes silent). Answers come back in the
    order sent; ``answer`` waits for the next one at most ``timeout`` seconds (None: none came)."""

    def __init__(self, port: int, client_id: str) -> None:
        self.sock = connect(port)
        self.client_id = client_id
        self.member_id = ""
        self._pending: list[tuple[int, int]] = []
        self._next = 0

    def send(self, api: str, version: int, fields: dict) -> None:
        self._next += 1
        self.sock.sendall(request(codec.API_KEYS[api], version, self._next, fields, self.client_id))
        self._pending.append((codec.API_KEYS[api], version))

    def answer(self, timeout: float = 10) -> dict | None:
        import select

        if not select.select([self.sock], [], [], timeout)[0]:
            return None
        frame = read_frame(self.sock)
        if not frame:
            raise ConnectionError(f"{self.client_id}: the connection closed with {len(self._pending)} unanswered")
        return response_fields(*self._pending.pop(0), frame)

    def call(self, api: str, version: int, fields: dict) -> dict:
        self.send(api, version, fields)
        got = self.answer()
        if got is None:
            raise TimeoutError(f"{self.client_id}: no answer to {api} within 10 s")
        return got

    def close(self) -> None:
        self.sock.close()


def closed_by_peer(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


# --- a fake broker --------------------------------------------------------------------------------------------

class FakeBroker:
    """A Kafka-protocol "broker" on 127.0.0.1 (threads) that keeps every byte it receives
    (``received``) and answers: Metadata with ``brokers`` ((node id, port) pairs),
    FindCoordinator with node ``coordinator``, Heartbeat with NONE (none at all for group
    ``hold``), anything else with ``canned(frame)``, bytes no codec made."""

    def __init__(self) -> None:
        self.brokers: list[tuple[int, int]] = []
        self.coordinator = -1
        self.received = bytearray()
        self.connections = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: list[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @staticmethod
    def canned(frame: bytes) -> bytes:
        payload = frame[4:8] + b"\x00canned answer\xff" + bytes(reversed(frame[8:]))
        return struct.pack(">i", len(payload)) + payload

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._open.append(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            while True:
                frame = read_frame(conn)
                if not frame:
                    return
                with self._lock:
                    self.received += frame
                answer = self._answer(frame[4:])
                if answer is not None:
                    conn.sendall(answer)
        except OSError:
            return
        finally:
            conn.close()

    def _answer(self, frame: bytes) -> bytes | None:
        api_key, version, correlation_id, _client = codec.peek_header(frame)
        if api_key == 3 and codec.has_schema(3, version):
            body = {"brokers": [{"node_id": n, "host": "127.0.0.1", "port": p} for n, p in self.brokers],
                    "controller_id": self.brokers[0][0] if self.brokers else -1, "topics": []}
        elif api_key == 10 and codec.has_schema(10, version):
            port = dict(self.brokers)[self.coordinator]
            keys = codec.to_fields(codec.decode_request(frame).body).get("coordinator_keys") or ["g"]
            body = {"node_id": self.coordinator, "host": "127.0.0.1", "port": port,
                    "coordinators": [{"key": k, "node_id": self.coordinator, "host": "127.0.0.1", "port": port}
                                     for k in keys]}
        elif api_key == 12 and codec.has_schema(12, version):
            if codec.to_fields(codec.decode_request(frame).body)["group_id"] == HOLD_GROUP:
                return None
            body = {"error_code": 0}
        else:
            return self.canned(struct.pack(">i", len(frame)) + frame)
        return codec.encode_response(api_key, version, correlation_id, codec.response_body(api_key, version, body))

    def got(self) -> bytes:
        with self._lock:
            return bytes(self.received)

    def stop(self) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (Linux)
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            for conn in self._open:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        for t in self._threads:
            t.join(5)


def json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def consumer_pair(bootstrap: str, group: str, during=None) -> None:
    """Two kafka-python consumers join ``group`` at ``bootstrap`` and are assigned (perhaps
    nothing), then ``during(workers)`` runs, then they leave; every one is stopped."""
    from server_harness import Worker

    workers = []
    try:
        workers = [Worker("kafka-python", bootstrap, group, client_id=f"kp-{i}") for i in range(2)]
        wait_until(lambda: all(w.assignment is not None for w in workers), 60, "both consumers assigned")
        if during is not None:
            during(workers)
        for w in workers:
            w.close()
    finally:
        for w in workers:
            w.stop()
