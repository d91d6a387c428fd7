"""Command-line wiring for ``simulate``, ``timeline``, ``replay`` and ``bench replay``.

``adapters/cli/main.py`` calls ``add_replay_commands(subparsers)`` and hands parsed arguments of
those commands to ``run_replay_command``; ``bench replay`` goes through
``add_bench_replay_arguments`` and ``run_bench_replay``. ``python -m
groupcoord.adapters.cli.replay ...`` runs the same commands on their own.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from groupcoord.adapters.cli.extras import java_missing, missing_from, needs
from groupcoord.adapters.cli.parsing import Parser, fail, number, one_of, output_problem
from groupcoord.adapters.traces import progress

COMMANDS = ("simulate", "timeline", "replay", "inject-faults")
ENGINES = ("plain", "spark", "core")

_count = number(int, 1, "a whole number of at least 1")
_positive_seconds = number(float, 0.001, "seconds, at least 0.001")
_rate = number(float, 0, "a number of at least 0")


def add_replay_commands(sub) -> None:
    p = sub.add_parser("simulate", help="simulate consumer groups into a trace (and a summary)")
    p.add_argument("--groups", type=_count, default=100, help="consumer groups to simulate (default: %(default)s)")
    p.add_argument("--members", type=_count, default=3,
                   help="members per group, varying by +-1 (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1,
                   help="the same seed gives the same trace records (default: %(default)s)")
    p.add_argument("--out", required=True,
                   help="trace directory to write (created; its old part files are removed): part-NNNNN.parquet "
                        "(or .jsonl with --format jsonl) holding whole groups, meta.json (the trace's manifest: "
                        "group scope, the coordinator settings, the generator's arguments) and summary.json (the "
                        "numbers printed at the end)")
    p.add_argument("--duration", type=_positive_seconds, default=120.0,
                   help="seconds of each group's life (default: %(default)s)")
    p.add_argument("--incidents", type=_rate, default=2.0, help="incidents per group-minute (default: %(default)s)")
    p.add_argument("--format", choices=["parquet", "jsonl"], default="parquet",
                   help="trace file format (default: %(default)s; parquet needs the replay extra)")
    p.add_argument("--jobs", type=_count, default=1,
                   help="processes (default: %(default)s); the records and their order do not depend on it, "
                        "but how many part files they are split into does")
    progress.add_flag(p)

    p = sub.add_parser("timeline", help="draw one group of a trace over time (PNG or HTML)")
    p.add_argument("trace", help="a trace directory or file, as simulate, scenario --trace or serve --trace write "
                                 "it; the group must be in one of its recordings (else the error names them)")
    p.add_argument("--group", required=True, help="the group id to draw, e.g. group-000003")
    p.add_argument("--out", required=True, type=_timeline_out,
                   help="the one file written: FILE.png (needs the replay extra: matplotlib) or FILE.html "
                        "(a page with an SVG), replaced if it exists")

    p = sub.add_parser("replay", help="replay a trace through the core and check it (Spark or plain)")
    from groupcoord.adapters.replay.job import add_arguments

    add_arguments(p)  # with --progress

    from groupcoord.adapters.replay.faults import FAULTS

    p = sub.add_parser("inject-faults", help="copy a group-scoped trace with faults injected (for demos)")
    p.add_argument("trace", help="the group-scoped trace to copy (it is not changed)")
    p.add_argument("--out", required=True,
                   help="directory for the copy, outside the trace: the trace's files (faulty where a fault went) "
                        "and a copy of its meta.json when it has one")
    p.add_argument("--faults", default=None, type=one_of(FAULTS, "faults"),
                   help=f"comma-separated subset of the known faults, each into its own group "
                        f"(default: all of {', '.join(FAULTS)})")


def _timeline_out(text: str) -> str:
    from groupcoord.adapters.replay.timeline import out_format

    try:
        out_format(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def add_bench_replay_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--records", type=_count, default=10_000_000, help="replay: trace records to simulate")
    p.add_argument("--groups", type=_count, default=100_000, help="replay: groups")
    p.add_argument("--trace", default=None, help="replay: use this trace instead of simulating one")
    p.add_argument("--engines", default=ENGINES, type=one_of(ENGINES, "engines"),
                   help="replay: any of plain,spark,core (core: the coordinator alone, one CPU)")
    p.add_argument("--workdir", default=None, help="replay: where simulated traces are cached")


def run_bench_replay(args) -> int:
    from groupcoord.adapters.bench.replay import DEFAULT_WORKDIR, run_replay_bench

    prog = getattr(args, "prog", "groupcoord bench replay")
    if args.trace is not None and not Path(args.trace).exists():
        return fail(prog, f"--trace {args.trace}: no such file or directory")
    problem = needs(("pyarrow", "the benchmark's traces are Parquet"))
    if problem is None and "spark" in args.engines:
        problem = needs(("pyspark", "the spark engine"), ("pandas", "the spark engine"), extra="spark") \
            or java_missing("Spark", "--engines plain,core")
    if problem:
        return fail(prog, problem)
    return run_replay_bench(records=args.records, groups=args.groups, trace=args.trace,
                            workdir=args.workdir or DEFAULT_WORKDIR, quick=args.quick, engines=tuple(args.engines))


def _missing_before_start(args) -> str | None:
    """What an optional package the command will need is missing, found before it starts."""
    if args.command == "simulate" and args.format == "parquet":
        return needs(("pyarrow", "Parquet traces; or --format jsonl"))
    if args.command == "timeline" and args.out.lower().endswith(".png"):
        return needs(("matplotlib", "PNG timelines; or --out FILE.html"))
    if args.command == "replay" and args.engine == "plain":
        return needs(("pyarrow", "the plain replay"))
    if args.command == "replay":
        return needs(("pyspark", "the replay on Spark; or --engine plain"), ("pandas", "the replay on Spark"),
                     ("pyarrow", "the replay on Spark"), extra="spark") \
            or java_missing("Spark", "--engine plain")
    return None


def _bad_before_start(args) -> str | None:
    """What is wrong with the command's outputs or its Spark master, found before it starts."""
    if args.command in ("simulate", "inject-faults", "timeline") or getattr(args, "out", None):
        problem = output_problem("--out", args.out, "file" if args.command == "timeline" else "dir")
        if problem:
            return problem
    if args.command == "replay" and args.engine == "spark":
        from groupcoord.adapters.traces.spark_session import master_problem

        return master_problem(args.master)
    return None


