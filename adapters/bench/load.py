"""``groupcoord bench load``: many groups of consumers against one server process held on one
CPU, the way real clients load a coordinator.

The server (``bench.load_server``) runs in a subprocess pinned to one CPU; this process, the
driver, pins itself to another. The driver forms ``--groups`` groups of ``--members``
members (JoinGroup, SyncGroup, Heartbeat as consumers do: ``bench.server.form_group``), then
for ``--duration`` seconds every member heartbeats every ``--heartbeat-interval-ms`` and,
with ``--commit-interval-ms``, commits its partition's offset that often (the Java client's
auto-commit), with at most one request of its own in flight, as a client has. Frames are
encoded once (a commit's offset is written into its frame in place) and answers are read by
their error code's position, so the driver stays cheap.

Members share connections only when the process's file limit leaves no other way (members of
different groups, formed in separate waves, so that a parked JoinGroup never holds up another
member of a group still forming); the server answers a connection's requests in order.

At the end the driver waits for every answer, then checks with DescribeGroups that every
group is Stable with exactly its original members, and with OffsetFetch that every committed
offset the server acknowledged reads back. Printed: a table, then one JSON object per line
(``{"name", "value", "unit"}``). Exit status 1 if a check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections import Counter, deque
from typing import Any, Callable

from groupcoord.adapters.bench.rows import print_json_rows
from groupcoord.adapters.bench.server import TOPIC_PARTITIONS, form_group, stop_process, wait_port
from groupcoord.adapters.client.kafka_client import KafkaClient, error_name
from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.wire.collector import GcPauses, settle_collector, unsettle_collector

HEARTBEAT_VERSION = 3  # non-flexible: the error code sits at a fixed place in the answer
COMMIT_VERSION = 7
SESSION_MS = 45_000  # the Java client's and librdkafka's default session.timeout.ms
HEARTBEAT_INTERVAL_MS = 3_000  # their default heartbeat.interval.ms
TICK_MS = 10
TOPIC = "bench"
_OFFSET_MARK = 0x5A5A5A5A5A5A5A5A  # a committed offset found in the encoded frame, then rewritten
_RESERVED_FDS = 200


# --- the driver's connections ---------------------------------------------------------------------

class _Conn(asyncio.Protocol):
    """One TCP connection; answers come back in request order, each to its request's callback.
    ``request`` is a KafkaClient's (what ``form_group`` uses)."""

    def __init__(self) -> None:
        self.transport: Any = None
        self.buf = bytearray()
        self.waiting: deque = deque()
        self.correlation = 0
        self.lost: asyncio.Future = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        at, end = 0, len(buf)
        waiting = self.waiting
        while end - at >= 4:
            size = int.from_bytes(buf[at:at + 4], "big")
            if end - at - 4 < size:
                break
            waiting.popleft()(bytes(buf[at + 4:at + 4 + size]))
            at += 4 + size
        if at:
            del buf[:at]

    def send(self, frame: bytes, on_answer: Callable[[bytes], None]) -> None:
        self.waiting.append(on_answer)
        self.transport.write(frame)

    async def request(self, api_key: int, fields: dict, version: int, timeout: float | None = 30.0) -> dict:
        self.correlation += 1
        frame = kc.encode_request(api_key, version, self.correlation, "bench-load",
                                  kc.request_body(api_key, version, fields))
        future = asyncio.get_running_loop().create_future()

        def answered(body: bytes) -> None:
            if not future.done():
                future.set_result(kc.to_fields(kc.decode_response(api_key, version, body)[1]))

        self.send(frame, answered)
        return await asyncio.wait_for(future, timeout)


async def _open_connections(port: int, count: int) -> list[_Conn]:
    loop = asyncio.get_running_loop()
    conns: list[_Conn] = []
    for start in range(0, count, 500):
        made = await asyncio.gather(*[loop.create_connection(_Conn, "127.0.0.1", port)
                                      for _ in range(min(500, count - start))])
        conns.extend(protocol for _transport, protocol in made)
    return conns


# --- the members under load -----------------------------------------------------------------------

