"""The one progress display of the long commands (verify, probe, verify --kafka-log, replay's
Spark stages, simulate, tla validate, the benchmarks that run them): a tqdm bar on stderr.

Shown when stderr is a terminal, else not, unless the command's ``--progress`` (or
``--no-progress``) says otherwise: the command line sets that once (``show``) and every bar
created afterwards follows it. A bar appears only once its run has lasted ``after_s`` seconds,
is redrawn at most every quarter second on a terminal (every 10 s elsewhere) and is erased
when it is done, so a short run prints nothing and the results that follow stand alone.

It lives in ``traces``, below every wing that shows progress (replay's Spark stages, verify,
the simulator, the benchmarks, the command line), which all import it from here.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

_wanted: bool | None = None  # the command's --progress / --no-progress; None: when stderr is a terminal


def show(wanted: bool | None) -> None:
    """Set from the command line: True (``--progress``), False (``--no-progress``) or None
    (when stderr is a terminal)."""
    global _wanted
    _wanted = wanted


def add_flag(parser) -> None:
    """The commands' ``--progress`` / ``--no-progress`` (the command line hands it to ``show``)."""
    import argparse

    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress on stderr (default: only when stderr is a terminal)")


def shown(stream: TextIO | None = None, wanted: bool | None = None) -> bool:
    """Whether a bar on ``stream`` (stderr) is shown: ``wanted``, else the command's choice,
    else whether the stream is a terminal."""
    for choice in (wanted, _wanted):
        if choice is not None:
            return choice
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Progress:
    """A run's progress: ``what`` (e.g. ``verify``), counted in ``unit`` up to ``total`` (None:
    unknown), with a note of what was found so far. ``advance(n, note)`` counts (``advance_to(n, note)``: up to n); ``update(text)``
    replaces the note alone; ``write(line)`` prints a line above the bar (``aside()``: a
    context for printing anything); ``done()`` erases it. Also a context manager."""

    def __init__(self, what: str = "", total: int | None = None, unit: str = "steps", *,
                 enabled: bool | None = None, stream: TextIO | None = None, after_s: float = 2.0) -> None:
        from tqdm import tqdm

        self.stream = stream if stream is not None else sys.stderr
        self.shown = shown(self.stream, enabled)
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.monotonic()
        counter = "{desc}: {n_fmt} " + unit + " [{elapsed}{postfix}]"  # no total: no bar, no rate
        self.bar = tqdm(total=total, desc=what or None, unit=unit, file=self.stream, disable=not self.shown,
                        bar_format=None if total else counter, delay=after_s,
                        mininterval=0.25 if tty else 10.0, dynamic_ncols=tty, leave=False, smoothing=0.1)

    @property
    def count(self) -> int:
        return int(self.bar.n)

    def advance(self, n: int = 1, note: str | None = None) -> None:
        if note is not None:
            self.bar.set_postfix_str(note, refresh=False)
        self.bar.update(n)

    def advance_to(self, n: int, note: str | None = None) -> None:
        """The count set to ``n`` (when the caller keeps its own)."""
        self.advance(max(0, n - self.count), note)

    def update(self, text: str) -> None:
        """The note alone (what has been done and found so far, in words)."""
        self.advance(0, text)

    def total(self, total: int) -> None:
        self.bar.total = total

    def write(self, line: str) -> None:
        """A line that stays, above the bar (drawn again under it); nothing when the bar is not
        shown."""
        if self.shown:
            self.bar.write(line, file=self.stream)

    def aside(self):
        """A context in which lines may go to stdout or stderr: the bar is cleared first and
        drawn again after."""
        import contextlib

        return self.bar.external_write_mode() if self.shown else contextlib.nullcontext()

    def seconds(self) -> float:
        return time.monotonic() - self.started

    def done(self) -> None:
        self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.done()
