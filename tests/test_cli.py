"""The groupcoord command, as a user runs it."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "conformance" / "scenarios"


def run(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def test_scenario_command_prints_a_line_per_scenario_and_passes():
    result = run("scenario", str(SHARED))
    lines = result.stdout.strip().splitlines()
    assert result.returncode == 0, result.stdout[-2000:]
    assert sum(line.startswith("PASS ") for line in lines) == len(list(SHARED.glob("*.json")))
    assert lines[-1].endswith(" passed, 0 failed")


def test_scenario_command_fails_with_the_step_and_why(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x", "steps": [
        {"send": "Heartbeat", "as": "h", "version": 4,
         "request": {"group_id": "g", "generation_id": 1, "member_id": "m"}},
        {"expect": "h", "response": {"error_code": "NONE"}}]}))
    result = run("scenario", str(bad))
    assert result.returncode == 1
    assert "FAIL" in result.stdout and "step 2" in result.stdout and "UNKNOWN_MEMBER_ID" not in "" \
        and "expected 0, got 25" in result.stdout


def test_demo_forms_a_group_and_survives_a_crash():
    result = run("demo")
    assert result.returncode == 0, result.stderr
    assert "joined generation 1 as leader" in result.stdout
    assert "final: Stable, generation 4, 2 members" in result.stdout


def test_bench_core_prints_json_lines_last():
    result = run("bench", "core", "--quick")
    assert result.returncode == 0, result.stderr
    tail = [json.loads(line) for line in result.stdout.strip().splitlines()[-6:]]
    assert [m["name"] for m in tail] == ["heartbeat_10", "heartbeat_1000", "offset_commit_10",
                                         "offset_commit_1000", "rebalance_100", "replay"]
    assert all(m["unit"] == "events/s" and m["value"] > 0 for m in tail)
