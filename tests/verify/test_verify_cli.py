"""``groupcoord verify`` end to end: exit codes, the report, a bad trace, the Spark engine."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from verify_scripts import CONFIG, TWO_MEMBERS, planted

from groupcoord.adapters.cli.main import main
from groupcoord.adapters.verify.from_core import observe
from groupcoord.adapters.verify.observed import dump


@pytest.fixture(scope="module")
def two():
    return observe(TWO_MEMBERS, CONFIG)


def test_a_conforming_trace_exits_0_with_its_report(tmp_path, two, capsys):
    dump(two, tmp_path / "t")
    assert main(["verify", str(tmp_path / "t"), "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 groups: 1 conform, 0 diverge, 0 inconclusive (15 pairs checked")
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert (summary["conforms"], summary["diverges"], summary["pairs_checked"]) == (1, 0, 15)
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "r" / "verdicts.parquet").to_pylist()
    assert [(r["group_id"], r["verdict"]) for r in rows] == [("g", "conforms")]


def test_a_divergence_exits_1_and_says_where(tmp_path, two, capsys):
    dump(planted(two, 7, error_code=27), tmp_path / "t")
    assert main(["verify", str(tmp_path / "t")]) == 1
    out = capsys.readouterr().out
    assert "DIVERGES g: Heartbeat v4 (line 7): error_code: spec NONE (0), broker REBALANCE_IN_PROGRESS (27)" in out
    assert "spec allows:     {\"error_code\": \"NONE (0)\"}" in out
    assert (tmp_path / "t-verify" / "summary.txt").read_text().startswith("1 groups: 0 conform, 1 diverge")


def test_inconclusive_exits_3_and_an_empty_trace_is_not_conforming(tmp_path, two, capsys):
    dump(two, tmp_path / "t")
    assert main(["verify", str(tmp_path / "t"), "--budget", "2"]) == 3
    dump([o for o in two if o.api == "OffsetFetch" and False], tmp_path / "empty")
    assert main(["verify", str(tmp_path / "empty")]) == 3
    assert "0 groups" in capsys.readouterr().out


def test_bad_input_exits_2_with_one_line(tmp_path, two, capsys):
    path = dump(two, tmp_path / "t")
    lines = path.read_text().splitlines()
    lines[4] = lines[4][:40]
    path.write_text("\n".join(lines) + "\n")
    assert main(["verify", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("groupcoord verify: error: ") and "observed.jsonl:5: not JSON" in err[0]
    assert main(["verify", str(tmp_path / "missing")]) == 2
    assert main(["verify", str(tmp_path / "t"), "--group.max.size", "0"]) == 2
    assert "group.max.size must be at least 1" in capsys.readouterr().err


def test_the_spark_engine_gives_the_plain_engines_verdicts(tmp_path, two):
    dump(planted(two, 7, error_code=27) + [o for o in observe(
        [(t, c, a, v, {**b, "group_id": "h"}, cl) for t, c, a, v, b, cl in TWO_MEMBERS], CONFIG)], tmp_path / "t")
    plain = subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.main", "verify", str(tmp_path / "t"),
                            "--out", str(tmp_path / "plain")], capture_output=True, text=True, timeout=120)
    spark = subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.main", "verify", str(tmp_path / "t"),
                            "--engine", "spark", "--master", "local[1]", "--out", str(tmp_path / "spark")],
                           capture_output=True, text=True, timeout=300)
    assert (plain.returncode, spark.returncode) == (1, 1), (plain.stderr, spark.stderr)
    a = json.loads((tmp_path / "plain" / "summary.json").read_text())
    b = json.loads((tmp_path / "spark" / "summary.json").read_text())
    assert (b["engine"], b["groups"], b["conforms"], b["diverges"]) == ("spark", 2, 1, 1)
    assert a["diverging_groups"] == b["diverging_groups"]
    path = tmp_path / "t" / "observed.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:3] + ["{not json"] + lines[3:]) + "\n")
    bad = subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.main", "verify", str(tmp_path / "t"),
                          "--engine", "spark", "--master", "local[1]"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("groupcoord verify: error: ")
    assert "observed.jsonl:4: not JSON" in bad.stderr


def test_a_parquet_recording_is_read_too(tmp_path, two, capsys):
    dump(two, tmp_path / "t", fmt="parquet")
    assert (tmp_path / "t" / "observed.parquet").exists()
    assert main(["verify", str(tmp_path / "t")]) == 0
    assert capsys.readouterr().out.startswith("1 groups: 1 conform")


@pytest.mark.parametrize("cut, group", [(0.75, "g"), (0.1, None)])
def test_a_torn_last_line_is_warned_counted_and_the_verdict_rests_on_the_lines_before(tmp_path, two, capsys,
                                                                                     cut, group):
    """A recorder killed mid-write leaves a last line without its newline that is not a record:
    left out (the pairs before it are checked), said on stderr, counted in the summary, and the
    verdict of the group it was about (every group's, when its text does not tell) rests on the
    lines before it. A last line that is a whole record, newline or not, is read."""
    dump(two, tmp_path / "t")
    path = tmp_path / "t" / "observed.jsonl"
    text = path.read_text()
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    path.write_text(text + last[:int(len(last) * cut)])
    assert main(["verify", str(tmp_path / "t"), "--out", str(tmp_path / "r")]) == 0
    out, err = capsys.readouterr()
    assert err.startswith(f"groupcoord verify: warning: {path}: torn last line") and len(err.splitlines()) == 1, err
    assert ("group g's verdict rests" if group else "every group's verdict rests") in err
    assert "(15 pairs checked" in out and "not checked: 1 torn last line" in out
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["torn_last_line"] == {"file": str(path), "group_id": group}
    assert summary["pairs_not_checked"]["torn last line (no newline, not a record): left out"] == 1
    if group:
        assert f"TORN g: its verdict (conforms) rests on the lines before {path}'s torn last line" in out

    path.write_text(text.rstrip("\n"))  # whole, only the newline missing: read, nothing said
    assert main(["verify", str(tmp_path / "t"), "--out", str(tmp_path / "r2")]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "(15 pairs checked" in out and "torn last line" not in out
