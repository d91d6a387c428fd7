"""The replay on Spark (``spark_replay``).

Parquet traces are read by Spark with each row's file and row number (``_metadata``); JSON
Lines traces are read by the Python workers from a list of files, so a bad line is reported
with its file and line. Group-scoped traces are then
``repartition(N, "group_id").sortWithinPartitions("group_id", "seq")`` (or, when the manifest
promises that no group spans files, read one Parquet file per task and only sorted within it)
and replayed by ``mapInArrow``: each task walks its Arrow batches with one
``stream.StreamReplayer`` that keeps the open group across batches and emits one row per group
with a finding plus one row of totals (``partition``). Instance-scoped traces (a shared
coordinator's recording) are replayed file by file, in written order, by the task that reads
the file. Nothing of the trace is collected on the driver: the result rows are written as
Parquet and only aggregates and a sample of findings come back (``report``).
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING

from groupcoord.adapters.replay.partition import (
    RESULT_SCHEMA,
    TRACE_FIELDS,
    check_trace,
    read_jsonl_files,
    recording_options,
    replay_batches,
    replay_files,
    torn_ends,
)
from groupcoord.adapters.replay.report import TOTALS, report_dir, report_written, summarize

if TYPE_CHECKING:
    from groupcoord.adapters.traces.spark_session import StageProgress


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
    with _put_back(spark, old):
        yield


def default_partitions(spark) -> int:
    return max(4, 4 * spark.sparkContext.defaultParallelism)


def spark_replay(spark, path: str, out: str, *, partitions: int | None = None, invariants: bool = True,
                 sample: int = 20, recordings: list | None = None, progress: "StageProgress | None" = None,
                 into=None) -> dict:
    """Replay ``path`` with ``spark``; write the report to ``out``; return the summary. Each
    recording (``trace_files.recordings``) is replayed with its own manifest: the files of
    instance-scoped recordings in one job (each file on its own), each group-scoped recording
    in a job of its own. The report goes to ``out`` whole (``report.report_written``; into
    ``into`` when the caller holds the temporary: Spark's tasks must have stopped before a
    stopped run's temporary is removed)."""
    recs = check_trace(path) if recordings is None else recordings
    out_path = report_dir(path, out)
    with report_written(out_path, into) as into:
        return _spark_replay_into(spark, path, out_path, into, recs, partitions, invariants, sample, progress)


def _spark_replay_into(spark, path, out_path, into, recs, partitions, invariants, sample, progress) -> dict:
    n = partitions or default_partitions(spark)
    findings_path = str(into / "findings.parquet")
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
        return _spark_summary(spark, path, out_path, recs, findings_path, seconds, whole_file_recordings, sample, n,
                              into)


@contextlib.contextmanager
def _shuffle_partitions(spark, n: int):
    key = "spark.sql.shuffle.partitions"
    old = spark.conf.get(key, None)
    spark.conf.set(key, str(max(1, n)))
    with _put_back(spark, {key: old}):
        yield


@contextlib.contextmanager
def _put_back(spark, old: dict):
    """The session's settings ``old`` put back when the block ends; not when the command is
    being stopped (a KeyboardInterrupt): the session is abandoned, and the JVM may not answer."""
    try:
        yield
    except KeyboardInterrupt:
        raise
    except BaseException:
        _settings(spark, old)
        raise
    _settings(spark, old)


def _settings(spark, values: dict) -> None:
    for k, v in values.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


def _spark_summary(spark, path, out_path, recs, findings_path, seconds, whole_file_recordings, sample, n,
                   into) -> dict:
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
    return summarize(path, out_path, recs, per, by_check, first, seconds, engine=f"spark {spark.sparkContext.master}",
                     partitions=n, several=several, into=into)


def _spark_group_recording(spark, recording, options: dict, n: int, findings_path: str) -> bool:
    """One group-scoped recording replayed by Spark into ``findings_path`` (appended); True
    when its manifest promises that no group spans files (each Parquet file one task)."""
    from pyspark.sql import functions as F

    from groupcoord.adapters.traces import trace_files as trace_io

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
        options["torn_ends"] = torn_ends(files)  # the tasks see only parts of each file
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
