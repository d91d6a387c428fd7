"""``groupcoord replay``: replay a trace through the core on Spark (or without it) and report.

Spark (``--master``): Parquet traces are read by Spark with each row's file and row number
(``_metadata``); JSON Lines traces are read by the Python workers from a list of files, so a
bad line is reported with its file and line. Group-scoped traces are then
``repartition(N, "group_id").sortWithinPartitions("group_id", "seq")`` (or, when the
manifest promises that no group spans files, read one Parquet file per task and only sorted
within it) and replayed by ``mapInArrow``: each task walks its Arrow batches with one
``core.replay.StreamReplayer`` that keeps the open group across batches and emits one row
per group with a finding plus one row of totals. Instance-scoped traces (a shared
coordinator's recording) are replayed file by file, in written order, by the task that
reads the file. Nothing of the trace is collected on the driver: the result rows are
written as Parquet and only aggregates and a sample of findings come back.

``--engine plain`` runs the same per-partition function without Spark: pyarrow reads,
sorts by (group_id, seq) and replays, in one or more processes (when the manifest promises
that no group spans files, each process takes whole files and replays them one at a time;
otherwise each takes the groups of a hash of the group id, from all files).

The module runs under ``spark-submit`` too: ``spark-submit adapters/replay/job.py TRACE --out
REPORT`` (ship groupcoord with ``--py-files`` on a cluster). spark-submit runs the driver
with ``PYSPARK_PYTHON`` (else the ``python3`` on PATH), which must have groupcoord::

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit adapters/replay/job.py TRACE --out REPORT

A trace may hold several recordings (``trace_files.recordings``: the files under each
``meta.json``, e.g. one per scenario from ``groupcoord scenario --trace DIR``); each is
replayed with its own manifest and reported on its own.

Report (``--out``, default ``TRACE-report`` beside the trace): ``findings.parquet`` (rows
with ``row_kind`` "finding", one per group with a problem, "task", one per task and
recording with totals, or "unit", one per group replayed, where the manifest promises that
no group spans files, so a group found in two files is reported; every row names its
``recording``), ``summary.json`` and ``summary.txt``. Exit status 1 when anything was found.

What reaches the terminal: a line at once on stderr, then Spark's warnings only (its log4j2
configuration at WARN: ``LOG4J2_PROPERTIES``), a line per long stage (``StageProgress``) and
the summary last on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import shutil
import sys
import time
import zlib
from pathlib import Path
from typing import Iterator

RESULT_FIELDS = (
    ("row_kind", "string"), ("group_id", "string"), ("kind", "string"), ("check", "string"),
    ("checks", "string"), ("seq", "long"), ("dir", "string"), ("type", "string"), ("ts_ms", "long"),
    ("file", "string"), ("line", "long"), ("expected", "string"), ("actual", "string"), ("detail", "string"),
    ("units", "long"), ("records", "long"), ("inputs", "long"), ("outputs", "long"), ("instances", "long"),
    ("skipped", "long"), ("units_with_findings", "long"), ("recording", "string"),
)
RESULT_SCHEMA = ", ".join(f"`{n}` {t}" for n, t in RESULT_FIELDS)
TRACE_FIELDS = ("v", "group_id", "partition", "seq", "ts_ms", "dir", "type", "data")


def json_loader():
    try:
        import orjson

        return orjson.loads
    except ImportError:  # the standard library's json is the fallback
        from groupcoord.adapters.replay.records import json_loads

        return json_loads


def _dumps():
    """orjson.dumps for the replay's fast output comparison (None without orjson: the exact
    comparison alone)."""
    try:
        import orjson

        return orjson.dumps
    except ImportError:
        return None


# ------------------------------------------------------------------ the per-partition replay


@contextlib.contextmanager
def fewer_collections(young: int = 100_000):
    """The replay allocates many short-lived objects (events, commands, group copies) and few
    cycles (a coordinator per group instance): with the default threshold (700) the cyclic
    collector runs every few records and takes a fifth of the CPU. Collect the young
    generation every ``young`` allocations instead; cycles are still collected."""
    old = gc.get_threshold()
    gc.set_threshold(young, old[1], old[2])
    try:
        yield
    finally:
        gc.set_threshold(*old)



class PartitionReplay:
    """Feeds column batches to a StreamReplayer; collects result rows (each naming the
    recording, ``options["recording"]``)."""

    def __init__(self, options: dict, file_names: list[str] | None = None) -> None:
        from groupcoord.core.config import CoordinatorConfig
        from groupcoord.adapters.replay.stream import StreamReplayer

        config = CoordinatorConfig.from_kafka(options.get("config") or {})
        self.replayer = StreamReplayer(config, outputs=options.get("outputs", True),
                                       scope=options.get("scope", "group"),
                                       check_invariants=options.get("invariants", True), loads=json_loader(),
                                       dumps=_dumps())
        self.file_names = file_names  # when the file column holds indices into it
        # one "unit" row per replayed group where the manifest promises that no group spans
        # files: a group found in two files (a copied file) then shows on the driver
        self.list_units = options.get("list_units", False)
        self.recording = options.get("recording")
        self.rows: list[dict] = []
        self.totals = {"units": 0, "records": 0, "inputs": 0, "outputs": 0, "instances": 0, "skipped": 0,
                       "units_with_findings": 0}

    def feed(self, cols: dict, unit_keys=None) -> None:
        n = len(cols["seq"])
        self._collect(self.replayer.feed(
            cols["v"], cols["group_id"], cols["partition"], cols["seq"], cols["ts_ms"], cols["dir"], cols["type"],
            cols["data"], cols.get("file") or [None] * n, cols.get("line") or [None] * n, unit_keys=unit_keys))

    def finish(self) -> None:
        self._collect(self.replayer.finish())

    def _collect(self, results) -> None:
        t = self.totals
        for r in results:
            t["units"] += 1
            t["records"] += r.records
            t["inputs"] += r.inputs
            t["outputs"] += r.outputs
            t["instances"] += r.instances
            t["skipped"] += r.skipped
            if self.list_units:
                self.rows.append({"row_kind": "unit", "group_id": r.group_id, "recording": self.recording})
            f = r.finding
            if f is not None:
                t["units_with_findings"] += 1
                self.rows.append({"row_kind": "finding", "group_id": f.group_id, "kind": f.kind, "check": f.check,
                                  "checks": ",".join(f.checks), "seq": f.seq, "dir": f.dir, "type": f.type,
                                  "ts_ms": f.ts_ms, "file": self._file_name(f.file), "line": f.line,
                                  "expected": f.expected, "actual": f.actual, "detail": f.detail,
                                  "recording": self.recording})

    def _file_name(self, file):
        if type(file) is int and self.file_names is not None and 0 <= file < len(self.file_names):
            return self.file_names[file]
        return file

    def result_rows(self) -> list[dict]:
        return self.rows + [{"row_kind": "task", **self.totals, "recording": self.recording}]


def _result_batch(rows: list[dict]):
    import pyarrow as pa

    types = {"string": pa.string(), "long": pa.int64()}
    schema = pa.schema([(n, types[t]) for n, t in RESULT_FIELDS])
    return pa.RecordBatch.from_pylist([{n: r.get(n) for n, _ in RESULT_FIELDS} for r in rows], schema=schema)


def _file_values(column) -> list:
    """The ``file`` column as a list: Spark repeats the file's path on every row, so a batch
    from one file converts it once, not once per row."""
    import pyarrow.compute as pc

    distinct = pc.unique(column).to_pylist()
    if len(distinct) == 1:
        return [_local_path(distinct[0])] * len(column)
    local = {v: _local_path(v) for v in distinct}
    return [local[v] for v in column.to_pylist()]


def _local_path(uri):
    """Spark's ``file:/tmp/a%20b.parquet`` as ``/tmp/a b.parquet``, as the plain replay names
    it; other schemes (hdfs:, s3a:) stay URIs."""
    if type(uri) is str and uri.startswith("file:"):
        from urllib.parse import unquote, urlparse

        return unquote(urlparse(uri).path)
    return uri


def replay_batches(batches: Iterator, options: dict) -> Iterator:
    """mapInArrow function: sorted trace batches in, result rows out."""
    with fewer_collections():
        job = PartitionReplay(options)
        for batch in batches:
            cols = {name: batch.column(name).to_pylist() for name in batch.schema.names if name != "file"}
            if "file" in batch.schema.names:
                cols["file"] = _file_values(batch.column("file"))
            job.feed(cols)
            if len(job.rows) >= 1000:
                yield _result_batch(job.rows)
                job.rows = []
        job.finish()
    yield _result_batch(job.result_rows())


def read_jsonl_files(batches: Iterator) -> Iterator:
    """mapInArrow function: file paths in, their records out (with file and line; bad lines
    as rows that the replay reports)."""
    import pyarrow as pa

    from groupcoord.adapters.replay.trace_files import arrow_schema, iter_batches

    schema = arrow_schema().append(pa.field("file", pa.string())).append(pa.field("line", pa.int64()))
    for batch in batches:
        for path in batch.column("path").to_pylist():
            for cols in iter_batches(path, batch_rows=10_000, strict=False):
                yield pa.RecordBatch.from_pydict(cols, schema=schema)


def replay_file(path: str, options: dict) -> list[dict]:
    """Instance scope: one file is one coordinator's recording, replayed in written order;
    its result rows (findings and the file's totals)."""
    from groupcoord.adapters.replay.trace_files import iter_batches

    job = PartitionReplay(options)
    with fewer_collections():
        for cols in iter_batches(path, batch_rows=10_000, strict=False):
            job.feed(cols, unit_keys=[path] * len(cols["seq"]))
        job.finish()
    return job.result_rows()


def replay_files(batches: Iterator, options: list[dict]) -> Iterator:
    """mapInArrow function for instance scope: (path, index into ``options`` of its
    recording) in, each file replayed on its own."""
    for batch in batches:
        for path, k in zip(batch.column("path").to_pylist(), batch.column("recording").to_pylist()):
            yield _result_batch(replay_file(path, options[k]))


# ------------------------------------------------------------------ Spark

# Spark's own logging at WARN (spark_session, unless verbose): the driver JVM reads this
# log4j2 configuration from its start (Spark's default profile prints a banner and, under
# spark-submit, INFO lines); the Hadoop native-library notice is dropped.
LOG4J2_PROPERTIES = """\
status = error
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark %p %c{1}: %m%n%ex
logger.nativecode.name = org.apache.hadoop.util.NativeCodeLoader
logger.nativecode.level = error
"""


def log4j2_file() -> str:
    """A file holding LOG4J2_PROPERTIES (one per user, rewritten when it differs)."""
    import tempfile

    path = Path(tempfile.gettempdir()) / f"groupcoord-log4j2-{os.getuid()}.properties"
    try:
        current = path.read_text()
    except OSError:
        current = None
    if current != LOG4J2_PROPERTIES:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(LOG4J2_PROPERTIES)
        os.replace(tmp, path)
    return str(path)


def _quiet_jvm(jvm) -> bool:
    """LOG4J2_PROPERTIES in a JVM already running (spark-submit's), before the SparkContext
    starts and logs its INFO lines. Spark reloads its default profile when a context starts
    if it loaded it before (spark-submit did): that flag is cleared and Spark's own logger
    context pointed at LOG4J2_PROPERTIES. Spark internals: False when they are not there
    (then ``spark.log.level`` does what it can, from just after the context's first lines)."""
    try:
        spark_logging = getattr(getattr(jvm.org.apache.spark.internal, "Logging$"), "MODULE$")
        getattr(spark_logging, "org$apache$spark$internal$Logging$$defaultSparkLog4jConfig_$eq")(False)
        context = jvm.org.apache.logging.log4j.LogManager.getContext(
            jvm.org.apache.spark.util.Utils.getSparkClassLoader(), False)
        context.setConfigLocation(jvm.java.net.URI.create(Path(log4j2_file()).as_uri()))
        return True
    except Exception:  # py4j's errors: another Spark
        return False


def spark_session(master: str | None = "local[*]", app: str = "groupcoord-replay", partitions: int | None = None,
                  extra: dict | None = None, verbose: bool = False):
    """A SparkSession set up for replay (the Python workers run this interpreter). ``master``
    None leaves it to spark-submit. Spark logs at WARN unless ``verbose`` (then as Spark's
    defaults say, with its console progress bar)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    extra = dict(extra or {})
    if not verbose:
        if os.environ.get("PYSPARK_GATEWAY_PORT"):  # under spark-submit: its JVM is up already
            SparkContext._ensure_initialized()
            if not _quiet_jvm(SparkContext._jvm):
                extra.setdefault("spark.log.level", "WARN")
        else:  # the JVM starts with the session: it reads the configuration from the start
            extra.setdefault("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j2_file()}")
    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    builder = (builder
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "true" if verbose else "false")
               .config("spark.sql.adaptive.coalescePartitions.enabled", "false")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "10000")
               .config("spark.python.worker.reuse", "true")
               .config("spark.driver.memory", os.environ.get("GROUPCOORD_SPARK_DRIVER_MEMORY", "4g")))
    if partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(partitions))
    for k, v in extra.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    if not verbose:
        spark.sparkContext.setLogLevel("WARN")
    return spark


class StageProgress:
    """A line on ``out`` (stderr) for each Spark stage that runs longer than ``after`` seconds:
    ``spark: stage 3: 5/8 tasks done (12 s), replaying TRACE``, again every ``every`` seconds
    while it runs and once when it ends. Polls the status tracker from a daemon thread; use
    as a context manager. ``what`` names the work under way (set it between jobs)."""

    def __init__(self, tracker, out=None, after: float = 2.0, every: float = 10.0, poll: float = 0.5,
                 clock=time.monotonic) -> None:
        import threading

        self.tracker, self.out = tracker, out or sys.stderr
        self.after, self.every, self.poll, self.clock = after, every, poll, clock
        self.what = ""
        self._seen: dict[int, float] = {}  # stage -> first seen
        self._told: dict[int, float] = {}  # stage -> last line
        self._what: dict[int, str] = {}  # stage -> the work under way when it was first seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="groupcoord-spark-progress", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)
        self.check(final=True)

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self.check()
            except Exception:  # the JVM going away at the end: nothing more to say
                return

    def check(self, final: bool = False) -> None:
        """One look at the running stages (the thread calls it every ``poll`` seconds)."""
        now = self.clock()
        active = set() if final else set(self.tracker.getActiveStageIds())
        for stage in sorted(active):
            info = self.tracker.getStageInfo(stage)
            if info is None:
                continue
            first = self._seen.setdefault(stage, now)
            self._what.setdefault(stage, self.what)
            told = self._told.get(stage)
            if now - first >= self.after and (told is None or now - told >= self.every):
                self._say(stage, f"{info.numCompletedTasks}/{info.numTasks} tasks done", now - first,
                          self._what[stage])
                self._told[stage] = now
        for stage in [s for s in self._seen if s not in active]:
            first = self._seen.pop(stage)
            what = self._what.pop(stage, self.what)
            if self._told.pop(stage, None) is not None:
                self._say(stage, "finished", now - first, what)

    def _say(self, stage: int, state: str, seconds: float, what: str) -> None:
        print(f"spark: stage {stage}: {state} ({seconds:.0f} s){', ' + what if what else ''}", file=self.out,
              flush=True)


@contextlib.contextmanager
def _one_task_per_file(spark, files):
    """Plan file scans with one whole file per task: Spark splits files larger than
    ``maxPartitionBytes`` and packs files into a task until their sizes plus an
    ``openCostInBytes`` per file pass it; both at the largest file's size do neither."""
    keys = ("spark.sql.files.maxPartitionBytes", "spark.sql.files.openCostInBytes")
    old = {k: spark.conf.get(k, None) for k in keys}
    size = str(max(os.path.getsize(f) for f in files) + 1)
    for k in keys:
        spark.conf.set(k, size)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


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
    from groupcoord.adapters.replay.trace_files import TraceError

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


def _fresh(out_path: Path) -> None:
    if out_path.exists():
        shutil.rmtree(out_path)
    out_path.mkdir(parents=True)


def default_partitions(spark) -> int:
    return max(4, 4 * spark.sparkContext.defaultParallelism)


def recording_options(recording, invariants: bool = True) -> dict:
    meta = recording.meta
    return {"config": meta.get("config") or {}, "outputs": meta.get("outputs", True),
            "scope": meta.get("scope", "group"), "invariants": invariants, "recording": recording.name}


def check_trace(path: str) -> list:
    """The trace's recordings, checked as far as can be without replaying: the path exists and
    is readable, its files are trace files in one format per recording, every ``meta.json`` is
    valid and every Parquet file has the trace schema (its footer). TraceError naming the
    first problem; cheap, so it runs before Spark starts."""
    from groupcoord.adapters.replay import trace_files as trace_io

    recs = trace_io.recordings(path)
    for r in recs:
        for f in r.files:
            if not os.access(f, os.R_OK):
                raise trace_io.TraceError(f"{f}: cannot read the file")
            if trace_io.file_format(f) == "parquet":
                trace_io.check_parquet_file(f)
    return recs


def spark_replay(spark, path: str, out: str, *, partitions: int | None = None, invariants: bool = True,
                 sample: int = 20, recordings: list | None = None, progress: "StageProgress | None" = None) -> dict:
    """Replay ``path`` with ``spark``; write the report to ``out``; return the summary. Each
    recording (``trace_files.recordings``) is replayed with its own manifest: the files of
    instance-scoped recordings in one job (each file on its own), each group-scoped recording
    in a job of its own."""
    recs = check_trace(path) if recordings is None else recordings
    out_path = report_dir(path, out)
    n = partitions or default_partitions(spark)
    findings_path = str(out_path / "findings.parquet")
    _fresh(out_path)
    started = time.perf_counter()
    instance = [(k, r) for k, r in enumerate(recs) if r.scope == "instance"]
    options = [recording_options(r, invariants) for r in recs]
    whole_file_recordings = []

    def doing(what: str) -> None:
        if progress is not None:
            progress.what = what

    if instance:
        files = [(str(f), k) for k, r in instance for f in r.files]
        doing(f"replaying {len(instance)} instance-scoped recording{'s' if len(instance) > 1 else ''}")
        paths = spark.createDataFrame(files, "path string, recording int").repartition(min(n, len(files)))
        paths.mapInArrow(lambda it: replay_files(it, options), RESULT_SCHEMA).write.mode("append").parquet(
            findings_path)
    for k, r in enumerate(recs):
        if r.scope == "instance":
            continue
        doing(f"replaying {r.name}")
        whole = _spark_group_recording(spark, r, options[k], n, findings_path)
        if whole:
            whole_file_recordings.append(r.name)
    seconds = time.perf_counter() - started
    doing("summing up the report")
    with _shuffle_partitions(spark, spark.sparkContext.defaultParallelism):  # a few rows: not 200 tasks
        return _spark_summary(spark, path, out_path, recs, findings_path, seconds, whole_file_recordings, sample, n)


@contextlib.contextmanager
def _shuffle_partitions(spark, n: int):
    key = "spark.sql.shuffle.partitions"
    old = spark.conf.get(key, None)
    spark.conf.set(key, str(max(1, n)))
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, old)


