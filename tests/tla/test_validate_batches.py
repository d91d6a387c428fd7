"""``tla validate`` checks its groups in TLC runs of a bounded size, so that progress and each
group's line come run by run; each line gives its own run's time, and says when the run checked
other traces too (no time made up per trace)."""

from __future__ import annotations

from types import SimpleNamespace

from groupcoord.adapters.tla.trace_check import TraceResult, batches


def _trace(name: str, lines: int, constants=(3000, 600000)):
    return SimpleNamespace(name=name, rows=[None] * lines, constants=constants)


def test_batches_share_constants_and_hold_a_bounded_number_of_lines():
    a, b, c, d = _trace("a", 300), _trace("b", 250), _trace("c", 200), _trace("d", 900)
    other = _trace("e", 10, constants=(0, 600000))
    assert [[t.name for t in batch] for batch in batches([a, b, c, d, other], max_lines=600)] == \
        [["e"], ["a", "b"], ["c"], ["d"]]
    assert [[t.name for t in batch] for batch in batches([a, b, c, d, other])] == [["e"], ["a", "b", "c", "d"]]


def test_a_line_gives_its_runs_time_and_with_how_many_traces():
    alone = TraceResult("g", 12, True, seconds=4.25)
    shared = TraceResult("g", 12, True, seconds=9.0, together=3)
    assert alone.line() == "trace g: 12 lines, accepted (4.2 s)"
    assert shared.line() == "trace g: 12 lines, accepted (9.0 s for a TLC run of 3 traces)"
