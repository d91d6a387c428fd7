"""``groupcoord bench fixture``: what a test waits for before its ``groupcoord_server`` takes
connections, and what stopping it costs, in one run:

* ``fixture_start_ms``: ``start_server()`` until a TCP connection to it is accepted, over
  ``starts`` servers started one after another in this process (its modules imported);
* ``fixture_stop_ms``: ``stop()`` of each;
* ``fixture_first_start_ms``: in a fresh Python process, importing the fixtures' module and
  starting the first server (what the first test of a pytest run pays), over ``cold``
  processes; ``fixture_import_ms`` is the import alone, ``plugin_import_ms`` the plugin
  module's once pytest is imported (what every pytest run pays once groupcoord is installed).

Each as p50 and max in ms: a table, then one JSON object per line (``{"name", "value",
"unit"}``), the ratio of a warm start to a cold first start last.
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import time

from groupcoord.adapters.bench.rows import print_json_rows

_COLD = r"""
import json, socket, time
import pytest  # a pytest run has it already
t0 = time.perf_counter()
import groupcoord.testing.plugin
t1 = time.perf_counter()
from groupcoord.testing.servers import start_server
t2 = time.perf_counter()
server = start_server()
socket.create_connection((server.host, server.port), timeout=10).close()
t3 = time.perf_counter()
server.stop()
print(json.dumps({"plugin": (t1 - t0) * 1e3, "import": (t2 - t1) * 1e3, "first": (t3 - t1) * 1e3}))
"""


def _warm(starts: int) -> tuple[list[float], list[float]]:
    from groupcoord.testing.servers import start_server

    start_ms, stop_ms = [], []
    for _ in range(starts):
        t0 = time.perf_counter()
        server = start_server()
        socket.create_connection((server.host, server.port), timeout=10).close()
        t1 = time.perf_counter()
        server.stop()
        t2 = time.perf_counter()
        start_ms.append((t1 - t0) * 1e3)
        stop_ms.append((t2 - t1) * 1e3)
    return start_ms, stop_ms


def _cold(runs: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"plugin": [], "import": [], "first": []}
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-c", _COLD], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"the cold start failed: {proc.stderr.strip().splitlines()[-1:]}")
        for key, value in json.loads(proc.stdout.strip().splitlines()[-1]).items():
            out[key].append(value)
    return out


def run_fixture_bench(starts: int = 200, cold: int = 5) -> int:
    start_ms, stop_ms = _warm(starts)
    cold_ms = _cold(cold)
    rows = []
    for name, values in (("fixture_start_ms", start_ms), ("fixture_stop_ms", stop_ms),
                         ("fixture_first_start_ms", cold_ms["first"]), ("fixture_import_ms", cold_ms["import"]),
                         ("plugin_import_ms", cold_ms["plugin"])):
        rows.append((f"{name}_p50", statistics.median(values), "ms"))
        rows.append((f"{name}_max", max(values), "ms"))
    ratio = statistics.median(start_ms) / statistics.median(cold_ms["first"])
    rows.append(("fixture_start_to_first_start_p50", ratio, "ratio"))
    print(f"groupcoord_server start-up: {starts} starts in this process, {cold} fresh processes")
    for name, value, unit in rows:
        print(f"  {name:<36} {value:>10.3f} {unit}")
    print_json_rows(rows, 3)
    return 0
