"""``groupcoord timeline``: a PNG and a self-contained HTML page of one group."""

import pytest

pytest.importorskip("pyarrow")

from groupcoord.adapters.cli import replay as replay_cli
from groupcoord.adapters.replay import timeline
from groupcoord.adapters.sim import simulator
from groupcoord.adapters.traces import trace_files as trace_io


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("tl") / "trace"
    summary = simulator.simulate(path, groups=6, members=3, seed=4, duration_ms=90_000, progress=False)
    busiest = summary["busiest_groups"][0]["group_id"]
    return path, busiest


def test_model_follows_the_group(trace):
    path, gid = trace
    tl = timeline.load_timeline(str(path), gid)
    assert tl.rebalances >= 1 and tl.lanes and tl.generations
    assert {s.label for s in tl.states} & {"Stable", "PreparingRebalance"}
    assert all(s.start <= s.end for lane in tl.lanes for s in lane.spans)
    assert any(label for lane in tl.lanes for _, label in lane.assignments)


def test_png_and_html(trace, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path, gid = trace
    png, page = tmp_path / "g.png", tmp_path / "g.html"
    assert replay_cli.main(["timeline", str(path), "--group", gid, "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert replay_cli.main(["timeline", str(path), "--group", gid, "--out", str(page)]) == 0
    html = page.read_text()
    assert html.startswith("<!doctype html>") and "<svg" in html and gid in html and "<script" not in html


def test_unknown_group_is_an_error(trace, capsys):
    path, _ = trace
    assert replay_cli.main(["timeline", str(path), "--group", "nope", "--out", "/tmp/x.png"]) == 2
    assert "no records of group 'nope'" in capsys.readouterr().err


def test_group_ids_lists_groups(trace):
    path, gid = trace
    assert gid in trace_io.group_ids(str(path))


def test_no_two_texts_of_the_png_overlap_with_10_members_and_20_generations(tmp_path):
    """A busy group (the simulator's: 10 members at a time, 27 over its life, 20 generations
    and a failover in 300 s): every text box the PNG shows, measured by matplotlib's renderer,
    overlaps no other (labels that find no free place are left out; the HTML has them all)."""
    pytest.importorskip("matplotlib")
    import itertools

    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    simulator.simulate(tmp_path / "busy", groups=1, members=10, seed=7, duration_ms=300_000, incidents_per_min=6.0,
                       fmt="jsonl", progress=False)
    tl = timeline.load_timeline(str(tmp_path / "busy"), "group-000000")
    assert len(tl.lanes) >= 10 and len(tl.generations) >= 20
    fig = timeline.timeline_figure(tl)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        shown = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in shown]
        assert len([b for b in boxes if b[0].startswith("g") and b[0][1:].isdigit()]) >= 15  # most gN shown
        overlapping = [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2)
                       if box_a.overlaps(box_b)]
        assert overlapping == []
    finally:
        plt.close(fig)
