"""Embedding the core in an asyncio service: a runnable example (spec/contract.md).

``EmbeddedCoordinator`` owns a ``Coordinator`` and carries out its commands through the
runtime's ``CommandRunner``:

* ``Respond``: resolves the future of ``request(event)``, keyed by ``request_id``;
* ``Write``: queued to one writer task that appends to ``storage`` in order and feeds back
  ``WriteCompleted`` / ``WriteFailed``;
* ``SetTimer`` / ``CancelTimer`` / ``CancelPartitionTimers``: kept in a ``TimerTable``; one
  alarm (``clock.call_at``) at the earliest deadline wakes a timer task that feeds
  ``TimerFired`` for everything due.

Time and member-id randomness are injected (``clock``, ``new_uuid``), so tests can drive the
service with a fake clock. Only ``LoopClock`` touches real time.

A core that raises is not used again (spec/contract.md, "A failed instance"): every request
it held is answered NOT_COORDINATOR in its API's error shape, its timers and the outcomes of
its writes in flight are dropped, and a new ``Coordinator`` loads its partitions from storage
once the writer has handled the failed instance's writes (marked loading until then).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Callable, Protocol

import attrs

from groupcoord.adapters.runtime.alarm import Alarm
from groupcoord.adapters.runtime.runner import CommandRunner
from groupcoord.adapters.storage.interface import Storage, StorageError
from groupcoord.adapters.storage.memory import MemoryStorage
from groupcoord.core import events as ev
from groupcoord.core.commands import Write
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator, CoordinatorFailed
from groupcoord.core.error_responses import error_response
from groupcoord.core.errors import Error


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> Any:
        """Run ``callback`` once ``now_ms() >= deadline_ms``; returns a handle with ``cancel()``."""


class LoopClock:
    """The event loop's monotonic clock."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()

    def now_ms(self) -> int:
        return int(self._loop.time() * 1000)

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> asyncio.TimerHandle:
        return self._loop.call_at(deadline_ms / 1000, callback)


class CoordinatorStopped(Exception):
    """The request was still unanswered when the service stopped."""


