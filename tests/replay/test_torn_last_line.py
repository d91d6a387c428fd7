"""A coordinator trace whose last line a killed recorder left torn (no newline, not a record):
the readers leave it out, strict or not, and the commands say so once, naming the file and the
group whose results rest on the lines before it; a last line that is a whole record without its
newline is read. A replay takes the outputs missing at the end of the unit whose records end there
(its group's, or whatever group when the torn text cannot tell) for the torn line's: no divergence."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from paths import ROOT

from groupcoord.adapters.replay.partition import check_trace
from groupcoord.adapters.traces import trace_files

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

    path, _lines, group = torn
    result = subprocess.run(CLI + ["replay", str(path), "--engine", "plain", "--out", str(tmp_path / "r")],
                            capture_output=True, text=True, timeout=120)
    # the torn line was the recording's last output: its verdict rests on the lines before it
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no divergence, no violation" in result.stdout
    assert result.stderr.count("torn last line") == 1, result.stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["torn_last_lines"] == [{"file": str(path), "group_id": group}]
    assert f"left out: {path}'s torn last line (no newline, not a record); group {group}'s results rest" \
        in result.stdout


# ---------------------------------------------------------------- the group's verdict (plain replay)


@pytest.fixture
def simulated(tmp_path):
    """A group-scoped JSON Lines trace, one group per file, and its files as lists of lines;
    ``ends`` holds files whose last step (an input, then two outputs) ends the file."""
    pytest.importorskip("pyarrow")
    from groupcoord.adapters.sim import simulator

    path = tmp_path / "sim"
    simulator.simulate(path, groups=3, members=3, seed=1, duration_ms=20_000, fmt="jsonl", groups_per_file=1,
                       progress=False)
    files = {f: f.read_text().splitlines(keepends=True) for f in sorted(path.glob("*.jsonl"))}
    ends = [f for f, lines in files.items() if [_record(x)["dir"] for x in lines[-3:]] == ["in", "out", "out"]]
    assert len(files) == 3 and ends
    return path, files, ends


def _record(line: str) -> dict:
    return json.loads(line)


def _line(record: dict) -> str:
    return json.dumps(record, separators=(",", ":")) + "\n"


def _tear(line: str, keep: float = 0.75) -> str:
    return line[:int(len(line) * keep)]


def _replay(path, out):
    from groupcoord.adapters.replay import report
    from groupcoord.adapters.replay.plain_job import plain_replay

    s = plain_replay(str(path), str(out), sample=10)
    return s, report.format_report(s)


@pytest.mark.parametrize("keep", [0.75, 0.1])  # the torn text names its group, or cannot tell it
def test_a_torn_last_output_is_not_a_divergence(simulated, tmp_path, keep):
    path, files, ends = simulated
    f = ends[0]
    lines = files[f]
    group = _record(lines[-1])["group_id"]
    f.write_text("".join(lines[:-1]) + _tear(lines[-1], keep))
    named = trace_files.torn_group(_tear(lines[-1], keep))
    assert named == (group if keep > 0.5 else None)
    s, text = _replay(path, tmp_path / "r")
    assert s["units"] == 3 and s["units_with_findings"] == 0, text
    whose = f"group {group}'s results rest" if named else "the results rest"
    assert "0 groups with findings; no divergence, no violation" in text
    assert f"left out: {f}'s torn last line (no newline, not a record); {whose} on the lines before it" in text


def test_a_wrong_output_or_one_missing_earlier_still_diverges(simulated, tmp_path):
    """The torn line excuses only outputs missing at the end: a recorded output of that step
    that differs, or an output missing from an earlier step, is a divergence."""
    path, files, ends = simulated
    f = ends[0]
    lines = list(files[f])
    group = _record(lines[-1])["group_id"]
    wrong = _record(lines[-2])
    wrong["data"] = {**wrong["data"], **{k: v + 1 for k, v in wrong["data"].items() if type(v) is int}}
    assert wrong["data"] != _record(lines[-2])["data"]
    f.write_text("".join(lines[:-2]) + _line(wrong) + _tear(lines[-1]))
    s, text = _replay(path, tmp_path / "r1")
    assert [(x["group_id"], x["kind"], x["line"]) for x in s["first_findings"]] == \
        [(group, "divergence", len(lines) - 1)], text
    assert "a recorded output differs from the replayed one" in s["first_findings"][0]["detail"]
    # an earlier step's output taken out (the seqs after it renumbered, so no gap shows)
    k = next(i for i in range(len(lines) - 4, 0, -1) if _record(lines[i])["dir"] == "out")
    later = [_line({**_record(x), "seq": _record(x)["seq"] - 1}) for x in lines[k + 1:]]
    f.write_text("".join(lines[:k]) + "".join(later[:-1]) + _tear(later[-1]))
    s, text = _replay(path, tmp_path / "r2")
    assert [(x["group_id"], x["kind"]) for x in s["first_findings"]] == [(group, "divergence")], text
    assert "an output is missing from the trace" in s["first_findings"][0]["detail"]


@pytest.mark.parametrize("where", ["its own file", "this group's file"])
def test_a_torn_line_of_another_group_excuses_nothing(simulated, tmp_path, where):
    """A group whose last output is missing (the line gone whole) diverges though another
    group's line is torn, in that group's own file or at the end of this group's file."""
    path, files, ends = simulated
    f = ends[0]
    lines = files[f]
    group = _record(lines[-1])["group_id"]
    other = next(g for g in files if g != f)
    other_lines = files[other]
    torn = _tear(other_lines[-1])
    assert trace_files.torn_group(torn) not in (None, group)
    if where == "its own file":
        f.write_text("".join(lines[:-1]))
        other.write_text("".join(other_lines[:-1]) + torn)
    else:
        f.write_text("".join(lines[:-1]) + torn)
    s, text = _replay(path, tmp_path / "r")
    assert [(x["group_id"], x["kind"]) for x in s["first_findings"]] == [(group, "divergence")], text
    assert "an output is missing from the trace" in s["first_findings"][0]["detail"]
