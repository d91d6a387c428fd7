"""Durable storage on SQLite: the coordinator's records, compacted by Kafka's record keys.

Each offsets-topic partition is a set of rows keyed like ``__consumer_offsets`` keys its
records: the row's key and value are Kafka's own record key and value bytes
(``records``: a group's metadata by group id; an offset by group, topic and partition; a
consumer group's records by group, and member or regular expression, as Kafka keys them),
the same bytes the broker-backed storage writes. A newer record for a key replaces the older
one (compaction); a tombstone deletes it. ``load`` returns the surviving records in the order
they were written, which is what the core's load path replays.

Durability: WAL journal with ``synchronous=FULL``, so a transaction is on disk (the WAL
fsynced) before its COMMIT returns; a write is acknowledged to the core only after that.
One writer thread commits batches of queued appends in one transaction each (group commit):
many concurrent commits cost one fsync. The appends of one event-loop turn reach the writer
together (one transaction per turn at most), and the outcomes go back in one call (batches
committed while the loop has not yet taken earlier outcomes share its wake-up). A crash at any moment leaves either the whole
transaction or none of it.

Failures surface as Kafka errors the core already translates: a full disk, an I/O error or
a read-only database fail the write with KAFKA_STORAGE_ERROR (clients see NOT_COORDINATOR);
an unreadable or corrupt file is refused at start-up with a clear StorageOpenError.

One owner per data directory: the store holds an exclusive lock on ``DIR/.lock`` (``dirlock``)
from before the database is opened until it is closed; a second store on the directory, in this
process or another, is refused with a StorageOpenError naming the owner's process id.

Schema version 2 (this layout). A version 1 store (keys and values as JSON text) is converted
in one transaction when it is opened.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import sqlite3
import threading
from pathlib import Path

from groupcoord.adapters.storage import records as fmt
from groupcoord.adapters.storage.dirlock import DataDirLock
from groupcoord.adapters.storage.interface import StorageError, StorageOpenError
from groupcoord.core import trace
from groupcoord.core.errors import Error

SCHEMA_VERSION = 2
DB_NAME = "groupcoord.sqlite3"
_CREATE = ("CREATE TABLE IF NOT EXISTS {table} (partition INTEGER NOT NULL, key BLOB NOT NULL, "
           "seq INTEGER NOT NULL, value BLOB NOT NULL, PRIMARY KEY (partition, key))")



class SqliteStorage:
    name = "sqlite"
    durable = True

    def __init__(self, data_dir: str | os.PathLike, batch_max: int = 1000, max_bytes: int | None = None) -> None:
        """``max_bytes`` caps the database (a quota): writes beyond it fail like a full disk."""
        self.path = (Path(data_dir) / DB_NAME).absolute()
        self._batch_max = batch_max
        try:
            Path(data_dir).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageOpenError(f"cannot create data directory {data_dir}: {e.strerror}") from None
        if not os.access(data_dir, os.W_OK | os.X_OK):
            raise StorageOpenError(f"data directory {data_dir} is not writable")
        self._lock = DataDirLock(data_dir)  # one owner per directory, before the database is touched
        try:
            self._db = self._open(self.path)
            if max_bytes is not None:
                page_size = self._db.execute("PRAGMA page_size").fetchone()[0]
                self._db.execute(f"PRAGMA max_page_count = {max(1, max_bytes // page_size)}")
            self._seq = self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM records").fetchone()[0]
        except BaseException:
            if hasattr(self, "_db"):
                self._db.close()
            self._lock.release()
            raise
        self._queue: queue.Queue = queue.Queue()  # lists of appends, barriers, None to stop
        self._turn: list = []  # this loop turn's appends, not yet handed to the writer
        self._outcomes: dict = {}  # loop -> [(futures, error, detail)] committed, not yet settled
        self._outcomes_lock = threading.Lock()
        self._last_error: str | None = None
        self._closed = False
        self.transactions = self.records_written = 0  # committed by the writer (for benchmarks)
        self._thread = threading.Thread(target=self._writer, name="sqlite-writer", daemon=True)
        self._thread.start()

    # --- opening ---------------------------------------------------------------------

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
            check = db.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise StorageOpenError(f"{path} is corrupt: {check}")
            row = db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
            if row is None:
                db.execute(_CREATE.format(table="records"))
                db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif row[0] == "1":
                _convert_v1(db, path)
            elif row[0] != str(SCHEMA_VERSION):
                raise StorageOpenError(f"{path}: schema version {row[0]}, this groupcoord reads {SCHEMA_VERSION}")
            db.execute("CREATE INDEX IF NOT EXISTS records_by_seq ON records (partition, seq)")
            db.execute("CREATE INDEX IF NOT EXISTS records_seq ON records (seq)")
            return db
        except sqlite3.DatabaseError as e:
            raise StorageOpenError(f"{path} is not a usable groupcoord database: {e}") from None

    # --- the Storage interface ---------------------------------------------------------

    async def load(self, partition: int) -> tuple:
        return self.records(partition)

    def records(self, partition: int) -> tuple:
        rows = self._db.execute("SELECT key, value FROM records WHERE partition = ? ORDER BY seq", (partition,))
        decode = fmt.decode
        try:
            return tuple(decode(key, value) for key, value in rows)
        except (fmt.FormatError, TypeError, UnicodeDecodeError) as e:
            raise StorageOpenError(f"{self.path}: unreadable record in partition {partition}: {e}") from None

    def append(self, partition: int, records: tuple) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if self._closed:
            future.set_exception(StorageError(Error.NOT_LEADER_OR_FOLLOWER))
            return future
        try:
            # Encoded here, so a record the format cannot hold fails its own write (at once),
            # not the transaction it would share with others, nor the writer thread.
            encode_key, encode_value = fmt.encode_key, fmt.encode_value
            rows = [(encode_key(r), encode_value(r)) for r in records]
        except Exception as e:  # any failure to encode is this write's failure
            future.set_exception(StorageError(Error.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}", level="error"))
            return future
        # Appends of one loop turn go to the writer as one item: one transaction (one
        # fsync) per turn at most, however quickly the previous transaction finished.
        if not self._turn:
            loop.call_soon(self._hand_over_turn)
        self._turn.append((loop, future, partition, rows))
        return future

    def _hand_over_turn(self) -> None:
        turn, self._turn = self._turn, []
        if turn:
            self._queue.put(turn)

    async def flush(self, partitions: set[int] | None = None, timeout: float | None = None) -> bool:
        """Wait until every append made so far has its outcome (a barrier through the writer
        queue). Returns False if that took longer than ``timeout``."""
        if self._closed:
            return True
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._hand_over_turn()  # the barrier comes after every append made so far
        self._queue.put([(loop, future, None, ())])
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            return False
        except StorageError:
            pass  # the barrier shared a batch with a failed write: that write has its outcome too
        return True

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._hand_over_turn()  # appends already accepted are written before the writer stops
            self._queue.put(None)
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join)
            self._db.close()
            self._lock.release()

    # --- the writer thread -------------------------------------------------------------------

    def _writer(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = list(item)
            while len(batch) < self._batch_max:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)
                    break
                batch.extend(nxt)
            try:
                error = self._commit(batch)
            except Exception as e:  # the writer outlives any failure: its writes get an outcome
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # no transaction was open
                self._last_error = f"{self.path}: {type(e).__name__}: {e}"
                error = Error.KAFKA_STORAGE_ERROR
            by_loop: dict = {}
            for loop, future, _, _ in batch:
                by_loop.setdefault(loop, []).append(future)
            for loop, futures in by_loop.items():
                self._hand_back(loop, futures, error, self._last_error)

    def _hand_back(self, loop: asyncio.AbstractEventLoop, futures: list, error: Error | None,
                   detail: str | None) -> None:
        """Outcomes go to the loop in commit order; the loop is woken only if the outcomes it
        was woken for are all taken (a busy loop would otherwise find its wake-up pipe full of
        one byte per batch)."""
        with self._outcomes_lock:
            waiting = self._outcomes.setdefault(loop, [])
            wake = not waiting
            waiting.append((futures, error, detail))
        if wake:
            loop.call_soon_threadsafe(self._settle_outcomes, loop)

    def _settle_outcomes(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._outcomes_lock:
            outcomes = self._outcomes.pop(loop, [])
        for futures, error, detail in outcomes:
            for future in futures:
                _settle(future, error, detail)

    def _commit(self, batch: list) -> Error | None:
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            seq = self._seq
            upserts: list = []
            for _, _, partition, rows in batch:
                for key, value in rows:  # Kafka's key and value bytes (a null value: a tombstone)
                    seq += 1
                    if value is None:
                        if upserts:  # keep the order: what came before the tombstone first
                            db.executemany(_UPSERT, upserts)
                            upserts = []
                        db.execute("DELETE FROM records WHERE partition = ? AND key = ?", (partition, key))
                    else:
                        upserts.append((partition, key, seq, value))
            if upserts:
                db.executemany(_UPSERT, upserts)
            db.execute("COMMIT")
            self.records_written += seq - self._seq
            self.transactions += 1
            self._seq = seq
            return None
        except sqlite3.Error as e:
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            # A full disk, an I/O error or a read-only file: Kafka reports a storage error
            # for the log directory, which the coordinator answers as NOT_COORDINATOR.
            self._last_error = f"{self.path}: {type(e).__name__}: {e}"
            return Error.KAFKA_STORAGE_ERROR


_UPSERT = ("INSERT INTO records (partition, key, seq, value) VALUES (?, ?, ?, ?) "
           "ON CONFLICT (partition, key) DO UPDATE SET seq = excluded.seq, value = excluded.value")


def _convert_v1(db: sqlite3.Connection, path: Path) -> None:
    """Schema 1 (JSON text keys and values) -> 2 (Kafka's record bytes), in one transaction."""
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute(_CREATE.format(table="records_v2"))
        rows = db.execute("SELECT partition, seq, value FROM records ORDER BY seq").fetchall()
        converted = []
        for partition, seq, value in rows:
            try:
                record = trace.decode(json.loads(value))
            except (ValueError, trace.TraceError) as e:
                raise StorageOpenError(f"{path}: unreadable record in partition {partition}: {e}") from None
            converted.append((partition, fmt.encode_key(record), seq, fmt.encode_value(record)))
        db.executemany("INSERT INTO records_v2 (partition, key, seq, value) VALUES (?, ?, ?, ?)", converted)
        db.execute("DROP TABLE records")
        db.execute("ALTER TABLE records_v2 RENAME TO records")
        db.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'", (str(SCHEMA_VERSION),))
        db.execute("COMMIT")
    except BaseException:
        try:
            db.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        raise


def _settle(future: asyncio.Future, error: Error | None, detail: str | None = None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(StorageError(error, detail, level="error"))

