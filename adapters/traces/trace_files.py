"""Trace files: JSON Lines and Parquet with one schema (spec/trace-format.md).

A trace is a file or a directory of files (``*.jsonl``, ``*.parquet``; names starting with
``.`` or ``_`` are ignored, e.g. Spark's ``_SUCCESS``, and so are replay reports found inside)
plus an optional ``meta.json`` manifest: the scope, whether outputs are recorded and the
coordinator config the recording used. A directory may hold several recordings, each under its
own ``meta.json`` (``groupcoord scenario --trace DIR`` writes one per scenario): ``recordings``
splits a trace into them, and readers take each on its own. Reading never skips anything
silently: a line that is not a v1 record raises ``TraceError`` naming the file and line
(Parquet: the file and row, 1-based).

pyarrow is imported here (and by the replay job: ``partition``, ``plain_job``) only; the core never
touches files.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterator

import attrs

from groupcoord.adapters.traces.records import GROUP, INSTANCE, MALFORMED_ROW, TraceColumns
from groupcoord.core import trace
from groupcoord.core.config import CoordinatorConfig

TraceError = trace.TraceError
MANIFEST = "meta.json"
FORMAT_NAME = "groupcoord-trace"
COLUMNS = ("v", "group_id", "partition", "seq", "ts_ms", "dir", "type", "data")
SUFFIXES = {".jsonl": "jsonl", ".parquet": "parquet"}
RESERVED = (MANIFEST, "summary.json")  # beside the trace files, not trace files
# A directory holding both is a replay report (``groupcoord replay``'s ``--out``), never a
# part of a trace: a report written beside a trace file is not read when its directory is.
REPORT_MARKERS = ("findings.parquet", "summary.json")


def arrow_schema():
    import pyarrow as pa

    return pa.schema([
        pa.field("v", pa.int32(), nullable=False),
        pa.field("group_id", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("ts_ms", pa.int64(), nullable=False),
        pa.field("dir", pa.string(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("data", pa.string(), nullable=False),
    ])


SPARK_SCHEMA = ("v int, group_id string, partition int, seq long, ts_ms long, dir string, type string, "
                "data string")

# ------------------------------------------------------------------ manifest


def default_manifest() -> dict:
    return {"format": FORMAT_NAME, "v": trace.VERSION, "scope": GROUP, "outputs": True,
            "config": {}, "groups_span_files": True}


def write_manifest(directory: str | os.PathLike, *, scope: str = GROUP, outputs: bool = True,
                   config: CoordinatorConfig | dict | None = None, groups_span_files: bool = True,
                   **extra: Any) -> Path:
    """``meta.json`` for a trace directory. ``config``: the CoordinatorConfig the recording
    ran with (replays use it); ``groups_span_files`` False promises that each group's records
    are all in one file (lets a plain replay split files between processes)."""
    if isinstance(config, CoordinatorConfig):
        config = {k: v for k, v in config.to_kafka().items() if v != CoordinatorConfig().to_kafka()[k]}
    meta = {"format": FORMAT_NAME, "v": trace.VERSION, "scope": scope, "outputs": outputs,
            "config": dict(config or {}), "groups_span_files": groups_span_files, **extra}
    path = Path(directory) / MANIFEST
    path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return path


def manifest_file(path: str | os.PathLike) -> Path:
    """Where a trace's ``meta.json`` is (it may not exist)."""
    p = Path(path)
    return (p if p.is_dir() else p.parent) / MANIFEST


def read_manifest(path: str | os.PathLike) -> dict:
    """The manifest of a trace (defaults where there is none); TraceError if it is invalid."""
    where = manifest_file(path)
    meta = default_manifest()
    if not where.exists():
        return meta
    try:
        given = json.loads(where.read_text())
    except ValueError as e:
        raise TraceError(f"{where}: not JSON: {e}") from None
    if not isinstance(given, dict) or given.get("format") != FORMAT_NAME:
        raise TraceError(f"{where}: not a {FORMAT_NAME} manifest")
    if given.get("v") != trace.VERSION:
        raise TraceError(f"{where}: trace version {given.get('v')!r}, this reader knows {trace.VERSION}")
    if given.get("scope", GROUP) not in (GROUP, INSTANCE):
        raise TraceError(f"{where}: scope must be {GROUP!r} or {INSTANCE!r}")
    meta.update(given)
    try:
        coordinator_config(meta)
    except ValueError as e:
        raise TraceError(f"{where}: config: {e}") from None
    return meta


