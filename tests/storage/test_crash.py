"""Crash tests: ``groupcoord serve`` on SQLite killed with SIGKILL at random moments while real
consumers commit offsets, then restarted on the same data directory.

Three real consumers (tests/support/commit_worker.py: kafka-python and confluent-kafka, in simple
groups and as a group member) commit ever larger offsets synchronously and record every
commit their client acknowledged. The server is killed ``CRASH_KILLS`` times (default 100):
mostly once every consumer is committing again and a random moment later, sometimes while it
is still starting. After every kill, with no server running:

* the store opens through SqliteStorage's own start-up path (WAL recovery, quick check) and
  ``PRAGMA integrity_check`` says ok;
* every partition loads through the core's load path (``LoadPartition``) and every group
  satisfies the core's invariants (``invariants.check_group``); groups stored with members
  come back Stable;
* for every partition of every group, the stored offset is at least the last acknowledged
  one (offsets only grow, so this is exact: no acknowledged commit is lost);

and after every restart the same is checked over the wire with OffsetFetch.

The seed is printed (and in every failure message); ``CRASH_SEED=<n>`` repeats a run. Restarts
fork the server from a pre-imported parent (server_harness.ServeZygote) so that 100 of them
fit in the time budget.
"""

from __future__ import annotations

import asyncio
import os
import random
import time

import pytest
from server_harness import CommitWorker, ServeZygote, free_port, read_json_lines, wait_until

from groupcoord.adapters.checks.invariants import check_group
from groupcoord.adapters.cli.admin import fetch_offsets
from groupcoord.adapters.client.kafka_client import Cluster
from groupcoord.adapters.storage.sqlite import SqliteStorage
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator
from groupcoord.core.events import LoadPartition

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

KILLS = int(os.environ.get("CRASH_KILLS", "100"))
OFFSETS_PARTITIONS = 5
TOPIC, TOPIC_PARTITIONS = "t4", 4
WORKERS = [("kafka-python", "assign", "crash-kp"), ("confluent", "subscribe", "crash-cf"),
           ("confluent", "assign", "crash-cfa")]


def serve_argv(port: int, data_dir: str, *extra: str) -> list[str]:
    return ["serve", "--host", "127.0.0.1", "--port", str(port), "--data-dir", data_dir, "--log-format", "json",
            "--topic", f"{TOPIC}={TOPIC_PARTITIONS}", "--offsets.topic.num.partitions", str(OFFSETS_PARTITIONS),
            "--group.initial.rebalance.delay.ms", "0", "--group.min.session.timeout.ms", "500", *extra]


def check_store(data_dir: str, acked: dict[str, dict[int, int]], context: str) -> dict:
    """Open the store as a new server would, check it, load it through the core, compare."""
    async def read():
        storage = SqliteStorage(data_dir)  # WAL recovery + quick_check + schema check
        try:
            integrity = storage._db.execute("PRAGMA integrity_check").fetchall()
            return integrity, {p: storage.records(p) for p in range(OFFSETS_PARTITIONS)}
        finally:
            await storage.close()

    integrity, records = asyncio.run(read())
    assert integrity == [("ok",)], f"{context}: integrity_check {integrity}"
    coordinator = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=OFFSETS_PARTITIONS))
    for p, recs in records.items():
        coordinator.handle(LoadPartition(now_ms=int(time.time() * 1000), partition=p, records=recs))
    stored_members = {r.group_id: len(r.members) for recs in records.values() for r in recs
                      if type(r).__name__ == "GroupMetadataRecord"}
    for gid, group in coordinator.groups().items():
        violations = check_group(group)
        assert not violations, f"{context}: group {gid}: {violations}"
        if stored_members.get(gid):
            assert group.state.value == "Stable", f"{context}: {gid} stored with members came back {group.state}"
    for group, parts in acked.items():
        offsets = coordinator.offsets(group) or {}
        for p, n in parts.items():
            entry = offsets.get((TOPIC, p))
            assert entry is not None and entry.offset >= n, \
                f"{context}: {group} {TOPIC}-{p}: acknowledged {n}, stored {entry and entry.offset}"
    return {g: len(coordinator.offsets(g) or {}) for g in coordinator.groups()}


