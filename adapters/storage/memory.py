"""Records in memory, per partition: the storage of tests, demos and embedders.

Writes complete at once, unless told otherwise: ``hold`` keeps them in flight until ``release``
(with or without an error), ``fail_next`` fails the next one; the conformance format and the
tests reach the write-dependent paths through these. ``store``/``records`` are the synchronous
side, for a caller that runs the coordinator without an event loop (runtime.Driver).
"""

from __future__ import annotations

import asyncio

from groupcoord.adapters.storage.interface import StorageError, compact
from groupcoord.core.errors import Error


class MemoryStorage:
    """Records in memory, per partition; each partition compacted by record key when it holds
    twice what survived its last compaction (at least ``compact_above`` records)."""

    name = "memory"
    durable = False

    def __init__(self, compact_above: int = 1_000) -> None:
        self.log: dict[int, list] = {}
        self._compact_min = compact_above
        self._compact_at: dict[int, int] = {}  # partition -> its log's length that triggers compaction
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
            self.store(partition, records)
            future.set_result(None)
        return future

    def store(self, partition: int, records) -> None:
        """Keep ``records`` now (no hold, no failure)."""
        log = self.log.setdefault(partition, [])
        log.extend(records)
        if len(log) > self._compact_at.get(partition, self._compact_min):
            # each partition at twice what survived its last compaction: memory stays within
            # twice the live records, and the cost per record stays constant
            self.log[partition] = log = compact(log)
            self._compact_at[partition] = max(self._compact_min, 2 * len(log))

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
                self.store(partition, records)
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
