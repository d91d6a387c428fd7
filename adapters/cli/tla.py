"""``groupcoord tla check``, ``groupcoord tla validate`` and ``groupcoord tla mutants`` (tla/README.md)."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from groupcoord.adapters.cli import parsing
from groupcoord.adapters.cli.parsing import fail
from groupcoord.adapters.tla import consumer_check, consumer_mutants, consumer_trace, mutants
from groupcoord.adapters.tla.run import (
    TLA_DIR,
    CheckResult,
    TlaSetupError,
    check_setup,
    run_tlc,
    tlc_check,
    workers_for_machine,
)
from groupcoord.adapters.traces import progress

# The spec's actions (one per input event) and how an event names them.
ACTIONS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "DeleteGroups", "OffsetCommit", "OffsetFetch",
           "OffsetDelete", "HeartbeatTimer", "JoinTimer", "SyncTimer", "ExpireTimer", "WriteCompleted", "WriteFailed",
           "WriteFailedLast", "UnloadPartition", "LoadPartition")
_TIMER = {"hb": "HeartbeatTimer", "join": "JoinTimer", "sync": "SyncTimer", "expire": "ExpireTimer"}

# then the consumer group spec (tla/ConsumerGroup.tla): TLC, its graph check, its trace validation
# Every re-created bug `tla mutants` runs: the classic spec's and core's, then the consumer group's.
ALL_MUTANTS = (*mutants.MUTANTS, *consumer_mutants.catalogue())

CHECKS = ("mc3", "mc4", "offsets", "failover", "wide", "live", "stable", "graph", "trace", "consumer",
          "consumer-subs", "consumer-live", "consumer-graph", "consumer-trace")
# Not in the full run (its time): MCWide's inputs replayed against the core (tla/README.md).
EXTRA_CHECKS = ("graphwide",)
CONFIGS = {"mc3": "MC3.cfg", "mc4": "MC4.cfg", "offsets": "MCOffsets.cfg", "failover": "MCFailover.cfg",
           "wide": "MCWide.cfg", "live": "MCLive.cfg", "stable": "MCStable.cfg", "graph": "MCGraph.cfg",
           "graphwide": "MCGraphWide.cfg"}
GRAPHS = ("graph", "graphwide")  # dumped whole and replayed against the core
TLC_CHECKS = ("mc3", "mc4", "offsets", "failover", "wide", "live", "stable")  # TLC alone; graph's dump is replayed after
COVERED = ("mc3", "mc4", "offsets", "failover", "wide")  # dumped for action coverage
# Configurations of liveness properties (TLC does not name the one it finds violated).
LIVENESS = ("live", "stable")


def _action(kind: str, key: str | None) -> str | None:
    if kind == "TimerFired":
        return _TIMER.get(key or "")
    return kind if kind in ACTIONS else None


def coverage_from_text(text: str) -> dict[str, int]:
    """States whose ``event`` is each action; ``text`` holds one event value a line."""
    counts = dict.fromkeys(ACTIONS, 0)
    for line in text.splitlines():
        m = _TYPE.search(line)
        if m:
            k = _KEY.search(line)
            a = _action(m.group(1), k.group(1) if k else None)
            if a:
                counts[a] += 1
    return counts


_TYPE = re.compile(r'\btype \|-> \\?"(\w+)\\?"')
_KEY = re.compile(r'key \|-> <<\\?"(\w+)\\?"')


def _event_chunks(path: Path) -> str:
    """The ``event`` values of a dump (TLC's -dump, or DOT labels), one a line."""
    keep, open_ = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if open_:
                if line.startswith("/\\") or not line.strip():
                    open_ = False
                else:
                    keep[-1] += " " + line.strip()
                    continue
            i = line.find("event = ")
            if i >= 0:
                chunk = line[i:].rstrip("\n")
                if "\\n" in chunk:  # a DOT label: the event ends at the next variable
                    chunk = chunk.split("\\n/\\\\", 1)[0]
                    keep.append(chunk)
                else:
                    keep.append(chunk)
                    open_ = True
    return "\n".join(keep)


def run_config(check: str, workers: int, work: Path, replace: dict | None = None, out=print,
               extra_files: dict | None = None) -> CheckResult:
    cfg = CONFIGS[check]
    dump = work / f"{check}.{'dot' if check in GRAPHS else 'dump'}"
    args = ["-dump", str(dump)] if check in COVERED else []
    r = tlc_check(check, cfg, workers=workers, dump=dump if check in GRAPHS else None, extra_args=args,
                  replace=replace, extra_files=extra_files)
    if check not in LIVENESS and dump.exists():
        cov = coverage_from_text(_event_chunks(dump))
        r.data["coverage"] = cov
        r.lines.append("  action coverage (states reached by each action): "
                       + ", ".join(f"{a} {n}" for a, n in cov.items()))
    return r


def run_graph_check(dot: Path, stop_at_first: bool = False, config: str = "MCGraph.cfg",
                    name: str = "graph-check") -> CheckResult:
    from groupcoord.adapters.tla.graph import check_graph, model_from_cfg, read_dot

    started = time.monotonic()
    graph = read_dot(dot)
    model = model_from_cfg((TLA_DIR / config).read_text(), (TLA_DIR / "MC.tla").read_text())
    res = check_graph(graph, model, stop_at_first=stop_at_first)
    r = CheckResult(name, res.ok, time.monotonic() - started)
    r.data.update(nodes=res.nodes, classes=res.classes, edges=res.edges, inits=res.inits, inputs=res.inputs,
                  matched=res.matched,
                  unsound=len(res.unsound), missing=len(res.missing), crashed=len(res.crashed),
                  first=(res.findings()
                         + [f"table edge {s} -> {t} taken by no core step" for s, t in res.uncovered])[:1],
                  about=res.first)
    r.lines.append(res.summary())
    r.lines.extend("  " + line for line in res.coverage())
    for x in (res.unsound[:3] + res.missing[:3] + res.crashed[:3]):
        r.lines.append("  " + x[:500])
    return r


# Traces validated by `tla check`: every conformance scenario within the spec's scope (through
# the scenario runner) and hypothesis traces (fixed seeds), in batches of one TLC run each.
HYPOTHESIS_SEEDS = (0, 1, 2, 3, 4)
HYPOTHESIS_STEPS = 60


def _scenario_paths() -> list[Path]:
    """The repository's conformance suite (and scenarios beside it, see ``suite_files``)."""
    from groupcoord.adapters.conformance.suite import suite_files

    return suite_files(Path(__file__).resolve().parents[2])


def validation_traces() -> tuple[list, list, list]:
    """(scenario traces, hypothesis traces, the scenarios left out: (file name, why))."""
    from groupcoord.adapters.tla import trace_sources

    scenario, left_out = trace_sources.scenario_traces(_scenario_paths())
    hypo = [trace_sources.hypothesis_trace(seed, HYPOTHESIS_STEPS) for seed in HYPOTHESIS_SEEDS]
    return scenario, hypo, left_out


def run_trace_validation(out=print) -> CheckResult:
    """Every scenario trace within the spec's scope and the hypothesis traces; the scenarios left
    out are listed by reason (a scenario that fails is a failure here, not a scenario out of
    scope), and a corrupted copy must be rejected."""
    from groupcoord.adapters.tla import trace_check, trace_sources

    started = time.monotonic()
    r = CheckResult("trace", True, 0.0)
    scenario, hypo, left_out = validation_traces()
    skipped = len(left_out)
    if not scenario:
        r.ok = False
        r.lines.append("  no scenario trace found")
    by_reason = trace_sources.reasons(left_out)
    if by_reason:
        r.lines.append(f"  not checked: {skipped} scenarios, by reason:")
        for why, names in by_reason.items():
            r.lines.append(f"    {why}: {len(names)} ({', '.join(names)})")
    if trace_sources.SCENARIO_FAILS in by_reason:
        r.ok = False
        r.lines.append(f"  FAILED: {len(by_reason[trace_sources.SCENARIO_FAILS])} scenarios fail on the core")
    accepted, runs = 0, []
    for batch in trace_check.batches(scenario + hypo):
        tr = trace_check.check_traces(batch)
        r.lines.append("  " + tr.line())
        r.ok &= tr.accepted
        accepted += len(batch) if tr.accepted else 0
        runs.append([len(batch), round(tr.seconds, 1)])
    bad, step = trace_check.corrupt(hypo[0])
    rejected = trace_check.check_trace(bad)
    r.lines.append("  " + rejected.line() + f" (corrupted at line {step}: must be rejected there)")
    r.ok &= (not rejected.accepted) and rejected.diverged_at == step
    n = len(scenario) + len(hypo)
    r.data.update(accepted=accepted, traces=n, scenario_traces=len(scenario), hypothesis_traces=len(hypo),
                  hypothesis_steps=HYPOTHESIS_STEPS, runs=runs,
                  not_checked={why: len(names) for why, names in by_reason.items()},
                  lines=sum(len(t.rows) for t in scenario + hypo), out_of_scope=skipped,
                  corrupted_step=step, rejected_at=rejected.diverged_at, rejected=not rejected.accepted)
    r.seconds = time.monotonic() - started
    r.lines.insert(0, f"trace validation: {accepted}/{n} traces accepted ({len(scenario)} from the scenario runner, "
                      f"{skipped} scenarios outside the spec's scope; {len(hypo)} from hypothesis; "
                      f"{r.data['lines']} lines); corrupted copy "
                      f"{'rejected at line ' + str(rejected.diverged_at) if not rejected.accepted else 'ACCEPTED'} "
                      f"({r.seconds:.1f} s)")
    return r


def run_check(selected: list[str] | None = None, workers: int | None = None, out=print,
              write_docs: bool = False, keep_graph: Path | None = None) -> tuple[bool, list]:
    """``write_docs``: a full check that passes records its numbers in tla/measured.json and
    rewrites tla/README.md's generated section from them (``adapters/tla/docs.py``).
    ``keep_graph``: where MCGraph's state graph, once dumped, is kept (``run_mutants_command``
    replays it again rather than run TLC for the same graph)."""
    from groupcoord.adapters.tla import docs

    selected = list(selected or CHECKS)
    if write_docs and selected != list(CHECKS):
        raise ValueError("--write-docs records the full check: run it without --only and --quick")
    workers = workers or workers_for_machine()
    load_at_start = docs.load_average()
    out(f"TLC: {check_setup(hypothesis='trace' in selected)}; {workers} workers")
    results = []
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="groupcoord-tla-check-"))
    try:
        for check in selected:
            if check in TLC_CHECKS:
                r = run_config(check, workers, work)
            elif check in GRAPHS:
                r = run_config(check, workers, work)
                for line in r.lines:
                    out(line)
                results.append(r)
                if not r.ok:
                    continue
                r = run_graph_check(work / f"{check}.dot", config=CONFIGS[check], name=f"{check}-check")
            elif check == "trace":
                r = run_trace_validation(out)
            elif check in consumer_check.CONFIGS:
                dot = work / "consumer.dot" if check == "consumer-graph" else None
                r = consumer_check.run_config(check, workers, dot)
                if dot is not None and r.ok:
                    for line in r.lines:
                        out(line)
                    results.append(r)
                    r = consumer_check.run_graph_check(dot)
            elif check == "consumer-trace":
                r = consumer_check.run_trace_validation()
            else:
                raise ValueError(f"unknown check {check}")
            for line in r.lines:
                out(line)
            results.append(r)
        total = dict.fromkeys(ACTIONS, 0)
        for r in results:
            for a, n in r.data.get("coverage", {}).items():
                total[a] += n
        ok = all(r.ok for r in results)
        if any(r.data.get("coverage") for r in results):
            never = [a for a, n in total.items() if n == 0]
            if never:
                out(f"actions never taken in any configuration (vacuous): {', '.join(never)}")
                ok = False
            else:
                out("every action taken in some configuration")
        seconds = time.monotonic() - started
        out(f"tla check: {'PASS' if ok else 'FAIL'} ({seconds:.1f} s)")
        if write_docs:
            if ok:
                docs.write("check", docs.record_check(results, ok, seconds, docs.machine(workers, load_at_start)))
                out(f"wrote {docs.MEASURED} and the measured numbers in {docs.README}")
            else:
                out("the docs are left as they were: a failing check measures nothing worth writing down")
        return ok, results
    finally:
        if keep_graph is not None and (work / "graph.dot").exists():
            shutil.move(work / "graph.dot", keep_graph)
        shutil.rmtree(work, ignore_errors=True)