def check_served(port: int, acked: dict[str, dict[int, int]], context: str) -> None:
    async def fetch():
        cluster = Cluster(f"127.0.0.1:{port}", timeout=10)
        try:
            return {g: await fetch_offsets(cluster, g) for g in acked}
        finally:
            await cluster.close()

    served = asyncio.run(fetch())
    for group, parts in acked.items():
        for p, n in parts.items():
            got = served[group].get((TOPIC, p), {}).get("offset")
            assert got is not None and got >= n, f"{context}: OffsetFetch {group} {TOPIC}-{p}: acknowledged {n}, got {got}"


def listening(log: str) -> bool:
    return any(row.get("event") == "listening" for row in read_json_lines(log))


def test_sigkill_under_load_loses_no_acknowledged_commit(tmp_path):
    seed = int(os.environ.get("CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"crash test: seed={seed} kills={KILLS} (CRASH_SEED={seed} repeats this run)")
    port = free_port()
    data_dir = str(tmp_path / "data")
    zygote = ServeZygote(str(tmp_path / "zygote.stderr"))
    workers: list[CommitWorker] = []
    pid = None
    started = time.monotonic()
    early = checked = 0
    try:
        log = str(tmp_path / "serve-0.log")
        pid = zygote.spawn(serve_argv(port, data_dir), log)
        wait_until(lambda: listening(log), 30, "the first server to listen")
        workers = [CommitWorker(client, mode, f"127.0.0.1:{port}", group, TOPIC, TOPIC_PARTITIONS,
                                str(tmp_path / f"{group}.acks"), session_ms=6000)
                   for client, mode, group in WORKERS]
        for w in workers:
            wait_until(lambda: w.count() > 0, 60, lambda: f"{w.group} to commit: {w.stderr_tail()}")
        for kill in range(1, KILLS + 1):
            context = f"seed={seed} kill={kill}"
            if rng.random() < 0.1:  # a moment during start-up, loading or recovery
                early += 1
                time.sleep(rng.uniform(0, 0.15))  # the random kill moment (not a synchronisation)
            else:  # a moment under load: every consumer commits to this incarnation first
                base = [w.count() for w in workers]
                # (a client's reconnect backoff on a busy machine can take most of a minute)
                wait_until(lambda: all(w.count() > b for w, b in zip(workers, base)), 150,
                           lambda: f"{context}: every consumer to commit again "
                                   f"{[(w.group, w.count(), w.stderr_tail()[-300:]) for w in workers]}")
                time.sleep(rng.uniform(0, 0.3))  # the random kill moment (not a synchronisation)
            zygote.kill(pid)
            acked = {w.group: w.acked() for w in workers}
            check_store(data_dir, acked, context)
            checked += sum(len(a) for a in acked.values())
            log = str(tmp_path / f"serve-{kill}.log")
            pid = zygote.spawn(serve_argv(port, data_dir), log)
            started_up = wait_until(lambda: listening(log) or [row for row in read_json_lines(log) if row.get("level") == "error"],
                                    45, f"{context}: the server to start again")
            assert started_up is True, f"{context}: the server did not start again: {started_up} " \
                                       f"alive={zygote.alive(pid)} {zygote.describe(pid)}"
            acked = {w.group: w.acked() for w in workers}
            check_served(port, acked, context)
        elapsed = time.monotonic() - started
        totals = {w.group: w.count() for w in workers}
        print(f"crash test: seed={seed} kills={KILLS} (at start-up: {early}) in {elapsed:.1f}s; "
              f"acknowledged commits {totals} (sum {sum(totals.values())}); "
              f"partition offsets checked after kills: {checked}")
        for w in workers:
            w.stop()
        zygote.kill(pid, __import__("signal").SIGTERM)
        final = {w.group: w.acked() for w in workers}
        groups = check_store(data_dir, final, f"seed={seed} final")
        assert set(groups) >= {g for _c, _m, g in WORKERS}
        errors = [row for k in range(KILLS + 1) for row in read_json_lines(str(tmp_path / f"serve-{k}.log"))
                  if row.get("level") == "error"]
        assert not errors, f"seed={seed}: {errors[:5]}"
    finally:
        for w in workers:
            w.stop()
        zygote.stop()
