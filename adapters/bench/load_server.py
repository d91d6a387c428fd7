"""The server side of ``groupcoord bench load``: a ``GroupServer`` in its own process, pinned
to one CPU, that reports what only it can see.

Run by ``bench.load`` as ``python -m groupcoord.adapters.bench.load_server``. It measures
the core's own heartbeat step on the same CPU (``bench.core.bench_heartbeat``) before it
serves and again after, then prints one JSON object per line on stdout: ``{"port": ...}``
once listening, then every ``--report-ms`` the process's CPU seconds (every thread: the
SQLite writer too), RSS, requests read, timers fired as session expiries and the longest
garbage-collection pause so far, one more on each SIGUSR1 (``"mark": n``), and a last line
once stopped (SIGTERM).

Beside the group server it listens on a second port with ``FloorConnection``: the least an
asyncio server can do for a heartbeat (take the frame, write a fixed answer with its
correlation id), in the same process, on the same CPU and event loop. The driver's floor
window against it measures what any Python server on this loop pays per request before it
does anything; ``floor_requests`` counts its answers.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import resource
import signal
import sys
import time

from groupcoord.adapters.bench.core import bench_heartbeat
from groupcoord.adapters.storage.memory import MemoryStorage
from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.wire.collector import GcPauses, settle_collector
from groupcoord.adapters.wire.log import Log
from groupcoord.adapters.wire.options import ServerOptions
from groupcoord.adapters.wire.server import GroupServer
from groupcoord.core.config import CoordinatorConfig

_PAGE = os.sysconf("SC_PAGE_SIZE")
CORE_STEP_HEARTBEATS = 200_000


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 1e6


def core_heartbeat_step_us() -> float:
    """The pure core's heartbeat step here (best of three, 10-member group)."""
    return min(1e6 / bench_heartbeat(10, CORE_STEP_HEARTBEATS) for _ in range(3))


def _cpu_s() -> tuple[float, float]:
    """(user + system, system) CPU seconds of the process, every thread."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, usage.ru_stime


class _ExpiryCount:
    """Session expiries: member (heartbeat) timers that fire. Wraps the timer table's pop."""

    def __init__(self, timers) -> None:
        self.count = 0
        self._pop = timers.pop_due
        timers.pop_due = self.pop_due

    def pop_due(self, now_ms: int):
        due = self._pop(now_ms)
        if due is not None and due[0][-1] == "heartbeat":
            self.count += 1
        return due


class FloorConnection(asyncio.Protocol):
    """Answers every whole frame as a Heartbeat v0-v3 with no error: size, correlation id,
    throttle time, error code. No parsing beyond the frame's length and correlation id."""

    answered = 0
    _ANSWER_TAIL = bytes(6)  # throttle_time_ms 0, error_code 0

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.buf = bytearray()

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        at, end, out = 0, len(buf), []
        while end - at >= 4:
            size = int.from_bytes(buf[at:at + 4], "big")
            if end - at - 4 < size:
                break
            correlation = buf[at + 8:at + 12]  # after api key and version
            out.append(b"\x00\x00\x00\x0a" + correlation + self._ANSWER_TAIL)
            at += 4 + size
        if at:
            del buf[:at]
            FloorConnection.answered += len(out)
            self.transport.write(b"".join(out))


def _emit(line: dict) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def serve(args: argparse.Namespace) -> None:
    if args.storage == "sqlite":
        from groupcoord.adapters.storage.sqlite import SqliteStorage

        storage = SqliteStorage(args.data_dir)
    else:
        storage = MemoryStorage()
    config = CoordinatorConfig(group_initial_rebalance_delay_ms=0, advertised_host="127.0.0.1")
    server = GroupServer(config, apis.TopicCatalog({args.topic: args.partitions}),
                         options=ServerOptions(host="127.0.0.1", port=0), storage=storage,
                         log=Log(sys.stderr, level="warning"))  # as `serve --log-level warning`
    await server.start()
    floor = await asyncio.get_running_loop().create_server(FloorConnection, "127.0.0.1", 0)
    if args.collector == "settled":
        settle_collector()
    pauses = GcPauses()
    pauses.start()
    expiries = _ExpiryCount(server.core.timers)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    marks = 0

    profile = None

    def mark() -> None:  # the driver's SIGUSR1: a report now, where one of its windows starts or ends
        nonlocal marks, profile
        marks += 1
        _emit({**report(), "mark": marks})
        pauses.longest_since_mark_ms = pauses.longest_cpu_since_mark_ms = 0.0
        # every window is profiled afresh and the last one (the load window, after the floor's) stays
        if args.profile and marks % 2 == 1:
            profile = cProfile.Profile()
            profile.enable()
        elif profile is not None:
            profile.disable()
            profile.dump_stats(args.profile)
            profile = None

    loop.add_signal_handler(signal.SIGUSR1, mark)
    started = time.monotonic()

    def report(final: bool = False) -> dict:
        cpu_s, system_s = _cpu_s()
        return {"t_s": round(time.monotonic() - started, 3), "cpu_s": round(cpu_s, 4), "system_s": round(system_s, 4),
                "rss_mb": round(rss_mb(), 1), "requests": server.listener.stats["requests"],
                "writes": server.listener.stats["writes"],
                "floor_requests": FloorConnection.answered,
                "transactions": getattr(storage, "transactions", 0), "records_written": getattr(storage, "records_written", 0),
                "connections": len(server.listener.connections), "expiries": expiries.count,
                "gc_longest_ms": round(pauses.longest_ms, 2),
                "gc_longest_since_mark_ms": round(pauses.longest_since_mark_ms, 2),
                "gc_longest_cpu_since_mark_ms": round(pauses.longest_cpu_since_mark_ms, 2), "gc_full": pauses.full_collections,
                "gc_cpu_ms": [round(ms, 2) for ms in pauses.cpu_ms_by_generation], "gc_collections": pauses.collections, "final": final}

    _emit({"port": server.port, "floor_port": floor.sockets[0].getsockname()[1], "loop": type(loop).__module__})
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), args.report_ms / 1000)
        except asyncio.TimeoutError:
            pass
        _emit(report())
    last = report(final=True)
    pauses.stop()
    floor.close()
    await server.shutdown("bench finished")
    _emit(last)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="load_server")
    p.add_argument("--cpu", type=int, default=None)
    p.add_argument("--storage", choices=["memory", "sqlite"], default="memory")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--topic", default="load")
    p.add_argument("--partitions", type=int, default=1000)
    p.add_argument("--report-ms", type=int, default=1000)
    p.add_argument("--event-loop", choices=["asyncio", "uvloop"], default="asyncio")
    p.add_argument("--collector", choices=["settled", "default"], default="settled")
    p.add_argument("--profile", default=None, help="cProfile each window between two marks to this file; the last (the load window) stays")
    args = p.parse_args(argv)
    if args.storage == "sqlite" and not args.data_dir:
        p.error("--storage sqlite needs --data-dir")
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    _emit({"core_heartbeat_step_us": round(core_heartbeat_step_us(), 4), "when": "before"})
    if args.event_loop == "uvloop":
        import uvloop  # type: ignore[import-not-found]

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(serve(args))
    _emit({"core_heartbeat_step_us": round(core_heartbeat_step_us(), 4), "when": "after"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