def run_mutants_command(names: list[str] | None = None, workers: int | None = None, out=print,
                        every_check: bool = False, write_docs: bool = False,
                        graph: Path | None = None) -> tuple[bool, list]:
    """``write_docs``: a run of the whole catalogue records its outcome in tla/measured.json and
    rewrites tla/README.md's mutant table from it. ``graph``: MCGraph's state graph as a passing
    ``run_check`` kept it (else TLC dumps it again here)."""
    from groupcoord.adapters.scenarios.runner import run_file, scenario_files
    from groupcoord.adapters.tla import docs, trace_check, trace_sources
    from groupcoord.adapters.tla.mutants import MUTANTS, Catch, only_property, run_mutants, violated_property

    if write_docs and names:
        raise ValueError("--write-docs records the whole catalogue: run it without --only")
    workers = workers or workers_for_machine()
    load_at_start = docs.load_average()
    started = time.monotonic()
    out(f"TLC: {check_setup(hypothesis=True)}; {workers} workers")
    work = Path(tempfile.mkdtemp(prefix="groupcoord-tla-mutants-"))
    try:
        dot = work / "graph.dot"
        state: dict = {}
        if graph is not None and graph.exists():
            dot, state["graph"] = graph, True

        def scenarios(m):
            crash = None  # a scenario the core crashed in; the others may still show a mismatch
            for p in scenario_files(_scenario_paths()):
                res = run_file(p)
                if res.passed:
                    continue
                c = Catch("scenarios", f"{res.path.rsplit('/', 1)[-1]} step {res.step}", None, res.reason[:150],
                          crash=res.crashed)
                if not c.crash:
                    return c
                crash = crash or c
            return crash

        def graph_check(m):
            if "graph" not in state:
                g = run_tlc("MCGraph.cfg", workers=workers, dump=dot, name="graph", timeout=600)
                if not g.ok:
                    raise RuntimeError(f"MCGraph failed on the unmutated spec: {g.violation()}")
                state["graph"] = True
            r = run_graph_check(dot, stop_at_first=True)
            if r.ok:
                return None
            d = r.data
            if d["unsound"] or d["missing"]:
                return Catch("graph-check", f"{'unsound' if d['unsound'] else 'missing'} ({d['about']})",
                             d["about"], d["first"][0][:300])
            if d["crashed"]:
                return Catch("graph-check", f"the core raised on {d['crashed']} inputs", None, d["first"][0][:300],
                             crash=True)
            return Catch("graph-check", "a table edge no core step takes", None, d["first"][0][:300])

        def trace(m):
            try:
                scenario, hypo, left_out = validation_traces()  # recorded through the mutated core
            except Exception as e:
                return Catch("trace", "the core raised while recording a trace", None, f"{type(e).__name__}: {e}",
                             crash=True)
            failing = trace_sources.reasons(left_out).get(trace_sources.SCENARIO_FAILS, [])
            if failing:  # said, not dropped quietly: the scenarios check is the one that fails on them
                out(f"    {m.name}: trace: {len(failing)} scenarios fail on the mutated core and are not traced "
                    f"({', '.join(failing[:5])}{', ...' if len(failing) > 5 else ''})")
            for batch in trace_check.batches(scenario + hypo):
                tr = trace_check.check_traces(batch)
                if not tr.accepted:
                    prop = violated_property(tr.detail)
                    return Catch("trace", f"{tr.name} rejected at line {tr.diverged_at} ({tr.event})"
                                 + (f": {prop} violated" if prop else ""), prop, tr.detail)
            return None

        def tlc(check):
            def run(m):
                # the named property checked alone: it is what catches the mutant (TLC stops at the
                # first property violated, and names no liveness property)
                extra = ({CONFIGS[check]: only_property((TLA_DIR / CONFIGS[check]).read_text(), m.expect)}
                         if m.expect else None)
                r = run_config(check, workers, work, replace=m.spec, extra_files=extra)
                if r.ok:
                    return None
                error = r.data.get("violation") or f"exit {r.data['exit_code']}"
                name = f"tlc-{check}"
                prop = violated_property(error)
                if prop is not None:
                    return Catch(name, f"{prop} violated", prop, error)
                if error.startswith("Temporal properties were violated"):
                    return Catch(name, f"{m.expect} violated (checked alone)", m.expect, error) if extra \
                        else Catch(name, "a liveness property violated", None, error)
                if error.startswith("Deadlock reached"):
                    return Catch(name, "a deadlock", "deadlock", error)
                return Catch(name, "TLC failed to evaluate the spec", None, error, crash=True)
            return run

        checks = {"scenarios": scenarios, "graph-check": graph_check, "trace": trace,
                  **{f"tlc-{name}": tlc(name) for name in TLC_CHECKS}}
        out(f"{len(ALL_MUTANTS) if not names else len(names)} mutants (name, source -> the check that caught it: "
            f"the property or the difference):")
        classic = [n for n in names if n in {m.name for m in MUTANTS}] if names else None
        results = run_mutants(checks, classic, out, every_check=every_check) if classic or not names else []
        consumer = [n for n in names if n not in {m.name for m in MUTANTS}] if names else None
        if consumer or not names:
            results += consumer_mutants.run_catalogue(consumer, out, every_check=every_check)
        passed = sum(r.passed for r in results)
        caught = sum(r.caught is not None for r in results)
        ok = passed == len(results) and bool(results)
        seconds = time.monotonic() - started
        out(f"tla mutants: {caught}/{len(results)} caught ({100 * caught // max(1, len(results))} %), "
            f"{passed}/{len(results)} through their property and not by a crash, "
            f"{'PASS' if ok else 'FAIL'} ({seconds:.1f} s)")
        if write_docs:
            docs.write("mutants", docs.record_mutants(results, ok, seconds, docs.machine(workers, load_at_start),
                                                      every_check))
            out(f"wrote {docs.MEASURED} and the mutant table in {docs.README}")
        return ok, results
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _mutant_selection(text: str) -> list[str]:
    try:
        return mutants.select(text, ALL_MUTANTS)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


