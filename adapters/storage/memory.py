"""Storage for the server: where the coordinator's records (``__consumer_offsets``) go.

The interface is small so that a durable storage (SQLite, a Kafka broker) can replace the
in-memory one without touching the server:

* ``load(partition) -> records``: every record of the partition's successful writes, oldest
  first (compaction by record key allowed), awaited once per partition at start-up;
* ``append(partition, records) -> awaitable``: starts the write *now* (so writes of one
  partition are in storage in the order they were emitted) and completes when it is durable,
  raising ``StorageError(kafka_error)`` if it failed;
* ``close()``.

``MemoryStorage`` keeps everything in a dict and completes writes at once. It also has the
controls the conformance format needs (hold writes, fail the next, release held writes with
or without an error), used by tests through the server.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Protocol

from groupcoord.core.commands import OffsetTombstone
from groupcoord.core.errors import Error


class StorageError(Exception):
    """A failed write: ``error`` is the Kafka append error the core translates for clients;
    ``detail`` says what happened (for the log), ``level`` how loud the server logs it."""

    def __init__(self, error: Error, detail: str | None = None, level: str = "warning") -> None:
        super().__init__(error.name if detail is None else f"{error.name}: {detail}")
        self.error = error
        self.detail = detail
        self.level = level


class Storage(Protocol):
    name: str
    durable: bool

    async def load(self, partition: int) -> tuple: ...

    def append(self, partition: int, records: tuple) -> Awaitable[None]: ...

    async def close(self) -> None: ...


class MemoryStorage:
    """Records in memory, per partition; compacted by record key as it grows."""

    name = "memory"
    durable = False

    def __init__(self, compact_above: int = 10_000) -> None:
        self.log: dict[int, list] = {}
        self._compact_above = compact_above
        self._hold = False
        self._held: list[tuple[asyncio.Future, int, tuple]] = []
        self._fail_next: Error | None = None

    async def load(self, partition: int) -> tuple:
        return self.records(partition)

    def records(self, partition: int) -> tuple:
        return tuple(self.log.get(partition, ()))

    def append(self, partition: int, records: tuple) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        if self._hold:
            self._held.append((future, partition, records))
        elif self._fail_next is not None:
            error, self._fail_next = self._fail_next, None
            future.set_exception(StorageError(error))
        else:
            self._store(partition, records)
            future.set_result(None)
        return future

    def _store(self, partition: int, records: tuple) -> None:
        log = self.log.setdefault(partition, [])
        log.extend(records)
        if len(log) > self._compact_above:
            self.log[partition] = log = compact(log)
            self._compact_above = max(self._compact_above, 2 * len(log))

    async def close(self) -> None:
        self.discard_held()

    # --- controls (tests, the conformance format) --------------------------------------------

    def hold(self) -> None:
        """Writes from now on stay in flight until ``release``."""
        self._hold = True

    def fail_next(self, error: Error) -> None:
        self._fail_next = error

    def release(self, error: Error | None = None) -> None:
        """Complete every held write in order (or fail them all with ``error``); later writes
        succeed at once again."""
        self._hold = False
        held, self._held = self._held, []
        for future, partition, records in held:
            if future.done():
                continue
            if error is None or error is Error.NONE:
                self._store(partition, records)
                future.set_result(None)
            else:
                future.set_exception(StorageError(error))

    def discard_held(self) -> None:
        """Forget held writes (a failover: they never reach storage) and the controls."""
        for future, _p, _r in self._held:
            if not future.done():
                future.cancel()
        self._held = []
        self._hold = False
        self._fail_next = None


def compact(records: list) -> list:
    """Keep the last record per key, in the order of those last writes. An offset key whose
    last record is a tombstone is dropped entirely (nothing older is left for it to delete);
    group tombstones stay, because replaying one also forgets the group's older offsets."""
    last: dict[Any, Any] = {}
    for record in records:
        key = record.key
        last.pop(key, None)
        last[key] = record
    return [r for r in last.values() if type(r) is not OffsetTombstone]
