"""``groupcoord bench verify`` prints its numbers on the simulator's groups: groups/s and µs per pair for the plain engine
and Spark local[1]/local[2] (each as a ratio to plain), and the search's states per group as
members join at once."""

from __future__ import annotations

import json
import re
import subprocess
import sys


def test_bench_verify_prints_its_numbers():
    proc = subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.main", "bench", "verify", "--quick",
                           "--groups", "30"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    engines = {r["name"]: r for r in rows if r["unit"] == "groups/s"}
    assert set(engines) == {"verify_plain", "verify_spark_local[1]", "verify_spark_local[2]"}
    assert all(r["value"] > 0 and r["us_per_pair"] > 0 for r in engines.values())
    assert engines["verify_plain"]["ratio_to_plain"] == 1.0
    assert all(r["inconclusive"] == 0 for r in engines.values())
    joining = [r for r in rows if r["unit"] == "states"]
    assert [r["name"] for r in joining] == ["verify_joining_2", "verify_joining_5", "verify_joining_10"]
    assert all(r["verdict"] == "conforms" and r["value"] >= 2 for r in joining)
    summary = re.search(r"30 simulated groups .*: (\d+) checked, (\d+) left out .*, ([\d,]+) observed pairs, none "
                        r"diverging", proc.stdout)
    assert summary, proc.stdout
    checked, left_out, pairs = int(summary[1]), int(summary[2]), int(summary[3].replace(",", ""))
    assert checked + left_out == 30 and checked >= 20 and pairs > 10 * checked