def _spark_summary(spark, path, out_path, recs, findings_path, seconds, whole_file_recordings, sample, n) -> dict:
    from pyspark.sql import functions as F

    rows = spark.read.parquet(findings_path)
    per = {r["recording"]: {c: int(r[c] or 0) for c in TOTALS}
           for r in rows.filter("row_kind = 'task'").groupBy("recording").agg(
               *[F.sum(c).alias(c) for c in TOTALS]).collect()}
    findings = rows.filter("row_kind = 'finding'")
    by_check = {f"{r['kind']}/{r['check']}": r["count"] for r in findings.groupBy("kind", "check").count().collect()}
    first = [r.asDict() for r in findings.orderBy("recording", "group_id").limit(sample).collect()]
    several = {}
    if whole_file_recordings:
        repeated = rows.filter("row_kind = 'unit'").groupBy("recording", "group_id").count().filter("count > 1")
        names = [r["group_id"] for r in repeated.orderBy("recording", "group_id").limit(sample).collect()]
        if names:
            extra = {r["recording"]: int(r["extra"]) for r in repeated.groupBy("recording").agg(
                (F.sum("count") - F.count("*")).alias("extra")).collect()}
            several = {"groups": repeated.count(), "extra_units": sum(extra.values()), "sample": names,
                       "by_recording": extra}
    return _summarize(path, out_path, recs, per, by_check, first, seconds, engine=f"spark {spark.sparkContext.master}",
                      partitions=n, several=several)


