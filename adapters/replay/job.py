"""``groupcoord replay``: replay a trace through the core on Spark (or without it) and report.

The command's parts: the trace checked and the per-partition replay both engines run
(``partition``), the Spark session (``spark_session``), the replay on Spark (``spark_job``) and
without it (``plain_job``, ``--engine plain``), and the report (``report``).

The module runs under ``spark-submit`` too: ``spark-submit adapters/replay/job.py TRACE --out
REPORT`` (ship groupcoord with ``--py-files`` on a cluster). spark-submit runs the driver
with ``PYSPARK_PYTHON`` (else the ``python3`` on PATH), which must have groupcoord::

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit adapters/replay/job.py TRACE --out REPORT

A trace may hold several recordings (``trace_files.recordings``: the files under each
``meta.json``, e.g. one per scenario from ``groupcoord scenario --trace DIR``); each is
replayed with its own manifest and reported on its own.

Report (``--out``, default ``TRACE-report`` beside the trace): ``findings.parquet``,
``summary.json`` and ``summary.txt`` (``report``). Exit status 1 when anything was found.

What reaches the terminal: a line at once on stderr, then Spark's warnings only (its log4j2
configuration at WARN: ``spark_session.LOG4J2_PROPERTIES``), a progress bar per long stage
(``spark_session.StageProgress``; on a terminal, or with ``--progress``) and the summary last on
stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _describe(recs: list) -> str:
    files = sum(len(r.files) for r in recs)
    return (f"{len(recs)} recording{'s' if len(recs) > 1 else ''}, {files} file{'s' if files > 1 else ''}")


def run(args, prog: str = "replay_job") -> int:
    """The command: inputs checked first (one line on stderr, ``<prog>: error: ...``, and exit 2
    on a problem, before Spark starts), a line on stderr at once, a progress bar per long stage,
    the summary last on stdout."""
    from groupcoord.adapters.replay.partition import check_trace
    from groupcoord.adapters.replay.plain_job import plain_replay
    from groupcoord.adapters.replay.report import default_report, format_report, report_dir, report_written
    from groupcoord.adapters.replay.spark_job import spark_replay
    from groupcoord.adapters.traces import progress as shown
    from groupcoord.adapters.traces.spark_session import StageProgress, spark_session, stopped_after
    from groupcoord.adapters.traces.trace_files import TraceError

    shown.show(getattr(args, "progress", None))
    out = args.out or default_report(args.path)
    try:
        recs = check_trace(args.path, warn=lambda text: print(f"{prog}: warning: {text}", file=sys.stderr,
                                                              flush=True))
        report_dir(args.path, out)
    except TraceError as e:
        print(f"{prog}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    try:
        if args.engine == "plain":
            summary = plain_replay(args.path, out, processes=args.processes, invariants=not args.no_invariants,
                                   recordings=recs)
        else:
            master = args.master or "the master spark-submit gives"
            if "PYSPARK_GATEWAY_PORT" in os.environ:  # spark-submit started the JVM
                _say(f"replay {args.path}: {_describe(recs)}; starting the Spark context ({master})...")
            else:
                _say(f"replay {args.path}: {_describe(recs)}; starting Spark {master} (the JVM takes a few "
                     f"seconds)...")
            started = time.monotonic()
            # the report's temporary outlives the session: a stopped run's is removed once Spark is
            with report_written(Path(out)) as into:
                with stopped_after(spark_session(args.master, partitions=args.partitions,
                                                 verbose=args.verbose)) as spark:
                    _say(f"Spark {spark.sparkContext.master} up in {time.monotonic() - started:.1f} s; replaying...")
                    # --verbose: Spark's own console progress bar instead
                    with (contextlib.nullcontext() if args.verbose
                          else StageProgress(spark.sparkContext.statusTracker())) as progress:
                        summary = spark_replay(spark, args.path, out, partitions=args.partitions,
                                               invariants=not args.no_invariants, recordings=recs,
                                               progress=progress, into=into)
    except TraceError as e:
        print(f"{prog}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except ImportError as e:
        if "PYSPARK_GATEWAY_PORT" not in os.environ:
            raise  # the command names the extra (cli.extras)
        print(f"{prog}: error: {e.name or e} is not installed for {sys.executable}: name the Python that has "
              f"groupcoord with PYSPARK_PYTHON=.venv/bin/python", file=sys.stderr)
        return 2
    sys.stderr.flush()
    if args.engine != "plain":
        print(f"{'=' * 30} replay summary {'=' * 30}")
    print(format_report(summary), flush=True)
    return 1 if summary["units_with_findings"] or summary["groups_in_several_files"] else 0


def _at_least_one(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return n


def add_arguments(p: argparse.ArgumentParser, master: str | None = "local[*]") -> None:
    p.description = (
        "Replay a recorded trace through the core, comparing every recorded output and checking the invariants "
        "after every step. TRACE is what `simulate --out`, `scenario --trace` or `serve --trace` wrote: a "
        "directory or a single trace file. Each recording in it (the files under one meta.json) is replayed "
        "on its own with its manifest's settings, and reported on its own. The trace is checked before Spark "
        "starts (a missing or unreadable one: one line, exit 2). Spark logs at WARN (--verbose: as Spark "
        "says); stages running longer than 2 s show their progress on stderr (on a terminal, or with --progress); "
        "the summary comes last, on stdout. "
        "Writes only the report directory (--out): findings.parquet (one row per unit with a finding, per "
        "task and recording with totals), summary.json (the summary, every recording listed) and summary.txt "
        "(the summary as printed); an old report there is replaced. Exit 1 on any finding, 2 when the trace "
        "cannot be read.")
    p.add_argument("path", metavar="TRACE",
                   help="a trace directory or file: Parquet or JSON Lines, with meta.json beside its files")
    p.add_argument("--master", default=master,
                   help=f"Spark master (default {master or 'the one spark-submit gives'})")
    p.add_argument("--engine", choices=["spark", "plain"], default="spark",
                   help="spark (default; needs the spark extra) or plain: pyarrow + processes, no Spark "
                        "(needs the replay extra)")
    p.add_argument("--processes", type=_at_least_one, default=1, help="plain engine: processes")
    p.add_argument("--partitions", type=_at_least_one, default=None,
                   help="Spark shuffle partitions (default 4 x cores)")
    p.add_argument("--out", default=None,
                   help="report directory (default: TRACE-report beside the trace, for a file or a directory "
                        "alike); never inside a trace directory")
    p.add_argument("--no-invariants", action="store_true", help="compare outputs only (faster)")
    from groupcoord.adapters.traces import progress

    progress.add_flag(p)
    p.add_argument("--verbose", action="store_true",
                   help="Spark's own logging and console progress bar, as Spark's defaults (or your SPARK_CONF_DIR) "
                        "have them")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="replay_job", description="Replay a groupcoord trace on Spark.")
    add_arguments(parser, master=None)  # under spark-submit, its --master applies
    try:
        return run(parser.parse_args(argv))
    except ImportError as e:
        package = (e.name or str(e)).split(".")[0]
        extra = "replay" if package in ("pyarrow", "orjson") else "spark"
        print(f"replay_job: error: needs {package}: pip install 'groupcoord[{extra}]'", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
