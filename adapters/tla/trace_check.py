"""Trace validation, the TLC run: a batch of traces sharing the spec's constants checked in one run
(``check_traces``, ``batches``). An accepted trace exits 0; a rejected one deadlocks (exit 11)
in the last state that matched, and its ``i`` tells the line where the core and the spec
diverged (``TraceResult``). ``corrupt`` makes a copy of a trace that TLC must reject.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from groupcoord.adapters.tla.run import run_tlc
from groupcoord.adapters.tla.trace import Trace
from groupcoord.adapters.tla.trace_module import module_text


def corrupt(trace: Trace, step: int | None = None) -> tuple[Trace, int]:
    """A copy of ``trace`` with one line's state changed (the generation after a settled join
    phase, else the last line's out): TLC must reject it at that line (1-based)."""
    rows = list(trace.rows)
    if step is None:
        candidates = [k for k in range(1, len(rows)) if rows[k]["s"]["generation"] != rows[k - 1]["s"]["generation"]]
        step = candidates[0] + 1 if candidates else len(rows)
    k = step - 1
    s = rows[k]["s"]
    rows[k] = rows[k].set(s=s.set(generation=s["generation"] + 1))
    return attrs.evolve(trace, name=trace.name + f" (corrupted at line {step})", rows=rows), step


@attrs.define
class TraceResult:
    name: str
    lines: int
    accepted: bool
    diverged_at: int | None = None  # 1-based line of the log TLC could not match
    event: Any = None
    seconds: float = 0.0  # the TLC run's
    detail: str = ""
    together: int = 1  # traces checked in that run

    def took(self) -> str:
        """The run's time, and with how many others when the trace did not have it alone."""
        if self.together > 1:
            return f"{self.seconds:.1f} s for a TLC run of {self.together} traces"
        return f"{self.seconds:.1f} s"

    def line(self) -> str:
        if self.accepted:
            return f"trace {self.name}: {self.lines} lines, accepted ({self.took()})"
        return (f"trace {self.name}: {self.lines} lines, REJECTED at line {self.diverged_at} "
                f"(event {self.event}) ({self.took()}) {self.detail}")


_I = re.compile(r"^/\\ i = (\d+)$", re.M)


def check_trace(trace: Trace, workers: int = 1, replace: dict | None = None, timeout: float = 300) -> TraceResult:
    return check_traces([trace], workers, replace, timeout)


_K = re.compile(r"^/\\ k = (\d+)$", re.M)


def check_traces(traces: list, workers: int = 1, replace: dict | None = None, timeout: float = 300) -> TraceResult:
    """One TLC run over a batch of traces sharing the constants: accepted if every trace is;
    else the first rejected trace TLC met, with its diverging line."""
    text, cfg = module_text(list(traces))
    name = traces[0].name if len(traces) == 1 else f"{len(traces)} traces"
    res = run_tlc("TraceCheck.cfg", "TraceCheck", workers=workers, name=name, timeout=timeout,
                  replace=replace, extra_files={"TraceCheck.tla": text, "TraceCheck.cfg": cfg})
    out = TraceResult(name, sum(len(t.rows) for t in traces), res.ok, seconds=res.seconds, together=len(traces))
    if not res.ok:
        found, ks = _I.findall(res.output), _K.findall(res.output)
        trace = traces[int(ks[-1]) - 1] if ks else traces[0]
        out.name = trace.name
        last = int(found[-1]) if found else 0
        out.diverged_at = last + 1 if res.exit_code == 11 else max(last, 1)
        if 1 <= out.diverged_at <= len(trace.rows):
            e = trace.rows[out.diverged_at - 1]["event"]
            out.event = e["type"] + (f" {e['key']}" if e["type"] == "TimerFired" else "")
        out.detail = res.violation()[:300]
    return out


def batches(traces: list, max_lines: int | None = None) -> list[list]:
    """Traces grouped by the constants they set (initial delay, retention check interval; one
    TLC run each). ``max_lines``: a batch holds traces of at most that many lines in all (a
    longer trace is a batch of its own), so that progress is seen run by run."""
    by: dict = {}
    for t in traces:
        by.setdefault(t.constants, []).append(t)
    out: list[list] = []
    for d in sorted(by):
        batch: list = []
        for t in by[d]:
            if batch and max_lines is not None and sum(len(b.rows) for b in batch) + len(t.rows) > max_lines:
                out.append(batch)
                batch = []
            batch.append(t)
        out.append(batch)
    return out
