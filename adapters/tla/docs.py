"""The measured numbers in tla/README.md, written by the runs that measure them.

``groupcoord tla check --write-docs`` (a full, passing check) and ``groupcoord tla mutants
--write-docs`` (the whole catalogue) record their run in ``tla/measured.json`` (``record_check``,
``record_mutants``) and rewrite the README's generated sections from that file: the text
between ``<!-- generated:begin NAME -->`` and ``<!-- generated:end NAME -->`` for NAME ``check``
and ``mutants`` (``render_readme``, pure). A test renders the sections again from the file and
requires the README to be unchanged, so no number in them is typed by hand; the full check's
test compares the state counts it finds with the recorded ones (TLC's counts are the same on
every complete run of a configuration), so a spec change that leaves them stale fails.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
from typing import Any

from groupcoord.adapters.checks.diagram import rewrite_sections
from groupcoord.adapters.tla.run import TLA_DIR

MEASURED = TLA_DIR / "measured.json"
README = TLA_DIR / "README.md"
SECTIONS = ("check", "mutants")


def render_readme(text: str, measured: dict) -> str:
    """The README ``text`` with the sections of every run ``measured`` holds rewritten."""
    render = {"check": check_section, "mutants": mutants_section}
    return rewrite_sections(text, {k: render[k](measured[k]) for k in SECTIONS if k in measured})


def load(path: Path = MEASURED) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def write(kind: str, record: dict, measured_path: Path = MEASURED, readme: Path = README) -> None:
    """Record one run (``check`` or ``mutants``) and rewrite the README from the record."""
    measured = load(measured_path)
    measured[kind] = record
    measured_path.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    readme.write_text(render_readme(readme.read_text(encoding="utf-8"), measured), encoding="utf-8")


def machine(workers: int, load_at_start: float) -> dict:
    """Where and when a run was measured."""
    return {"date": datetime.date.today().isoformat(), "cores": os.cpu_count() or 1, "workers": workers,
            "load": round(load_at_start, 1)}


def load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:  # not on this platform
        return 0.0


# ----------------------------------------------------------------------------- tla check

def record_check(results: list, ok: bool, seconds: float, where: dict) -> dict:
    """The numbers of a full ``tla check`` run (its CheckResults by name)."""
    by = {r.name: r for r in results}
    tlc = [{"check": name, "config": by[name].data["config"], "distinct": by[name].data["distinct"],
            "generated": by[name].data["generated"], "depth": by[name].data["depth"],
            "seconds": round(by[name].seconds, 1)}
           for name in by if "config" in by[name].data]
    g = by["graph-check"].data
    graph = {k: g[k] for k in ("nodes", "classes", "edges", "inits", "inputs", "matched", "unsound", "missing",
                               "crashed")}
    graph["seconds"] = round(by["graph-check"].seconds, 1)
    t = by["trace"].data
    trace = {k: t[k] for k in ("accepted", "traces", "scenario_traces", "hypothesis_traces", "hypothesis_steps",
                               "lines", "out_of_scope", "not_checked", "corrupted_step", "rejected_at",
                               "runs")}
    trace["seconds"] = round(by["trace"].seconds, 1)
    c = by["consumer-graph-check"].data
    consumer_graph = {k: c[k] for k in ("nodes", "classes", "edges", "steps", "unsound", "missing", "crashed")}
    consumer_graph["seconds"] = round(by["consumer-graph-check"].seconds, 1)
    c = by["consumer-trace"].data
    consumer_trace = {k: c[k] for k in ("accepted", "traces", "scenario_traces", "client_traces", "client_steps",
                                        "steps", "no_step", "stopped", "corrupted_row", "rejected_at")}
    consumer_trace["seconds"] = round(by["consumer-trace"].seconds, 1)
    return dict(where, ok=ok, seconds=round(seconds, 1), tlc=tlc, graph_check=graph, trace=trace,
                consumer_graph_check=consumer_graph, consumer_trace=consumer_trace)


def _n(x: int) -> str:
    return f"{x:,}"


def _s(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"


def _plural(n: int) -> str:
    return "" if n == 1 else "s"


def _where(m: dict) -> str:
    return (f"{m['cores']} cores, {m['workers']} TLC worker{_plural(m['workers'])}, load average "
            f"{m['load']} at the start")


def _by_count(counts: dict) -> list:
    """Most first, then by name (the file keeps its keys sorted by name)."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def check_section(m: dict) -> str:
    lines = [f"Measured by `groupcoord tla check --write-docs` on {m['date']} ({_where(m)}): "
             f"{'PASS' if m['ok'] else 'FAIL'} in {_s(m['seconds'])}.", "",
             "| check | config | distinct states | generated states | depth | time |",
             "|---|---|---:|---:|---:|---:|"]
    for r in m["tlc"]:
        lines.append(f"| {r['check']} | `{r['config']}` | {_n(r['distinct'])} | {_n(r['generated'])} | {r['depth']} "
                     f"| {_s(r['seconds'])} |")
    g, t = m["graph_check"], m["trace"]
    lines += ["",
              f"* graph check: {_n(g['nodes'])} states of MCGraph ({_n(g['classes'])} distinct without `out` and "
              f"`event`), {_n(g['edges'])} edges, {g['inits']} initial; {_n(g['inputs'])} core steps, "
              f"{_n(g['matched'])} matched an edge; unsound {g['unsound']}, missing {g['missing']}, "
              f"crashed {g['crashed']} ({_s(g['seconds'])}).",
              f"* trace validation: {t['accepted']}/{t['traces']} traces accepted ({t['scenario_traces']} from the "
              f"scenario runner, {t['hypothesis_traces']} hypothesis traces of {t['hypothesis_steps']} steps; "
              f"{_n(t['lines'])} lines) in {len(t['runs'])} TLC run{_plural(len(t['runs']))} "
              f"({'; '.join(f'{r[0]} trace{_plural(r[0])}: {_s(r[1])}' for r in t['runs'])}); a copy corrupted at line "
              f"{t['corrupted_step']} "
              f"{'rejected at line ' + str(t['rejected_at']) if t['rejected_at'] else 'ACCEPTED'} "
              f"({_s(t['seconds'])} in all). {t['out_of_scope']} scenarios are outside the spec's scope "
              f"and not checked, by reason (`tla check` lists them by name): "
              + "; ".join(f"{why}: {n}" for why, n in _by_count(t["not_checked"])) + "."]
    if "consumer_trace" in m:
        g, t = m["consumer_graph_check"], m["consumer_trace"]
        lines += [
            f"* consumer graph check: {_n(g['nodes'])} states of MCConsumerGraph ({_n(g['classes'])} distinct "
            f"without `out` and `event`), {_n(g['edges'])} edges; {_n(g['steps'])} core steps; unsound "
            f"{g['unsound']}, missing {g['missing']}, crashed {g['crashed']} ({_s(g['seconds'])}).",
            f"* consumer trace validation: {t['accepted']}/{t['traces']} traces accepted ({t['scenario_traces']} "
            f"consumer scenarios, {t['client_traces']} generated client runs of {t['client_steps']} actions; "
            f"{_n(t['steps'])} steps); a copy corrupted at row {t['corrupted_row']} "
            f"{'rejected at row ' + str(t['rejected_at']) if t['rejected_at'] else 'ACCEPTED'} "
            f"({_s(t['seconds'])} in all). {t['no_step']} consumer scenarios have no step the spec follows (only "
            f"requests refused before its checks, or none of one group); runs stopped short at the first input "
            f"the spec does not model, by reason: "
            + "; ".join(f"{why}: {n}" for why, n in _by_count(t["stopped"])) + "."]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- tla mutants

