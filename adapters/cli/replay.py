"""Command-line wiring for ``simulate``, ``timeline``, ``replay`` and ``bench replay``.

``adapters/cli/main.py`` calls ``add_replay_commands(subparsers)`` and hands parsed arguments of
those commands to ``run_replay_command``; ``bench replay`` goes through
``add_bench_replay_arguments`` and ``run_bench_replay``. ``python -m
groupcoord.adapters.cli.replay ...`` runs the same commands on their own.
"""

from __future__ import annotations

import argparse
import math
import sys

COMMANDS = ("simulate", "timeline", "replay", "inject-faults")


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
                   help="trace file format (default: %(default)s)")
    p.add_argument("--jobs", type=_count, default=1,
                   help="processes (default: %(default)s); the records and their order do not depend on it, "
                        "but how many part files they are split into does")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")

    p = sub.add_parser("timeline", help="draw one group of a trace over time (PNG or HTML)")
    p.add_argument("trace", help="a trace directory or file, as simulate, scenario --trace or serve --trace write "
                                 "it; the group must be in one of its recordings (else the error names them)")
    p.add_argument("--group", required=True, help="the group id to draw, e.g. group-000003")
    p.add_argument("--out", required=True, type=_timeline_out,
                   help="the one file written: FILE.png (matplotlib) or FILE.html (a page with an SVG), replaced "
                        "if it exists")

    p = sub.add_parser("replay", help="replay a trace through the core and check it (Spark or plain)")
    from groupcoord.adapters.replay.job import add_arguments

    add_arguments(p)

    from groupcoord.adapters.replay.faults import FAULTS

    p = sub.add_parser("inject-faults", help="copy a group-scoped trace with faults injected (for demos)")
    p.add_argument("trace", help="the group-scoped trace to copy (it is not changed)")
    p.add_argument("--out", required=True,
                   help="directory for the copy, outside the trace: the trace's files (faulty where a fault went) "
                        "and a copy of its meta.json when it has one")
    p.add_argument("--faults", default=None,
                   help=f"comma-separated subset of the known faults, each into its own group "
                        f"(default: all of {', '.join(FAULTS)})")


def _number(text: str, kind, minimum, what: str):
    """An argparse value of type ``kind`` at least ``minimum`` (finite), with a message saying so."""
    try:
        x = kind(text)
    except ValueError:
        x = None
    if x is None or not (math.isfinite(x) and x >= minimum):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return x


def _timeline_out(text: str) -> str:
    from groupcoord.adapters.replay.timeline import out_format

    try:
        out_format(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _count(text: str) -> int:
    return _number(text, int, 1, "a whole number of at least 1")


def _positive_seconds(text: str) -> float:
    return _number(text, float, 0.001, "seconds, at least 0.001")


def _rate(text: str) -> float:
    return _number(text, float, 0, "a number of at least 0")


def add_bench_replay_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--records", type=int, default=10_000_000, help="replay: trace records to simulate")
    p.add_argument("--groups", type=int, default=100_000, help="replay: groups")
    p.add_argument("--trace", default=None, help="replay: use this trace instead of simulating one")
    p.add_argument("--engines", default="plain,spark,core",
                   help="replay: any of plain,spark,core (core: the coordinator alone, one CPU)")
    p.add_argument("--workdir", default=None, help="replay: where simulated traces are cached")


def run_bench_replay(args) -> int:
    from groupcoord.adapters.bench.replay import DEFAULT_WORKDIR, run_replay_bench

    return run_replay_bench(records=args.records, groups=args.groups, trace=args.trace,
                            workdir=args.workdir or DEFAULT_WORKDIR, quick=args.quick,
                            engines=tuple(e for e in args.engines.split(",") if e))


def run_replay_command(args) -> int:
    from groupcoord.adapters.replay.trace_files import TraceError

    try:
        if args.command == "simulate":
            from groupcoord.adapters.sim.simulator import format_summary, simulate

            summary = simulate(args.out, groups=args.groups, members=args.members, seed=args.seed,
                               duration_ms=int(args.duration * 1000), incidents_per_min=args.incidents,
                               fmt=args.format, jobs=args.jobs, progress=args.progress)
            print(format_summary(summary))
            return 0
        if args.command == "timeline":
            from groupcoord.adapters.replay.timeline import render_timeline

            path = render_timeline(args.trace, args.group, args.out)
            print(f"wrote {path}")
            return 0
        if args.command == "replay":
            from groupcoord.adapters.replay.job import run

            return run(args)
        if args.command == "inject-faults":
            return _inject_faults(args)
    except TraceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"error: {e.name or e} is not installed (Parquet traces need pyarrow, timelines as PNG "
              f"matplotlib): pip install 'groupcoord[replay]', or use JSON Lines / HTML", file=sys.stderr)
        return 2
    return 2


def _inject_faults(args) -> int:
    from groupcoord.adapters.replay.faults import FAULTS, FaultError, inject

    chosen = tuple(f for f in args.faults.split(",") if f) if args.faults else FAULTS
    unknown = set(chosen) - set(FAULTS)
    if unknown or not chosen:
        print(f"error: unknown faults {sorted(unknown)}; known: {', '.join(FAULTS)}", file=sys.stderr)
        return 2
    try:
        injected = inject(args.trace, args.out, chosen)
    except FaultError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for gid, fault in injected.items():
        print(f"{gid}\t{fault}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="groupcoord", description="trace tools")
    sub = parser.add_subparsers(dest="command", required=True)
    add_replay_commands(sub)
    p = sub.add_parser("bench", help="benchmarks")
    p.add_argument("target", choices=["replay"])
    p.add_argument("--quick", action="store_true")
    add_bench_replay_arguments(p)
    args = parser.parse_args(argv)
    if args.command == "bench":
        return run_bench_replay(args)
    return run_replay_command(args)


if __name__ == "__main__":
    from groupcoord.adapters.cli.main import quiet_on_broken_pipe

    sys.exit(quiet_on_broken_pipe(main, None))
