"""One simulated group's world: its coordinator instances (started, failed over, crashed),
the clock and its queue of actions, the coordinator's timers, a storage log for its offsets
partition (writes complete after ``WRITE_LATENCY_MS``, one in a thousand fails), the requests
of its consumers (``consumer.Consumer``) and their answers, the recording of every event and
the group's statistics (rebalances, time not Stable, partitions moved).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any, Callable

from groupcoord.adapters.client.assignors import AssignorError, decode_assignment
from groupcoord.adapters.runtime.runner import CommandRunner
from groupcoord.adapters.traces.records import GroupRecorder, TraceColumns
from groupcoord.core import events as ev
from groupcoord.core.classic.states import STABLE
from groupcoord.core.commands import GroupMetadataRecord, Write
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator, partition_for
from groupcoord.core.errors import Error
from groupcoord.core.timers import TimerTable

if TYPE_CHECKING:
    from groupcoord.adapters.sim.consumer import Consumer
    from groupcoord.adapters.sim.workload import GroupSpec

WRITE_LATENCY_MS = 2


class GroupWorld:
    """One group's coordinator instances, clock, timers, storage and consumers."""

    def __init__(self, spec: GroupSpec, config: CoordinatorConfig, columns: TraceColumns) -> None:
        self.spec = spec
        self.rng = spec.rng
        self.config = config
        self.partition = partition_for(spec.group_id, config.offsets_topic_num_partitions)
        self.recorder = GroupRecorder(spec.group_id, self.partition, columns)
        self.now = spec.start_ms
        self._queue: list = []
        self._qseq = 0
        self._rid = 0
        self.coordinator: Coordinator | None = None
        self.runner: CommandRunner | None = None
        self.instance = 0
        self.alive = False
        self.timers = TimerTable()
        self.storage: dict[tuple, Any] = {}  # compacted log: key -> latest record
        self.requests: dict[Any, tuple] = {}  # request id -> (consumer, epoch, kind, event, instance)
        self.consumers: list[Consumer] = []
        self.stats = _new_stats()
        self._state = None
        self._state_since = self.now
        self._members = False
        self._last_owner: dict = {}
        self._generation = 0

    # ----------------------------------------------------------------- the clock

    def after(self, delay_ms: int, action: Callable[[], Any]) -> None:
        self._qseq += 1
        heapq.heappush(self._queue, (self.now + max(0, delay_ms), self._qseq, action))

    def rid(self) -> int:
        self._rid += 1
        return self._rid

    def uuid(self) -> str:
        r = self.rng.getrandbits(128)
        h = f"{r:032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}"

    def run(self, end_ms: int) -> None:
        queue = self._queue
        while True:
            timers = self.timers  # a failover replaces the table
            due = timers.next_deadline() if self.alive else None
            top = queue[0][0] if queue else None
            if due is not None and (top is None or due <= top) and due <= end_ms:
                self.now = max(self.now, due)
                popped = timers.pop_due(self.now)
                if popped is not None:
                    key, payload = popped
                    self.deliver(ev.TimerFired(now_ms=self.now, key=key, payload=payload))
                continue
            if top is None or top > end_ms:
                break
            t, _, action = heapq.heappop(queue)
            self.now = max(self.now, t)
            action()
        self._account(end_ms)

    # ----------------------------------------------------------------- the coordinator

    def start_instance(self, loading_ms: int = 0) -> None:
        """A coordinator instance takes the group's partition: LoadPartition (after
        ``loading_ms`` of loading, during which requests get COORDINATOR_LOAD_IN_PROGRESS)."""
        self.coordinator = Coordinator(self.config)
        self.instance += 1
        # Responses go back to their consumers, writes complete later (WRITE_LATENCY_MS).
        self.runner = CommandRunner(self.coordinator, self._respond, self._store, self._observe)
        self.timers = self.runner.timers
        self.alive = True
        instance = self.instance
        if loading_ms:
            self.deliver(ev.LoadPartition(now_ms=self.now, partition=self.partition, loading=True))
            self.after(loading_ms, lambda: instance == self.instance and self._load_records())
        else:
            self._load_records()

    def _load_records(self) -> None:
        self.deliver(ev.LoadPartition(now_ms=self.now, partition=self.partition,
                                      records=tuple(self.storage.values())))

    def failover(self, crash: bool, gap_ms: int, loading_ms: int) -> None:
        self.stats["failovers"] += 1
        if crash:
            # the instance dies: parked requests are never answered; clients time out
            for rid, (consumer, epoch, kind, event, instance) in list(self.requests.items()):
                if instance == self.instance:
                    del self.requests[rid]
                    timeout = 5000 if kind not in ("join", "sync") else 10_000
                    self.after(timeout, lambda c=consumer, e=epoch, k=kind, q=event:
                               c.epoch == e and c.on_response(k, q, None))
            self.start_instance(loading_ms)
            return
        self.deliver(ev.UnloadPartition(now_ms=self.now, partition=self.partition))
        self.alive = False
        self.after(gap_ms, lambda: self.start_instance(loading_ms))

    def request(self, consumer: Consumer, kind: str, event) -> None:
        self.requests[event.request_id] = (consumer, consumer.epoch, kind, event, self.instance)
        self.deliver(event)

    def deliver(self, event) -> None:
        self.runner.feed(event)
        self._observe_state()

    def _observe(self, event, commands) -> None:
        self.recorder.record(event, commands)
        self.stats["inputs"] += 1
        self.stats["outputs"] += len(commands)

    def _respond(self, request_id, response) -> None:
        entry = self.requests.pop(request_id, None)
        if entry is not None:
            consumer, epoch, kind, request, _ = entry
            if consumer.epoch == epoch:
                self.after(0, lambda cn=consumer, e=epoch, k=kind, q=request, r=response:
                           cn.epoch == e and cn.on_response(k, q, r))

    def _store(self, write: Write) -> None:
        self._observe_write(write)
        fail = self.rng.random() < 0.001
        instance = self.instance
        self.after(WRITE_LATENCY_MS, lambda w=write, f=fail: self._write_outcome(w, f, instance))

    def _write_outcome(self, write: Write, fail: bool, instance: int) -> None:
        if instance != self.instance or not self.alive:
            return  # the instance is gone; a new one starts from what storage holds
        if fail:
            self.deliver(ev.WriteFailed(now_ms=self.now, write_id=write.write_id, error=Error.NOT_LEADER_OR_FOLLOWER))
            return
        for record in write.records:
            self.storage.pop(record.key, None)
            self.storage[record.key] = record
        self.deliver(ev.WriteCompleted(now_ms=self.now, write_id=write.write_id))

    # ----------------------------------------------------------------- statistics

    def _observe_state(self) -> None:
        group = self.coordinator.group(self.spec.group_id)
        state = group.state if group is not None else None
        members = bool(group is not None and group.members)
        if state is not self._state or members != self._members:
            self._account(self.now)
            self._state, self._members = state, members
        if group is not None and group.generation_id > self._generation:
            self.stats["rebalances"] += group.generation_id - self._generation
        if group is not None:
            self._generation = group.generation_id

    def _account(self, now: int) -> None:
        if self._members and self._state is not STABLE:
            self.stats["not_stable_ms"] += now - self._state_since
        self._state_since = now

    def _observe_write(self, write: Write) -> None:
        names = {c.member_id: c.name for c in self.consumers if c.member_id}
        for record in write.records:
            if type(record) is not GroupMetadataRecord or not record.members:
                continue
            for m in record.members:
                try:
                    partitions = decode_assignment(m.assignment).partitions if m.assignment else ()
                except AssignorError:
                    continue
                owner = names.get(m.member_id, m.member_id)
                for tp in partitions:
                    last = self._last_owner.get(tp)
                    if last is not None and last != owner:
                        self.stats["partitions_moved"] += 1
                    self._last_owner[tp] = owner


def _new_stats() -> dict:
    return {"inputs": 0, "outputs": 0, "rebalances": 0, "not_stable_ms": 0, "partitions_moved": 0,
            "failovers": 0, "fenced": 0, "join_errors": 0, "assignor_errors": 0, "delayed_assignments": 0,
            "incidents": 0}
