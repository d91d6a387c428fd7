"""``groupcoord bench proxy``: what recording costs. Heartbeat round trips to one
``groupcoord serve`` (memory storage), straight to it and through ``groupcoord record`` in
front of it (a subprocess writing JSON Lines to a temporary directory, the way it runs), in
one run:

* latency: one connection, one request in flight, ``count`` heartbeats each way, alternating
  direct and proxied blocks so that a load that comes and goes on the machine hits both; p50
  and p99 in µs, and the latency the proxy adds (proxied minus direct, per percentile);
* requests/s: ``CONNECTIONS`` connections sending back to back, ``count`` heartbeats each way.

The member is a real one (joined and synced by this process), so every heartbeat is answered
NONE and recorded by the proxy. Results: a table, then one JSON object per line
(``{"name", "value", "unit"}``), the ratios proxy/direct last.
"""

from __future__ import annotations

import asyncio
import shutil
import struct
import sys
import tempfile
import time

from groupcoord.adapters.bench.rows import print_json_rows
from groupcoord.adapters.bench.server import HEARTBEAT_VERSION, Target, form_group, free_port, start_groupcoord
from groupcoord.adapters.client.kafka_client import KafkaClient
from groupcoord.adapters.protocol import codec

CONNECTIONS = 4
BLOCKS = 4  # latency blocks per way, interleaved


def start_recorder(upstream_port: int, out_dir: str) -> Target:
    port = free_port()
    cmd = [sys.executable, "-m", "groupcoord.adapters.cli.main", "record", "--upstream",
           f"127.0.0.1:{upstream_port}", "--listen", f"127.0.0.1:{port}", "--out", out_dir]
    return Target("record", cmd, port)


async def _open(port: int):
    return await asyncio.open_connection("127.0.0.1", port)


async def _round_trips(port: int, frame: bytes, n: int, samples_us: list | None) -> int:
    """``n`` heartbeats back to back on a new connection; their round trips (µs) appended to
    ``samples_us``; the number answered with an error."""
    reader, writer = await _open(port)
    errors = 0
    try:
        for _ in range(n):
            start = time.perf_counter_ns()
            writer.write(frame)
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            body = await reader.readexactly(size)
            if samples_us is not None:
                samples_us.append((time.perf_counter_ns() - start) / 1000)
            errors += int(codec.decode_response(12, HEARTBEAT_VERSION, body)[1].error_code) != 0
    finally:
        writer.close()
    return errors


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


async def measure(direct_port: int, proxy_port: int, count: int) -> tuple[dict[str, float], int]:
    client = await KafkaClient.connect("127.0.0.1", direct_port, client_id="bench-proxy")
    try:
        group = f"bench-proxy-{time.time_ns()}"
        _, [(member_id, generation)] = await form_group([client], group)
    finally:
        await client.close()
    frame = codec.encode_request(12, HEARTBEAT_VERSION, 1, "bench", codec.request_body(
        12, HEARTBEAT_VERSION, {"group_id": group, "generation_id": generation, "member_id": member_id}))
    ports = {"direct": direct_port, "proxy": proxy_port}
    samples: dict[str, list[float]] = {way: [] for way in ports}
    errors = 0
    for way, port in ports.items():  # warm up: connections, kio's caches, the proxy's listener
        errors += await _round_trips(port, frame, max(10, count // 20), None)
    for _ in range(BLOCKS):
        for way, port in ports.items():
            errors += await _round_trips(port, frame, max(1, count // BLOCKS), samples[way])
    out: dict[str, float] = {}
    for way, port in ports.items():
        s = sorted(samples[way])
        out[f"heartbeat_p50_us_{way}"] = percentile(s, 0.50)
        out[f"heartbeat_p99_us_{way}"] = percentile(s, 0.99)
        start = time.perf_counter()
        each = max(1, count // CONNECTIONS)
        errors += sum(await asyncio.gather(*[_round_trips(port, frame, each, None) for _ in range(CONNECTIONS)]))
        out[f"heartbeats_per_s_{way}"] = each * CONNECTIONS / (time.perf_counter() - start)
    return out, errors


def run_proxy_bench(count: int = 20_000) -> int:
    out_dir = tempfile.mkdtemp(prefix="groupcoord-bench-proxy-")
    server = start_groupcoord()
    try:
        recorder = start_recorder(server.port, out_dir)
        try:
            results, errors = asyncio.run(measure(server.port, recorder.port, count))
        finally:
            recorder.stop()
    finally:
        server.stop()
        shutil.rmtree(out_dir, ignore_errors=True)
    rows = [(name, value, "1/s" if "per_s" in name else "us") for name, value in results.items()]
    for q in ("p50", "p99"):
        rows.append((f"added_latency_{q}_us", results[f"heartbeat_{q}_us_proxy"] - results[f"heartbeat_{q}_us_direct"],
                     "us"))
    for metric in ("heartbeat_p50_us", "heartbeat_p99_us", "heartbeats_per_s"):
        rows.append((f"{metric}_ratio_proxy_vs_direct", results[f"{metric}_proxy"] / results[f"{metric}_direct"], "x"))
    width = max(len(r[0]) for r in rows)
    for name, value, unit in rows:
        print(f"{name:<{width}}  {value:>12,.2f} {unit}")
    if errors:
        print(f"heartbeats answered with an error: {errors}", file=sys.stderr)
    print_json_rows(rows, 2)
    return 0


if __name__ == "__main__":
    sys.exit(run_proxy_bench(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000))
