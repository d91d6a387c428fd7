"""A replay's report: where it goes (``default_report``, ``TRACE-report`` beside the trace;
``report_dir`` checks the place before any work), the summary both engines write
(``summarize``) and its text (``format_report``).

The report directory holds ``findings.parquet`` (rows with ``row_kind`` "finding", one per
group with a problem, "task", one per task and recording with totals, or "unit", one per group
replayed, where the manifest promises that no group spans files, so a group found in two files
is reported; every row names its ``recording``), ``summary.json`` and ``summary.txt``.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Iterator

REPORT_FILES = ("findings.parquet", "summary.json", "summary.txt")
TOTALS = ("units", "records", "inputs", "outputs", "instances", "skipped", "units_with_findings")


def default_report(path: str) -> str:
    """Where a replay's report goes without ``--out``: beside the trace, ``TRACE-report``
    (a directory or a file trace alike; never inside a trace directory)."""
    return str(Path(path).resolve()).rstrip("/") + "-report"


def report_dir(path: str, out: str) -> Path:
    """The report directory for trace ``path``, checked before any work: a report inside a
    trace directory would be mixed with it, a trace inside the report would be deleted with
    the old report, and an existing directory that is not a report is never emptied. Beside
    a trace file (in its directory) is fine: a directory's listing leaves reports out."""
    from groupcoord.adapters.traces.trace_files import TraceError

    trace = Path(path).resolve()
    out_path = Path(out)
    target = out_path.resolve()
    if trace.is_dir() and (target == trace or trace in target.parents):
        raise TraceError(f"{out}: the report would be inside the trace {path} (and read as part of it next time)")
    if trace == target or target in trace.parents:
        raise TraceError(f"{out}: the trace {path} is inside it, and an old report is deleted")
    if target.exists() and (not target.is_dir() or any(
            p.name not in REPORT_FILES for p in target.iterdir())):
        raise TraceError(f"{out}: exists and is not a replay report; not replacing it")
    return out_path


@contextlib.contextmanager
def report_written(out_path: Path, into: Path | None = None) -> Iterator[Path]:
    """The directory the report is written into: ``into`` when the caller holds its temporary
    (the replay on Spark holds it until the session is stopped), else a temporary that replaces
    ``out_path`` when the block ends normally and is removed when it raises
    (``stopping.written``)."""
    from groupcoord.adapters.traces.stopping import written

    if into is not None:
        yield Path(into)
        return
    with written(out_path, directory=True, stale=lambda name: name in REPORT_FILES) as tmp:
        yield tmp


