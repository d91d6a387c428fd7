"""The observed-trace format (spec/observed-trace.md): one record per request/response pair
of the group APIs, as ``groupcoord record`` saw them on the wire; its writer and reader.

A directory holds ``observed.jsonl`` (one JSON object per line, flushed line by line) or
``observed.parquet`` (the same columns, ``request``/``response`` as JSON text), and
``meta.json``. A Parquet file is only complete once closed, so while recording its rows go to
``observed.partial.jsonl`` (flushed the same way) and become ``observed.parquet`` at close: a
crash leaves the journal, which the reader takes as it is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from groupcoord.adapters.traces.trace_files import torn

FORMAT = "groupcoord-observed/1"
JSONL = "observed.jsonl"
PARQUET = "observed.parquet"
JOURNAL = "observed.partial.jsonl"
META = "meta.json"

RECORDED_APIS = ("FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit",
                 "OffsetFetch", "OffsetDelete", "DescribeGroups", "ListGroups", "DeleteGroups",
                 "ConsumerGroupHeartbeat", "ConsumerGroupDescribe")
# Metadata answers' topics (name, topic id, partition count, error), one JSON object a line
# (``pairing.metadata_record``): the topics image consumer groups are checked against
# (spec/verify.md). Its own file, whatever the format, so the pairs' file holds only pairs.
TOPICS = "topics.jsonl"
COLUMNS = ("conn", "broker", "recv_us", "send_us", "api", "api_key", "version", "correlation_id", "client_id",
           "request", "response", "open_until_us", "undecodable")


def jsonable(value: Any) -> Any:
    """The one conversion of what ``codec.to_fields`` gives that JSON has no type for: bytes
    as lowercase hex, anything else (UUIDs) as its ``str``."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return str(value)


def dumps(value: Any) -> str:
    return json.dumps(value, default=jsonable, separators=(",", ":"), ensure_ascii=False)


def observed(conn: int, broker: int, recv_us: int, send_us: int | None, api: str, api_key: int, version: int,
             correlation_id: int, client_id: str | None, request: dict, response: dict | None,
             open_until_us: int | None = None, undecodable: str | None = None) -> dict:
    """One record, its keys in the format's order. ``open_until_us``: for a request never
    answered, until when it was known to wait (its connection closed, or the recording ended).
    ``undecodable``: for a response that came but could not be decoded, its size and first bytes
    (``undecodable_text``)."""
    return {"conn": conn, "broker": broker, "recv_us": recv_us, "send_us": send_us, "api": api, "api_key": api_key,
            "version": version, "correlation_id": correlation_id, "client_id": client_id, "request": request,
            "response": response, "open_until_us": open_until_us, "undecodable": undecodable}


UNDECODABLE_PREFIX = 32  # bytes of an undecodable response kept (as hex)


def undecodable_text(frame: bytes) -> str:
    """A response frame (after its size prefix: correlation id, header, body) that could not
    be decoded, as a record keeps it: ``N bytes: HEX`` (the first bytes, ``…`` when cut)."""
    cut = "…" if len(frame) > UNDECODABLE_PREFIX else ""
    return f"{len(frame)} bytes: {bytes(frame[:UNDECODABLE_PREFIX]).hex()}{cut}"


class ObservedWriter:
    """Records to ``out_dir`` in ``fmt`` (``jsonl`` or ``parquet``), each flushed as written.
    Files of an earlier recording in the directory are replaced."""

    def __init__(self, out_dir: str | Path, fmt: str = "jsonl") -> None:
        if fmt not in ("jsonl", "parquet"):
            raise ValueError(f"unknown format {fmt!r}")
        self.dir = Path(out_dir)
        self.fmt = fmt
        self.dir.mkdir(parents=True, exist_ok=True)
        for name in (JSONL, PARQUET, JOURNAL, TOPICS):
            (self.dir / name).unlink(missing_ok=True)
        self.path = self.dir / (JSONL if fmt == "jsonl" else JOURNAL)
        self._file = open(self.path, "w", encoding="utf-8")
        self.count = 0
        self._topics = None  # TOPICS, opened at the first Metadata answer

    def write(self, record: dict) -> None:
        if record.get("api") == "Metadata":  # a topics record: to TOPICS, not counted as a pair
            if self._topics is None:
                self._topics = open(self.dir / TOPICS, "w", encoding="utf-8")
            self._topics.write(dumps(record) + "\n")
            self._topics.flush()
            return
        self._file.write(dumps(record) + "\n")
        self._file.flush()  # a crash loses at most the record being written
        self.count += 1

    def close(self) -> Path:
        """Close the file (Parquet: write it from the journal, then drop the journal); the
        path of the finished file."""
        if self._file.closed:
            return self.dir / (JSONL if self.fmt == "jsonl" else PARQUET)
        if self._topics is not None:
            self._topics.close()
        self._file.close()
        if self.fmt == "jsonl":
            return self.path
        from groupcoord.adapters.observe.parquet import write_parquet
        from groupcoord.adapters.traces.stopping import written

        target = self.dir / PARQUET
        with written(target) as tmp:  # the journal stays until the file is whole
            write_parquet(list(_json_lines(self.path)), tmp)
        self.path.unlink()
        return target


def write_meta(out_dir: str | Path, meta: dict) -> None:
    """``meta.json``, replaced whole (a reader never sees half of it)."""
    from groupcoord.adapters.traces.stopping import written

    with written(Path(out_dir) / META) as tmp:
        tmp.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


def read_meta(out_dir: str | Path) -> dict:
    return json.loads((Path(out_dir) / META).read_text(encoding="utf-8"))


def read_observed(out_dir: str | Path) -> list[dict]:
    """The records of a recording directory: ``observed.parquet``, else ``observed.jsonl``, else
    the journal a crashed Parquet recording left (a torn last line is left out)."""
    path, lines = source_file(out_dir)
    if lines:
        return list(_json_lines(path))
    from groupcoord.adapters.observe.parquet import read_parquet

    return read_parquet(path)


def _json_lines(path: Path) -> Iterator[dict]:
    """Each line's record; a line that is not one raises ValueError naming the file and line."""
    for _line, record in json_lines_with_text(path):
        yield record


def read_topics(out_dir: str | Path) -> list[dict]:
    """The topics records of a recording directory (``TOPICS``; none when it has no such file:
    a recording made before it, or one whose clients sent no Metadata request)."""
    path = Path(out_dir) / TOPICS
    if not path.exists():
        return []
    return [record for _line, record in json_lines_with_text(path)]


def source_file(out_dir: str | Path) -> tuple[Path, bool]:
    """The file ``read_observed`` reads in a recording directory, and whether it is JSON Lines."""
    d = Path(out_dir)
    for name in (PARQUET, JSONL, JOURNAL):
        if (d / name).exists():
            return d / name, name != PARQUET
    raise FileNotFoundError(f"{d}: no {JSONL}, {PARQUET} or {JOURNAL}")


def json_lines_with_text(path: Path) -> Iterator[tuple[str, dict]]:
    """Each line's text and record, as ``_json_lines`` reads them."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.endswith("\n") and torn(line):  # the record being written when the recorder died
                return
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{n}: not a record (a JSON object)")
            yield line, record