def _spark_group_recording(spark, recording, options: dict, n: int, findings_path: str) -> bool:
    """One group-scoped recording replayed by Spark into ``findings_path`` (appended); True
    when its manifest promises that no group spans files (each Parquet file one task)."""
    from pyspark.sql import functions as F

    from groupcoord.adapters.replay import trace_files as trace_io

    files = recording.files
    fmt = trace_io.trace_format(recording.name, files)
    # a manifest promising that no group spans files lets each Parquet file be one task's
    # input: the shuffle that would bring each group together is not needed (a broken
    # promise shows up as groups whose records start past seq 0, never as a silent pass)
    whole_files = fmt == "parquet" and not recording.meta.get("groups_span_files", True)
    options = {**options, "list_units": whole_files}
    if fmt == "parquet":
        df = (spark.read.schema(trace_io.SPARK_SCHEMA).parquet(*[str(f) for f in files])
              .select(*TRACE_FIELDS, F.col("_metadata.file_path").alias("file"),
                      (F.col("_metadata.row_index") + 1).alias("line")))
    else:
        paths = spark.createDataFrame([(str(f),) for f in files], "path string").repartition(min(n, len(files)))
        df = paths.mapInArrow(read_jsonl_files, trace_io.SPARK_SCHEMA + ", file string, line long")
    if whole_files:
        # each file is read by one task and holds whole groups: no shuffle, a local sort
        df = df.sortWithinPartitions("group_id", "seq")
    else:
        df = df.repartition(n, "group_id").sortWithinPartitions("group_id", "seq")
    result = df.mapInArrow(lambda it: replay_batches(it, options), RESULT_SCHEMA)
    with _one_task_per_file(spark, files) if whole_files else contextlib.nullcontext():
        result.write.mode("append").parquet(findings_path)
    return whole_files


