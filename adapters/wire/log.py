"""Structured log lines (``Log``: logfmt or JSON, one line per event)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


class Log:
    """Structured log lines on a stream: ``text`` is key=value (logfmt), ``json`` one object per
    line. Every line has ts, level and event."""

    def __init__(self, stream: TextIO | None = None, fmt: str = "text", level: str = "info") -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.fmt = fmt
        self.threshold = _LEVELS[level]

    def enabled(self, level: str) -> bool:
        return _LEVELS[level] >= self.threshold

    def __call__(self, level: str, event: str, **fields: Any) -> None:
        if _LEVELS[level] < self.threshold:
            return
        record = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z",
                  "level": level, "event": event, **fields}
        if self.fmt == "json":
            line = json.dumps(record, default=str, separators=(",", ":"))
        else:
            line = " ".join(f"{k}={_logfmt(v)}" for k, v in record.items())
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass


def _logfmt(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = value if isinstance(value, str) else (json.dumps(value, default=str) if isinstance(value, (list, dict, tuple)) else str(value))
    if text == "" or any(c in text for c in ' "=\n\t'):
        return json.dumps(text)
    return text


class NullLog(Log):
    def __init__(self) -> None:
        super().__init__(stream=None, level="error")
        self.threshold = 100

    def __call__(self, level: str, event: str, **fields: Any) -> None:
        return None
