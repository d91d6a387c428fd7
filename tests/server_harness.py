"""Helpers for the wire tests: a server subprocess, real-client worker subprocesses, an
in-process server on its own event-loop thread, and bounded polling.

Every process started here is stopped by its ``stop()`` (the fixtures call it); every wait
polls a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import shutil
import subprocess
import tempfile
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
WORKER = HERE / "client_worker.py"


def wait_until(condition: Callable[[], Any], timeout: float, what: str = "condition", interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class ServerProcess:
    """``groupcoord serve`` in a subprocess on a free port, its JSON log lines collected."""

    def __init__(self, *extra: str, topics: tuple[str, ...] = ("t6=6",), settings: dict | None = None,
                 env: dict | None = None) -> None:
        settings = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 500, **(settings or {})}
        cmd = [sys.executable, "-m", "groupcoord.adapters.server_cli", "serve", "--host", "127.0.0.1",
               "--port", "0", "--log-format", "json"]
        for t in topics:
            cmd += ["--topic", t]
        for k, v in settings.items():
            cmd += ["--" + k, str(v)]
        cmd += list(extra)
        if "--storage" not in extra and "--data-dir" not in extra:
            # The default storage is SQLite under the working directory: give each server its own.
            self.data_dir = tempfile.mkdtemp(prefix="groupcoord-test-")
            cmd += ["--data-dir", self.data_dir]
        else:
            self.data_dir = None
        self.cmd = cmd
        self.lines: list[dict] = []
        self.raw: list[str] = []
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        listening = wait_until(lambda: self.find("listening"), 20, "the server to listen")
        self.port = listening["port"]
        self.bootstrap = f"127.0.0.1:{self.port}"

    def _read(self) -> None:
        for line in self.proc.stderr:
            with self._lock:
                self.raw.append(line)
                try:
                    self.lines.append(json.loads(line))
                except ValueError:
                    pass

    def find(self, event: str, **match) -> dict | None:
        with self._lock:
            for line in self.lines:
                if line.get("event") == event and all(line.get(k) == v for k, v in match.items()):
                    return line
        return None

    def events(self, event: str, **match) -> list[dict]:
        with self._lock:
            return [l for l in self.lines if l.get("event") == event and all(l.get(k) == v for k, v in match.items())]

    def group_states(self, group: str) -> list[dict]:
        return self.events("group", group=group)

    def last_group_state(self, group: str) -> dict | None:
        states = self.group_states(group)
        return states[-1] if states else None

    def log_text(self) -> str:
        with self._lock:
            return "".join(self.raw[-200:])

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        return self.proc.returncode


class Worker:
    """One real consumer (tests/client_worker.py) in a subprocess."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str = "t6", *, assignor: str = "range",
                 client_id: str = "worker", instance_id: str | None = None, session_ms: int = 3000,
                 heartbeat_ms: int = 300, lifetime: float = 150) -> None:
        cmd = [sys.executable, str(WORKER), client, bootstrap, group, topic, "--assignor", assignor,
               "--client-id", client_id, "--session-ms", str(session_ms), "--heartbeat-ms", str(heartbeat_ms),
               "--lifetime", str(lifetime)]
        if instance_id:
            cmd += ["--instance-id", instance_id]
        self.name = client_id
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.events: queue.Queue = queue.Queue()
        self.seen: list[dict] = []
        self.assignment: list[int] | None = None
        self.stderr: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                self.seen.append(event)
                if event.get("event") == "assignment":
                    self.assignment = event["partitions"]
            self.events.put(event)

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            with self._lock:
                self.stderr.append(line)
                del self.stderr[:-200]

    def send(self, **cmd) -> None:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def wait_event(self, name: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{self.name}: no {name!r} within {timeout}s; seen {self.seen[-5:]}; "
                                     f"stderr {''.join(self.stderr[-20:])}")
            try:
                event = self.events.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                if self.proc.poll() is not None and self.events.empty():
                    raise AssertionError(f"{self.name} exited ({self.proc.returncode}) waiting for {name}: "
                                         f"{self.seen[-5:]} {''.join(self.stderr[-30:])}")
                continue
            if event.get("event") == "error":
                raise AssertionError(f"{self.name}: {event}")
            if event.get("event") == name:
                return event

    def close(self, timeout: float = 30) -> None:
        """A clean close (a dynamic member sends LeaveGroup)."""
        if self.proc.poll() is None:
            try:
                self.send(cmd="close")
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        """Dies without a word: no LeaveGroup, no more heartbeats."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        self.kill()


def balanced(workers: list[Worker], partitions: int = 6) -> bool:
    """Each worker has a share (sizes differ by at most one) and together they cover every partition once."""
    got = [w.assignment for w in workers]
    if any(a is None for a in got):
        return False
    flat = [p for a in got for p in a]
    sizes = [len(a) for a in got]
    return sorted(flat) == list(range(partitions)) and max(sizes) - min(sizes) <= 1


class InProcessServer:
    """A GroupServer on an event loop in a background thread (for tests that reach into it)."""

    def __init__(self, **kwargs: Any) -> None:
        from groupcoord.adapters.server import GroupServer

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        kwargs.setdefault("host", "127.0.0.1")
        kwargs.setdefault("port", 0)
        self.server = self.call(lambda: GroupServer(**kwargs))
        self.run(self.server.start())
        self.port = self.server.port

    def run(self, coro, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], Any], timeout: float = 30) -> Any:
        async def wrapper():
            return fn()
        return self.run(wrapper(), timeout)

    def stop(self) -> None:
        try:
            self.run(self.server.shutdown("test"), timeout=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()