def coordinator_config(meta: dict) -> CoordinatorConfig:
    return CoordinatorConfig.from_kafka(meta.get("config") or {})


# ------------------------------------------------------------------ listing


def is_report(directory: str | os.PathLike) -> bool:
    """A replay report (``findings.parquet`` and ``summary.json``), not trace files."""
    d = Path(directory)
    return all((d / name).exists() for name in REPORT_MARKERS)


def trace_files(path: str | os.PathLike) -> list[Path]:
    """The trace files of a path (a file, or a directory searched recursively, leaving out
    replay reports), sorted."""
    p = Path(path)
    if not p.exists():
        raise TraceError(f"{p}: no such file or directory")
    if p.is_file():
        if p.suffix not in SUFFIXES:
            raise TraceError(f"{p}: not a trace file (expected {', '.join(SUFFIXES)})")
        return [p]
    if not os.access(p, os.R_OK | os.X_OK):
        raise TraceError(f"{p}: cannot read the directory")
    if is_report(p):
        raise TraceError(f"{p}: a replay report, not a trace")
    files = []
    for root, dirs, names in os.walk(p, onerror=_walk_error):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")) and not is_report(Path(root) / d))
        for name in sorted(names):
            if name.startswith((".", "_")) or name in RESERVED:
                continue
            f = Path(root) / name
            if f.suffix not in SUFFIXES:
                raise TraceError(f"{f}: not a trace file (expected {', '.join(SUFFIXES)})")
            files.append(f)
    if not files:
        raise TraceError(f"{p}: no trace files")
    return files


def torn(line: str) -> bool:
    """A last line without its newline is torn (left out) unless it is a whole record."""
    try:
        return not isinstance(json.loads(line), dict)
    except ValueError:
        return True


def torn_tail(path: str | os.PathLike, most: int = 1 << 20) -> str | None:
    """The torn last line of JSON Lines file ``path`` (no newline at the end and not a record:
    what a recorder killed mid-write leaves; its last ``most`` bytes at most), or None when the
    file ends whole. Reads only the file's end. Every JSON Lines reader (traces, recordings)
    leaves such a line out; the commands say so."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return None
        f.seek(max(0, size - most))
        end = f.read()
    if end.endswith(b"\n"):
        return None
    text = end[end.rfind(b"\n") + 1:].decode("utf-8", "replace")
    return text if torn(text) else None


EXPECTED_TRACE = "expected a coordinator trace (spec/trace-format.md: what simulate, scenario --trace and serve " \
                 "--trace write)"


def check_jsonl_head(path: str | os.PathLike) -> None:
    """The first record of a JSON Lines trace file is a trace record, else TraceError naming
    the file and what was expected (a recording of ``groupcoord record``, read by ``groupcoord
    verify``, is told apart); one line read, so it can run before anything starts."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            if not line.endswith("\n"):
                return  # a torn last line: the readers say so
            try:
                trace.parse_record(line, f"{path}:{n}")
            except TraceError as e:
                try:
                    head = json.loads(line)
                except ValueError:
                    head = None
                if isinstance(head, dict) and {"api", "recv_us", "request"} <= set(head):
                    raise TraceError(f"{path}: {EXPECTED_TRACE}; this is a recording of groupcoord record, "
                                     f"which groupcoord verify reads") from None
                raise TraceError(f"{path}: {EXPECTED_TRACE}; line {n}: {str(e).split(': ', 1)[-1]}") from None
            return


def _walk_error(e: OSError) -> None:
    raise TraceError(f"{e.filename}: cannot read the directory: {e.strerror}")