# ------------------------------------------------------------------ without Spark


def _shard_of(group_id: str | None, shards: int) -> int:
    return 0 if group_id is None else zlib.crc32(group_id.encode()) % shards


def plain_task(items) -> tuple[list[dict], float]:
    """One process's share: work items (see ``plain_replay``) replayed one after the other."""
    started = time.perf_counter()
    rows: list[dict] = []
    with fewer_collections():
        for item in items:
            rows += _plain_item(item)
    return rows, time.perf_counter() - started


def _plain_item(item) -> list[dict]:
    """An instance-scoped file, or the groups of shard ``index`` (of ``shards``) of a
    group-scoped recording: read, sort, replay."""
    files, index, shards, split_files, options = item
    if options.get("scope") == "instance":
        return replay_file(files[0], options)
    job = PartitionReplay(options, file_names=[str(f) for f in files])
    if split_files:
        # no group spans files: this task's files one at a time, so memory holds one file
        for i, f in enumerate(files):
            if i % shards == index:
                _replay_sorted(job, [_read_table(f, i)])
    else:
        tables = [_read_table(f, i) for i, f in enumerate(files)]
        if shards > 1:
            tables = [_shard_rows(t, index, shards) for t in tables]
        _replay_sorted(job, tables)
    job.finish()
    return job.result_rows()


