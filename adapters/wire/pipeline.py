"""The storage pipeline: the core's writes go to the storage as they are emitted, and their
outcomes come back as core events in write order.

A write is started at once (``start``), so one partition's records reach the storage in the
order the core emitted them. Its outcome is fed back only when every earlier write has its
own (``drain``): the core sees completions in the order it asked for them, as Kafka's
replica manager answers appends of one partition in order. ``forget`` drops the writes in
flight when a new coordinator instance takes over (their outcomes belong to the old one).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Callable

from groupcoord.adapters.storage.interface import Storage, StorageError
from groupcoord.core import events as ev
from groupcoord.core.commands import Write
from groupcoord.core.errors import Error


class StoragePipeline:
    def __init__(self, storage: Storage, clock: Any, log: Any) -> None:
        self.storage = storage
        self.clock = clock
        self.log = log
        self._writes: deque = deque()  # (epoch, write, future), oldest first
        self._epoch = 0  # a new coordinator instance ignores the outcomes of older writes
        self._draining = False

    def start(self, write: Write) -> asyncio.Future:
        """Hand ``write`` to the storage now; the future completes with its outcome."""
        try:
            future = self.storage.append(write.partition, write.records)
            if not isinstance(future, asyncio.Future):
                future = asyncio.ensure_future(future)
        except Exception as e:  # StorageError, or a storage bug: the write still gets an outcome
            future = asyncio.get_running_loop().create_future()
            future.set_exception(e)
        self._writes.append((self._epoch, write, future))
        return future

    def drain(self, feed: Callable[[Any], None]) -> None:
        """Feed write outcomes in write order, as far as they are known."""
        if self._draining:
            return
        self._draining = True
        try:
            writes = self._writes
            while writes and writes[0][2].done():
                epoch, write, future = writes.popleft()
                if epoch != self._epoch or future.cancelled():
                    continue
                error = future.exception()
                now = self.clock.now_ms()
                if error is None:
                    outcome: Any = ev.WriteCompleted(now_ms=now, write_id=write.write_id)
                elif isinstance(error, StorageError):
                    self.log(error.level, "write_failed", partition=write.partition, error=error.error.name,
                             detail=error.detail, storage=self.storage.name)
                    outcome = ev.WriteFailed(now_ms=now, write_id=write.write_id, error=error.error)
                else:
                    self.log("error", "storage_error", partition=write.partition, error=f"{type(error).__name__}: {error}")
                    outcome = ev.WriteFailed(now_ms=now, write_id=write.write_id, error=Error.KAFKA_STORAGE_ERROR)
                feed(outcome)
        finally:
            self._draining = False

    def forget(self) -> None:
        """Writes in flight get no outcome (a new coordinator instance takes over); a storage
        holding writes back (the test controls) drops them."""
        self._epoch += 1
        self._writes.clear()
        discard = getattr(self.storage, "discard_held", None)
        if discard is not None:
            discard()
