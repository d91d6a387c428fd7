"""What the trace commands do with awkward inputs: faults that need a real placement, output
paths that overlap the trace, wrong file types, nonsense sizes, and a reader that goes away."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

pytest.importorskip("pyarrow")

from groupcoord.adapters.cli import replay as replay_cli
from groupcoord.adapters.replay import faults, timeline
from groupcoord.adapters.sim import simulator
from groupcoord.adapters.traces import trace_files as trace_io

MATCHED_SEED = 6  # greedy placement strands stale_generation; a matching places it
NO_PLACEMENT_SEED = 13  # no group takes stale_generation at all
TIMELINE_SEED = 47  # a failover, members kept their partitions across generations, stale session timers


def small_trace(path: Path, seed: int) -> Path:
    simulator.simulate(path, groups=20, members=3, seed=seed, duration_ms=20_000, progress=False)
    return path


@pytest.fixture(scope="module")
def matched(tmp_path_factory) -> Path:
    return small_trace(tmp_path_factory.mktemp("matched") / "trace", MATCHED_SEED)


@pytest.fixture(scope="module")
def drawn(tmp_path_factory) -> Path:
    return small_trace(tmp_path_factory.mktemp("drawn") / "trace", TIMELINE_SEED)


@pytest.fixture(scope="module")
def unplaceable(tmp_path_factory) -> Path:
    return small_trace(tmp_path_factory.mktemp("unplaceable") / "trace", NO_PLACEMENT_SEED)


def usage_error(argv: list[str], capsys) -> str:
    """argparse's refusal: exit 2 and the message on stderr."""
    with pytest.raises(SystemExit) as exc:
        replay_cli.main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def help_text(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        replay_cli.main([*argv, "--help"])
    assert exc.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines anywhere


# ------------------------------------------------------------------ inject-faults: placement


def test_place_keeps_the_greedy_result_when_greedy_places_everything():
    fits = {0: {"a", "b"}, 1: {"a", "b"}, 2: {"c"}}
    assert faults.place(3, ["a", "b", "c"], lambda i, f: f in fits[i]) == {"a": 0, "b": 1, "c": 2}


def test_place_moves_a_placed_fault_to_free_a_group_for_a_stranded_one():
    # greedy gives group 0 "a"; then "b" fits only group 0: "a" moves on to group 1
    fits = {0: {"a", "b"}, 1: {"a"}}
    assert faults.place(2, ["a", "b"], lambda i, f: f in fits[i]) == {"a": 1, "b": 0}


def test_place_leaves_out_only_what_no_placement_holds():
    fits = {0: {"a", "b"}, 1: {"c"}}
    placed = faults.place(2, ["a", "b", "c"], lambda i, f: f in fits[i])
    assert len(placed) == 2 and placed["c"] == 1 and set(placed) & {"a", "b"}


def test_inject_faults_places_every_fault_where_greedy_got_stuck(matched, tmp_path, capsys):
    out = tmp_path / "faulty"
    assert replay_cli.main(["inject-faults", str(matched), "--out", str(out)]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    injected = dict(rows)
    assert sorted(injected.values()) == sorted(faults.FAULTS) and len(injected) == len(rows)
    assert injected["group-000000"] == "two_leaders"  # as the greedy pass chose
    assert sorted(p.name for p in out.glob("part-*")) == sorted(p.name for p in matched.glob("part-*"))
    copied = {r["group_id"] for r in trace_io.read_records(out)}
    assert copied == {r["group_id"] for r in trace_io.read_records(matched)}


def test_inject_faults_without_a_placement_is_a_clear_error_and_writes_nothing(unplaceable, tmp_path, capsys):
    out = tmp_path / "faulty"
    assert replay_cli.main(["inject-faults", str(unplaceable), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("groupcoord inject-faults: error: ") and "stale_generation fits no group" in err
    assert "--faults" in err and len(err.splitlines()) == 1
    assert "Traceback" not in err
    assert not out.exists()


def test_inject_faults_with_a_subset_that_fits(unplaceable, tmp_path, capsys):
    out = tmp_path / "faulty"
    argv = ["inject-faults", str(unplaceable), "--out", str(out), "--faults", "two_leaders,out_of_order,two_leaders"]
    assert replay_cli.main(argv) == 0
    assert sorted(line.split("\t")[1] for line in capsys.readouterr().out.splitlines()) == \
        ["out_of_order", "two_leaders"]


@pytest.mark.parametrize("where", ["same", "inside", "around"])
def test_inject_faults_refuses_an_out_overlapping_the_trace(matched, where, capsys):
    out = {"same": matched, "inside": matched / "faulty", "around": matched.parent}[where]
    before = {p: p.read_bytes() for p in matched.iterdir()}
    assert replay_cli.main(["inject-faults", str(matched), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "overlaps the trace" in err and "Traceback" not in err
    assert {p: p.read_bytes() for p in matched.iterdir()} == before


def test_inject_faults_help_names_the_faults_and_arguments(capsys):
    text = help_text(["inject-faults"], capsys)
    assert all(name in text for name in faults.FAULTS)
    assert "the group-scoped trace to copy" in text and "directory for the copy" in text


# ------------------------------------------------------------------ timeline: output type


def test_timeline_refuses_other_file_types_before_reading_the_trace(tmp_path, capsys):
    out = tmp_path / "x.svg"
    err = usage_error(["timeline", str(tmp_path / "no-such-trace"), "--group", "g", "--out", str(out)], capsys)
    assert "argument --out" in err and "FILE.png or FILE.html" in err
    assert "no such file" not in err and "Traceback" not in err and not out.exists()


def test_render_timeline_checks_the_type_first(tmp_path):
    with pytest.raises(ValueError, match="FILE.png or FILE.html"):
        timeline.render_timeline(str(tmp_path / "no-such-trace"), "g", str(tmp_path / "x.svg"))


def test_timeline_help_explains_trace_and_group(capsys):
    text = help_text(["timeline"], capsys)
    assert "a trace directory or file, as simulate, scenario --trace or serve --trace write" in text
    assert "the group id to draw" in text and "the one file written" in text


# ------------------------------------------------------------------ timeline: readability


def test_every_member_is_labelled_when_the_group_becomes_stable(drawn):
    repeated = 0
    for gid in trace_io.group_ids(str(drawn)):
        tl = timeline.load_timeline(str(drawn), gid)
        for stable in (s for s in tl.states if s.label == "Stable"):
            for lane in tl.lanes:
                if any(s.start <= stable.start < s.end for s in lane.spans):
                    assert any(ts == stable.start and label for ts, label in lane.assignments), (gid, lane.name)
        for lane in tl.lanes:
            labels = [label for _, label in lane.assignments]
            repeated += sum(a == b for a, b in zip(labels, labels[1:]))
    assert repeated  # members given the same partitions again are labelled again


def test_expiry_marks_sit_on_the_member_they_removed(drawn):
    marks = 0
    for gid in trace_io.group_ids(str(drawn)):
        for lane in timeline.load_timeline(str(drawn), gid).lanes:
            for ts, kind, _ in lane.marks:
                if kind == "expired":
                    marks += 1
                    assert any(s.start <= ts <= s.end for s in lane.spans), (gid, lane.name, ts)
    assert marks


def test_png_legend_explains_the_blank_band_and_the_labels():
    pytest.importorskip("matplotlib")
    labels = [h.get_label() for h in timeline.legend_handles()]
    assert any(label.replace("\n", " ") == timeline.ABSENT_LABEL for label in labels)
    assert any("partitions" in label for label in labels)


def test_html_has_no_empty_tooltips_and_marks_the_time_without_a_coordinator(drawn, tmp_path, capsys):
    gid = next(g for g in trace_io.group_ids(str(drawn))
               if timeline.load_timeline(str(drawn), g).failovers)
    page = tmp_path / "g.html"
    assert replay_cli.main(["timeline", str(drawn), "--group", gid, "--out", str(page)]) == 0
    text = page.read_text()
    tooltips = re.findall(r"<title>assignment at [\d.]+s: ([^<]*)</title>", text)
    assert tooltips and all(tooltips)
    assert f'fill="url(#absent)" stroke="#aaa"><title>{timeline.ABSENT_LABEL}:' in text
    assert "partitions 0,2 of topic-a" in text  # the legend says what the labels mean


# ------------------------------------------------------------------ simulate: sizes


@pytest.mark.parametrize("option,value", [("--groups", "0"), ("--groups", "-1"), ("--members", "0"),
                                          ("--duration", "-5"), ("--duration", "nan"), ("--incidents", "-1"),
                                          ("--jobs", "0"), ("--groups", "many")])
def test_simulate_refuses_nonsense_sizes(option, value, tmp_path, capsys):
    out = tmp_path / "trace"
    err = usage_error(["simulate", "--out", str(out), option, value], capsys)
    assert f"argument {option}: expected" in err and repr(value) in err
    assert not out.exists()


def test_simulate_library_refuses_zero_groups(tmp_path):
    with pytest.raises(ValueError, match="groups must be at least 1"):
        simulator.simulate(tmp_path / "trace", groups=0, members=3, seed=1, progress=False)
    assert not (tmp_path / "trace").exists()


def test_simulate_help_shows_defaults_and_what_jobs_changes(capsys):
    text = help_text(["simulate"], capsys)
    assert "consumer groups to simulate (default: 100)" in text
    assert "the same seed gives the same trace records (default: 1)" in text
    assert "do not depend on it, but how many part files they are split into does" in text


def test_jobs_changes_the_part_files_but_not_the_records(tmp_path):
    def records(path):
        return [(r["group_id"], r["seq"], r["type"], r["data"]) for r in trace_io.read_records(path)]

    kwargs = dict(groups=8, members=2, seed=3, duration_ms=10_000, progress=False)
    one = simulator.simulate(tmp_path / "one", jobs=1, **kwargs)
    two = simulator.simulate(tmp_path / "two", jobs=2, **kwargs)
    assert one["files"] != two["files"]
    assert records(tmp_path / "one") == records(tmp_path / "two")


# ------------------------------------------------------------------ a reader that goes away


@pytest.mark.parametrize("command", ["simulate", "replay"])
def test_a_closed_pipe_ends_the_command_quietly(command, matched, tmp_path):
    args = {"simulate": ["simulate", "--groups", "2", "--duration", "5", "--out", str(tmp_path / "t")],
            "replay": ["replay", str(matched), "--engine", "plain", "--out", str(tmp_path / "report")]}[command]
    proc = subprocess.Popen([sys.executable, "-m", "groupcoord.adapters.cli.main", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # like `| head` that has gone: every write to stdout fails
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1, err
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err