@attrs.define
class Recording:
    """One recording of a trace: the files under one ``meta.json`` (or, without any, under
    the trace's path), read with that manifest. ``name``: the directory holding the manifest
    (a file trace: the file)."""

    name: str
    files: list
    meta: dict
    manifest: Path | None  # the meta.json read; None when there is none and the defaults apply

    @property
    def scope(self) -> str:
        return self.meta.get("scope", GROUP)


def recordings(path: str | os.PathLike) -> list[Recording]:
    """A trace split into its recordings: each trace file belongs to the nearest directory,
    from its own up to ``path``, that holds a ``meta.json`` (files under none belong to
    ``path`` with the defaults). A trace file given alone is one recording, read with the
    ``meta.json`` beside it. Each recording is read with one format; TraceError for any
    problem found without reading records (no files, a foreign file, a bad manifest)."""
    p = Path(path)
    files = trace_files(p)
    if p.is_file():
        where = manifest_file(p)
        found = [(str(p), files)]
        manifests = {str(p): where if where.exists() else None}
    else:
        by_root: dict[Path, list] = {}
        has_manifest: dict[Path, bool] = {}
        for f in files:
            root = p
            d = f.parent
            while True:
                if d not in has_manifest:
                    has_manifest[d] = (d / MANIFEST).is_file()
                if has_manifest[d]:
                    root = d
                    break
                if d == p or p not in d.parents:
                    break
                d = d.parent
            by_root.setdefault(root, []).append(f)
        found = [(str(root), fs) for root, fs in sorted(by_root.items())]
        manifests = {str(root): (root / MANIFEST) if has_manifest.get(root) else None for root in by_root}
    out = []
    for name, fs in found:
        manifest = manifests[name]
        meta = read_manifest(manifest.parent) if manifest is not None else default_manifest()
        trace_format(name, fs)
        out.append(Recording(name, fs, meta, manifest))
    return out


def file_format(path: Path) -> str:
    return SUFFIXES[path.suffix]


def trace_format(path: str | os.PathLike, files: list[Path] | None = None) -> str:
    """'parquet' or 'jsonl' for a trace (of its ``files`` when already listed); TraceError
    when it mixes both."""
    formats = {file_format(f) for f in (trace_files(path) if files is None else files)}
    if len(formats) > 1:
        raise TraceError(f"{path}: mixes JSON Lines and Parquet files")
    return formats.pop()


# ------------------------------------------------------------------ writing


def write_parquet(path: str | os.PathLike, columns: TraceColumns, row_group_size: int = 256 * 1024) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = len(columns)
    table = pa.table({
        "v": pa.array([trace.VERSION] * n, pa.int32()),
        "group_id": pa.array(columns.group_id, pa.string()),
        "partition": pa.array(columns.partition, pa.int32()),
        "seq": pa.array(columns.seq, pa.int64()),
        "ts_ms": pa.array(columns.ts_ms, pa.int64()),
        "dir": pa.array(columns.dir, pa.string()),
        "type": pa.array(columns.type, pa.string()),
        "data": pa.array(columns.data, pa.string()),
    }, schema=arrow_schema())
    pq.write_table(table, str(path), row_group_size=row_group_size, compression="snappy")


def write_jsonl(path: str | os.PathLike, columns: TraceColumns) -> None:
    with open(path, "w", encoding="ascii") as f:
        for line in columns.lines():
            f.write(line)
            f.write("\n")


def write_columns(path: str | os.PathLike, columns: TraceColumns) -> None:
    fmt = SUFFIXES.get(Path(path).suffix)
    if fmt == "parquet":
        write_parquet(path, columns)
    elif fmt == "jsonl":
        write_jsonl(path, columns)
    else:
        raise TraceError(f"{path}: unknown trace file suffix (expected {', '.join(SUFFIXES)})")


def columns_from_records(records) -> TraceColumns:
    """Record dicts (``trace.Recorder`` output) as columns with canonical ``data`` strings."""
    cols = TraceColumns()
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    for r in records:
        data = r["data"] if isinstance(r["data"], str) else dumps(r["data"])
        cols.append(r["group_id"], r["partition"], r["seq"], r["ts_ms"], r["dir"], r["type"], data)
    return cols