_workers = parsing.number(int, 0, "a whole number of at least 0 (0: the machine's cores, at most 2)")


def add_tla_command(sub) -> None:
    p = sub.add_parser("tla", help="model-check tla/ with TLC and tie it to the core (tla/README.md)",
                       description="Needs the tla extra (pip install 'groupcoord[tla]') and Java 11 or newer "
                                   "on PATH; runs from a checkout (the spec in tla/, the scenarios in spec/conformance/ and tests/).")
    tsub = p.add_subparsers(dest="tla_command", required=True)
    c = tsub.add_parser("check", help="TLC on every configuration, the state-graph check, trace validation")
    c.add_argument("--only", default=None, type=parsing.one_of(CHECKS + EXTRA_CHECKS, "checks"),
                   help=f"comma-separated subset of {','.join(CHECKS + EXTRA_CHECKS)}")
    c.add_argument("--quick", action="store_true", help="mc3, the state-graph check and trace validation only")
    c.add_argument("--workers", type=_workers, default=0, help="TLC workers (default 0: the machine's cores, "
                                                              "at most 2)")
    c.add_argument("--write-docs", action="store_true",
                   help="a full check that passes writes its numbers to tla/measured.json and the measured "
                        "section of tla/README.md")
    v = tsub.add_parser(
        "validate", help="trace validation of a recorded trace (spec/trace-format.md): its inputs re-run "
                         "through the core, each step checked by TLC",
        description="Trace validation of a recorded trace: what `scenario --trace DIR`, `serve --trace PATH` "
                    "and `simulate --out DIR` write, a file or a directory. Each recording (the files under one "
                    "meta.json) is read with its own manifest; each group in it is one unit, its inputs re-run "
                    "through the core and every step checked by TLC against tla/Coordinator.tla (a consumer "
                    "group of KIP-848's protocol against tla/ConsumerGroup.tla). The spec models "
                    "one group on one coordinator, its offsets included (OffsetCommit, OffsetFetch, "
                    "OffsetDelete, their expiry; tla/README.md): inputs it does not see (other partitions' "
                    "loads and timers, FindCoordinator, DescribeGroups, ListGroups, other groups' requests) are "
                    "run through the core and stepped over when they change nothing the spec sees; at the first "
                    "input it cannot model (another group's commit or join on the group's partition, a "
                    "DeleteGroups of other groups, a load of records the coordinator did not write, offset "
                    "metadata over offset.metadata.max.bytes, ...) the unit's checking stops, and the line says "
                    "so: 'accepted in part', the rest NOT CHECKED. Exit 0 when something was checked and nothing rejected, 1 when a unit is "
                    "rejected, 2 when nothing could be checked. Writes no file (TLC runs in a temporary "
                    "directory, removed afterwards).")
    v.add_argument("trace", help="a trace file or directory (several recordings, one per meta.json, are fine)")
    v.add_argument("--group", default=None, help="this group only")
    progress.add_flag(v)
    m = tsub.add_parser("mutants", help="re-created coordinator bugs; each must be caught",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="mutants (name, bug ids, source); --only takes names and bug ids, in any case:\n"
                               + mutants.catalogue(ALL_MUTANTS))
    m.add_argument("--only", default=None, type=_mutant_selection, metavar="NAME_OR_BUG_ID[,...]",
                   help="comma-separated mutant names or bug ids (e.g. KAFKA-8500, KoP-380); a bug id picks "
                        "every mutant that re-creates it")
    m.add_argument("--workers", type=_workers, default=0, help="TLC workers (default 0: the machine's cores, "
                                                              "at most 2)")
    m.add_argument("--every-check", action="store_true",
                   help="run every check on each mutant (not only up to the first that catches it)")
    m.add_argument("--write-docs", action="store_true",
                   help="write the outcome (of the whole catalogue) to tla/measured.json and the mutant table "
                        "of tla/README.md")