class EmbeddedCoordinator:
    def __init__(self, config: CoordinatorConfig | None = None, *, clock: Clock | None = None,
                 storage: Storage | None = None,
                 new_uuid: Callable[[], str] = lambda: str(uuid.uuid4())) -> None:
        self.config = config or CoordinatorConfig()
        self.coordinator = Coordinator(self.config)
        self.storage = storage if storage is not None else MemoryStorage()
        self._clock = clock
        self._new_uuid = new_uuid
        self._futures: dict[Any, asyncio.Future] = {}
        self._requests: dict[Any, ev.Request] = {}  # the unanswered requests, by request id
        # Writes go to one writer task, each with the instance that emitted it; their outcomes
        # are fed when storage answers, to that instance only. (A future is a barrier: the
        # writer resolves it once every write queued before it is handled.)
        self._writes: asyncio.Queue[tuple[Coordinator, Write] | asyncio.Future] = asyncio.Queue()
        self._runner = CommandRunner(self.coordinator, self._resolve, self._store)
        self.replaced = 0  # failed instances replaced so far
        self._wake = asyncio.Event()
        self._alarm: Alarm | None = None  # needs the clock, which may need the running loop
        self._tasks: list[asyncio.Task] = []

    async def start(self, partitions: range | None = None) -> None:
        self._clock = self._clock or LoopClock()
        self._alarm = Alarm(self._clock, self._wake.set)
        self._tasks = [asyncio.create_task(self._run_timers()), asyncio.create_task(self._run_writes())]
        for p in partitions if partitions is not None else range(self.config.offsets_topic_num_partitions):
            records = await self.storage.load(p)
            self._dispatch(ev.LoadPartition(now_ms=self._clock.now_ms(), partition=p, records=records))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._alarm is not None:
            self._alarm.cancel()
        for future in self._futures.values():  # parked in an instance that goes away: never answered
            future.set_exception(CoordinatorStopped())
        self._futures.clear()
        self._requests.clear()

    async def request(self, event: ev.Request) -> Any:
        """Send one request; returns its logical response (``wire.response_fields`` shapes it)."""
        if event.request_id in self._futures:
            raise ValueError(f"request id {event.request_id!r} is already in flight")
        changes: dict[str, Any] = {"now_ms": self._clock.now_ms()}
        if isinstance(event, (ev.JoinGroup, ev.ConsumerGroupHeartbeat)) and not event.new_member_uuid:
            changes["new_member_uuid"] = self._new_uuid()
        future = self._futures[event.request_id] = asyncio.get_running_loop().create_future()
        event = self._requests[event.request_id] = attrs.evolve(event, **changes)
        self._dispatch(event)
        return await future

    # --- carrying out commands ---------------------------------------------------------------

    def _dispatch(self, event) -> None:
        try:
            self._runner.feed(event)
        except CoordinatorFailed:
            self._replace_failed()
        self._set_alarm()

    def _store(self, write: Write) -> None:
        self._writes.put_nowait((self.coordinator, write))

    def _resolve(self, request_id, response) -> None:
        future = self._futures.pop(request_id, None)
        self._requests.pop(request_id, None)
        if future is not None and not future.done():
            future.set_result(response)

    def _replace_failed(self) -> None:
        """The core raised: answer what it held, drop it (its timers go with its runner), start
        a new instance and load the failed one's partitions again."""
        failed = self.coordinator
        owned = set(failed.owned_partitions())
        if isinstance(failed.failed, (ev.LoadPartition, ev.UnloadPartition)):
            owned.discard(failed.failed.partition)  # its records would fail the next instance too
        for request_id, event in list(self._requests.items()):
            self._resolve(request_id, error_response(event, Error.NOT_COORDINATOR, runtime=True))
        self.replaced += 1
        self.coordinator = Coordinator(self.config)
        self._runner = CommandRunner(self.coordinator, self._resolve, self._store)
        for p in sorted(owned):  # requests get COORDINATOR_LOAD_IN_PROGRESS until the records come
            self._runner.feed(ev.LoadPartition(now_ms=self._clock.now_ms(), partition=p, loading=True))
        if owned:
            self._tasks.append(asyncio.get_running_loop().create_task(self._reload(self.coordinator, owned)))

    async def _reload(self, instance: Coordinator, partitions: set[int]) -> None:
        settled = asyncio.get_running_loop().create_future()
        self._writes.put_nowait(settled)  # after the failed instance's writes
        await settled
        for p in sorted(partitions):
            records = await self.storage.load(p)
            if instance is not self.coordinator:
                return  # failed meanwhile: its replacement loads again
            self._dispatch(ev.LoadPartition(now_ms=self._clock.now_ms(), partition=p, records=records))

    def _set_alarm(self) -> None:
        self._alarm.set(self._runner.next_deadline())

    async def _run_timers(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            self._runner.fire_due(self._clock.now_ms())
            self._set_alarm()

    async def _run_writes(self) -> None:
        while True:  # one writer: outcomes are reported in write order
            item = await self._writes.get()
            if isinstance(item, asyncio.Future):
                if not item.done():
                    item.set_result(None)
                continue
            instance, write = item
            try:
                await self.storage.append(write.partition, write.records)
                outcome = ev.WriteCompleted(now_ms=self._clock.now_ms(), write_id=write.write_id)
            except StorageError as e:
                outcome = ev.WriteFailed(now_ms=self._clock.now_ms(), write_id=write.write_id, error=e.error)
            except Exception:  # a store that fails otherwise fails the write, not the writer
                outcome = ev.WriteFailed(now_ms=self._clock.now_ms(), write_id=write.write_id,
                                         error=Error.KAFKA_STORAGE_ERROR)
            if instance is self.coordinator:  # a failed instance's outcomes are dropped with it
                self._dispatch(outcome)