class TraceWriter:
    """Appends records to one trace file as they come (for adapters such as the server's
    ``--trace``): JSON Lines are written line by line; Parquet is buffered and written in
    row groups, so close() it. Write ``meta.json`` beside it with ``write_manifest``."""

    def __init__(self, path: str | os.PathLike, flush_rows: int = 100_000) -> None:
        self.path = Path(path)
        self.format = SUFFIXES.get(self.path.suffix)
        if self.format is None:
            raise TraceError(f"{path}: unknown trace file suffix (expected {', '.join(SUFFIXES)})")
        self.flush_rows = flush_rows
        self._columns = TraceColumns()
        self._file = open(self.path, "w", encoding="ascii") if self.format == "jsonl" else None
        self._parquet = None

    def write(self, records) -> None:
        """Record dicts (``trace.Recorder.records`` output) or a TraceColumns."""
        cols = records if isinstance(records, TraceColumns) else columns_from_records(records)
        if self._file is not None:
            for line in cols.lines():
                self._file.write(line + "\n")
            return
        self._columns.extend(cols)
        if len(self._columns) >= self.flush_rows:
            self._flush()

    def flush(self) -> None:
        """What is written so far reaches the file (JSON Lines; Parquet waits for ``close``)."""
        if self._file is not None:
            self._file.flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not len(self._columns):
            return
        cols, n = self._columns, len(self._columns)
        table = pa.table({
            "v": pa.array([trace.VERSION] * n, pa.int32()), "group_id": pa.array(cols.group_id, pa.string()),
            "partition": pa.array(cols.partition, pa.int32()), "seq": pa.array(cols.seq, pa.int64()),
            "ts_ms": pa.array(cols.ts_ms, pa.int64()), "dir": pa.array(cols.dir, pa.string()),
            "type": pa.array(cols.type, pa.string()), "data": pa.array(cols.data, pa.string())},
            schema=arrow_schema())
        if self._parquet is None:
            self._parquet = pq.ParquetWriter(str(self.path), arrow_schema(), compression="snappy")
        self._parquet.write_table(table)
        self._columns = TraceColumns()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            return
        self._flush()
        if self._parquet is None:
            import pyarrow.parquet as pq

            pq.ParquetWriter(str(self.path), arrow_schema()).close()
        else:
            self._parquet.close()
        self._parquet = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ------------------------------------------------------------------ reading

_dumps = json.JSONEncoder(separators=(",", ":")).encode


def parse_line(line: str, where: str) -> tuple:
    """One JSON Lines record as a row (v, group_id, partition, seq, ts_ms, dir, type, data)
    with ``data`` as canonical JSON; TraceError naming ``where`` otherwise."""
    record = trace.parse_record(line, where)
    if not isinstance(record["data"], dict):
        raise TraceError(f"{where}: data must be an object")
    if record["group_id"] is not None and not isinstance(record["group_id"], str):
        raise TraceError(f"{where}: group_id must be a string or null")
    if record["partition"] is not None and type(record["partition"]) is not int:
        raise TraceError(f"{where}: partition must be an integer or null")
    if type(record["seq"]) is not int or type(record["ts_ms"]) is not int:
        raise TraceError(f"{where}: seq and ts_ms must be integers")
    return (record["v"], record["group_id"], record["partition"], record["seq"], record["ts_ms"],
            record["dir"], record["type"], _dumps(record["data"]))


def _check_parquet_schema(path: Path, schema) -> None:
    import pyarrow as pa

    want = {f.name: f.type for f in arrow_schema()}
    have = {f.name: f.type for f in schema}
    missing = [n for n in want if n not in have]
    if missing:
        raise TraceError(f"{path}: not a trace: missing columns {missing}")
    extra = [n for n in have if n not in want]
    if extra:
        raise TraceError(f"{path}: unknown columns {extra}")
    for name, t in want.items():
        h = have[name]
        ok = (h == t or (pa.types.is_integer(t) and pa.types.is_integer(h))
              or (pa.types.is_string(t) and (pa.types.is_string(h) or pa.types.is_large_string(h))))
        if not ok:
            raise TraceError(f"{path}: column {name} has type {h}, expected {t}")


