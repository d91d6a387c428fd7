"""A status line on stderr for long runs (``verify``'s groups, ``probe``'s examples): on a
terminal one line rewritten in place, elsewhere (a log, CI) a line every ``every_s`` seconds;
nothing for a run shorter than ``after_s``."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO | None = None, after_s: float = 3.0, every_s: float = 10.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.monotonic()
        self.after_s, self.every_s = after_s, (0.25 if self.tty else every_s)
        self.last: float | None = None
        self.shown = False

    def update(self, text: str) -> None:
        now = time.monotonic()
        if now - self.started < self.after_s or (self.last is not None and now - self.last < self.every_s):
            return
        self.last = now
        self.shown = True
        if self.tty:
            self.stream.write(f"\r\033[K{text}")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
