"""A coordinator trace whose last line a killed recorder left torn (no newline, not a record):
the readers leave it out, strict or not, and the commands say so once, naming the file and the
group whose results rest on the lines before it; a last line that is a whole record without its
newline is read."""

from __future__ import annotations

import subprocess
import sys

import pytest
from paths import ROOT

from groupcoord.adapters.replay import trace_files
from groupcoord.adapters.replay.partition import check_trace

CLI = [sys.executable, "-m", "groupcoord.adapters.cli.main"]


@pytest.fixture
def torn(tmp_path):
    subprocess.run(CLI + ["scenario", str(ROOT / "tests" / "scenarios" / "kafka-delete-groups-batch.json"),
                          "--trace", str(tmp_path / "t")], check=True, capture_output=True, timeout=120)
    (path,) = (tmp_path / "t").rglob("*.jsonl")
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    cut = lines[-1][:len(lines[-1]) * 3 // 4]
    path.write_text("".join(lines[:-1]) + cut)
    group = trace_files.torn_group(cut)  # the record's, or (instance scope) its event's
    assert group is not None and group in lines[-1]
    return path, lines, group


def test_the_readers_leave_it_out_and_the_check_says_so(torn):
    path, lines, group = torn
    rows = [c for cols in trace_files.iter_batches(path, strict=True) for c in cols["line"]]
    assert rows == [n for n, line in enumerate(lines[:-1], start=1) if line.strip()]
    said = []
    check_trace(str(path), warn=said.append)
    assert said == [f"{path}: torn last line (no newline, not a record): left out; group {group}'s results rest "
                    f"on the lines before it"]
    path.write_text("".join(lines).rstrip("\n"))  # whole, only the newline missing: read, nothing said
    assert len([c for cols in trace_files.iter_batches(path) for c in cols["line"]]) == len(rows) + 1
    said.clear()
    check_trace(str(path), warn=said.append)
    assert said == []


def test_timeline_warns_once_and_draws_the_lines_before(torn, tmp_path):
    path, _lines, group = torn
    result = subprocess.run(CLI + ["timeline", str(path), "--group", group, "--out", str(tmp_path / "t.html")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [f"groupcoord timeline: warning: {path}: torn last line (no newline, not a "
                                          f"record): left out; group {group}'s results rest on the lines before it"]
    assert (tmp_path / "t.html").exists()


def test_replay_counts_it_in_its_summary(torn, tmp_path):
    pytest.importorskip("pyarrow")
    import json

    path, _lines, group = torn
    result = subprocess.run(CLI + ["replay", str(path), "--engine", "plain", "--out", str(tmp_path / "r")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1), result.stderr
    assert result.stderr.count("torn last line") == 1, result.stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["torn_last_lines"] == [{"file": str(path), "group_id": group}]
    assert f"left out: {path}'s torn last line (no newline, not a record); group {group}'s results rest" \
        in result.stdout
