"""Runs the coordinator with in-memory storage and a manual clock.

The storage keeps, per offsets partition, the records of every write that succeeded; a reload
starts a fresh Coordinator from them through the same LoadPartition path real storage uses.
Writes succeed at once unless told otherwise (hold, fail the next, release), which is what the
conformance format needs and what tests use to reach the write-dependent paths.
"""

from __future__ import annotations

from typing import Any, Callable

from groupcoord.adapters.protocol.translate import request_event
from groupcoord.adapters.runtime.runner import CommandRunner
from groupcoord.adapters.storage.memory import MemoryStorage
from groupcoord.core import events as ev
from groupcoord.core.commands import Write
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator
from groupcoord.core.errors import Error


class Driver:
    """A coordinator, its timers and a storage, driven by explicit calls.

    ``observer`` (if given) is called with every (event, commands) pair, e.g. to record a trace.
    """

    def __init__(self, config: CoordinatorConfig | None = None, now_ms: int = 0,
                 storage: MemoryStorage | None = None,
                 observer: Callable[[Any, list], None] | None = None) -> None:
        self.config = config or CoordinatorConfig()
        self.now_ms = now_ms
        self.storage = storage or MemoryStorage()
        self.observer = observer
        self.responses: dict[Any, Any] = {}
        self.answer_counts: dict[Any, int] = {}
        self.in_flight: list[Write] = []
        self._hold = False
        self._fail_next: Error | None = None
        self._uuid_counter = 0
        self._sent = 0
        self._start()

    def _start(self) -> None:
        self.coordinator = Coordinator(self.config)
        self.runner = CommandRunner(self.coordinator, self._respond, self._store, self._observe)
        self.timers = self.runner.timers
        for partition in range(self.config.offsets_topic_num_partitions):
            self.dispatch(ev.LoadPartition(now_ms=self.now_ms, partition=partition,
                                           records=self.storage.records(partition)))

    def _respond(self, request_id, response) -> None:
        self.responses[request_id] = response
        self.answer_counts[request_id] = self.answer_counts.get(request_id, 0) + 1

    def _observe(self, event, commands) -> None:
        if self.observer is not None:  # read at each step: callers set it after construction
            self.observer(event, commands)

    def send(self, api: str, body: dict, *, version: int, client_id: str = "client") -> Any:
        """Send a request given as Kafka's fields of that API version (``protocol.translate``)
        at the driver's time; returns its request id. Its response, once sent, is
        ``responses[id]``."""
        self._sent += 1
        request_id = (client_id, api, self._sent)
        self.dispatch(request_event(api, version, body, request_id=request_id, now_ms=self.now_ms,
                                    client_id=client_id, new_member_uuid=self.new_uuid()))
        return request_id

    def new_uuid(self) -> str:
        """Deterministic stand-ins for Kafka's random UUIDs."""
        self._uuid_counter += 1
        n = self._uuid_counter
        return f"{n:08x}-0000-4000-8000-{n:012x}"

    # --- driving -------------------------------------------------------------------------

    def dispatch(self, event) -> list:
        """Feed one event, and the storage outcomes it triggers at once; return all commands."""
        return self.runner.feed(event)

    def _store(self, write: Write):
        if self._hold:
            self.in_flight.append(write)
            return None
        if self._fail_next is not None:
            error, self._fail_next = self._fail_next, None
            return ev.WriteFailed(now_ms=self.now_ms, write_id=write.write_id, error=error)
        self.storage.store(write.partition, write.records)
        return ev.WriteCompleted(now_ms=self.now_ms, write_id=write.write_id)

    def advance(self, ms: int) -> list:
        """Move the clock, then fire every due timer in deadline order (Kafka's MockTimer)."""
        if ms < 0:
            raise ValueError("time cannot go backwards")
        self.now_ms += ms
        return self.runner.fire_due(self.now_ms)

    # --- storage control -------------------------------------------------------------------

    def hold_writes(self) -> None:
        self._hold = True

    def fail_next_write(self, error: Error) -> None:
        self._fail_next = Error.parse(error)

    def release_writes(self, error: Error | None = None) -> list:
        """Complete (or fail) every held write, in order; writes then succeed at once again."""
        self._hold = False
        held, self.in_flight = self.in_flight, []
        emitted = []
        for write in held:
            if error is None:
                self.storage.store(write.partition, write.records)
                outcome = ev.WriteCompleted(now_ms=self.now_ms, write_id=write.write_id)
            else:
                outcome = ev.WriteFailed(now_ms=self.now_ms, write_id=write.write_id, error=Error.parse(error))
            emitted.extend(self.dispatch(outcome))
        return emitted

    # --- failover ----------------------------------------------------------------------------

    def unload(self) -> list:
        emitted = []
        for partition in sorted(self.coordinator.owned_partitions()):
            emitted.extend(self.dispatch(ev.UnloadPartition(now_ms=self.now_ms, partition=partition)))
        return emitted

    def reload(self, config: CoordinatorConfig | None = None) -> None:
        """A new coordinator instance takes over from what storage holds; nothing in memory
        (parked requests, held writes, timers) survives."""
        if config is not None:
            self.config = config
        self.in_flight = []
        self._hold = False
        self._fail_next = None
        self._start()
