"""What both replay engines share: a trace's recordings as they take them (checked before any
work, ``check_trace``, and each with its tasks' options, ``recording_options``), the result
rows' schema, and the per-partition replay: ``PartitionReplay`` feeds column batches to one
``stream.StreamReplayer`` and collects one row per group with a finding plus one row of totals.
Spark's tasks run ``replay_batches``, ``read_jsonl_files`` and ``replay_files``
(``spark_job``); the plain engine's processes run ``PartitionReplay`` and ``replay_file``
(``plain_job``).
"""

from __future__ import annotations

import contextlib
import gc
import os
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
        from groupcoord.adapters.traces.records import json_loads

        return json_loads


def json_dumper():
    """orjson.dumps for the replay's fast output comparison (None without orjson: the exact
    comparison alone)."""
    try:
        import orjson

        return orjson.dumps
    except ImportError:
        return None


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

    replayer_class = None  # StreamReplayer unless a measurement swaps in its own (phases.py)

    def __init__(self, options: dict, file_names: list[str] | None = None) -> None:
        from groupcoord.adapters.replay.stream import StreamReplayer
        from groupcoord.core.config import CoordinatorConfig

        config = CoordinatorConfig.from_kafka(options.get("config") or {})
        self.replayer = (self.replayer_class or StreamReplayer)(config, outputs=options.get("outputs", True),
                                       scope=options.get("scope", "group"),
                                       check_invariants=options.get("invariants", True), loads=json_loader(),
                                       dumps=json_dumper())
        self.file_names = file_names  # when the file column holds indices into it
        self.replayer.torn_ends.update(options.get("torn_ends") or {})  # found on the driver (torn_ends)
        # one "unit" row per replayed group where the manifest promises that no group spans
        # files: a group found in two files (a copied file) then shows on the driver
        self.list_units = options.get("list_units", False)
        self.recording = options.get("recording")
        self.rows: list[dict] = []
        self.totals = {"units": 0, "records": 0, "inputs": 0, "outputs": 0, "instances": 0, "skipped": 0,
                       "units_with_findings": 0}

    def torn_end(self, path, key, last_line) -> None:
        """JSON Lines file ``path``, read up to its last record at ``last_line`` (None: none),
        named ``key`` in the rows' file column: when a torn last line follows, the unit ending
        there may lack that line's outputs (``UnitReplay.torn_ends``). Before ``finish``."""
        from groupcoord.adapters.traces import trace_files as trace_io

        tail = trace_io.torn_tail(path) if last_line is not None else None
        if tail is not None:
            self.replayer.torn_ends[(key, last_line)] = trace_io.torn_group(tail)

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


def result_batch(rows: list[dict]):
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
                yield result_batch(job.rows)
                job.rows = []
        job.finish()
    yield result_batch(job.result_rows())


def read_jsonl_files(batches: Iterator) -> Iterator:
    """mapInArrow function: file paths in, their records out (with file and line; bad lines
    as rows that the replay reports)."""
    import pyarrow as pa

    from groupcoord.adapters.traces.trace_files import arrow_schema, iter_batches

    schema = arrow_schema().append(pa.field("file", pa.string())).append(pa.field("line", pa.int64()))
    for batch in batches:
        for path in batch.column("path").to_pylist():
            for cols in iter_batches(path, batch_rows=10_000, strict=False):
                yield pa.RecordBatch.from_pydict(cols, schema=schema)


def replay_file(path: str, options: dict) -> list[dict]:
    """Instance scope: one file is one coordinator's recording, replayed in written order;
    its result rows (findings and the file's totals)."""
    from pathlib import Path

    from groupcoord.adapters.traces.trace_files import file_format, iter_batches

    job = PartitionReplay(options)
    end = None  # (file, line) of the last record read
    with fewer_collections():
        for cols in iter_batches(path, batch_rows=10_000, strict=False):
            job.feed(cols, unit_keys=[path] * len(cols["seq"]))
            end = cols["file"][-1], cols["line"][-1]
        if end is not None and file_format(Path(path)) == "jsonl":
            job.torn_end(path, *end)
        job.finish()
    return job.result_rows()


def replay_files(batches: Iterator, options: list[dict]) -> Iterator:
    """mapInArrow function for instance scope: (path, index into ``options`` of its
    recording) in, each file replayed on its own."""
    for batch in batches:
        for path, k in zip(batch.column("path").to_pylist(), batch.column("recording").to_pylist()):
            yield result_batch(replay_file(path, options[k]))


def recording_options(recording, invariants: bool = True) -> dict:
    meta = recording.meta
    return {"config": meta.get("config") or {}, "outputs": meta.get("outputs", True),
            "scope": meta.get("scope", "group"), "invariants": invariants, "recording": recording.name}


def torn_ends(files) -> dict:
    """{(file, line of its last record): the group its torn last line names, or None} for the
    JSON Lines files that end torn (``UnitReplay.torn_ends``), for a job whose tasks each read
    only some of a file's records (Spark, group scope; the other readers tell ``torn_end`` as
    they reach a file's end). Only a torn file is read through (for its line count)."""
    from groupcoord.adapters.traces import trace_files as trace_io

    found = {}
    for f in files:
        tail = trace_io.torn_tail(f) if trace_io.file_format(Path(f)) == "jsonl" else None
        if tail is not None:
            with open(f, "rb") as fh:
                whole = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
            found[(str(f), whole)] = trace_io.torn_group(tail)
    return found


def check_trace(path: str, warn=None) -> list:
    """The trace's recordings, checked as far as can be without replaying: the path exists and
    is readable, its files are trace files in one format per recording, every ``meta.json`` is
    valid and every Parquet file has the trace schema (its footer). TraceError naming the
    first problem; cheap, so it runs before Spark starts. ``warn(text)`` is told of each JSON
    Lines file's torn last line (left out by the readers)."""
    from groupcoord.adapters.traces import trace_files as trace_io

    recs = trace_io.recordings(path)
    for r in recs:
        for f in r.files:
            if not os.access(f, os.R_OK):
                raise trace_io.TraceError(f"{f}: cannot read the file")
            if trace_io.file_format(f) == "parquet":
                trace_io.check_parquet_file(f)
            else:
                trace_io.check_jsonl_head(f)
                tail = trace_io.torn_tail(f) if warn is not None else None
                if tail is not None:
                    group = trace_io.torn_group(tail)
                    warn(f"{f}: torn last line (no newline, not a record): left out; "
                         + (f"group {group}'s results rest" if group is not None else "the results rest")
                         + " on the lines before it")
    return recs