def _read_table(f, i: int):
    """A trace file as an Arrow table with ``file`` (the file's index in the task's list: ints
    convert to Python far faster than strings; findings get the name back) and ``line`` (the
    row number in Parquet)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from groupcoord.adapters.replay import trace_files as trace_io

    if trace_io.file_format(Path(f)) == "parquet":
        trace_io.check_parquet_file(Path(f))
        t = pq.read_table(f, columns=list(TRACE_FIELDS))
        line = pc.cumulative_sum(pa.nulls(t.num_rows, pa.int64()).fill_null(1))
        return t.append_column("file", pa.nulls(t.num_rows, pa.int32()).fill_null(i)).append_column("line", line)
    batches = [pa.RecordBatch.from_pydict(c) for c in trace_io.iter_batches(f, strict=False)]
    if not batches:  # an empty file (or blank lines only): no records
        schema = trace_io.arrow_schema().append(pa.field("file", pa.int32())).append(pa.field("line", pa.int64()))
        return schema.empty_table()
    t = pa.Table.from_batches(batches)
    return t.set_column(t.column_names.index("file"), "file", pa.nulls(t.num_rows, pa.int32()).fill_null(i))


def _shard_rows(t, index: int, shards: int):
    """The rows of shard ``index``'s groups: a hash per distinct group id, then a vectorised take."""
    import pyarrow as pa
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(t.column("group_id")).combine_chunks()
    keep = pa.array([_shard_of(g, shards) == index for g in enc.dictionary.to_pylist()])
    mask = pc.fill_null(pc.take(keep, enc.indices), index == 0)
    return t.filter(mask)


