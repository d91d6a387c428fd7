"""The partitions this server serves, loaded from storage and unloaded again.

Without an ownership protocol the server serves every partition from the start
(``load_all``). With one (``ownership.Ownership``, several servers sharing a broker-backed
storage) partitions come and go as it decides: ``assign_partitions`` marks each loading at
once (requests get COORDINATOR_LOAD_IN_PROGRESS) and reads it in the background,
``revoke_partitions`` unloads them and waits for their writes, ``fence`` drops everything
when ownership is lost. When a failed core is replaced (``core_loop``), ``reload`` loads the
failed instance's partitions into the new one the same way, each read once the writes already
sent for it have their outcomes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from groupcoord.adapters.storage.interface import Storage, StorageOpenError
from groupcoord.adapters.wire.core_loop import CoreLoop
from groupcoord.core import events as ev

_SETTLE_S = 30.0  # the longest a reload waits for the failed instance's writes to have their outcomes


class Partitions:
    def __init__(self, core: CoreLoop, storage: Storage, log: Any) -> None:
        self.core = core
        self.storage = storage
        self.log = log
        self.clock = core.clock  # the time of the core's events
        self.closing = False  # set by the server's shutdown: nothing more is loaded
        self._loads: dict[int, asyncio.Task] = {}  # partition -> its load in the background

    async def load_all(self) -> None:
        """Serve every partition (no ownership protocol): read each from storage, in turn."""
        for partition in range(self.core.config.offsets_topic_num_partitions):
            records = await self.storage.load(partition)
            self.core.dispatch(ev.LoadPartition(now_ms=self.clock.now_ms(), partition=partition, records=tuple(records)))
        self.log("info", "partitions_loaded", count=self.core.config.offsets_topic_num_partitions,
                 groups=len(self.core.coordinator.groups()))

    def assign_partitions(self, partitions: set[int], settle: bool = False) -> None:
        """Start serving ``partitions``: each is marked loading at once (requests get
        COORDINATOR_LOAD_IN_PROGRESS), read from storage in the background, then activated.
        ``settle``: read each only once the writes already sent for it have their outcomes."""
        for partition in sorted(partitions):
            if partition in self._loads or self.closing:
                continue
            self.core.dispatch(ev.LoadPartition(now_ms=self.clock.now_ms(), partition=partition, loading=True))
            self._loads[partition] = asyncio.get_running_loop().create_task(self._load_partition(partition, settle))

    def reload(self, partitions: set[int]) -> None:
        """A new coordinator instance replaces a failed one: load ``partitions`` (the failed
        one's) again, as ``assign_partitions`` does, once the failed instance's writes to them
        have their outcomes (a load under way for the failed instance starts over)."""
        for partition in partitions:
            task = self._loads.pop(partition, None)
            if task is not None:
                task.cancel()
        self.assign_partitions(partitions, settle=True)

    async def _load_partition(self, partition: int, settle: bool = False) -> None:
        backoff = 0.05
        loop = asyncio.get_running_loop()
        started = loop.time()
        self.log("info", "partition_loading", partition=partition)
        try:
            flush = getattr(self.storage, "flush", None) if settle else None
            if flush is not None:
                try:
                    settled = await flush({partition}, timeout=_SETTLE_S)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # the load below reads what the storage has
                    settled = True  # (told here)
                    self.log("warning", "partition_settle_failed", partition=partition, error=f"{type(e).__name__}: {e}")
                if not settled:
                    self.log("warning", "partition_settle_timeout", partition=partition, timeout_s=_SETTLE_S)
            while True:
                try:
                    records = await self.storage.load(partition)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # the broker is away: keep trying while the partition is ours
                    # (unreadable records: an error, and the partition stays loading; nothing is dropped)
                    self.log("error" if isinstance(e, StorageOpenError) else "warning", "partition_load_retry",
                             partition=partition, error=f"{type(e).__name__}: {e}", backoff_s=backoff)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
            if self._loads.get(partition) is not asyncio.current_task() or self.closing:
                return
            self.core.dispatch(ev.LoadPartition(now_ms=self.clock.now_ms(), partition=partition, records=tuple(records)))
            self.log("info", "partition_loaded", partition=partition, records=len(records),
                     groups=sum(1 for g in self.core.coordinator.groups().values() if g.partition == partition),
                     ms=round((loop.time() - started) * 1000))
        finally:
            if self._loads.get(partition) is asyncio.current_task():
                del self._loads[partition]

    async def revoke_partitions(self, partitions: set[int]) -> None:
        """Stop serving ``partitions`` (parked requests are answered NOT_COORDINATOR) and wait
        until every write already sent for them has its answer, so that the next owner's
        load sees them."""
        self.unload_partitions(partitions)
        flush = getattr(self.storage, "flush", None)
        if flush is not None:
            if not await flush(set(partitions)):
                self.log("warning", "revoke_flush_timeout", partitions=sorted(partitions))
        self.log("info", "partitions_revoked", partitions=sorted(partitions))

    def unload_partitions(self, partitions: set[int]) -> None:
        for partition in sorted(partitions):
            task = self._loads.pop(partition, None)
            if task is not None:
                task.cancel()
            if self.core.coordinator is not None and partition in self.core.coordinator.owned_partitions():
                self.core.dispatch(ev.UnloadPartition(now_ms=self.clock.now_ms(), partition=partition))

    def fence(self, reason: str) -> None:
        """Ownership is lost (the lease ran out, the broker forgot this member): unload everything now."""
        owned = set(self.core.coordinator.owned_partitions()) | set(self._loads) if self.core.coordinator else set(self._loads)
        self.log("warning", "fenced", reason=reason, partitions=sorted(owned))
        self.unload_partitions(owned)

    def stop(self) -> None:
        """Shutdown: cancel the loads under way and unload every partition."""
        for task in self._loads.values():
            task.cancel()
        self._loads.clear()
        self.core.unload_owned()
