"""The replay without Spark (``plain_replay``, ``--engine plain``): pyarrow reads, sorts by
(group_id, seq) and replays with ``partition.PartitionReplay``, in one or more processes (when
the manifest promises that no group spans files, each process takes whole files and replays
them one at a time; otherwise each takes the groups of a hash of the group id, from all files).
Each instance-scoped file is one process's work item.
"""

from __future__ import annotations

import time
import zlib
from pathlib import Path

from groupcoord.adapters.replay.partition import (
    TRACE_FIELDS,
    PartitionReplay,
    check_trace,
    fewer_collections,
    recording_options,
    replay_file,
    result_batch,
)
from groupcoord.adapters.replay.report import TOTALS, report_dir, report_written, summarize
from groupcoord.adapters.traces.stopping import pool_results, worker_pool


def _shard_of(group_id: str | None, shards: int) -> int:
    return 0 if group_id is None else zlib.crc32(group_id.encode()) % shards


def plain_task(items, progress=None) -> tuple[list[dict], float]:
    """One process's share: work items (see ``plain_replay``) replayed one after the other;
    ``progress``: the records fed counted there (one process only)."""
    started = time.perf_counter()
    rows: list[dict] = []
    with fewer_collections():
        for item in items:
            rows += _plain_item(item, progress)
    return rows, time.perf_counter() - started


def _plain_item(item, progress=None) -> list[dict]:
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
                _replay_sorted(job, [_read_table(f, i, job)], progress)
    else:
        tables = [_read_table(f, i, job) for i, f in enumerate(files)]
        if shards > 1:
            tables = [_shard_rows(t, index, shards) for t in tables]
        _replay_sorted(job, tables, progress)
    job.finish()
    return job.result_rows()


def _read_table(f, i: int, job: "PartitionReplay | None" = None):
    """A trace file as an Arrow table with ``file`` (the file's index in the task's list: ints
    convert to Python far faster than strings; findings get the name back) and ``line`` (the
    row number in Parquet). ``job`` is told where a JSON Lines file ends at a torn last line."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from groupcoord.adapters.traces import trace_files as trace_io

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
    if job is not None:
        job.torn_end(f, i, t.column("line")[-1].as_py())
    return t.set_column(t.column_names.index("file"), "file", pa.nulls(t.num_rows, pa.int32()).fill_null(i))


def _shard_rows(t, index: int, shards: int):
    """The rows of shard ``index``'s groups: a hash per distinct group id, then a vectorised take."""
    import pyarrow as pa
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(t.column("group_id")).combine_chunks()
    keep = pa.array([_shard_of(g, shards) == index for g in enc.dictionary.to_pylist()])
    mask = pc.fill_null(pc.take(keep, enc.indices), index == 0)
    return t.filter(mask)


def _replay_sorted(job: "PartitionReplay", tables: list, progress=None) -> None:
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
    # rows already in that order (the simulator writes each group's records in turn) are
    # fed in slices of the table as it is, without gathering a copy
    steps = pc.pairwise_diff(order.cast(pa.int64()))  # the first is null; one row: all null
    in_order = len(order) > 0 and order[0].as_py() == 0 and pc.all(pc.equal(steps, 1)).as_py() is not False
    step = 65_536  # take slices: one take of the whole table can pass 2 GB of strings
    for start in range(0, len(order), step):
        batch = table.slice(start, step) if in_order else table.take(order.slice(start, step))
        job.feed({name: batch.column(name).to_pylist() for name in batch.column_names})
        if progress is not None:
            progress.advance(len(batch))


def plain_replay(path: str, out: str, *, processes: int = 1, invariants: bool = True, sample: int = 20,
                 recordings: list | None = None, into=None) -> dict:
    """Replay ``path`` without Spark in ``processes`` processes: each instance-scoped file is
    one work item (dealt round the processes); each group-scoped recording is split between
    all of them (whole files when its manifest promises that no group spans files, else by a
    hash of the group id). The report goes to ``out`` whole (``report.report_written``; into
    ``into`` when the caller holds the temporary)."""
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
        with worker_pool(processes) as pool:
            results = list(pool_results(pool, plain_task, work))
    else:
        from groupcoord.adapters.traces.progress import Progress

        with Progress("replay", unit="records") as progress:
            results = [plain_task(work[0], progress)]
    seconds = time.perf_counter() - started
    rows = [r for rs, _ in results for r in rs]
    with report_written(out_path, into) as into:
        pq.write_table(pa.Table.from_batches([result_batch(rows)]), str(into / "findings.parquet"))
        return _plain_summary(path, out_path, recs, rows, results, seconds, sample, processes, into)


def _plain_summary(path, out_path, recs, rows, results, seconds, sample, processes, into) -> dict:
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
    return summarize(path, out_path, recs, per, by_check, findings[:sample], seconds,
                     engine=f"plain x{processes}", partitions=processes,
                     task_seconds=[round(s, 2) for _, s in results], several=several, into=into)