def _replay_sorted(job: "PartitionReplay", tables: list) -> None:
    """Sort the tables' rows by (group_id, seq) together and feed them to ``job``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not tables:
        return
    table = pa.concat_tables(tables, promote_options="default")
    del tables[:]
    # 64-bit string offsets: a take of sorted rows may gather more than 2 GB of data
    table = table.set_column(table.column_names.index("data"), "data", table["data"].cast(pa.large_string()))
    # a null seq first in its group, as Spark sorts it: the group's first finding is that row
    order = pc.sort_indices(table, sort_keys=[("group_id", "ascending", "at_start"), ("seq", "ascending", "at_start")])
    step = 65_536  # take slices: one take of the whole table can pass 2 GB of strings
    for start in range(0, len(order), step):
        batch = table.take(order.slice(start, step))
        job.feed({name: batch.column(name).to_pylist() for name in batch.column_names})


def plain_replay(path: str, out: str, *, processes: int = 1, invariants: bool = True, sample: int = 20,
                 recordings: list | None = None) -> dict:
    """Replay ``path`` without Spark in ``processes`` processes: each instance-scoped file is
    one work item (dealt round the processes); each group-scoped recording is split between
    all of them (whole files when its manifest promises that no group spans files, else by a
    hash of the group id)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    recs = check_trace(path) if recordings is None else recordings
    out_path = report_dir(path, out)
    work: list[list] = [[] for _ in range(processes)]
    dealt = 0
    for r in recs:
        options = recording_options(r, invariants)
        files = [str(f) for f in r.files]
        if r.scope == "instance":
            for f in files:
                work[dealt % processes].append(([f], 0, 1, False, options))
                dealt += 1
            continue
        split_files = not r.meta.get("groups_span_files", True)
        options["list_units"] = split_files
        for i in range(processes):
            work[i].append((files, i, processes, split_files, options))
    started = time.perf_counter()
    if processes > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(processes) as pool:
            results = pool.map(plain_task, work)
    else:
        results = [plain_task(work[0])]
    seconds = time.perf_counter() - started
    rows = [r for rs, _ in results for r in rs]
    _fresh(out_path)
    pq.write_table(pa.Table.from_batches([_result_batch(rows)]), str(out_path / "findings.parquet"))
    per: dict[str, dict] = {}
    for r in rows:
        if r["row_kind"] == "task":
            t = per.setdefault(r["recording"], dict.fromkeys(TOTALS, 0))
            for k in TOTALS:
                t[k] += r[k]
    findings = sorted((r for r in rows if r["row_kind"] == "finding"),
                      key=lambda r: (str(r["recording"]), str(r["group_id"])))
    by_check: dict[str, int] = {}
    for r in findings:
        key = f"{r['kind']}/{r['check']}"
        by_check[key] = by_check.get(key, 0) + 1
    seen: dict[tuple, int] = {}
    for r in rows:
        if r["row_kind"] == "unit":
            key = (r["recording"], r["group_id"])
            seen[key] = seen.get(key, 0) + 1
    repeated = {k: c for k, c in seen.items() if c > 1}
    several = {}
    if repeated:
        extra: dict[str, int] = {}
        for (rec, _), c in repeated.items():
            extra[rec] = extra.get(rec, 0) + c - 1
        several = {"groups": len(repeated), "extra_units": sum(extra.values()),
                   "sample": [g for _, g in sorted(repeated)][:sample], "by_recording": extra}
    return _summarize(path, out_path, recs, per, by_check, findings[:sample], seconds,
                      engine=f"plain x{processes}", partitions=processes,
                      task_seconds=[round(s, 2) for _, s in results], several=several)


