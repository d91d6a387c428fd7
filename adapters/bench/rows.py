"""The figures every benchmark ends with: one JSON object per line, ``{"name", "value",
"unit"}``, the last lines of its output (tests and scripts read them)."""

from __future__ import annotations

import json
from typing import Iterable


def print_json_rows(rows: Iterable[tuple[str, float, str]], digits: int) -> None:
    """Each (name, value, unit) as one JSON line, the value rounded to ``digits``."""
    for name, value, unit in rows:
        print(json.dumps({"name": name, "value": round(value, digits), "unit": unit}))
