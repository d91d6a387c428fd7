"""The Spark replay job on a local SparkSession: clean traces pass; each injected fault is
flagged for exactly its group; JSON Lines with a bad line; a shared coordinator's recording.

One SparkSession (local[2]) for the whole module, warmed by a first job.
"""

import functools
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from replay_helpers import spread_over_files

from groupcoord.adapters.replay import faults
from groupcoord.adapters.replay import job as replay_job
from groupcoord.adapters.replay.plain_job import plain_replay
from groupcoord.adapters.replay.report import format_report
from groupcoord.adapters.replay.spark_job import spark_replay
from groupcoord.adapters.sim import simulator
from groupcoord.adapters.traces.spark_session import StageProgress, spark_session

GROUPS = 16


@pytest.fixture(scope="module")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    session = spark_session("local[2]", app="groupcoord-tests", partitions=4)
    session.range(100).count()  # warm-up: JVM classes, the first Python worker
    yield session
    session.stop()


@functools.lru_cache(maxsize=None)
def traces(root: str):
    root = Path(root)
    clean = root / "clean"
    simulator.simulate(clean, groups=GROUPS, members=3, seed=21, duration_ms=60_000, progress=False)
    faulty = root / "faulty"
    injected = faults.inject(clean, faulty)
    jsonl = root / "clean-jsonl"
    simulator.simulate(jsonl, groups=6, members=2, seed=22, duration_ms=30_000, fmt="jsonl", progress=False)
    return clean, faulty, injected, jsonl


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return traces(str(tmp_path_factory.mktemp("spark-traces")))


def test_clean_parquet_trace_passes(spark, data, tmp_path):
    clean = data[0]
    s = spark_replay(spark, str(clean), str(tmp_path / "report"))
    assert s["units"] == GROUPS and s["units_with_findings"] == 0, format_report(s)
    plain = plain_replay(str(clean), str(tmp_path / "plain"))
    assert (s["records"], s["inputs"], s["outputs"]) == (plain["records"], plain["inputs"], plain["outputs"])
    assert (tmp_path / "report" / "findings.parquet").is_dir()
    assert "no divergence, no violation" in (tmp_path / "report" / "summary.txt").read_text()


def test_faults_are_flagged_for_exactly_their_groups(spark, data, tmp_path):
    _, faulty, injected, _ = data
    s = spark_replay(spark, str(faulty), str(tmp_path / "report"), sample=100)
    found = {f["group_id"]: f for f in s["first_findings"]}
    assert set(found) == set(injected), format_report(s)
    for gid, fault in injected.items():
        f = found[gid]
        assert faults.EXPECTED_CHECK[fault] in f["checks"].split(","), (fault, f)
        assert f["file"].startswith(str(faulty)) and f["file"].endswith(".parquet") and f["line"] >= 1
    # the same findings as the plain replay
    plain = plain_replay(str(faulty), str(tmp_path / "plain"), sample=100)
    assert {(f["group_id"], f["checks"], f["seq"], f["file"], f["line"]) for f in plain["first_findings"]} == \
        {(f["group_id"], f["checks"], f["seq"], f["file"], f["line"]) for f in s["first_findings"]}
    rows = spark.read.parquet(str(tmp_path / "report" / "findings.parquet"))
    assert rows.filter("row_kind = 'finding'").count() == len(injected)


def test_jsonl_trace_with_a_bad_line(spark, data, tmp_path):
    src = data[3]
    dst = tmp_path / "bad"
    shutil.copytree(src, dst)
    part = sorted(dst.glob("part-*.jsonl"))[0]
    lines = part.read_text().splitlines()
    record = json.loads(lines[7])
    record["data"]["surprise"] = 1
    lines[7] = json.dumps(record)
    part.write_text("\n".join(lines) + "\n")
    s = spark_replay(spark, str(dst), str(tmp_path / "report"))
    assert s["units_with_findings"] == 1, format_report(s)
    f = s["first_findings"][0]
    assert (f["kind"], f["file"], f["line"], f["group_id"]) == ("malformed", str(part), 8, record["group_id"])
    assert "surprise" in f["detail"]
    # a line cut short (not JSON) is placed by the text it kept: one finding, in its group
    lines[7] = json.dumps(record)[:60]
    part.write_text("\n".join(lines) + "\n")
    s = spark_replay(spark, str(dst), str(tmp_path / "report2"))
    assert [(f["kind"], f["line"], f["group_id"]) for f in s["first_findings"]] == \
        [("malformed", 8, record["group_id"])], format_report(s)


