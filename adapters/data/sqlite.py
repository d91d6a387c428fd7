"""The partition log's durable copy: ``DIR/data.sqlite3`` beside the group records' store in
the data directory ``groupcoord serve`` uses (whose one owner, ``storage.dirlock``, the group
store holds; the log is opened after it, so the directory is already this process's).

Tables: ``batches`` (topic, partition, base offset -> the batch's bytes as the log keeps them),
``starts`` (each partition's log start), ``topics`` (the topics created by CreateTopics or
auto-creation, with their ``retention.ms``) and ``meta`` (the first producer id not yet handed
out). WAL journal with ``synchronous=FULL``: a transaction is on disk before its COMMIT
returns, and an append is acknowledged (``done``) only after that, so an ``acks=all``
produce that was answered survives a SIGKILL. One writer thread commits what is queued in one
transaction (group commit); outcomes go back to the event loop in commit order.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from pathlib import Path
from typing import Callable

from groupcoord.adapters.storage.interface import StorageOpenError

DB_NAME = "data.sqlite3"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS batches (topic TEXT NOT NULL, partition INTEGER NOT NULL, "
    "base_offset INTEGER NOT NULL, last_offset INTEGER NOT NULL, data BLOB NOT NULL, "
    "PRIMARY KEY (topic, partition, base_offset))",
    "CREATE TABLE IF NOT EXISTS starts (topic TEXT NOT NULL, partition INTEGER NOT NULL, "
    "log_start INTEGER NOT NULL, PRIMARY KEY (topic, partition))",
    "CREATE TABLE IF NOT EXISTS topics (name TEXT PRIMARY KEY, partitions INTEGER NOT NULL, retention_ms INTEGER)",
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
)
_BATCH_MAX = 1000  # queued writes per transaction at most


class SqliteLogBackend:
    name = "sqlite"
    durable = True

    def __init__(self, data_dir: str | Path, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.path = (Path(data_dir) / DB_NAME).absolute()
        self.loop = loop
        self.last_error: str | None = None
        try:
            Path(data_dir).mkdir(parents=True, exist_ok=True)
            db = self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            for statement in _SCHEMA:
                db.execute(statement)
        except (sqlite3.DatabaseError, OSError) as e:
            raise StorageOpenError(f"{self.path} is not a usable groupcoord data log: {e}") from None
        self._queue: queue.Queue = queue.Queue()
        self._closed = False
        self._thread = threading.Thread(target=self._writer, name="data-log-writer", daemon=True)
        self._thread.start()

    def load(self) -> dict:
        db = self._db
        try:
            topics = {name: {"partitions": n, **({"retention_ms": r} if r is not None else {})}
                      for name, n, r in db.execute("SELECT name, partitions, retention_ms FROM topics")}
            batches = db.execute("SELECT topic, partition, data FROM batches ORDER BY topic, partition, base_offset")
            batches = [(t, p, bytes(d)) for t, p, d in batches]
            starts = {(t, p): s for t, p, s in db.execute("SELECT topic, partition, log_start FROM starts")}
            row = db.execute("SELECT value FROM meta WHERE name = 'next_producer_id'").fetchone()
        except sqlite3.DatabaseError as e:
            raise StorageOpenError(f"{self.path}: unreadable data log: {e}") from None
        return {"topics": topics, "batches": batches, "starts": starts, "next_producer_id": row[0] if row else 0}

    def reserve_producer_ids(self, upto: int) -> None:
        """Committed before the first id of the block is handed out (rare: one per 1000)."""
        self._queue.put(([("producer_ids", upto)], None))
        done = threading.Event()
        self._queue.put(([], lambda error: done.set()))
        done.wait(30)

    def write(self, op: tuple, done: Callable[[int | None], None]) -> None:
        if self._closed:
            done(56)  # KAFKA_STORAGE_ERROR
            return
        loop = self.loop or asyncio.get_running_loop()
        self._queue.put(([op], lambda error: loop.call_soon_threadsafe(done, error)))

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join)
            self._db.close()

    def close_now(self) -> None:
        """Close from a thread without an event loop (tests)."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join()
            self._db.close()

    # --- the writer thread --------------------------------------------------------------------

    def _writer(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            items = [item]
            while len(items) < _BATCH_MAX:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)
                    break
                items.append(nxt)
            error = self._commit([op for ops, _ in items for op in ops])
            for _, done in items:
                if done is not None:
                    done(error)

    def _commit(self, ops: list) -> int | None:
        if not ops:
            return None
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            for op in ops:
                kind = op[0]
                if kind == "batch":
                    _, topic, index, stored = op
                    db.execute("INSERT OR REPLACE INTO batches VALUES (?, ?, ?, ?, ?)",
                               (topic, index, stored.base_offset, stored.last_offset, stored.data))
                elif kind == "start":
                    _, topic, index, start = op
                    db.execute("INSERT OR REPLACE INTO starts VALUES (?, ?, ?)", (topic, index, start))
                    db.execute("DELETE FROM batches WHERE topic = ? AND partition = ? AND last_offset < ?",
                               (topic, index, start))
                elif kind == "topic":
                    _, name, partitions, retention_ms = op
                    db.execute("INSERT OR IGNORE INTO topics VALUES (?, ?, ?)", (name, partitions, retention_ms))
                elif kind == "delete_topic":
                    for table, column in (("topics", "name"), ("batches", "topic"), ("starts", "topic")):
                        db.execute(f"DELETE FROM {table} WHERE {column} = ?", (op[1],))
                elif kind == "producer_ids":
                    db.execute("INSERT OR REPLACE INTO meta VALUES ('next_producer_id', ?)", (op[1],))
            db.execute("COMMIT")
            return None
        except sqlite3.Error as e:
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            self.last_error = f"{self.path}: {type(e).__name__}: {e}"
            return 56  # KAFKA_STORAGE_ERROR
