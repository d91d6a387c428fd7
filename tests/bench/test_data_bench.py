"""``groupcoord bench data --quick`` (adapters/bench/data.py) measures produce, consume and end-to-end
latency with confluent-kafka against groupcoord serve (memory and SQLite) and Tansu in one run, and
prints the figures and the ratios against Tansu as JSON lines last. Its shape only: no speed is
asserted here."""

from __future__ import annotations

import json
import subprocess
import sys

from server_harness import tansu_binary

METRICS = ("produce_msgs_per_s", "produce_mb_per_s", "consume_msgs_per_s", "consume_mb_per_s", "latency_ms_p50",
           "latency_ms_p99")


def test_bench_data_quick_prints_every_figure_and_the_ratios_against_tansu():
    out = subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.main", "bench", "data", "--quick"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.rstrip().splitlines()
    assert lines[-1].startswith("{")
    values = {row["name"]: row["value"] for row in map(json.loads, (line for line in lines if line.startswith("{")))}
    assert values["messages"] == 2_000 and values["message_bytes"] == 1024
    servers = ["groupcoord_memory", "groupcoord_sqlite"] + (["tansu"] if tansu_binary() is not None else [])
    for server in servers:
        for metric in METRICS:
            assert values[f"{server}_{metric}"] > 0, (server, metric)
        assert values[f"{server}_latency_ms_p99"] >= values[f"{server}_latency_ms_p50"]
        assert 1 <= values[f"{server}_latency_rounds"] <= 50
    if "tansu" in servers:
        for server in servers[:2]:
            for metric in ("produce_msgs_per_s", "consume_msgs_per_s", "latency_ms_p50", "latency_ms_p99"):
                assert values[f"{server}_{metric}_vs_tansu"] > 0
        assert "groupcoord_memory_produce_msgs_per_s_vs_tansu" in out.stdout.split("{", 1)[0]  # the table too
    assert not any(name.startswith("log_") for name in values)  # the storage comparison is not quick
