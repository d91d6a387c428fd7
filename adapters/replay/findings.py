"""What a replay reports: a unit's first finding (its kind, the check, where, what was expected
and what came) and the unit's totals."""

from __future__ import annotations

import attrs

from groupcoord.adapters.traces.records import MAX_VALUE_CHARS

DIVERGENCE, VIOLATION, CONTRACT, SEQUENCE, TIME, MALFORMED = (
    "divergence", "violation", "contract", "sequence", "time", "malformed")


@attrs.frozen
class Finding:
    """The first problem of a replay unit.

    ``kind``: divergence (a recorded output differs from the replayed one, or is missing or
    extra; ``checks`` names what the recorded output violates), violation (the replayed core
    breaks an invariant or a trace check: a core bug), contract (the recorded inputs break
    the embedding contract), sequence, time, malformed (a record is not trace format v1).
    ``expected`` is what the replayed core gives (or the contract wants), ``actual`` what the
    trace holds.
    """

    group_id: str | None
    kind: str
    check: str
    checks: tuple[str, ...]
    seq: int | None
    dir: str | None
    type: str | None
    ts_ms: int | None
    file: str | None
    line: int | None
    expected: str | None
    actual: str | None
    detail: str

    def location(self) -> str:
        if self.file is None:
            return f"seq {self.seq}"
        return f"{self.file}:{self.line}"

    def summary(self) -> str:
        head = f"{self.group_id!r} {self.kind} [{', '.join(self.checks) or self.check}] at {self.location()}"
        parts = [head, f"  {self.detail}"]
        if self.expected is not None:
            parts.append(f"  expected: {self.expected}")
        if self.actual is not None:
            parts.append(f"  actual:   {self.actual}")
        return "\n".join(parts)


def clip(s: str | None) -> str | None:
    if s is None or len(s) <= MAX_VALUE_CHARS:
        return s
    return s[:MAX_VALUE_CHARS] + f"... ({len(s)} chars)"


@attrs.frozen
class UnitResult:
    group_id: str | None
    records: int
    inputs: int
    outputs: int
    instances: int
    skipped: int
    finding: Finding | None