def run_replay_command(args) -> int:
    from groupcoord.adapters.traces.trace_files import TraceError

    prog = getattr(args, "prog", f"groupcoord {args.command}")
    problem = _missing_before_start(args) or _bad_before_start(args)
    if problem:
        return fail(prog, problem)
    try:
        if args.command == "simulate":
            from groupcoord.adapters.sim.report import format_summary
            from groupcoord.adapters.sim.simulator import simulate

            summary = simulate(args.out, groups=args.groups, members=args.members, seed=args.seed,
                               duration_ms=int(args.duration * 1000), incidents_per_min=args.incidents,
                               fmt=args.format, jobs=args.jobs, progress=args.progress)
            print(format_summary(summary))
            return 0
        if args.command == "timeline":
            from groupcoord.adapters.replay.partition import check_trace
            from groupcoord.adapters.replay.timeline import render_timeline

            check_trace(args.trace, warn=lambda text: print(f"{prog}: warning: {text}", file=sys.stderr, flush=True))

            path = render_timeline(args.trace, args.group, args.out)
            print(f"wrote {path}")
            return 0
        if args.command == "replay":
            from groupcoord.adapters.replay.job import run

            return run(args, prog=prog)
        if args.command == "inject-faults":
            return _inject_faults(args, prog)
    except TraceError as e:
        return fail(prog, e)
    except ImportError as e:  # an optional package met only now (e.g. by a Parquet trace)
        line = missing_from(e)
        if line is None:
            raise
        return fail(prog, line)
    return 2


def _inject_faults(args, prog: str) -> int:
    from groupcoord.adapters.replay.faults import FAULTS, FaultError, inject

    try:
        injected = inject(args.trace, args.out, args.faults or FAULTS)
    except FaultError as e:
        return fail(prog, e)
    for gid, fault in injected.items():
        print(f"{gid}\t{fault}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="groupcoord", description="trace tools")
    sub = parser.add_subparsers(dest="command", required=True)
    add_replay_commands(sub)
    p = sub.add_parser("bench", help="benchmarks")
    q = p.add_subparsers(dest="target", required=True).add_parser("replay", help="the replay benchmark")
    q.add_argument("--quick", action="store_true")
    add_bench_replay_arguments(q)
    args = parser.parse_args(argv)
    if args.command == "bench":
        return run_bench_replay(args)
    return run_replay_command(args)


if __name__ == "__main__":
    from groupcoord.adapters.cli.main import quiet_on_broken_pipe

    sys.exit(quiet_on_broken_pipe(main, None))
