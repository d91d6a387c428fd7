"""``groupcoord bench fixture`` prints the test fixture's start-up: warm starts, stops and the
first start in a fresh process, p50 and max in ms."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.bench  # asserts a speed ratio measured on this machine: `pytest -m bench`, run once per CI run
def test_bench_fixture_prints_its_figures():
    proc = subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.main", "bench", "fixture", "--starts", "20",
                           "--cold", "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    rows = {r["name"]: r for r in (json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{"))}
    for name in ("fixture_start_ms", "fixture_stop_ms", "fixture_first_start_ms", "fixture_import_ms",
                 "plugin_import_ms"):
        p50, top = rows[f"{name}_p50"], rows[f"{name}_max"]
        assert p50["unit"] == top["unit"] == "ms" and 0 < p50["value"] <= top["value"], name
    # A warm start is a small part of the first one (which imports the server's modules).
    assert rows["fixture_start_ms_p50"]["value"] < rows["fixture_first_start_ms_p50"]["value"]
    assert "groupcoord_server start-up: 20 starts in this process, 1 fresh processes" in proc.stdout