class Tally:
    """What the driver saw during the load window."""

    def __init__(self) -> None:
        self.heartbeats = self.commits = 0  # answered without error
        self.heartbeats_sent = self.commits_sent = 0
        self.errors: Counter = Counter()  # (api, error name) -> count
        self.latency_s = {"heartbeat": array("d"), "commit": array("d")}
        self.recording = False

    def restart(self) -> None:
        """Count afresh from now (the window after a settling period); errors stay counted."""
        self.heartbeats = self.commits = self.heartbeats_sent = self.commits_sent = 0
        self.latency_s = {"heartbeat": array("d"), "commit": array("d")}


class Member:
    __slots__ = ("conn", "group", "partition", "heartbeat_frame", "commit_frame", "offset_at", "offset",
                 "acked_offset", "busy", "owe_heartbeat", "owe_commit", "sent_at", "tally", "stopping")

    def __init__(self, conn: _Conn, group: str, member_id: str, generation: int, partition: int,
                 tally: Tally) -> None:
        self.conn, self.group, self.partition, self.tally = conn, group, partition, tally
        self.heartbeat_frame = kc.encode_request(12, HEARTBEAT_VERSION, 1, "bench-load", kc.request_body(
            12, HEARTBEAT_VERSION, {"group_id": group, "generation_id": generation, "member_id": member_id}))
        self.commit_frame = bytearray(kc.encode_request(8, COMMIT_VERSION, 2, "bench-load", kc.request_body(
            8, COMMIT_VERSION, {"group_id": group, "generation_id_or_member_epoch": generation,
                                "member_id": member_id, "group_instance_id": None, "topics": [
                                    {"name": TOPIC, "partitions": [
                                        {"partition_index": partition, "committed_offset": _OFFSET_MARK,
                                         "committed_leader_epoch": -1, "committed_metadata": ""}]}]})))
        self.offset_at = self.commit_frame.index(_OFFSET_MARK.to_bytes(8, "big"))
        self.offset = 0
        self.acked_offset: int | None = None
        self.busy = self.owe_heartbeat = self.owe_commit = self.stopping = False
        self.sent_at = 0.0

    def heartbeat_due(self) -> None:
        if self.busy:
            self.owe_heartbeat = True
        else:
            self._send_heartbeat()

    def commit_due(self) -> None:
        if self.busy:
            self.owe_commit = True
        else:
            self._send_commit()

    def _send_heartbeat(self) -> None:
        self.busy, self.owe_heartbeat = True, False
        self.tally.heartbeats_sent += 1
        self.sent_at = time.perf_counter()
        self.conn.send(self.heartbeat_frame, self._heartbeat_answered)

    def _send_commit(self) -> None:
        self.busy, self.owe_commit = True, False
        self.offset += 1
        self.commit_frame[self.offset_at:self.offset_at + 8] = self.offset.to_bytes(8, "big")
        self.tally.commits_sent += 1
        self.sent_at = time.perf_counter()
        self.conn.send(bytes(self.commit_frame), self._commit_answered)

    def _heartbeat_answered(self, body: bytes) -> None:
        tally = self.tally
        if tally.recording:
            tally.latency_s["heartbeat"].append(time.perf_counter() - self.sent_at)
        code = (body[8] << 8) | body[9]  # correlation id, throttle time, error code
        if code:
            tally.errors[("Heartbeat", code)] += 1
        elif tally.recording:
            tally.heartbeats += 1
        self._next()

    def _commit_answered(self, body: bytes) -> None:
        tally = self.tally
        if tally.recording:
            tally.latency_s["commit"].append(time.perf_counter() - self.sent_at)
        code = (body[-2] << 8) | body[-1]  # one topic, one partition: its error code ends the answer
        if code:
            tally.errors[("OffsetCommit", code)] += 1
        else:
            self.acked_offset = self.offset
            if tally.recording:
                tally.commits += 1
        self._next()

    def _next(self) -> None:
        self.busy = False
        if self.stopping:
            return
        if self.owe_commit:
            self._send_commit()
        elif self.owe_heartbeat:
            self._send_heartbeat()