def test_a_torn_last_output_is_not_a_divergence_on_spark(spark, data, tmp_path):
    """As in the plain replay (tests/replay/test_torn_last_line.py): a file's torn last line
    that held its group's last output leaves that group's verdict to the lines before it; an
    output missing at the same place in a whole file still diverges."""
    dst = tmp_path / "torn"
    shutil.copytree(data[3], dst)
    ends = [f for f in sorted(dst.glob("part-*.jsonl")) if json.loads(f.read_text().splitlines()[-1])["dir"] == "out"]
    assert ends
    lines = ends[0].read_text().splitlines(keepends=True)
    ends[0].write_text("".join(lines[:-1]) + lines[-1][:len(lines[-1]) * 3 // 4])
    s = spark_replay(spark, str(dst), str(tmp_path / "report"))
    assert s["units_with_findings"] == 0 and s["torn_last_lines"][0]["file"] == str(ends[0]), format_report(s)
    ends[0].write_text("".join(lines[:-1]))  # the output gone, the file whole: nothing excuses it
    s = spark_replay(spark, str(dst), str(tmp_path / "report2"))
    assert s["units_with_findings"] == 1 and "missing" in s["first_findings"][0]["detail"], format_report(s)


def test_shared_recording_replays_clean(spark, tmp_path):
    from replay_helpers import shared_recording

    path = shared_recording(tmp_path)
    s = spark_replay(spark, str(path), str(tmp_path / "report"))
    assert s["units"] == 1 and s["instances"] == 2 and s["units_with_findings"] == 0, format_report(s)


def test_groups_spanning_files_are_brought_together(spark, data, tmp_path):
    """Without the manifest's promise the job shuffles by group: the same clean replay."""
    spanning = spread_over_files(data[0], tmp_path / "spread", promise=False)
    assert len(spanning) == GROUPS
    s = spark_replay(spark, str(tmp_path / "spread"), str(tmp_path / "report"))
    assert s["units"] == GROUPS and s["units_with_findings"] == 0, format_report(s)
    plain = plain_replay(str(data[0]), str(tmp_path / "plain"))
    assert (s["records"], s["inputs"], s["outputs"]) == (plain["records"], plain["inputs"], plain["outputs"])


def test_a_broken_promise_is_reported_not_passed(spark, data, tmp_path):
    """A manifest that promises whole groups per file while groups span files: each file is
    one task, so every split group is flagged (its second half does not start at seq 0)."""
    spanning = spread_over_files(data[0], tmp_path / "spread", promise=True)
    s = spark_replay(spark, str(tmp_path / "spread"), str(tmp_path / "report"), sample=100)
    flagged = {f["group_id"] for f in s["first_findings"]}
    assert flagged == spanning, format_report(s)
    assert {f["check"] for f in s["first_findings"]} == {"sequence_order"}


def test_the_module_runs_under_spark_submit(data, tmp_path):
    """`PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit adapters/replay/job.py TRACE --out
    REPORT` from a fresh shell (the virtualenv's bin not on PATH): its own driver and master,
    the same findings, exit 1 when anything is found, no INFO lines from Spark once the job
    runs, and the summary last (the module session above stays up meanwhile)."""
    import subprocess

    import pyspark

    _, faulty, injected, _ = data
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {"HOME": os.environ.get("HOME", "/tmp"), "PATH": "/usr/bin:/bin", "PYSPARK_PYTHON": sys.executable}
    for name in ("PYTHONPATH", "JAVA_HOME"):
        if name in os.environ:
            env[name] = os.environ[name]
    report = tmp_path / "report"
    proc = subprocess.run([str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
                           replay_job.__file__, str(faulty), "--out", str(report)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((report / "summary.json").read_text())
    assert summary["units"] == GROUPS and summary["units_with_findings"] == len(injected)
    assert {f["group_id"] for f in summary["first_findings"]} == set(injected)
    assert "spark local[1]" in proc.stdout, proc.stdout[-2000:]
    said = (proc.stderr + proc.stdout).splitlines()
    assert not [line for line in said if " INFO " in line], said[:40]
    lines = proc.stdout.strip().splitlines()
    banner = next(i for i, line in enumerate(lines) if " replay summary " in line)
    assert lines[banner + 1].startswith("replayed ") and lines[-1].startswith(f"report: {report}/"), lines
    assert not [line for line in lines[banner:] if line.startswith("spark")], lines


def test_stage_progress_shows_the_stages_that_run_long():
    """A bar for a stage running past ``after`` seconds, with its tasks done, erased when it
    ends; nothing for short stages."""
    import io
    from types import SimpleNamespace

    class Tracker:
        active: dict = {}

        def getActiveStageIds(self):
            return list(self.active)

        def getStageInfo(self, stage):
            done, total = self.active[stage]
            return SimpleNamespace(numCompletedTasks=done, numTasks=total)

    now = [0.0]
    tracker, out = Tracker(), io.StringIO()
    progress = StageProgress(tracker, out=out, after=2, clock=lambda: now[0], enabled=True)
    progress.what = "replaying T"
    tracker.active = {1: (0, 4), 2: (0, 8)}
    progress.check()
    now[0] = 1.0
    tracker.active = {2: (3, 8)}  # stage 1 ended within a second: nothing shown
    progress.check()
    assert out.getvalue() == ""
    now[0] = 2.5
    progress.check()
    tracker.active = {2: (6, 8)}
    progress.check()
    now[0] = 14.0
    tracker.active = {}
    progress.check()
    shown = out.getvalue()
    assert "spark stage 2, replaying T:" in shown and "/8 " in shown and "stage 1" not in shown, shown
    assert shown.endswith("\r"), shown  # erased at the end


def test_a_copied_file_breaks_the_promise(spark, data, tmp_path):
    """Each Parquet file is one task under the promise; a copied file's groups replay clean
    in both tasks, and the driver finds them by their group ids."""
    import pyarrow.parquet as pq

    copy = tmp_path / "copied"
    shutil.copytree(data[0], copy)
    first = sorted(copy.glob("part-*.parquet"))[0]
    shutil.copy(first, copy / "part-copy.parquet")
    in_first = set(pq.read_table(first, columns=["group_id"]).column("group_id").to_pylist())
    s = spark_replay(spark, str(copy), str(tmp_path / "report"))
    assert s["units"] == GROUPS and s["units_with_findings"] == 0
    assert s["groups_in_several_files"] == len(in_first)
    assert set(s["groups_in_several_files_sample"]) == in_first
    assert "are in more than one file" in format_report(s)
