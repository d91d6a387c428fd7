"""``groupcoord bench frames`` (adapters/bench/frames.py), run small: groups formed through the
server's core, every heartbeat answered, the two runs' figures and their ratio printed."""

from __future__ import annotations

import json
import subprocess
import sys


def bench_frames(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.main", "bench", "frames", *args],
                          capture_output=True, text=True, timeout=300)


def test_heartbeat_frames_with_few_and_many_members_are_answered_and_timed():
    out = bench_frames("--groups", "40", "--members", "5", "--heartbeats", "3000", "--rounds", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    values = {row["name"]: row["value"] for row in map(json.loads, (row for row in out.stdout.splitlines() if row.startswith("{")))}
    few = values["server_python_us_per_heartbeat_5_members"]
    many = values["server_python_us_per_heartbeat_200_members"]
    assert 0 < few < 1000 and 0 < many < 1000, values
    assert abs(values["many_vs_few_members"] - many / few) < 0.01, values


def test_bad_arguments_are_refused_in_one_line():
    out = bench_frames("--groups", "0")
    assert out.returncode == 2
    assert "--groups: expected a whole number of at least 1, got '0'" in out.stderr


def test_answers_are_counted_with_their_errors():
    """The bench fails unless every heartbeat has an answer without an error: the counting sees both."""
    from groupcoord.adapters.bench.frames import CountingTransport
    from groupcoord.adapters.protocol import codec as kc

    def answer(correlation_id: int, error_code: int) -> bytes:
        body = kc.response_body(12, 4, {"throttle_time_ms": 0, "error_code": error_code})
        return kc.encode_response(12, 4, correlation_id, body)

    transport = CountingTransport(None)
    transport.write(answer(1, 0) + answer(2, 22))  # ILLEGAL_GENERATION
    transport.write(answer(3, 0))
    assert transport.take_answers() == (3, 1)
    assert transport.take_answers() == (0, 0)