class Schedule:
    """Every member's heartbeats (and commits) spread evenly over their interval, in ticks of
    ``TICK_MS``; a late tick catches up on the slots it missed, so the offered rate holds.
    Members join it as their group forms (``add``): a group formed early keeps heartbeating
    while later ones form, as consumers do."""

    def __init__(self, heartbeat_ms: int, commit_ms: int | None) -> None:
        self.loop = asyncio.get_running_loop()
        self.lanes: list[tuple[list[list[Member]], str]] = [(self._slots(heartbeat_ms), "heartbeat_due")]
        if commit_ms:
            self.lanes.append((self._slots(commit_ms), "commit_due"))
        self.added = 0
        self.start = self.loop.time()
        self.done_ticks = 0
        self.handle: Any = None

    @staticmethod
    def _slots(interval_ms: int) -> list[list[Member]]:
        return [[] for _ in range(max(1, interval_ms // TICK_MS))]

    def add(self, member: Member) -> None:
        for shift, (slots, _what) in enumerate(self.lanes):
            count = len(slots)  # a prime spreads a group's members; commits half a lap after heartbeats
            slots[(self.added * 7919 + shift * (count // 2)) % count].append(member)
        self.added += 1

    def run(self) -> None:
        due = int((self.loop.time() - self.start) * 1000 / TICK_MS) + 1
        while self.done_ticks < due:
            for slots, what in self.lanes:
                for member in slots[self.done_ticks % len(slots)]:
                    getattr(member, what)()
            self.done_ticks += 1
        self.handle = self.loop.call_at(self.start + self.done_ticks * TICK_MS / 1000, self.run)

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()


# --- the server process ---------------------------------------------------------------------------

class ServerProcess:
    """``bench.load_server`` on one CPU; its JSON lines are read by a thread as they come."""

    def __init__(self, cpu: int | None, storage: str, data_dir: str | None, partitions: int,
                 event_loop: str, collector: str, profile: str | None) -> None:
        cmd = [sys.executable, "-m", "groupcoord.adapters.bench.load_server", "--storage", storage,
               "--partitions", str(partitions), "--topic", TOPIC, "--event-loop", event_loop,
               "--collector", collector]
        if profile:
            cmd += ["--profile", profile]
        if cpu is not None:
            cmd += ["--cpu", str(cpu)]
        if data_dir:
            cmd += ["--data-dir", data_dir]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        self.lines: list[dict] = []
        self.marks = 0
        self.changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for text in self.proc.stdout:
            try:
                line = json.loads(text)
            except ValueError:
                continue
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()

    def wait_for(self, key: str, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while True:
                for line in self.lines:
                    if key in line:
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise RuntimeError(f"the server process gave no {key!r} within {timeout_s}s "
                                       f"(exit status {self.proc.poll()})")
                self.changed.wait(min(left, 0.5))

    def mark(self) -> dict:
        """The server's figures now (SIGUSR1: it reports at once)."""
        self.marks += 1
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 120  # an overloaded server takes a while to get to it
        with self.changed:
            while True:
                for line in reversed(self.lines):
                    if line.get("mark") == self.marks:
                        return line
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("the server process did not report its figures within 120 s")
                self.changed.wait(0.5)

    def stats(self) -> list[dict]:
        with self.changed:
            return [line for line in self.lines if "cpu_s" in line]

    def stop(self) -> None:
        stop_process(self.proc, grace_s=30)
        self._reader.join(10)


def _raise_file_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# --- the run --------------------------------------------------------------------------------------

def _conn_index(g: int, m: int, waves: int, members: int) -> int:
    """Group ``g``'s member ``m``'s connection: one member per connection in each wave."""
    return (g // waves) * members + m


async def _form(conns: list[_Conn], groups: list[str], members: int, waves: int, tally: Tally,
                beat_s: float, schedule: Schedule) -> tuple[list[Member], list[float], dict[str, list[str]]]:
    """Groups formed wave by wave; group ``g`` is in wave ``g % waves`` and its member ``m``
    uses connection ``(g // waves) * members + m``: one member per connection in each wave.
    A formed group's members join the ``schedule`` at once."""
    out: list[Member] = []
    join_ms: list[float] = []
    member_ids: dict[str, list[str]] = {}
    for wave in range(waves):
        in_wave = list(range(wave, len(groups), waves))
        formed = await asyncio.gather(*[form_group(
            [conns[_conn_index(g, m, waves, members)] for m in range(members)], groups[g], SESSION_MS, beat_s, 300)
            for g in in_wave])
        for g, (ms, joined) in zip(in_wave, formed):
            join_ms.append(ms)
            member_ids[groups[g]] = [member_id for member_id, _generation in joined]
            for m, (member_id, generation) in enumerate(joined):
                member = Member(conns[_conn_index(g, m, waves, members)], groups[g], member_id, generation,
                                m, tally)  # the topic has at least as many partitions as a group has members
                out.append(member)
                schedule.add(member)
    return out, join_ms, member_ids


async def _check(port: int, member_ids: dict[str, list[str]], members: list[Member]) -> dict[str, int]:
    """DescribeGroups: Stable with the original members; OffsetFetch: the acknowledged offsets."""
    client = await KafkaClient.connect("127.0.0.1", port, client_id="bench-load-check")
    try:
        names = list(member_ids)
        unstable = 0
        for start in range(0, len(names), 100):
            batch = names[start:start + 100]
            answer = await client.request(15, {"groups": batch, "include_authorized_operations": False}, 4, timeout=60)
            for described in answer["groups"]:
                ids = sorted(m["member_id"] for m in described["members"])
                if (described["error_code"] != 0 or described["group_state"] != "Stable"
                        or ids != sorted(member_ids[described["group_id"]])):
                    unstable += 1
        by_group: dict[str, list[Member]] = {}
        for member in members:
            if member.acked_offset is not None:
                by_group.setdefault(member.group, []).append(member)
        lost = checked = 0
        groups = list(by_group)
        for start in range(0, len(groups), 200):
            futures = [client.send(9, {"group_id": g, "topics": [
                {"name": TOPIC, "partition_indexes": [m.partition for m in by_group[g]]}], "require_stable": False}, 7)
                for g in groups[start:start + 200]]
            for g, answer in zip(groups[start:start + 200], await asyncio.gather(*futures)):
                stored = {p["partition_index"]: p["committed_offset"] for t in answer["topics"] for p in t["partitions"]}
                for member in by_group[g]:
                    checked += 1
                    if stored.get(member.partition) != member.acked_offset:
                        lost += 1
        return {"groups_not_stable_with_original_members": unstable, "commits_checked": checked,
                "acknowledged_commits_lost": lost}
    finally:
        await client.close()


def _p99_ms(latencies_s) -> float:
    """The 99th percentile of latencies in seconds, in ms (nan if none)."""
    return _percentile(sorted(latencies_s), 0.99) * 1000


def _server_cpu(before: dict, after: dict, requests: int) -> dict[str, float]:
    """The server's CPU between two of its reports: per request, its kernel part per request,
    and as a share of the time between the reports."""
    cpu_s = after["cpu_s"] - before["cpu_s"]
    system_s = after["system_s"] - before["system_s"]
    return {"cpu_s": cpu_s, "cpu_per_request_us": cpu_s / requests * 1e6 if requests else float("nan"),
            "system_cpu_per_request_us": system_s / requests * 1e6 if requests else float("nan"),
            "cpu_percent": cpu_s / (after["t_s"] - before["t_s"]) * 100}


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(q * len(values)))]


async def _drive(args: argparse.Namespace, server: ServerProcess, port: int) -> dict[str, Any]:
    total = args.groups * args.members
    limit = _raise_file_limit() - _RESERVED_FDS
    waves = max(1, math.ceil(total / limit))
    if waves > 1 and args.members > limit:
        raise SystemExit(f"bench load: {args.members} members in one group need {args.members} connections; "
                         f"the file limit allows {limit}")
    groups = [f"load-{g}" for g in range(args.groups)]
    # The driver is the measuring instrument: with CPython's collector its full collections walk
    # every member and connection (200-600 ms at 100,000 members), and every answer that
    # arrives meanwhile is timed late. It settles its collector as the server does.
    threshold = gc.get_threshold()
    settle_collector()
    pauses = GcPauses()
    pauses.start()
    try:
        floor = await _floor_window(args, server, math.ceil(args.groups / waves) * args.members, waves, groups,
                                    pauses) if args.floor_duration > 0 else None
        conns = await _open_connections(port, math.ceil(args.groups / waves) * args.members)
        tally = Tally()
        formed_at = time.monotonic()
        schedule = Schedule(args.heartbeat_interval_ms, args.commit_interval_ms)
        schedule.run()
        members, join_ms, member_ids = await _form(conns, groups, args.members, waves, tally, 0.5, schedule)
        form_s = time.monotonic() - formed_at
        settle_collector()  # the members and their connections, long-lived from here on
        settle_latencies = await _settle(tally, args.settle)
        window = await _window(server, tally, schedule, members, args.duration, 60, pauses)
        checks = await _check(port, member_ids, members)
        for conn in conns:
            conn.transport.close()
    finally:
        pauses.stop()
        unsettle_collector(threshold)
    return {"tally": tally, **window, "form_s": form_s, "join_ms": sorted(join_ms), "checks": checks,
            "waves": waves, "connections": len(conns), "floor": floor,
            "settle_p99_ms": _p99_ms(settle_latencies)}


async def _settle(tally: Tally, seconds: float) -> array:
    """``seconds`` of load before a window, so that it starts in the steady state (the burst of
    the members' first requests, or what forming left queued, drained): the heartbeats'
    latencies in that time (sorted only once the run is over: the driver must not stall), then
    the tally starts afresh."""
    tally.recording = True
    await asyncio.sleep(seconds)
    latencies = tally.latency_s["heartbeat"]
    tally.restart()
    return latencies


async def _window(server: "ServerProcess", tally: Tally, schedule: Schedule, members: list[Member],
                  seconds: float, drain_s: float, pauses: GcPauses) -> dict[str, Any]:
    """``seconds`` of load between two of the server's reports, then the members stop and their
    last requests are awaited (up to ``drain_s``): the reports before and after, the window's
    length, requests still unanswered, and the driver's own CPU percent and longest collector
    pause in the window (a busy or paused driver reads answers late: its delay adds to the
    latencies it measures). The server's reports are awaited in a thread: the driver's loop goes
    on sending and reading meanwhile (a busy server takes a while to report)."""
    loop = asyncio.get_running_loop()
    tally.recording = True
    pauses.longest_since_mark_ms = 0.0
    started, driver_cpu_s = time.monotonic(), time.process_time()
    mark = loop.run_in_executor(None, server.mark)
    await asyncio.sleep(seconds)
    schedule.stop()
    tally.recording = False
    window_s = time.monotonic() - started
    driver_cpu_percent = (time.process_time() - driver_cpu_s) / window_s * 100
    driver_gc_ms = pauses.longest_since_mark_ms
    before = await mark
    after = await loop.run_in_executor(None, server.mark)
    for member in members:
        member.stopping = True
    deadline = time.monotonic() + drain_s
    while any(member.busy for member in members) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return {"before": before, "after": after, "window_s": window_s,
            "unanswered": sum(member.busy for member in members), "driver_cpu_percent": driver_cpu_percent,
            "driver_gc_longest_pause_ms": driver_gc_ms}


async def _floor_window(args: argparse.Namespace, server: "ServerProcess", connections: int, waves: int,
                        groups: list[str], pauses: GcPauses) -> dict[str, float]:
    """Before any group forms: the same number of members heartbeating at the same rate over as
    many connections, answered by the server process's floor listener (``load_server.
    FloorConnection``): the server's CPU per answer there is the least this loop pays."""
    port = server.wait_for("floor_port", 10)["floor_port"]
    conns = await _open_connections(port, connections)
    tally = Tally()
    schedule = Schedule(args.heartbeat_interval_ms, None)
    members = []
    for g, group in enumerate(groups):
        for m in range(args.members):
            # on the connection it has in the load window, with a member id as long as the
            # server's (client id, a dash, a UUID)
            member = Member(conns[_conn_index(g, m, waves, args.members)], group,
                            f"bench-load-{g:08x}-{m:04x}-0000-0000-000000000000", 1, m, tally)
            members.append(member)
            schedule.add(member)
    settle_collector()
    schedule.run()
    settle_latencies = await _settle(tally, args.settle)  # every member's first heartbeat leaves at once
    window = await _window(server, tally, schedule, members, args.floor_duration, 30, pauses)
    for conn in conns:
        conn.transport.close()
    before, after = window["before"], window["after"]
    return {**_server_cpu(before, after, after["floor_requests"] - before["floor_requests"]),
            "answered_per_s": tally.heartbeats / window["window_s"],
            "latency_ms_p99": _p99_ms(tally.latency_s["heartbeat"]),
            "settle_latency_ms_p99": _p99_ms(settle_latencies),
            "driver_cpu_percent": window["driver_cpu_percent"],
            "driver_gc_longest_pause_ms": window["driver_gc_longest_pause_ms"]}


def run_load_bench(args: argparse.Namespace) -> int:
    cpus = sorted(os.sched_getaffinity(0))
    server_cpu, driver_cpu = (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)
    data_dir = tempfile.mkdtemp(prefix="groupcoord-load-") if args.storage == "sqlite" else None
    partitions = max(TOPIC_PARTITIONS, args.members)
    server = ServerProcess(server_cpu, args.storage, data_dir, partitions, args.event_loop, args.collector,
                           args.profile)
    try:
        port = server.wait_for("port", 120)["port"]
        wait_port(port, server.proc)
        if driver_cpu is not None:
            os.sched_setaffinity(0, {driver_cpu})
        run = asyncio.run(_drive(args, server, port))
    finally:
        server.stop()
        if data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
    steps = [line["core_heartbeat_step_us"] for line in server.lines if "core_heartbeat_step_us" in line]
    final = next((line for line in server.lines if line.get("final")), server.stats()[-1])
    return _report(args, run, server.stats(), steps, final, server_cpu)


def _report(args: argparse.Namespace, run: dict, stats: list[dict], steps: list[float], final: dict,
            server_cpu: int | None) -> int:
    tally: Tally = run["tally"]
    window_s, before, after = run["window_s"], run["before"], run["after"]
    requests = after["requests"] - before["requests"]
    server = _server_cpu(before, after, requests)
    cpu_s, per_request_us = server["cpu_s"], server["cpu_per_request_us"]
    core_step_us = min(steps) if steps else float("nan")
    members = args.groups * args.members
    rows: list[tuple[str, float, str]] = [
        ("join_to_stable_s_all", run["form_s"], "s"),
        ("join_to_stable_ms_p50", _percentile(run["join_ms"], 0.5), "ms"),
        ("join_to_stable_ms_max", run["join_ms"][-1], "ms"),
        ("heartbeats_offered_per_s", members * 1000 / args.heartbeat_interval_ms, "1/s"),
        ("heartbeats_answered_per_s", tally.heartbeats / window_s, "1/s")]
    if args.commit_interval_ms:
        rows += [("commits_offered_per_s", members * 1000 / args.commit_interval_ms, "1/s"),
                 ("commits_answered_per_s", tally.commits / window_s, "1/s")]
    for kind, values in tally.latency_s.items():
        ordered = sorted(values)
        if ordered:
            rows += [(f"{kind}_latency_ms_p50", _percentile(ordered, 0.5) * 1000, "ms"),
                     (f"{kind}_latency_ms_p99", _percentile(ordered, 0.99) * 1000, "ms"),
                     (f"{kind}_latency_ms_max", ordered[-1] * 1000, "ms")]
    rows += [("settle_heartbeat_latency_ms_p99", run["settle_p99_ms"], "ms"),
             ("errors", sum(tally.errors.values()), "answers"),
             ("session_expiries", final["expiries"], "members"),
             ("requests_unanswered_at_end", run["unanswered"], "requests"),
             ("server_cpu_percent", server["cpu_percent"], "%"),
             ("server_cpu_per_request_us", per_request_us, "us"),
             ("driver_cpu_percent", run["driver_cpu_percent"], "%"),
             ("driver_gc_longest_pause_ms", run["driver_gc_longest_pause_ms"], "ms"),
             ("server_system_cpu_per_request_us", server["system_cpu_per_request_us"], "us"),
             ("answers_per_write", requests / (after["writes"] - before["writes"])
              if after["writes"] > before["writes"] else float("nan"), "answers"),
             ("core_heartbeat_step_us", core_step_us, "us"),
             ("server_cpu_per_request_vs_core_step", per_request_us / core_step_us, "x"),
             ("gc_longest_pause_ms", after["gc_longest_since_mark_ms"], "ms"),
             ("gc_longest_pause_cpu_ms", after["gc_longest_cpu_since_mark_ms"], "ms"),
             ("gc_longest_pause_ms_with_forming", final["gc_longest_ms"], "ms"),
             ("gc_full_collections", final["gc_full"], "collections")]
    for generation, name in enumerate(("young", "middle", "full")):  # the collector's CPU time in the window
        gc_ms = after["gc_cpu_ms"][generation] - before["gc_cpu_ms"][generation]
        rows.append((f"gc_{name}_share_of_server_cpu_percent", gc_ms / 10 / cpu_s if cpu_s else float("nan"), "%"))
    transactions = after.get("transactions", 0) - before.get("transactions", 0)
    if transactions:
        rows += [("storage_transactions_per_s", transactions / window_s, "1/s"),
                 ("storage_records_per_transaction",
                  (after["records_written"] - before["records_written"]) / transactions, "records")]
    floor = run["floor"]
    if floor is not None:
        rows += [("floor_heartbeats_answered_per_s", floor["answered_per_s"], "1/s"),
                 ("floor_heartbeat_latency_ms_p99", floor["latency_ms_p99"], "ms"),
                 ("floor_settle_heartbeat_latency_ms_p99", floor["settle_latency_ms_p99"], "ms"),
                 ("floor_cpu_percent", floor["cpu_percent"], "%"),
                 ("floor_driver_cpu_percent", floor["driver_cpu_percent"], "%"),
                 ("floor_driver_gc_longest_pause_ms", floor["driver_gc_longest_pause_ms"], "ms"),
                 ("floor_cpu_per_request_us", floor["cpu_per_request_us"], "us"),
                 ("floor_system_cpu_per_request_us", floor["system_cpu_per_request_us"], "us"),
                 ("floor_vs_core_step", floor["cpu_per_request_us"] / core_step_us, "x"),
                 ("server_cpu_per_request_vs_floor", per_request_us / floor["cpu_per_request_us"], "x")]
    in_window = [s for s in stats if before["t_s"] <= s["t_s"] <= after["t_s"]] or [before, after]
    rss = [s["rss_mb"] for s in in_window]
    rows += [("rss_mb_start", rss[0], "MB"), ("rss_mb_end", rss[-1], "MB"), ("rss_mb_max", max(rss), "MB"),
             ("rss_change_percent", (rss[-1] - rss[0]) / rss[0] * 100, "%")]
    rows += [(name, value, "") for name, value in run["checks"].items()]

    print(f"bench load: {args.groups} groups x {args.members} members, {args.storage} storage, "
          f"heartbeat every {args.heartbeat_interval_ms} ms"
          + (f", commit every {args.commit_interval_ms} ms" if args.commit_interval_ms else "")
          + f", {window_s:.0f} s after {args.settle:g} s of settling; server on CPU {server_cpu}, {run['connections']} connections"
          + (f" ({run['waves']} members per connection)" if run["waves"] > 1 else "")
          + f"; load average {os.getloadavg()[0]:.2f}")
    width = max(len(name) for name, _v, _u in rows)
    for name, value, unit in rows:
        print(f"{name:<{width}}  {value:>14,.2f} {unit}")
    step = max(1, len(in_window) // 10)
    print("rss_mb over time: " + ", ".join(f"{s['t_s'] - before['t_s']:.0f}s {s['rss_mb']:.0f}"
                                           for s in in_window[::step]))
    for (api, code), count in sorted(tally.errors.items()):
        print(f"error: {api} {error_name(code)} x{count}")
    print_json_rows(rows, 4)
    failed = run["checks"]["groups_not_stable_with_original_members"] or run["checks"]["acknowledged_commits_lost"]
    return 1 if failed else 0
