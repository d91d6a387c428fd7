"""The ``groupcoord`` command."""

from __future__ import annotations

import argparse
import os
import sys

from groupcoord.adapters.cli.serve import SERVER_COMMANDS, add_server_commands, run_server_command


def main(argv: list[str] | None = None) -> int:
    return quiet_on_broken_pipe(_main, argv)


def quiet_on_broken_pipe(command, argv) -> int:
    """Run ``command(argv)``; when its reader goes away (``groupcoord ... | head``), exit 1
    without a traceback, the usual recipe for Python programs in pipelines."""
    try:
        code = command(argv)
        sys.stdout.flush()  # a closed pipe shows up here, inside the try, not at interpreter exit
        return code
    except BrokenPipeError:
        # the interpreter flushes stdout once more on exit: let that go to devnull
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="groupcoord", description="Kafka's classic group coordinator.")
    sub = parser.add_subparsers(dest="command", required=True)
    add_server_commands(sub)  # serve, groups, offsets

    p = sub.add_parser("scenario", help="run conformance scenarios (files or directories)")
    p.add_argument("paths", nargs="+")
    p.add_argument("--quiet", action="store_true", help="print failures only")
    p.add_argument("--trace", metavar="DIR",
                   help="also record what each scenario's coordinator did: DIR/<scenario file name>/recording.jsonl "
                        "(the trace, instance scope: spec/trace-format.md) and DIR/<scenario file name>/meta.json "
                        "(its manifest: scope and the scenario's coordinator settings); files already there are "
                        "replaced. `groupcoord replay DIR`, `tla validate DIR` and `timeline DIR` take each "
                        "scenario's recording on its own")

    p = sub.add_parser("demo", help="drive simulated members through a rebalance and narrate it")
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--partitions", type=int, default=6)

    p = sub.add_parser("bench", help="benchmarks; JSON lines last")
    p.add_argument("target", choices=["core", "server", "storage", "replay"])
    p.add_argument("--quick", action="store_true", help="smaller runs (for smoke tests)")
    from groupcoord.adapters.cli.replay import add_bench_replay_arguments, add_replay_commands

    add_bench_replay_arguments(p)
    add_replay_commands(sub)
    from groupcoord.adapters.cli.tla import add_tla_command

    add_tla_command(sub)  # tla check, tla mutants

    args = parser.parse_args(argv)
    if args.command in SERVER_COMMANDS:
        return run_server_command(args)
    if args.command == "scenario":
        from pathlib import Path

        from groupcoord.adapters.conformance.scenarios import run_file, run_file_recorded, scenario_files

        files = scenario_files(args.paths)
        if not files:
            print("no scenario files found", file=sys.stderr)
            return 2
        if args.trace:
            if len({f.stem for f in files}) < len(files):
                print("--trace: two scenarios share a file name; run them separately", file=sys.stderr)
                return 2
            try:
                Path(args.trace).mkdir(parents=True, exist_ok=True)
            except OSError as e:
                print(f"--trace: cannot use {args.trace}: {e}", file=sys.stderr)
                return 2
        failed = untraced = 0
        for path in files:
            if args.trace:
                result, problem = run_file_recorded(path, Path(args.trace) / path.stem)
                if problem is not None:
                    untraced += 1
                    print(f"no trace for {path}: {problem}", file=sys.stderr)
            else:
                result = run_file(path)
            failed += not result.passed
            if not (args.quiet and result.passed):
                print(result.line())
        traced = f", {len(files) - untraced} traces in {args.trace}" if args.trace else ""
        print(f"{len(files) - failed} passed, {failed} failed{traced}")
        return 1 if failed or untraced else 0
    if args.command == "tla":
        from groupcoord.adapters.cli.tla import run_tla_command

        return run_tla_command(args)
    if args.command == "demo":
        from groupcoord.adapters.sim.demo import run_demo

        return run_demo(args.members, args.partitions)
    if args.command == "bench" and args.target == "replay":
        from groupcoord.adapters.cli.replay import run_bench_replay

        return run_bench_replay(args)
    if args.command in ("simulate", "timeline", "replay", "inject-faults"):
        from groupcoord.adapters.cli.replay import run_replay_command

        return run_replay_command(args)
    if args.command == "bench" and args.target == "server":
        from groupcoord.adapters.bench.server import run_server_bench

        return run_server_bench(quick=args.quick)
    if args.command == "bench" and args.target == "storage":
        from groupcoord.adapters.bench.storage import run_storage_bench

        return run_storage_bench(quick=args.quick)
    if args.command == "bench":
        from groupcoord.adapters.bench.core import run_core_bench

        return run_core_bench(quick=args.quick)
    return 2


if __name__ == "__main__":
    sys.exit(main())