# ------------------------------------------------------------------ the report


def _summarize(path, out_path: Path, recs, per: dict, by_check, first, seconds, several=None, **extra) -> dict:
    """``per``: totals by recording name. ``several``: groups replayed from more than one file
    although the manifest promises that none spans files (counted once in ``units``; the run
    fails)."""
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
               "recordings": recordings, **extra}
    (out_path / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (out_path / "summary.txt").write_text(format_report(summary) + "\n")
    return summary


def _unit_word(scope: str, n: int | None = None) -> str:
    word = {"group": "groups", "instance": "recordings"}.get(scope, "units")
    return word[:-1] if n == 1 else word


RECORDINGS_SHOWN = 10  # more than this: those with findings only (up to this many)


def format_report(summary: dict) -> str:
    from groupcoord.adapters.replay.records import MALFORMED_ROW

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


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _describe(recs: list) -> str:
    files = sum(len(r.files) for r in recs)
    return (f"{len(recs)} recording{'s' if len(recs) > 1 else ''}, {files} file{'s' if files > 1 else ''}")


def run(args, prog: str = "replay_job") -> int:
    """The command: inputs checked first (one line on stderr, ``<prog>: error: ...``, and exit 2
    on a problem, before Spark starts), a line on stderr at once and per long stage, the summary
    last on stdout."""
    from groupcoord.adapters.replay.trace_files import TraceError

    out = args.out or default_report(args.path)
    try:
        recs = check_trace(args.path)
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
            spark = spark_session(args.master, partitions=args.partitions, verbose=args.verbose)
            try:
                _say(f"Spark {spark.sparkContext.master} up in {time.monotonic() - started:.1f} s; replaying...")
                # --verbose: Spark's own console progress bar instead
                with (contextlib.nullcontext() if args.verbose
                      else StageProgress(spark.sparkContext.statusTracker())) as progress:
                    summary = spark_replay(spark, args.path, out, partitions=args.partitions,
                                           invariants=not args.no_invariants, recordings=recs, progress=progress)
            finally:
                spark.stop()
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
        "says); stages running longer than 2 s report progress on stderr; the summary comes last, on stdout. "
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