def check_parquet_file(path: str | os.PathLike) -> None:
    """TraceError unless ``path`` is a Parquet file with the trace schema (reads the footer)."""
    import pyarrow.parquet as pq

    try:
        schema = pq.ParquetFile(str(path)).schema_arrow
    except Exception as e:
        raise TraceError(f"{path}: not a Parquet file: {e}") from None
    _check_parquet_schema(Path(path), schema)


def iter_batches(path: str | os.PathLike, batch_rows: int = 65_536, strict: bool = True
                 ) -> Iterator[dict[str, list]]:
    """Column batches (lists) of every record of a trace, each row with its ``file`` and
    ``line`` (1-based; the row number in Parquet). JSON Lines lines are validated: with
    ``strict`` a bad line raises TraceError, otherwise it comes as a row of type
    ``MALFORMED_ROW`` whose ``data`` holds the error, so a replay reports it as a finding."""
    for f in trace_files(path):
        if file_format(f) == "parquet":
            yield from _parquet_batches(f, batch_rows)
        else:
            yield from _jsonl_batches(f, batch_rows, strict)


def _parquet_batches(f: Path, batch_rows: int):
    import pyarrow.parquet as pq

    check_parquet_file(f)
    pf = pq.ParquetFile(str(f))
    row = 1
    name = str(f)
    for batch in pf.iter_batches(batch_size=batch_rows, columns=list(COLUMNS)):
        cols = {n: batch.column(n).to_pylist() for n in COLUMNS}
        n = batch.num_rows
        cols["file"] = [name] * n
        cols["line"] = list(range(row, row + n))
        row += n
        yield cols


def _jsonl_batches(f: Path, batch_rows: int, strict: bool):
    name = str(f)
    cols = _empty()
    with open(f, encoding="utf-8", errors="strict") as fh:
        try:
            for number, line in enumerate(fh, start=1):
                if not line.strip() or (not line.endswith("\n") and torn(line)):  # torn: left out, said up front
                    continue
                where = f"{name}:{number}"
                try:
                    row = parse_line(line, where)
                except TraceError as e:
                    if strict:
                        raise
                    row = (trace.VERSION, *_placement(line), 0, "in", MALFORMED_ROW, str(e))
                for key, value in zip(COLUMNS, row):
                    cols[key].append(value)
                cols["file"].append(name)
                cols["line"].append(number)
                if len(cols["seq"]) >= batch_rows:
                    yield cols
                    cols = _empty()
        except UnicodeDecodeError as e:
            raise TraceError(f"{name}: not UTF-8 text: {e}") from None
    if cols["seq"]:
        yield cols


_GROUP_FIELD = re.compile(r'"group_id"\s*:\s*("(?:[^"\\]|\\.)*")')
_SEQ_FIELD = re.compile(r'"seq"\s*:\s*(-?\d+)\s*[,}]')


def torn_group(text: str) -> str | None:
    """The group a torn line was about, as far as its text tells (the first ``group_id``)."""
    found = _GROUP_FIELD.search(text)
    try:
        return json.loads(found.group(1)) if found else None
    except ValueError:
        return None


def _placement(line: str) -> tuple:
    """(group_id, partition, seq) of a bad line, so the bad record is reported in its group,
    in its place: read from the JSON, or from the text of a line that is not JSON (a
    truncated line keeps its first fields). A group without a usable seq gets -1: the bad
    record comes first in its group. (None, None, -1) when the group cannot be told."""
    try:
        raw = json.loads(line)
    except ValueError:
        raw = None
    if raw is None:
        head = line.split('"data"', 1)[0]  # the record's own fields, not the event's
        group, seq = _GROUP_FIELD.search(head), _SEQ_FIELD.search(head)
        try:
            gid = json.loads(group.group(1)) if group else None
        except ValueError:
            gid = None
        return gid, None, int(seq.group(1)) if gid is not None and seq else -1
    if not isinstance(raw, dict):
        return None, None, -1
    gid, seq, part = raw.get("group_id"), raw.get("seq"), raw.get("partition")
    if gid is not None and not isinstance(gid, str):
        return None, None, -1
    return gid, part if type(part) is int else None, seq if type(seq) is int else -1


