"""``groupcoord record`` and ``groupcoord bench proxy`` as commands: a refusal is one line and
exit 2 with nothing written (the whole table of refusals is tests/cli/test_bad_flags.py);
the benchmark prints its numbers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest


def run(*argv: str, cwd=None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.main", *argv], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it is closed


@pytest.mark.parametrize("argv, said", [
    (["--upstream", "127.0.0.1:{closed}", "--out", "rec"], "cannot reach the upstream 127.0.0.1:{closed}"),
    (["--upstream", "127.0.0.1", "--out", "rec"], "argument --upstream: expected HOST:PORT, got '127.0.0.1'"),
    (["--upstream", "127.0.0.1:{closed}", "--listen", "localhost:http", "--out", "rec"], "argument --listen: expected HOST:PORT"),
    (["--upstream", "127.0.0.1:{closed}", "--out", "file/rec"], "file is not a directory"),
])
def test_a_bad_argument_is_one_line_exit_2_and_nothing_written(tmp_path, argv, said):
    closed = str(_closed_port())
    (tmp_path / "file").write_text("")
    result = run("record", *[a.replace("{closed}", closed) for a in argv], cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("groupcoord record: error: "), result.stderr
    assert said.replace("{closed}", closed) in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_bench_proxy_prints_latency_and_rate_both_ways_and_their_ratios():
    result = run("bench", "proxy", "--count", "200", timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    numbers = {m["name"]: m for m in map(json.loads, lines[-11:])}
    for way in ("direct", "proxy"):
        assert numbers[f"heartbeat_p50_us_{way}"]["unit"] == "us"
        assert 0 < numbers[f"heartbeat_p50_us_{way}"]["value"] <= numbers[f"heartbeat_p99_us_{way}"]["value"]
        assert numbers[f"heartbeats_per_s_{way}"]["value"] > 0 and numbers[f"heartbeats_per_s_{way}"]["unit"] == "1/s"
    for q in ("p50", "p99"):
        added = numbers[f"added_latency_{q}_us"]["value"]
        assert added == pytest.approx(numbers[f"heartbeat_{q}_us_proxy"]["value"]
                                      - numbers[f"heartbeat_{q}_us_direct"]["value"], abs=0.02)
    ratios = [name for name in numbers if name.endswith("_ratio_proxy_vs_direct")]
    assert sorted(ratios) == ["heartbeat_p50_us_ratio_proxy_vs_direct", "heartbeat_p99_us_ratio_proxy_vs_direct",
                              "heartbeats_per_s_ratio_proxy_vs_direct"]
    assert all(numbers[r]["unit"] == "x" and numbers[r]["value"] > 0 for r in ratios)
    assert "heartbeats answered with an error" not in result.stderr
    assert any(line.startswith("added_latency_p50_us") for line in lines)  # the table, before the JSON lines
