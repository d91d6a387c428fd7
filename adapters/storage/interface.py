"""Storage for the server: where the coordinator's records (``__consumer_offsets``) go.

The interface is small so that a durable storage (SQLite, a Kafka broker) can replace the
in-memory one without touching the server:

* ``load(partition) -> records``: every record of the partition's successful writes, oldest
  first (compaction by record key allowed), awaited once per partition at start-up;
* ``append(partition, records) -> awaitable``: starts the write *now* (so writes of one
  partition are in storage in the order they were emitted) and completes when it is durable,
  raising ``StorageError(kafka_error)`` if it failed;
* ``close()``.

A store that cannot be opened or read raises ``StorageOpenError`` with the reason.
"""

from __future__ import annotations

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


class StorageOpenError(Exception):
    """The data directory or database cannot be used; the message says why and where."""


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