def _empty() -> dict[str, list]:
    return {n: [] for n in (*COLUMNS, "file", "line")}


def read_records(path: str | os.PathLike, group_id: str | None = None) -> Iterator[dict]:
    """Every record of a trace as a dict (``data`` decoded), optionally one group's only."""
    for f in trace_files(path):
        if file_format(f) == "parquet" and group_id is not None:
            batches = _parquet_group(f, group_id)
        else:
            batches = _parquet_batches(f, 65_536) if file_format(f) == "parquet" else _jsonl_batches(f, 65_536, True)
        for cols in batches:
            for i in range(len(cols["seq"])):
                if group_id is not None and cols["group_id"][i] != group_id:
                    continue
                record = {n: cols[n][i] for n in COLUMNS}
                record["data"] = json.loads(record["data"])
                yield record


def _parquet_group(f: Path, group_id: str):
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(str(f))
    _check_parquet_schema(f, pf.schema_arrow)
    table = pq.read_table(str(f), columns=list(COLUMNS), filters=[("group_id", "=", group_id)])
    if table.num_rows:
        cols = {n: table.column(n).to_pylist() for n in COLUMNS}
        cols["file"] = [str(f)] * table.num_rows
        cols["line"] = [None] * table.num_rows
        yield cols


def group_ids(path: str | os.PathLike, limit: int | None = None, files: list | None = None) -> list[str]:
    """Distinct group ids of a trace, or of its ``files`` (reads only the group_id column of
    Parquet files)."""
    seen: dict[str, None] = {}
    for f in (trace_files(path) if files is None else files):
        if file_format(f) == "parquet":
            import pyarrow.compute as pc
            import pyarrow.parquet as pq

            column = pq.read_table(str(f), columns=["group_id"]).column("group_id")
            values = pc.unique(column).to_pylist()
        else:
            values = [c for cols in _jsonl_batches(f, 65_536, True) for c in cols["group_id"]]
        for v in values:
            if v is not None:
                seen.setdefault(v, None)
        if limit is not None and len(seen) >= limit:
            break
    return list(seen)[:limit] if limit is not None else list(seen)


class InstanceRecorder:
    """The one writer of a live coordinator's recording: a Driver ``observer``, or any
    adapter's per-event hook (the server's ``--trace``), writing what one shared coordinator
    does as an instance-scoped trace (``trace.Recorder`` records) with its ``meta.json``::

        rec = InstanceRecorder(out_dir, config=config)
        driver = Driver(config, observer=rec)
        ...
        rec.close()

    ``path`` ending in a trace suffix is the file itself; anything else is a directory
    (created) that gets ``name``. ``meta.json`` beside the file is written at once (a recording
    cut short by a crash still says how to replay it) and again on ``close()`` (with
    ``config`` as it is then)."""

    def __init__(self, path: str | os.PathLike, name: str = "recording.jsonl",
                 config: CoordinatorConfig | None = None) -> None:
        target = Path(path)
        file = target if target.suffix in SUFFIXES else target / name
        self.directory = file.parent
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config = config or CoordinatorConfig()
        self.recorder = trace.Recorder()
        write_manifest(self.directory, scope=INSTANCE, outputs=True, config=self.config)
        self.writer = TraceWriter(file)

    @property
    def path(self) -> Path:
        return self.writer.path

    def __call__(self, event, commands) -> None:
        self.writer.write(self.recorder.records(event, commands))

    observe = __call__

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
        write_manifest(self.directory, scope=INSTANCE, outputs=True, config=self.config)
