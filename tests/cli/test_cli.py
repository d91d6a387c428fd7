"""The groupcoord command, as a user runs it."""

import json
import re
import subprocess
import sys

import pytest
from paths import KAFKA_SCENARIOS, ROOT


def run(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.main", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def test_scenario_command_prints_a_line_per_scenario_and_passes():
    result = run("scenario", str(KAFKA_SCENARIOS))
    lines = result.stdout.strip().splitlines()
    assert result.returncode == 0, result.stdout[-2000:]
    assert sum(line.startswith("PASS ") for line in lines) == len(list(KAFKA_SCENARIOS.glob("*.json")))
    assert lines[-1].endswith(" passed, 0 failed")


def test_scenario_command_fails_with_the_step_and_why(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x", "steps": [
        {"send": "Heartbeat", "as": "h", "version": 4,
         "request": {"group_id": "g", "generation_id": 1, "member_id": "m"}},
        {"expect": "h", "response": {"error_code": "NONE"}}]}))
    result = run("scenario", str(bad))
    assert result.returncode == 1
    assert "FAIL" in result.stdout and "step 2" in result.stdout and "expected 0, got 25" in result.stdout


def test_scenario_command_writes_traces_the_replay_passes(tmp_path):
    own = sorted((ROOT / "tests" / "scenarios").glob("own-*.json"))
    result = run("scenario", *map(str, own), "--trace", str(tmp_path / "traces"), "--quiet")
    n = len(own)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert result.stdout.strip().endswith(f"{n} passed, 0 failed, {n} traces in {tmp_path / 'traces'}")
    traced = tmp_path / "traces" / "own-015-expired-pending-member-stays-expired-on-restore"
    assert json.loads((traced / "meta.json").read_text())["scope"] == "instance"
    replayed = run("replay", str(traced), "--engine", "plain", "--out", str(tmp_path / "report"))
    assert replayed.returncode == 0, replayed.stdout[-2000:] + replayed.stderr[-2000:]
    assert "0 recordings with findings; no divergence, no violation" in replayed.stdout


def test_scenario_trace_refuses_a_reload_with_new_settings(tmp_path):
    scenario = tmp_path / "reconfigured.json"
    scenario.write_text(json.dumps({"name": "x", "steps": [
        {"reload": True, "config": {"group.initial.rebalance.delay.ms": 0}}]}))
    result = run("scenario", str(scenario), "--trace", str(tmp_path / "traces"))
    assert result.returncode == 1
    assert "PASS" in result.stdout
    assert "no trace for" in result.stderr and "a reload changes the config" in result.stderr
    assert not (tmp_path / "traces" / "reconfigured").exists()


def test_demo_forms_a_group_and_survives_a_crash():
    result = run("demo")
    assert result.returncode == 0, result.stderr
    assert "joined generation 1 as leader" in result.stdout
    assert "final: Stable, generation 4, 2 members" in result.stdout


@pytest.mark.bench  # asserts a speed ratio measured on this machine: `pytest -m bench`, run once per CI run
def test_bench_core_prints_json_lines_last():
    result = run("bench", "core", "--quick")
    assert result.returncode == 0, result.stderr
    tail = [json.loads(line) for line in result.stdout.strip().splitlines()[-13:]]
    *tail, ratios, by_input = tail
    assert [m["name"] for m in tail] == ["heartbeat_10", "heartbeat_1000", "offset_commit_10",
                                         "offset_commit_1000", "rebalance_100", "consumer_heartbeat_10",
                                         "consumer_reconciliation_100", "recorded_stream",
                                         "simulated_mix", "slow_store_1_in_flight", "slow_store_1000_in_flight"]
    assert all(m["unit"] == "events/s" for m in tail)
    rate = {m["name"]: m["value"] for m in tail}
    # KIP-848's steady heartbeat beside the classic one, their ratio printed from the same run
    assert rate["consumer_heartbeat_10"] > 0 and rate["consumer_reconciliation_100"] > 0
    printed = re.search(r"vs classic heartbeat, groups of 10: ([0-9.]+)x the cost", result.stdout)
    assert printed and abs(float(printed[1]) - rate["heartbeat_10"] / rate["consumer_heartbeat_10"]) < 0.05
    # the costs against the heartbeat step, measured side by side: a commit with its write and
    # the mix's mean input (joins, syncs, commits) cost more than a heartbeat; printed as such
    assert ratios["name"] == "ratios" and ratios["rounds"] == 3
    assert ratios["commit_vs_heartbeat"] > 1 and ratios["mix_vs_heartbeat"] > 1, ratios
    assert f"a heartbeat step: {ratios['commit_vs_heartbeat']:.2f}x" in result.stdout
    # the values a commit and its acknowledgement build cost something, and less than all of it
    assert 0 < ratios["commit_values_vs_heartbeat"] < ratios["commit_vs_heartbeat"], ratios
    # so do the values the mix's steps build and keep, and those of a heartbeat step
    assert 0 < ratios["mix_values_vs_heartbeat"] < ratios["mix_vs_heartbeat"], ratios
    assert 0 < ratios["heartbeat_values_vs_heartbeat"] < 1, ratios
    assert f"built alone: {ratios['mix_values_vs_heartbeat']:.2f}x" in result.stdout
    # where the mix's time goes, by input type: commits, joins and heartbeats among them
    assert by_input["name"] == "mix_by_input"
    shares = {name: v["share"] for name, v in by_input.items() if name != "name"}
    assert {"OffsetCommit", "JoinGroup", "Heartbeat", "WriteCompleted"} <= set(shares), shares
    assert abs(sum(shares.values()) - 1) < 0.01 and list(shares.values()) == sorted(shares.values(), reverse=True)
    assert "the mix by input type" in result.stdout
    commit = by_input["OffsetCommit"]
    assert 0 < commit["values_vs_heartbeat"] and commit["vs_heartbeat"] > 1, commit
    assert f"its values alone {commit['values_vs_heartbeat']:>5.2f}x" in result.stdout
    # what the numbers must show, as ratios within this run: a heartbeat does no work that
    # grows with its group (1000 members cost about what 10 do), and is cheaper than a commit
    # with its write
    assert rate["heartbeat_1000"] > rate["heartbeat_10"] / 3, rate
    assert rate["heartbeat_10"] > rate["offset_commit_10"], rate  # ~5x on a quiet machine
    # a store slow to acknowledge: a commit and a held heartbeat cost about the same with 1,000
    # writes in flight as with one (9x slower before the writes in flight were kept by partition)
    assert rate["slow_store_1000_in_flight"] > rate["slow_store_1_in_flight"] / 3, rate
    assert "commit and held heartbeat cost, 1000 vs 1 writes in flight:" in result.stdout


def test_scenario_trace_that_cannot_be_written_is_reported_and_the_scenario_still_counts(tmp_path):
    scenario = ROOT / "tests" / "scenarios" / "own-001-simple-group-offsets-expire.json"
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / scenario.stem).write_text("in the way")
    result = run("scenario", str(scenario), "--trace", str(tmp_path / "traces"))
    assert result.returncode == 1
    assert result.stdout.startswith("PASS ")
    assert f"no trace for {scenario}: cannot write the trace" in result.stderr
    assert (tmp_path / "traces" / scenario.stem).read_text() == "in the way"
    result = run("scenario", str(scenario), "--trace", str(tmp_path / "traces" / scenario.stem))
    assert result.returncode == 2 and "exists and is not a directory" in result.stderr
