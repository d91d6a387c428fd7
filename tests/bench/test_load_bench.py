"""``groupcoord bench load`` (adapters/bench/load.py), run small: a server process on one CPU,
groups formed, heartbeats and commits answered, the final checks made and every figure printed
(a table, then JSON lines)."""

from __future__ import annotations

import json
import pstats
import subprocess
import sys

import pytest


def bench_load(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.main", "bench", "load", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.bench  # asserts a speed ratio measured on this machine: `pytest -m bench`, run once per CI run
def test_a_small_load_with_commits_on_sqlite_is_answered_and_checked(tmp_path):
    profile = tmp_path / "load.prof"
    out = bench_load("--groups", "20", "--members", "5", "--duration", "3", "--heartbeat-interval-ms", "300",
                     "--commit-interval-ms", "500", "--storage", "sqlite", "--floor-duration", "2",
                     "--settle", "1", "--profile", str(profile))
    assert out.returncode == 0, out.stdout + out.stderr
    values = {row["name"]: row["value"] for row in map(json.loads, (row for row in out.stdout.splitlines() if row.startswith("{")))}
    assert round(values["heartbeats_offered_per_s"]) == 333
    assert values["commits_offered_per_s"] == 100 * 1000 / 500
    # a light load: most of what is offered is answered even on a busy machine
    assert values["heartbeats_answered_per_s"] > 0.5 * values["heartbeats_offered_per_s"], values
    assert values["commits_answered_per_s"] > 0.5 * values["commits_offered_per_s"], values
    assert values["errors"] == 0 and values["session_expiries"] == 0 and values["requests_unanswered_at_end"] == 0
    # every member committed and each acknowledged offset reads back; every group kept its members
    assert values["commits_checked"] == 100 and values["acknowledged_commits_lost"] == 0
    assert values["groups_not_stable_with_original_members"] == 0
    assert 0 < values["join_to_stable_ms_p50"] <= values["join_to_stable_ms_max"]
    assert 0 < values["heartbeat_latency_ms_p50"] <= values["heartbeat_latency_ms_p99"] <= values["heartbeat_latency_ms_max"]
    assert 0 < values["core_heartbeat_step_us"] < values["server_cpu_per_request_us"]
    assert values["server_cpu_per_request_vs_core_step"] > 1
    assert 0.9 <= values["answers_per_write"] <= 5, values  # about one; never more than a connection carries
    assert 0 < values["server_cpu_percent"] <= 100
    # the floor window: the same heartbeats answered by the bare listener, which does less than
    # the server (no decode, no core, no commits), so its CPU per answer is lower
    assert values["floor_heartbeats_answered_per_s"] > 0.5 * values["heartbeats_offered_per_s"], values
    assert 0 < values["floor_cpu_per_request_us"] < values["server_cpu_per_request_us"]
    assert 0 < values["floor_system_cpu_per_request_us"] < values["floor_cpu_per_request_us"]
    assert values["floor_heartbeat_latency_ms_p99"] > 0 and values["floor_settle_heartbeat_latency_ms_p99"] > 0
    assert values["settle_heartbeat_latency_ms_p99"] > 0
    assert 0 < values["driver_cpu_percent"] <= 100 and 0 < values["floor_driver_cpu_percent"] <= 100
    assert values["driver_gc_longest_pause_ms"] >= 0 and values["floor_driver_gc_longest_pause_ms"] >= 0
    assert "s after 1 s of settling" in out.stdout
    assert values["server_cpu_per_request_vs_floor"] > 1
    assert values["rss_mb_start"] > 0 and values["rss_mb_max"] >= values["rss_mb_end"]
    assert values["gc_longest_pause_ms"] >= 0
    shares = [values[f"gc_{g}_share_of_server_cpu_percent"] for g in ("young", "middle", "full")]
    assert all(0 <= share < 100 for share in shares) and sum(shares) < 100, shares
    assert "rss_mb over time: 0s" in out.stdout
    assert out.stdout.rstrip().splitlines()[-1].startswith("{")
    # the profile is the load window's (the server's handlers ran), not the floor window's
    profiled = {function for _, _, function in pstats.Stats(str(profile)).stats}
    assert "_offset_commit" in profiled and "data_received" in profiled, sorted(profiled)[:40]


def test_bad_arguments_are_refused_in_one_line():
    out = bench_load("--groups", "0", "--members", "5")
    assert out.returncode == 2
    assert "--groups: expected a whole number of at least 1, got '0'" in out.stderr
    out = bench_load("--groups", "1", "--members", "1", "--floor-duration", "-1")
    assert out.returncode == 2 and "--floor-duration: expected seconds, at least 0, got '-1'" in out.stderr, out.stderr
    out = bench_load("--groups", "1", "--members", "1", "--settle", "soon")
    assert out.returncode == 2 and "--settle: expected seconds, at least 0, got 'soon'" in out.stderr, out.stderr