def summarize(path, out_path: Path, recs, per: dict, by_check, first, seconds, several=None, into=None,
              **extra) -> dict:
    """``per``: totals by recording name. ``several``: groups replayed from more than one file
    although the manifest promises that none spans files (counted once in ``units``; the run
    fails). The summary names ``out_path``; its files go to ``into`` (default ``out_path``)."""
    several = several or {}
    recordings = []
    for r in recs:
        t = {k: per.get(r.name, {}).get(k, 0) for k in TOTALS}
        t["units"] -= several.get("by_recording", {}).get(r.name, 0)
        recordings.append({"name": r.name, "scope": r.scope, "manifest": str(r.manifest) if r.manifest else None,
                           "files": len(r.files), "outputs_compared": bool(r.meta.get("outputs", True)), **t})
    totals = {k: sum(r[k] for r in recordings) for k in TOTALS}
    scopes = {r["scope"] for r in recordings}
    summary = {"trace": str(path), "report": str(out_path),
               "manifest": recordings[0]["manifest"] if len(recordings) == 1 else None,
               "scope": scopes.pop() if len(scopes) == 1 else "mixed",
               "outputs_compared": all(r["outputs_compared"] for r in recordings), "seconds": round(seconds, 2),
               "records_per_s": round(totals["records"] / seconds) if seconds else None,
               **totals, "findings_by_check": dict(sorted(by_check.items())),
               "first_findings": [{k: v for k, v in f.items() if k not in ("row_kind", *TOTALS)} for f in first],
               "groups_in_several_files": several.get("groups", 0),
               "groups_in_several_files_sample": several.get("sample", []),
               "recordings": recordings, "torn_last_lines": _torn(recs), **extra}
    into = Path(into) if into is not None else out_path
    (into / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (into / "summary.txt").write_text(format_report(summary) + "\n")
    return summary


def _torn(recs) -> list[dict]:
    """The JSON Lines files whose torn last line the readers left out, each with the group it
    was about (None when its text cannot tell)."""
    from groupcoord.adapters.traces.trace_files import file_format, torn_group, torn_tail

    found = []
    for r in recs:
        for f in r.files:
            tail = torn_tail(f) if file_format(Path(f)) == "jsonl" else None
            if tail is not None:
                found.append({"file": str(f), "group_id": torn_group(tail)})
    return found


def _unit_word(scope: str, n: int | None = None) -> str:
    word = {"group": "groups", "instance": "recordings"}.get(scope, "units")
    return word[:-1] if n == 1 else word


RECORDINGS_SHOWN = 10  # more than this: those with findings only (up to this many)


def format_report(summary: dict) -> str:
    from groupcoord.adapters.traces.records import MALFORMED_ROW

    s = summary
    recordings = s.get("recordings") or []
    unit = _unit_word(s["scope"], s["units"])
    where = (f" in {len(recordings):,} recordings" if len(recordings) > 1 and s["scope"] != "instance" else "")
    note = ""
    if not s["outputs_compared"]:
        note = (" (some recordings have no outputs: invariants only there)" if len(recordings) > 1
                else " (the trace has no outputs: invariants only)")
    lines = [f"replayed {s['records']:,} records ({s['inputs']:,} inputs, {s['outputs']:,} outputs) of "
             f"{s['units']:,} {unit}{where} in {s['seconds']}s with {s['engine']}{note}"]
    bare = [r for r in recordings if r["manifest"] is None]
    defaults = ("replayed with the defaults (group scope, outputs compared, the default coordinator config); a "
                "trace recorded with other settings diverges where they matter")
    if len(recordings) <= 1 and bare:
        lines.append(f"no meta.json beside the trace: {defaults}")
    elif bare:
        lines.append(f"{len(bare)} of {len(recordings)} recordings have no meta.json beside them: {defaults}")
    lines.append(f"{s['units_with_findings']:,} {_unit_word(s['scope'], s['units_with_findings'])} with findings"
                 + (":" if s["units_with_findings"] else "; no divergence, no violation"))
    for key, count in s["findings_by_check"].items():
        lines.append(f"  {count:>8,}  {key}")
    if len(recordings) > 1:
        lines.append(f"{len(recordings):,} recordings (one per meta.json), each replayed on its own:")
        ordered = sorted(recordings, key=lambda r: (not r["units_with_findings"], r["name"]))
        shown = ordered if len(ordered) <= RECORDINGS_SHOWN else [r for r in ordered if r["units_with_findings"]]
        for r in shown[:RECORDINGS_SHOWN]:
            found = (f"{r['units_with_findings']:,} with findings" if r["units_with_findings"]
                     else "no divergence, no violation")
            counts = (f"{r['units']:,} {_unit_word(r['scope'], r['units'])}, " if r["scope"] != "instance"
                      or r["units"] != 1 else "")
            lines.append(f"  {'FINDINGS' if r['units_with_findings'] else 'clean':<8}  {r['name']}: "
                         f"{counts}{r['records']:,} records; {found}")
        hidden = ordered[len(shown[:RECORDINGS_SHOWN]):]
        if hidden:
            bad = sum(1 for r in hidden if r["units_with_findings"])
            what = (f"{len(hidden):,} more, " if shown else f"all {len(hidden):,} ") + (
                f"{bad:,} of them with findings" if bad else "clean")
            lines.append(f"  {what} (each listed in {s['report']}/summary.json)")
    if s["first_findings"]:
        lines.append(f"first findings (by group, {len(s['first_findings'])} shown; all in {s['report']}/findings.parquet):")
        for f in s["first_findings"]:
            where = f"{f['file']}:{f['line']}" if f.get("file") else f"seq {f.get('seq')}"
            record = ("a line that could not be read" if f["type"] == MALFORMED_ROW else
                      f"seq {f['seq']}, {f['dir']} {f['type']}, ts {f['ts_ms']}")
            lines.append(f"- {f['group_id']!r}: {f['kind']} [{f['checks']}] at {where} ({record})")
            lines.append(f"    {_short(f['detail'], 700)}")
            expected, actual = _around_difference(f.get("expected"), f.get("actual"))
            if expected is not None:
                lines.append(f"    expected: {expected}")
            if actual is not None:
                lines.append(f"    actual:   {actual}")
    if s.get("groups_in_several_files"):
        sample = ", ".join(repr(g) for g in s["groups_in_several_files_sample"][:5])
        lines.append(f"{s['groups_in_several_files']:,} groups are in more than one file, though meta.json promises "
                     f"that none is (groups_span_files: false); each copy was replayed alone: {sample}")
    for t in s.get("torn_last_lines") or []:
        whose = f"group {t['group_id']}'s results rest" if t["group_id"] is not None else "the results rest"
        lines.append(f"left out: {t['file']}'s torn last line (no newline, not a record); {whose} on the lines "
                     f"before it")
    lines.append(f"report: {s['report']}/findings.parquet, summary.json, summary.txt")
    return "\n".join(lines)


def _short(s: str, n: int = 400) -> str:
    return s if len(s) <= n else s[:n] + "..."


def _around_difference(expected: str | None, actual: str | None, n: int = 400) -> tuple:
    """Both values cut to ``n`` characters around their first difference, so two long values
    that differ far in do not print as the same text (the full values are in the report)."""
    if expected is None or actual is None or (len(expected) <= n and len(actual) <= n):
        return (None if expected is None else _short(expected, n)), (None if actual is None else _short(actual, n))
    first = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), min(len(expected), len(actual)))
    start = max(0, first - n // 3)

    def cut(v: str) -> str:
        return ("..." if start else "") + v[start:start + n] + ("..." if start + n < len(v) else "")

    return cut(expected), cut(actual)