def record_mutants(results: list, ok: bool, seconds: float, where: dict, every_check: bool) -> dict:
    """The outcome of a ``tla mutants`` run over the whole catalogue (its MutantResults)."""
    rows = []
    for r in results:
        m, c = r.mutant, r.caught
        rows.append({"name": m.name, "bug": m.bug, "source": m.source, "expect": m.expect,
                     "caught": None if c is None else f"{c.check}: {c.by}", "problem": r.problem,
                     "also": r.also if every_check else None, "seconds": round(r.seconds, 1)})
    passed = sum(r.passed for r in results)
    return dict(where, ok=ok, seconds=round(seconds, 1), every_check=every_check, passed=passed,
                caught=sum(r.caught is not None for r in results), mutants=rows)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|")


def mutants_section(m: dict) -> str:
    n = len(m["mutants"])
    every = m["every_check"]
    lines = [f"Measured by `groupcoord tla mutants{' --every-check' if every else ''} --write-docs` on {m['date']} "
             f"({_where(m)}): {m['caught']}/{n} caught, {m['passed']}/{n} through their property and not by a "
             f"crash; {'PASS' if m['ok'] else 'FAIL'} in {_s(m['seconds'])}.", "",
             "| mutant | bug | source | caught by | time |" + (" every check that catches it |" if every else ""),
             "|---|---|---|---|---:|" + ("---|" if every else "")]
    for r in m["mutants"]:
        caught = r["caught"] if r["problem"] is None else r["problem"]
        if r["expect"] is not None and r["problem"] is None:
            caught += " (expected)" if caught.startswith(f"{r['caught'].split(':')[0]}: {r['expect']} ") \
                else f" (expected: {r['expect']})"
        row = (f"| {_cell(r['name'])} | {_cell(r['bug'])} | {_cell(r['source'])} | {_cell(caught)} "
               f"| {_s(r['seconds'])} |")
        if every:
            row += f" {_cell(', '.join(r['also']) or 'none')} |"
        lines.append(row)
    return "\n".join(lines) + "\n"
