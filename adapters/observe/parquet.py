"""Observed records as Parquet: the JSON Lines columns, ``request`` and ``response`` as JSON
text (their field sets differ by API and version, so no one nested type fits them all).
pyarrow is imported here only: JSON Lines recordings need nothing more than the standard
library."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from groupcoord.adapters.observe.trace import COLUMNS, dumps

SCHEMA = pa.schema([
    ("conn", pa.int32()), ("broker", pa.int32()), ("recv_us", pa.int64()), ("send_us", pa.int64()),
    ("api", pa.string()), ("api_key", pa.int16()), ("version", pa.int16()), ("correlation_id", pa.int32()),
    ("client_id", pa.string()), ("request", pa.string()), ("response", pa.string()), ("open_until_us", pa.int64()),
    ("undecodable", pa.string()),
])
_JSON_TEXT = ("request", "response")


def write_parquet(records: list[dict], path: Path) -> None:
    columns = {name: [r.get(name) for r in records] for name in COLUMNS}
    for name in _JSON_TEXT:
        columns[name] = [None if v is None else dumps(v) for v in columns[name]]
    pq.write_table(pa.table(columns, schema=SCHEMA), path)


def read_parquet(path: Path) -> list[dict]:
    rows = pq.read_table(path).to_pylist()
    for row in rows:
        for name in _JSON_TEXT:
            if row[name] is not None:
                row[name] = json.loads(row[name])
    return [{name: row.get(name) for name in COLUMNS} for row in rows]
