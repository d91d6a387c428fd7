"""The one progress display (adapters/traces/progress.py): a tqdm bar on stderr, shown on a
terminal, not elsewhere unless the command says --progress (and never with --no-progress);
a short run shows nothing; the commands that run long take the flag."""

from __future__ import annotations

import io
import time

import pytest

from groupcoord.adapters.traces import progress
from groupcoord.adapters.traces.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _no_choice():
    progress.show(None)
    yield
    progress.show(None)


def test_shown_on_a_terminal_erased_when_done():
    out = Terminal()
    with Progress("verify", unit="groups", stream=out, after_s=0) as p:
        p.advance(3, "1 diverging")
        time.sleep(0.3)
        p.advance(1, "2 diverging")
    text = out.getvalue()
    assert "verify: 4 groups" in text and "2 diverging" in text, text
    assert text.endswith("\r"), text  # nothing left behind the results that follow


def test_quiet_elsewhere_unless_asked_and_never_when_told_not_to():
    log = io.StringIO()
    with Progress("simulate", total=4, unit="groups", stream=log, after_s=0) as p:
        p.advance(4)
    assert log.getvalue() == ""
    progress.show(True)  # --progress
    with Progress("simulate", total=4, unit="groups", stream=log, after_s=0) as p:
        p.advance(4)
    assert "simulate:" in log.getvalue() and "/4 " in log.getvalue()
    progress.show(False)  # --no-progress, even on a terminal
    term = Terminal()
    with Progress("simulate", total=4, unit="groups", stream=term, after_s=0) as p:
        p.advance(4)
    assert term.getvalue() == ""


def test_a_short_run_shows_nothing():
    out = Terminal()
    with Progress("probe", total=10, unit="examples", stream=out, after_s=5) as p:
        p.advance_to(7, "0 divergences")
    assert out.getvalue() == ""


@pytest.mark.parametrize("argv", [["verify", "DIR"], ["probe", "--bootstrap", "h:1"], ["replay", "T"],
                                  ["simulate", "--out", "o", "--groups", "1", "--members", "1"],
                                  ["tla", "validate", "T"], ["bench", "verify"], ["bench", "replay"]])
def test_the_long_commands_take_the_flag(argv):
    from groupcoord.adapters.cli.main import build_parser

    parser = build_parser()
    assert parser.parse_args(argv + ["--progress"]).progress is True
    assert parser.parse_args(argv + ["--no-progress"]).progress is False
    assert parser.parse_args(argv).progress is None
