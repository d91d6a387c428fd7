"""``groupcoord verify``: check an observed trace (``groupcoord record``) against the spec."""

from __future__ import annotations

import argparse

from groupcoord.adapters.cli import parsing
from groupcoord.adapters.cli.parsing import fail
from groupcoord.adapters.traces import progress
from groupcoord.core.config import KAFKA_NAMES, ConfigError, CoordinatorConfig


def add_verify_command(sub) -> None:
    p = sub.add_parser("verify", help="check a broker's observed trace against the spec, group by group",
                       description="Each group of the trace is checked by searching for an execution of the "
                                   "spec that gives every answer the broker gave. Exit 0: all conform; 1: a "
                                   "group diverges; 3: some inconclusive (none diverges); 2: bad input.")
    p.add_argument("trace", metavar="DIR", nargs="?", default=None,
                   help="the directory `groupcoord record` wrote (or its observed.jsonl)")
    p.add_argument("--kafka-log", nargs="+", metavar="FILE", default=None,
                   help="check Kafka's own logs instead: a broker's GroupCoordinator lines and Java consumers' "
                        "lines (Kafka 0.9 to 4.x, each version's wording), against the spec's transitions and "
                        "generations")
    p.add_argument("--kafka-version", metavar="VERSION", default=None,
                   help="with --kafka-log: the brokers' Kafka release (e.g. 2.3.0), where the lines' wording "
                        "cannot tell it (it names version-specific bugs such as KAFKA-8653)")
    p.add_argument("--engine", choices=["plain", "spark"], default="plain",
                   help="plain: one process; spark: a group per task (default: %(default)s)")
    p.add_argument("--master", default="local[2]", help="Spark master for --engine spark (default: %(default)s)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="report directory (default: the trace's path + '-verify'): verdicts.parquet (verdicts.jsonl "
                        "without the replay extra), summary.json, summary.txt")
    p.add_argument("--config", metavar="FILE",
                   help="the broker's settings as a properties file (Kafka names; flags win)")
    p.add_argument("--timer-tolerance-ms", type=parsing.number(int, 0, "milliseconds, at least 0"), default=1000,
                   help="how far from its deadline the broker may have fired a timer (default: %(default)s)")
    p.add_argument("--budget", type=parsing.number(int, 1, "a whole number of at least 1"), default=50_000,
                   help="search states per group before it is inconclusive (default: %(default)s)")
    p.add_argument("--keep-going", action="store_true",
                   help="after a group's divergence, take the broker's answer there as given and search on: "
                        "every distinct divergence of every group, each by its signature")
    add_known_flag(p)
    progress.add_flag(p)
    add_kafka_setting_flags(p)


def add_kafka_setting_flags(p) -> None:
    """``--<kafka.setting> VALUE`` for each broker group setting the checker judges by (verify
    and probe), shown in --help as one line that names them all."""
    g = p.add_argument_group(
        "the broker's group settings",
        "--<kafka.setting> VALUE: any broker group setting by its Kafka name, as the broker has it (the "
        "answers are judged by them; --config FILE gives them as a properties file, flags win): "
        + ", ".join(sorted(KAFKA_NAMES)))
    for name in sorted(KAFKA_NAMES):
        g.add_argument("--" + name, dest="kafka:" + name, metavar="VALUE", default=None, help=argparse.SUPPRESS)


def run_verify(args) -> int:
    from pathlib import Path

    from groupcoord.adapters.verify import run
    from groupcoord.adapters.verify.observed import TraceError
    from groupcoord.adapters.verify.search import Settings

    prog = "groupcoord verify"
    if args.kafka_log:
        from groupcoord.adapters.verify.kafka_log import LogError

        try:
            if args.kafka_version is not None:
                from groupcoord.adapters.verify.kafka_log_lines import families_of_release

                families_of_release(args.kafka_version)
            code, text = run.run_logs(args.kafka_log, report=args.out, release=args.kafka_version)
        except (LogError, ValueError) as e:
            return fail(prog, str(e))
        print(text, end="")
        return code
    if args.trace is None:
        return fail(prog, "give a recording (DIR) or --kafka-log FILE...")
    if not Path(args.trace).exists():
        return fail(prog, f"{args.trace}: no such file or directory")
    try:
        config = config_from_args(args)
    except ConfigError as e:
        return fail(prog, str(e))
    try:
        known = read_known_flag(args)
    except ValueError as e:
        return fail(prog, str(e))
    from groupcoord.adapters.cli.parsing import output_problem

    problem = _not_a_recording(Path(args.trace)) or (args.out and output_problem("--out", args.out, "dir"))
    if not problem and args.engine == "spark":
        from groupcoord.adapters.traces.spark_session import master_problem

        problem = master_problem(args.master)
    if problem:
        return fail(prog, problem)
    search = Settings(config=config, timer_tolerance_ms=args.timer_tolerance_ms, budget=args.budget)
    try:
        code, text = run.run(args.trace, search, engine=args.engine, master=args.master, report=args.out,
                             keep_going=args.keep_going, known=known)
    except TraceError as e:
        return fail(prog, str(e))
    except OSError as e:
        return fail(prog, f"{e.filename or args.out}: {e.strerror or e}")
    print(text, end="")
    return code


def _not_a_recording(path) -> str | None:
    """Why ``path`` is not what ``groupcoord record`` writes (its directory, or the trace file in
    it), said naming ``path``; looked at by name only, the reader judges the content."""
    from groupcoord.adapters.observe.trace import JOURNAL, JSONL, PARQUET

    names = (PARQUET, JSONL, JOURNAL)
    expected = f"expected a recording of groupcoord record (a directory with {', '.join(names)}, or that file)"
    if path.is_dir():
        return None if any((path / n).exists() for n in names) else f"{path}: {expected}"
    return None if path.name in names else f"{path}: {expected}"


def add_known_flag(p) -> None:
    p.add_argument("--known", metavar="FILE", default=None,
                   help="findings to set aside: signatures one a line as this tool prints them (# comments); "
                        "only others are reported, and only known findings exit 0")


def read_known_flag(args) -> frozenset | None:
    """``--known FILE``'s signatures (None without the flag); ValueError says why it cannot be read."""
    from groupcoord.adapters.verify.findings import read_known

    if args.known is None:
        return None
    try:
        return frozenset(read_known(args.known))
    except OSError as e:
        raise ValueError(f"--known {args.known}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ValueError(f"--known {args.known}: not a text file") from None


def config_from_args(args) -> CoordinatorConfig:
    """The coordinator's settings judged by: ``--config FILE``'s Kafka settings, then each
    ``--<kafka.setting> V`` flag over them (verify and probe)."""
    from groupcoord.adapters.cli.serve import read_properties

    settings = dict(read_properties(args.config)) if args.config else {}
    settings = {k: v for k, v in settings.items() if k in KAFKA_NAMES}
    for name in KAFKA_NAMES:
        value = getattr(args, "kafka:" + name)
        if value is not None:
            settings[name] = value
    return CoordinatorConfig.from_kafka(settings)
