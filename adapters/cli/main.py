"""The ``groupcoord`` command."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

from groupcoord.adapters.cli import parsing, stopping
from groupcoord.adapters.cli.extras import missing_from
from groupcoord.adapters.cli.parsing import Parser, fail, output_problem
from groupcoord.adapters.traces.stopping import stop_behind


def main(argv: list[str] | None = None) -> int:
    stopping.take_signals()  # Ctrl-C and SIGTERM: one line and 130 / 143 (cli.stopping)
    try:
        hypothesis_cache_out_of_the_working_directory()
        return quiet_on_broken_pipe(_main, argv)
    except KeyboardInterrupt as e:  # before the command was known
        return stopping.interrupted("groupcoord", stopping.signal_of(e))


def hypothesis_cache_out_of_the_working_directory() -> None:
    """kio imports hypothesis when it is installed (groupcoord depends on it), and that
    import writes a Unicode table under ``./.hypothesis/``, in whatever directory the command
    runs in. Point hypothesis at the user's cache instead (before kio is imported)."""
    if "kio" in sys.modules or importlib.util.find_spec("hypothesis") is None:
        return
    try:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    except RuntimeError:  # no home directory
        return
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(cache / "groupcoord" / "hypothesis")


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


def build_parser() -> Parser:
    """The whole command tree (tests walk it: every command has its bad-input cases)."""
    from importlib.metadata import version

    from groupcoord.adapters.cli.serve import add_server_commands
    from groupcoord.adapters.traces import progress

    parser = Parser(prog="groupcoord", description="Kafka's classic group coordinator.")
    parser.add_argument("--version", action="version", version=f"groupcoord {version('groupcoord')}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_server_commands(sub)  # serve, groups, offsets

    p = sub.add_parser("scenario", help="run conformance scenarios (files or directories)")
    p.add_argument("paths", nargs="+", metavar="FILE_OR_DIR")
    p.add_argument("--quiet", action="store_true", help="print failures only")
    p.add_argument("--trace", metavar="DIR",
                   help="also record what each scenario's coordinator did: DIR/<scenario file name>/recording.jsonl "
                        "(the trace, instance scope: spec/trace-format.md) and DIR/<scenario file name>/meta.json "
                        "(its manifest: scope and the scenario's coordinator settings); files already there are "
                        "replaced. `groupcoord replay DIR`, `tla validate DIR` and `timeline DIR` take each "
                        "scenario's recording on its own")

    p = sub.add_parser("demo", help="drive simulated members through a rebalance and narrate it")
    p.add_argument("--members", type=parsing.number(int, 2, "a whole number of at least 2"), default=3)
    p.add_argument("--partitions", type=parsing.number(int, 1, "a whole number of at least 1"), default=6)

    p = sub.add_parser("bench", help="benchmarks; JSON lines last")
    bench = p.add_subparsers(dest="target", required=True)
    for target, text in (("core", "the coordinator core's throughput"),
                         ("server", "heartbeats/s and join->Stable latency on loopback (and Tansu's, when installed)"),
                         ("storage", "acknowledged commits/s and reload time on SQLite and a broker")):
        q = bench.add_parser(target, help=text)
        q.add_argument("--quick", action="store_true", help="smaller runs (for smoke tests)")
    from groupcoord.adapters.cli.replay import add_bench_replay_arguments, add_replay_commands

    q = bench.add_parser("replay", help="the replay on Spark against the plain replay and the core alone")
    q.add_argument("--quick", action="store_true", help="smaller runs (for smoke tests)")
    add_bench_replay_arguments(q)
    progress.add_flag(q)
    q = bench.add_parser("data", help="produce and consume throughput and end-to-end latency of 1 KB messages "
                                      "(confluent-kafka) against groupcoord serve and Tansu in one run, each "
                                      "server on one CPU; ratios against Tansu")
    q.add_argument("--quick", action="store_true", help="2000 messages, 50 latency rounds, no storage comparison "
                                                        "(for smoke tests)")
    q.add_argument("--messages", type=parsing.number(int, 100, "a whole number of at least 100"), default=None,
                   help="messages produced and consumed per server (default 100000; 2000 with --quick)")
    q.add_argument("--storage-compare", action=argparse.BooleanOptionalAction, default=None,
                   help="also time the log's durable backends alone: SQLite against an append-only segment "
                        "file with fdatasync (default: on, off with --quick)")
    q = bench.add_parser("proxy", help="Heartbeat round trips direct and through `groupcoord record`")
    q.add_argument("--count", type=parsing.number(int, 10, "a whole number of at least 10"), default=20_000,
                   help="heartbeats each way in each phase (default 20000): one connection with one in "
                        "flight (latency), then 4 connections back to back (requests/s)")
    q = bench.add_parser("fixture", help="start-up and stop of the groupcoord_server test fixture (ms p50/max), "
                                         "warm and in a fresh process")
    q.add_argument("--starts", type=parsing.number(int, 1, "a whole number of at least 1"), default=200,
                   help="servers started one after another in this process (default 200)")
    q.add_argument("--cold", type=parsing.number(int, 1, "a whole number of at least 1"), default=5,
                   help="fresh processes importing the fixtures and starting one server (default 5)")
    q = bench.add_parser("verify", help="groupcoord verify on many groups: plain against Spark local[1] and local[2], "
                                        "and the search's cost as members join at once")
    q.add_argument("--quick", action="store_true", help="200 groups and up to 10 members joining (for smoke tests)")
    q.add_argument("--groups", type=parsing.number(int, 1, "a whole number of at least 1"), default=None,
                   help="the simulator's groups in the trace (default 100000; 200 with --quick)")
    progress.add_flag(q)
    q = bench.add_parser("frames", help="the server's own Python path per heartbeat (frames handed to the "
                                        "connection, no sockets) with one group and with many: what a large "
                                        "heap costs in cache misses")
    q.add_argument("--groups", type=parsing.number(int, 1, "a whole number of at least 1"), default=10_000,
                   help="groups of the large run (default 10000)")
    q.add_argument("--members", type=parsing.number(int, 1, "a whole number of at least 1"), default=10,
                   help="members of each group (default 10)")
    q.add_argument("--heartbeats", type=parsing.number(int, 1, "a whole number of at least 1"), default=200_000,
                   help="heartbeats in each round (default 200000)")
    q.add_argument("--rounds", type=parsing.number(int, 1, "a whole number of at least 1"), default=5,
                   help="rounds of each, alternated; the medians are printed (default 5)")
    q = bench.add_parser("load", help="many groups of consumers against one server process held on one CPU: "
                                      "answered rates, latencies, CPU per request against the core's step, RSS, GC")
    whole = parsing.number(int, 1, "a whole number of at least 1")
    q.add_argument("--groups", type=whole, required=True, help="consumer groups")
    q.add_argument("--members", type=whole, required=True, help="members of each group")
    q.add_argument("--commit-interval-ms", type=whole, default=None, metavar="MS",
                   help="each member also commits its partition's offset this often (the Java client's "
                        "auto-commit: 5000); default: heartbeats only")
    q.add_argument("--heartbeat-interval-ms", type=whole, default=3000, metavar="MS",
                   help="each member's heartbeat interval (default 3000, the clients' default)")
    q.add_argument("--storage", choices=["memory", "sqlite"], default="memory",
                   help="the server's storage (sqlite: in a temporary directory, removed afterwards)")
    q.add_argument("--duration", type=parsing.number(float, 1, "seconds, at least 1"), default=60.0, metavar="S",
                   help="seconds of load once every group is Stable (default 60)")
    q.add_argument("--settle", type=parsing.number(float, 0, "seconds, at least 0"), default=10.0, metavar="S",
                   help="seconds of load before each window is measured, once every group is Stable (and "
                        "once the floor window's members start), so that it starts in the steady state: "
                        "what forming left queued has drained (default 10; its p99 is printed apart)")
    q.add_argument("--floor-duration", type=parsing.number(float, 0, "seconds, at least 0"), default=20.0,
                   metavar="S", help="seconds of the floor window before the groups form: the same heartbeats "
                                     "answered by a bare asyncio listener in the server process (default 20; 0: none)")
    q.add_argument("--event-loop", choices=["asyncio", "uvloop"], default="asyncio",
                   help="the server's event loop (uvloop must be installed)")
    q.add_argument("--collector", choices=["settled", "default"], default="settled",
                   help="settled (default): the server freezes what exists once started and collects its "
                        "young objects less often, as `groupcoord serve` does; default: CPython's settings")
    q.add_argument("--profile", metavar="FILE", default=None,
                   help="write a cProfile of the server during the load window to FILE (pstats format)")
    add_replay_commands(sub)
    from groupcoord.adapters.cli.tla import add_tla_command

    add_tla_command(sub)  # tla check, tla validate, tla mutants
    from groupcoord.adapters.cli.verify import add_verify_command

    add_verify_command(sub)
    from groupcoord.adapters.cli.record import add_record_command

    add_record_command(sub)
    from groupcoord.adapters.cli.probe import add_probe_command

    add_probe_command(sub)
    return parser


def _main(argv: list[str] | None) -> int:
    from groupcoord.adapters.traces import progress

    args = build_parser().parse_args(argv)
    progress.show(getattr(args, "progress", None))  # the long commands' --progress / --no-progress
    try:
        return _run(args)
    except KeyboardInterrupt as e:
        return stopping.interrupted(args.prog, stopping.signal_of(e))
    except Exception as e:
        stop = stop_behind(e)
        if stop is not None:  # a library turned the interrupt into an error of its own (hypothesis does)
            return stopping.interrupted(args.prog, stopping.signal_of(stop))
        line = missing_from(e) if isinstance(e, ImportError) else None  # an optional package met only now
        if line is None:
            raise
        return fail(args.prog, line)


def _run(args) -> int:
    from groupcoord.adapters.cli.serve import SERVER_COMMANDS, run_server_command

    if args.command in SERVER_COMMANDS:
        return run_server_command(args)
    if args.command == "scenario":
        return _scenario(args)
    if args.command == "tla":
        from groupcoord.adapters.cli.tla import run_tla_command

        return run_tla_command(args)
    if args.command == "verify":
        from groupcoord.adapters.cli.verify import run_verify

        return run_verify(args)
    if args.command == "probe":
        from groupcoord.adapters.cli.probe import run_probe

        return run_probe(args)
    if args.command == "record":
        from groupcoord.adapters.cli.record import run_record

        return run_record(args)
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
    if args.command == "bench" and args.target == "verify":
        from groupcoord.adapters.bench.verify import run_verify_bench

        return run_verify_bench(quick=args.quick, groups=args.groups)
    if args.command == "bench" and args.target == "data":
        from groupcoord.adapters.bench.data import run_data_bench

        return run_data_bench(quick=args.quick, messages=args.messages, storage_compare=args.storage_compare)
    if args.command == "bench" and args.target == "proxy":
        from groupcoord.adapters.bench.proxy import run_proxy_bench

        return run_proxy_bench(args.count)
    if args.command == "bench" and args.target == "fixture":
        from groupcoord.adapters.bench.fixture import run_fixture_bench

        return run_fixture_bench(starts=args.starts, cold=args.cold)
    if args.command == "bench" and args.target == "frames":
        from groupcoord.adapters.bench.frames import run_frames_bench

        return run_frames_bench(args.groups, args.members, args.heartbeats, args.rounds)
    if args.command == "bench" and args.target == "load":
        from groupcoord.adapters.bench.load import run_load_bench

        return run_load_bench(args)
    if args.command == "bench" and args.target == "storage":
        from groupcoord.adapters.bench.storage import run_storage_bench

        return run_storage_bench(quick=args.quick)
    if args.command == "bench":
        from groupcoord.adapters.bench.core import run_core_bench

        return run_core_bench(quick=args.quick)
    return 2


def _json_object(path) -> bool:
    import json

    try:
        return isinstance(json.loads(path.read_text(encoding="utf-8")), dict)
    except (OSError, ValueError):
        return False


def _scenario(args) -> int:
    from pathlib import Path

    from groupcoord.adapters.scenarios.runner import run_file, run_file_recorded, scenario_files

    absent = [p for p in args.paths if not Path(p).exists()]
    if absent:
        return fail(args.prog, f"{absent[0]}: no such file or directory")
    files = scenario_files(args.paths)
    given = [p for p in map(Path, args.paths) if p.is_file()]
    wrong = next((p for p in given if p.suffix != ".json" or not _json_object(p)), None)
    if wrong is not None:
        return fail(args.prog, f"{wrong}: expected a scenario (a JSON object, spec/conformance/FORMAT.md)")
    if not files:
        return fail(args.prog, f"no scenario files (*.json) in {', '.join(args.paths)}")
    if args.trace:
        if len({f.stem for f in files}) < len(files):
            return fail(args.prog, "--trace: two scenarios share a file name; run them separately")
        problem = output_problem("--trace", args.trace, "dir")
        if problem:
            return fail(args.prog, problem)
        try:
            Path(args.trace).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            return fail(args.prog, f"--trace: cannot use {args.trace}: {e}")
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


if __name__ == "__main__":
    sys.exit(main())