# A TLC run of tla validate checks traces of at most this many lines in all (a longer one alone):
# each run takes seconds, so the progress and each group's line come run by run, each with the
# time of its own run (a run costs ~1 s of start-up besides its lines).
VALIDATE_BATCH_LINES = 600


def run_validate(path: str, group_id: str | None = None, out=print, prog: str = "groupcoord tla validate") -> int:
    """Trace validation of a recorded trace, unit by unit (``trace_sources.file_traces``): each
    unit's line says whether TLC accepted it, accepted the part before an input the spec
    cannot model (and which), rejected it, or could check none of it (and why), with the time
    of the TLC run that checked it; the units outside the spec's scope first, then each checked
    one as its run ends (a progress bar on stderr meanwhile); the last line counts them. 0 when
    nothing checked is rejected and something was checked, 1 when a unit is rejected, 2 when
    nothing could be checked (or the trace cannot be read)."""
    from groupcoord.adapters.tla import trace_check, trace_sources
    from groupcoord.adapters.traces.progress import Progress
    from groupcoord.core.trace import TraceError

    if not Path(path).exists():
        return fail(prog, f"{path}: no such file or directory")
    try:
        from groupcoord.adapters.replay.partition import check_trace

        check_trace(path, warn=lambda text: print(f"{prog}: warning: {text}", file=sys.stderr, flush=True))
        units = trace_sources.file_traces(path, group_id)
    except (TraceError, ValueError) as e:
        return fail(prog, e)
    check_setup()
    counts = {"accepted": 0, "partial": 0, "rejected": 0, "unchecked": 0}

    def over(u) -> str:
        if not u.stepped_over:
            return ""
        return "; stepped over: " + ", ".join(f"{name} {n}" for name, n in u.stepped_over.items())

    for u in units:
        if u.trace is None:
            counts["unchecked"] += 1
            out(f"trace {u.name}: NOT CHECKED, outside the spec's scope: {u.not_checked()}{over(u)}")
    checked = {id(u.trace): u for u in units if u.trace is not None}
    progress = Progress("tla validate", total=len(checked), unit="groups", after_s=0)  # TLC starts slowly

    def told(u, r) -> None:
        if not r.accepted:
            counts["rejected"] += 1
            line = r.line()
        elif u.partial:
            counts["partial"] += 1
            line = f"trace {u.name}: {r.lines} lines accepted ({r.took()}); NOT CHECKED: {u.not_checked()}{over(u)}"
        else:
            counts["accepted"] += 1
            line = f"{r.line()}{over(u)}"
        with progress.aside():
            out(line)
        progress.advance(1, f"{counts['rejected']} rejected")  # noted again before the next run

    consumer = [u.trace for u in checked.values() if isinstance(u.trace, consumer_trace.ConsumerTrace)]
    with progress:
        for batch in consumer_trace.batches(consumer):  # consumer groups: ConsumerGroup.tla
            while batch:
                progress.update(f"{counts['rejected']} rejected; TLC on {len(batch)} consumer groups")
                c = consumer_trace.check(batch)
                done = batch if c.accepted else [next((t for t in batch if t.name == c.name), batch[0])]
                for t in done:
                    told(checked[id(t)], trace_check.TraceResult(
                        t.name, len(t.rows), c.accepted, c.diverged_at, seconds=c.seconds, detail=c.detail,
                        together=len(batch)))
                batch = [t for t in batch if t not in done]
        classic = [u.trace for u in checked.values() if not isinstance(u.trace, consumer_trace.ConsumerTrace)]
        for batch in trace_check.batches(classic, max_lines=VALIDATE_BATCH_LINES):
            # one TLC run for a batch; TLC names the first trace it rejects, which leaves the
            # batch for the next run (a run per rejection, plus one)
            while batch:
                progress.update(f"{counts['rejected']} rejected; TLC on {len(batch)} of them, "
                                f"{sum(len(t.rows) for t in batch):,} lines")
                together = trace_check.check_traces(batch)
                if together.accepted:
                    for t in batch:
                        told(checked[id(t)], trace_check.TraceResult(t.name, len(t.rows), True,
                                                                     seconds=together.seconds, together=len(batch)))
                    break
                bad = next((t for t in batch if t.name == together.name), None)
                if bad is None or len(batch) == 1:
                    bad = bad or batch[0]
                    together = trace_check.check_trace(bad) if len(batch) > 1 else together
                told(checked[id(bad)], together)
                batch = [t for t in batch if t is not bad]
    if any(u.stepped_over for u in units):
        out("(stepped over: inputs the spec has no step for, run through the core and shown to change nothing "
            "the spec sees)")
    out(f"{counts['accepted']} accepted, {counts['partial']} accepted in part (the rest not checked), "
        f"{counts['rejected']} rejected, {counts['unchecked']} outside the spec's scope (not checked)")
    if counts["rejected"]:
        return 1
    return 0 if counts["accepted"] or counts["partial"] else 2


def run_tla_command(args) -> int:
    prog = getattr(args, "prog", f"groupcoord tla {args.tla_command}")
    try:
        if args.tla_command == "check":
            selected = list(args.only or ()) or (["mc3", "graph", "trace"] if args.quick else None)
            if args.write_docs and (args.only or args.quick):
                return fail(prog, "--write-docs records the full check: run it without --only and --quick")
            ok, _ = run_check(selected, args.workers or None, write_docs=args.write_docs)
        elif args.tla_command == "validate":
            return run_validate(args.trace, args.group, prog=prog)
        else:
            if args.write_docs and args.only:
                return fail(prog, "--write-docs records the whole catalogue: run it without --only")
            ok, _ = run_mutants_command(args.only, args.workers or None, every_check=args.every_check,
                                        write_docs=args.write_docs)
    except TlaSetupError as e:
        return fail(prog, e)
    return 0 if ok else 1
