"""The SQLite store's layout: rows hold Kafka's own ``__consumer_offsets`` record bytes (the
same as the broker-backed storage writes), older stores are converted when opened, newer ones
refused."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

from groupcoord.adapters.storage import records as fmt
from groupcoord.adapters.storage.sqlite import DB_NAME, SqliteStorage, StorageOpenError
from groupcoord.core import trace
from groupcoord.core.commands import GroupMetadataRecord, MemberRecord, OffsetCommitRecord

RECORDS = (GroupMetadataRecord("g", "consumer", 2, "range", "m", 1000,
                               (MemberRecord("m", "i", "c", "/h", 300, 100, b"\x01", b"\x02"),)),
           OffsetCommitRecord("g", "t", 0, 42, 3, "meta", 1000),
           OffsetCommitRecord("g", "t", 1, 43, -1, "", 1000, 9000))


def test_rows_are_kafkas_record_keys_and_values(tmp_path):
    async def write():
        s = SqliteStorage(tmp_path)
        await s.append(4, RECORDS)
        await s.close()

    asyncio.run(write())
    rows = sqlite3.connect(tmp_path / DB_NAME).execute("SELECT partition, key, value FROM records ORDER BY seq").fetchall()
    assert rows == [(4, fmt.encode_key(r), fmt.encode_value(r)) for r in RECORDS]


def test_a_version_1_store_is_converted_when_opened(tmp_path):
    db = sqlite3.connect(tmp_path / DB_NAME)  # the layout of schema version 1: JSON text
    db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("CREATE TABLE records (partition INTEGER NOT NULL, key TEXT NOT NULL, seq INTEGER NOT NULL, "
               "value TEXT NOT NULL, PRIMARY KEY (partition, key))")
    db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    for seq, record in enumerate(RECORDS, start=1):
        db.execute("INSERT INTO records VALUES (?, ?, ?, ?)", (1, json.dumps(list(record.key)), seq,
                                                               json.dumps(trace.encode(record))))
    db.commit()
    db.close()

    async def read():
        s = SqliteStorage(tmp_path)
        try:
            return s.records(1), s._db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
        finally:
            await s.close()

    records, version = asyncio.run(read())
    # (as in Kafka, an offset with an explicit expiry is stored without its leader epoch)
    assert records == RECORDS and version == ("2",)


def test_a_newer_store_is_refused(tmp_path):
    asyncio.run(SqliteStorage(tmp_path).close())
    db = sqlite3.connect(tmp_path / DB_NAME)
    db.execute("UPDATE meta SET value = '3' WHERE name = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(StorageOpenError, match="schema version 3, this groupcoord reads 2"):
        SqliteStorage(tmp_path)


def test_a_large_batch_with_repeated_keys_and_tombstones_keeps_the_last_write_of_each_key(tmp_path):
    # 523 records in one batch cross every statement size (200, 40, 8, 1 rows); a key written
    # twice in one statement, or deleted between two writes, ends as its last write says.
    from groupcoord.core.commands import OffsetTombstone

    batch, model = [], {}
    for n in range(523):
        partition = n % 37
        if n % 50 == 49:
            batch.append(OffsetTombstone("g", "t", partition))
            model.pop(partition, None)
        else:
            batch.append(OffsetCommitRecord("g", "t", partition, n, -1, "", 1000))
            model[partition] = n

    async def write_and_read():
        s = SqliteStorage(tmp_path)
        await s.append(2, tuple(batch))
        await s.close()
        s = SqliteStorage(tmp_path)
        try:
            return s.records(2)
        finally:
            await s.close()

    records = asyncio.run(write_and_read())
    assert {r.partition: r.offset for r in records} == model and len(records) == len(model)
