"""``groupcoord simulate``: seeded consumers drive the core through a clock and are recorded.

Every group gets its own world: a coordinator instance serving that group alone (group
scope, spec/trace-format.md), its timers, a storage log for its offsets partition and a set
of consumers that behave like Kafka's Java client (a simplified ConsumerCoordinator): they
join with the group's assignment strategy (``adapters/client/assignors.py``: range, roundrobin, sticky,
cooperative-sticky; eager or cooperative rebalancing, with the cooperative second round and
optionally the delayed reassignment of a bounced member's partitions), heartbeat, auto-
commit, and react to errors as the client does. A seeded schedule of incidents happens to
each group: members joining and leaving, static and dynamic members, crashes (and
restarts), members exceeding max.poll.interval, slow heartbeats, rolling restarts and
coordinator failovers (graceful, with UnloadPartition, or a crash).

Everything is a function of (seed, group index), so a run is reproducible. The output is a
trace directory (``part-NNNNN.parquet`` or ``.jsonl`` files, each holding whole groups in
index order, and ``meta.json``) plus ``summary.json``: rebalances, the time groups spent not
Stable, partitions moved, per strategy. ``--jobs`` changes neither the records nor their
order (the part files read in name order), only how many part files they are split into:
about four per process, so that every process has files to write.
"""

from __future__ import annotations

import heapq
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable

from groupcoord.core import events as ev
from groupcoord.adapters.client.assignors import (
    COOPERATIVE,
    AssignorError,
    decode_assignment,
    leader_assign,
    make_assignor,
    member_subscription,
    on_assignment,
    rebalance_protocol,
)
from groupcoord.core.commands import (
    FindCoordinatorResponse,
    GroupMetadataRecord,
    Write,
)
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator, partition_for
from groupcoord.core.errors import Error
from groupcoord.adapters.replay.records import GroupRecorder, TraceColumns
from groupcoord.core.states import STABLE
from groupcoord.adapters.runtime.runner import CommandRunner
from groupcoord.adapters.runtime.timers import TimerTable

SUMMARY = "summary.json"
STRATEGIES = ("range", "roundrobin", "sticky", "cooperative-sticky")
SIM_CONFIG = CoordinatorConfig(offsets_retention_minutes=2, offsets_retention_check_interval_ms=60_000)
WRITE_LATENCY_MS = 2
RETRY_BACKOFF_MS = 100
JOIN_VERSION, SYNC_VERSION, HEARTBEAT_VERSION, LEAVE_VERSION, COMMIT_VERSION, FIND_VERSION = 9, 5, 4, 5, 8, 4
COORDINATOR_ERRORS = frozenset({Error.NOT_COORDINATOR, Error.COORDINATOR_NOT_AVAILABLE,
                                Error.COORDINATOR_LOAD_IN_PROGRESS})

# client states
STOPPED, UNJOINED, JOINING, SYNCING, STABLE_C = "stopped", "unjoined", "joining", "syncing", "stable"


class GroupSpec:
    """The seeded set-up of one group."""

    def __init__(self, seed: int, index: int, members: int, duration_ms: int, incidents_per_min: float) -> None:
        rng = self.rng = random.Random(f"{seed}:{index}")
        self.index = index
        self.group_id = f"group-{index:06d}"
        self.strategy = STRATEGIES[rng.randrange(len(STRATEGIES))]
        self.delay_ms = rng.choice((0, 0, 20_000)) if self.strategy == "cooperative-sticky" else 0
        n_topics = rng.choice((1, 1, 2, 3))
        self.topics = {f"topic-{chr(97 + t)}": rng.randint(1, 12) for t in range(n_topics)}
        self.uneven = n_topics > 1 and rng.random() < 0.3
        self.static = rng.random() < 0.35
        self.members = max(1, members + rng.choice((-1, 0, 0, 0, 1)) if members > 1 else members)
        self.session_ms = rng.choice((10_000, 10_000, 30_000))
        self.heartbeat_ms = max(1000, self.session_ms // 3)
        self.poll_ms = rng.choice((30_000, 45_000, 60_000))  # max.poll.interval.ms = rebalance timeout
        self.commit_ms = 5000
        self.duration_ms = duration_ms
        self.start_ms = rng.randrange(0, 1000)
        self.incidents_per_min = incidents_per_min

    def subscription(self, k: int) -> list[str]:
        topics = list(self.topics)
        if self.uneven:
            n = 1 + k % len(topics)
            return topics[:n] if k % 2 else topics[-n:]
        return topics


class Consumer:
    """A simplified Kafka consumer (ConsumerCoordinator + heartbeat thread + auto-commit)."""

    def __init__(self, world: "GroupWorld", k: int) -> None:
        self.world, self.k = world, k
        spec = world.spec
        self.name = f"c{k}"
        self.client_id = f"consumer-{spec.group_id}-{k}"
        self.instance_id = f"{spec.group_id}-instance-{k}" if spec.static else None
        self.topics = spec.subscription(k)
        self.state = STOPPED
        self.epoch = 0
        self.member_id = ""
        self.generation = -1
        self.owned: set = set()
        self.offsets: dict = {}
        self.assignor = None
        self.protocol = None
        self.inflight: dict[str, Any] = {}
        self.stalled_until = -1
        self.poll_expired = False
        self.slow_until = -1
        self.slow_factor = 1
        self.coordinator_known = True
        self.rejoin_pending = False
        self.rejoin_reason = ""

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        w = self.world
        self.epoch += 1
        self.state = UNJOINED
        self.member_id, self.generation, self.owned = "", -1, set()
        self.assignor = make_assignor(w.spec.strategy, **({"scheduled_rebalance_max_delay_ms": w.spec.delay_ms}
                                                          if w.spec.strategy == "cooperative-sticky" else {}))
        self.protocol = rebalance_protocol([self.assignor])
        self.inflight.clear()
        self.stalled_until, self.poll_expired, self.rejoin_pending = -1, False, False
        self.join("starting")
        epoch = self.epoch
        w.after(self.world.spec.heartbeat_ms, lambda: self._heartbeat_tick(epoch))
        w.after(self.world.spec.commit_ms + w.rng.randrange(500), lambda: self._commit_tick(epoch))

    def crash(self) -> None:
        self.epoch += 1
        self.state = STOPPED
        self.inflight.clear()

    def close(self) -> None:
        """Consumer.close(): a dynamic member leaves the group; a static one does not."""
        if self.state == STOPPED:
            return
        if self.instance_id is None and self.member_id:
            self.send("leave", ev.LeaveGroup(
                request_id=self.world.rid(), now_ms=self.world.now, version=LEAVE_VERSION, client_id=self.client_id,
                group_id=self.world.spec.group_id,
                members=(ev.MemberIdentity(self.member_id, None, "the consumer is being closed"),)))
        self.epoch += 1
        self.state = STOPPED
        self.inflight.clear()

    @property
    def running(self) -> bool:
        return self.state != STOPPED

    # ----------------------------------------------------------------- requests

    def send(self, kind: str, event) -> None:
        self.inflight[kind] = event.request_id
        self.world.request(self, kind, event)

    def join(self, reason: str) -> None:
        w = self.world
        if self.state == STOPPED or "join" in self.inflight:
            return
        if w.now < self.stalled_until:  # the app thread is busy: it joins on its next poll
            self.rejoin_pending, self.rejoin_reason = True, reason
            return
        if not self.coordinator_known:
            self.rejoin_pending, self.rejoin_reason = True, reason
            self.find_coordinator()
            return
        self.rejoin_pending = False
        if self.protocol != COOPERATIVE or self.generation < 0:
            self.owned = set()  # eager: revoke everything before joining; a reset member lost them
        self.state = JOINING
        spec = w.spec
        metadata = member_subscription(self.assignor, self.topics, self.owned, self.generation)
        self.send("join", ev.JoinGroup(
            request_id=w.rid(), now_ms=w.now, version=JOIN_VERSION, client_id=self.client_id,
            group_id=spec.group_id, session_timeout_ms=spec.session_ms, rebalance_timeout_ms=spec.poll_ms,
            member_id=self.member_id, group_instance_id=self.instance_id, protocol_type="consumer",
            protocols=((self.assignor.name, metadata),), reason=reason, new_member_uuid=w.uuid()))

    def find_coordinator(self) -> None:
        w = self.world
        if "find" in self.inflight or self.state == STOPPED:
            return
        self.send("find", ev.FindCoordinator(request_id=w.rid(), now_ms=w.now, version=FIND_VERSION,
                                             client_id=self.client_id, key_type=0,
                                             coordinator_keys=(w.spec.group_id,)))

    def _heartbeat_tick(self, epoch: int) -> None:
        w = self.world
        if epoch != self.epoch or self.state == STOPPED:
            return
        spec = w.spec
        interval = spec.heartbeat_ms * (self.slow_factor if w.now < self.slow_until else 1)
        w.after(interval + w.rng.randrange(200), lambda: self._heartbeat_tick(epoch))
        if self.poll_expired:
            return
        if self.state not in (SYNCING, STABLE_C) or "heartbeat" in self.inflight or not self.coordinator_known:
            return
        self.send("heartbeat", ev.Heartbeat(
            request_id=w.rid(), now_ms=w.now, version=HEARTBEAT_VERSION, client_id=self.client_id,
            group_id=spec.group_id, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance_id))

    def _commit_tick(self, epoch: int) -> None:
        w = self.world
        if epoch != self.epoch or self.state == STOPPED:
            return
        w.after(w.spec.commit_ms, lambda: self._commit_tick(epoch))
        if (self.state != STABLE_C or not self.owned or "commit" in self.inflight or w.now < self.stalled_until
                or not self.coordinator_known):
            return
        by_topic: dict[str, list] = {}
        for topic, p in sorted(self.owned):
            offset = self.offsets.get((topic, p), 0) + w.rng.randrange(0, 500)
            self.offsets[(topic, p)] = offset
            by_topic.setdefault(topic, []).append(ev.CommitPartition(p, offset, -1, ""))
        self.send("commit", ev.OffsetCommit(
            request_id=w.rid(), now_ms=w.now, version=COMMIT_VERSION, client_id=self.client_id,
            group_id=w.spec.group_id, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance_id,
            topics=tuple((t, tuple(ps)) for t, ps in by_topic.items())))

    # ----------------------------------------------------------------- stalls (max.poll.interval)

    def stall(self, duration_ms: int) -> None:
        w = self.world
        if self.state == STOPPED:
            return
        self.stalled_until = w.now + duration_ms
        epoch = self.epoch
        w.after(w.spec.poll_ms, lambda: self._maybe_poll_timeout(epoch))
        w.after(duration_ms, lambda: self._resume(epoch))

    def _maybe_poll_timeout(self, epoch: int) -> None:
        if epoch == self.epoch and self.world.now < self.stalled_until and not self.poll_expired:
            self._poll_timeout()

    def _poll_timeout(self) -> None:
        """The heartbeat thread gives up: a dynamic member leaves; both reset their generation."""
        w = self.world
        self.poll_expired = True
        if self.instance_id is None and self.member_id and self.coordinator_known:
            self.send("leave", ev.LeaveGroup(
                request_id=w.rid(), now_ms=w.now, version=LEAVE_VERSION, client_id=self.client_id,
                group_id=w.spec.group_id,
                members=(ev.MemberIdentity(self.member_id, None, "consumer poll timeout has expired."),)))
        self.member_id, self.generation, self.owned = "", -1, set()
        self.state = UNJOINED
        self.inflight.pop("join", None)
        self.inflight.pop("sync", None)
        self.rejoin_pending, self.rejoin_reason = True, "rejoining after the poll timeout"

    def _resume(self, epoch: int) -> None:
        if epoch != self.epoch:
            return
        self.stalled_until = -1
        self.poll_expired = False
        if self.rejoin_pending:
            self.join(self.rejoin_reason)

    # ----------------------------------------------------------------- responses

    def on_response(self, kind: str, request, response) -> None:
        self.inflight.pop(kind, None)
        if response is None:  # the request timed out (its coordinator crashed)
            self._coordinator_lost()
            if kind in ("join", "sync"):
                self.state = UNJOINED
                self.rejoin_pending, self.rejoin_reason = True, "request timed out"
            return
        getattr(self, f"_on_{kind}")(request, response)

    def _coordinator_lost(self) -> None:
        self.coordinator_known = False
        w, epoch = self.world, self.epoch
        w.after(RETRY_BACKOFF_MS, lambda: epoch == self.epoch and self.find_coordinator())

    def _on_find(self, request, response: FindCoordinatorResponse) -> None:
        ok = response.coordinators and response.coordinators[0].error_code is Error.NONE
        if not ok:
            self._coordinator_lost()
            return
        self.coordinator_known = True
        if self.rejoin_pending or self.state == UNJOINED:
            self.join(self.rejoin_reason or "coordinator found")

    def _reset(self, member_id: bool) -> None:
        self.generation = -1
        self.owned = set()
        if member_id:
            self.member_id = ""

    def _rejoin(self, reason: str, delay_ms: int = 0) -> None:
        self.state = UNJOINED
        if delay_ms:
            epoch = self.epoch
            self.world.after(delay_ms, lambda: epoch == self.epoch and self.state == UNJOINED and self.join(reason))
        else:
            self.join(reason)

    def _error(self, code: Error, what: str) -> bool:
        """Handling common to every response; True when the code was handled here."""
        if code in COORDINATOR_ERRORS:
            self._coordinator_lost()
            if what in ("join", "sync"):
                self.state = UNJOINED
                self.rejoin_pending, self.rejoin_reason = True, "coordinator moved"
            return True
        if code is Error.FENCED_INSTANCE_ID or code is Error.GROUP_MAX_SIZE_REACHED:
            self.world.stats["fenced"] += 1
            self.crash()  # fatal in the Java client
            return True
        if code is Error.UNKNOWN_MEMBER_ID:
            self._reset(member_id=True)
            self._rejoin("unknown member id", RETRY_BACKOFF_MS)
            return True
        if code is Error.ILLEGAL_GENERATION:
            self._reset(member_id=False)
            self._rejoin("illegal generation")
            return True
        if code is Error.REBALANCE_IN_PROGRESS:
            self._rejoin("the group is rebalancing")
            return True
        return False

    def _on_join(self, request, response) -> None:
        code = response.error_code
        w = self.world
        if code is Error.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
            self.state = UNJOINED
            self.join("need to re-join with the given member-id")
            return
        if code is not Error.NONE:
            if not self._error(code, "join"):
                self.world.stats["join_errors"] += 1
                self._rejoin("join failed", 1000)
            return
        self.member_id, self.generation = response.member_id, response.generation_id
        assignments = ()
        if response.leader == self.member_id and not response.skip_assignment:
            members = [(m.member_id, m.group_instance_id, m.metadata) for m in response.members]
            try:
                result = leader_assign(self.assignor, members, w.spec.topics, protocol=self.protocol, now_ms=w.now)
            except AssignorError:
                w.stats["assignor_errors"] += 1
                result = {m: b"" for m, _, _ in members}
            assignments = tuple(result.items())
        self.state = SYNCING
        self.send("sync", ev.SyncGroup(
            request_id=w.rid(), now_ms=w.now, version=SYNC_VERSION, client_id=self.client_id,
            group_id=w.spec.group_id, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance_id, protocol_type="consumer", protocol_name=response.protocol_name,
            assignments=assignments))

    def _on_sync(self, request, response) -> None:
        code = response.error_code
        if code is not Error.NONE:
            if not self._error(code, "sync"):
                self._rejoin("sync failed", 1000)
            return
        if len(response.assignment) < 2:  # Kafka's client throws; rejoin instead
            self._rejoin("empty assignment", 1000)
            return
        outcome = on_assignment(self.owned, response.assignment, self.protocol)
        self.assignor.on_assignment(decode_assignment(response.assignment), self.generation)
        self.owned = set(outcome.assigned)
        self.state = STABLE_C
        if outcome.rejoin:
            self._rejoin("need to revoke partitions and re-join")
        elif outcome.rejoin_after_ms:
            self.world.stats["delayed_assignments"] += 1
            self._rejoin("scheduled rebalance delay expired", outcome.rejoin_after_ms)

    def _on_heartbeat(self, request, response) -> None:
        code = response.error_code
        if code is Error.NONE:
            return
        if request.generation_id != self.generation and code in (Error.ILLEGAL_GENERATION, Error.REBALANCE_IN_PROGRESS):
            return  # an answer about a generation this member has already left behind
        if self.state in (JOINING,) and code is Error.REBALANCE_IN_PROGRESS:
            return
        self._error(code, "heartbeat")

    def _on_commit(self, request, response) -> None:
        codes = {p.error_code for t in response.topics for p in t.partitions}
        for code in codes - {Error.NONE}:
            if request.generation_id != self.generation:
                return
            if self._error(code, "commit"):
                return

    def _on_leave(self, request, response) -> None:
        pass


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


INCIDENTS = ("join", "leave", "crash", "poll_timeout", "slow_heartbeats", "rolling_restart", "failover")
INCIDENT_WEIGHTS = (3, 2, 3, 2, 2, 1, 1)


def simulate_group(spec: GroupSpec, config: CoordinatorConfig, columns: TraceColumns) -> dict:
    """Run one group from start to end; its records go to ``columns``; returns its stats."""
    rng = spec.rng
    world = GroupWorld(spec, config, columns)
    world.start_instance()
    for k in range(spec.members):
        consumer = Consumer(world, k)
        world.consumers.append(consumer)
        world.after(rng.randrange(0, 2000), consumer.start)
    end = spec.start_ms + spec.duration_ms
    n_incidents = _poisson(rng, spec.incidents_per_min * spec.duration_ms / 60_000)
    for _ in range(n_incidents):
        at = rng.randrange(4000, max(4001, spec.duration_ms - 2000))
        kind = rng.choices(INCIDENTS, INCIDENT_WEIGHTS)[0]
        world.after(at, lambda kind=kind: _incident(world, kind))
    finale = rng.random() < 0.25
    if finale:  # everyone leaves near the end; the group empties and may expire
        world.after(max(0, spec.duration_ms - 3000), lambda: [c.close() for c in world.consumers])
    world.run(end)
    stats = dict(world.stats)
    stats["records"] = world.recorder.seq
    stats["duration_ms"] = spec.duration_ms
    stats["strategy"] = spec.strategy
    stats["static"] = spec.static
    return stats


def _poisson(rng: random.Random, mean: float) -> int:
    n, t = 0, rng.expovariate(1.0) if mean > 0 else float("inf")
    while t < mean:
        n += 1
        t += rng.expovariate(1.0)
    return n


def _incident(world: GroupWorld, kind: str) -> None:
    rng, spec = world.rng, world.spec
    world.stats["incidents"] += 1
    running = [c for c in world.consumers if c.running]
    stopped = [c for c in world.consumers if not c.running]
    if kind == "join":
        if stopped and rng.random() < 0.5:
            rng.choice(stopped).start()
        else:
            consumer = Consumer(world, len(world.consumers))
            world.consumers.append(consumer)
            consumer.start()
    elif kind == "leave" and running:
        rng.choice(running).close()
    elif kind == "crash" and running:
        victim = rng.choice(running)
        victim.crash()
        if rng.random() < 0.6:
            world.after(rng.randrange(2000, 20_000), victim.start)
    elif kind == "poll_timeout" and running:
        rng.choice(running).stall(spec.poll_ms + rng.randrange(1000, 10_000))
    elif kind == "slow_heartbeats" and running:
        victim = rng.choice(running)
        victim.slow_until = world.now + rng.randrange(10_000, 40_000)
        victim.slow_factor = rng.choice((2, 3, 5))
    elif kind == "rolling_restart":
        for i, consumer in enumerate(running):
            down = rng.randrange(1000, 3000)
            world.after(i * 5000, consumer.close)
            world.after(i * 5000 + down, consumer.start)
    elif kind == "failover":
        world.failover(crash=rng.random() < 0.4, gap_ms=rng.randrange(200, 2000), loading_ms=rng.randrange(0, 3000))


# ------------------------------------------------------------------ running many groups


def _simulate_file(args) -> tuple[str, dict, list[dict]]:
    path, indexes, seed, members, duration_ms, incidents, config_kafka = args
    from groupcoord.adapters.replay.trace_files import write_columns

    config = CoordinatorConfig.from_kafka(config_kafka)
    columns = TraceColumns()
    per_group = []
    for index in indexes:
        spec = GroupSpec(seed, index, members, duration_ms, incidents)
        stats = simulate_group(spec, config, columns)
        stats["group_id"] = spec.group_id
        per_group.append(stats)
    write_columns(path, columns)
    return path, {"records": len(columns)}, per_group


def simulate(out: str | os.PathLike, *, groups: int, members: int, seed: int, duration_ms: int = 120_000,
             incidents_per_min: float = 2.0, fmt: str = "parquet", groups_per_file: int | None = None,
             jobs: int = 1, config: CoordinatorConfig = SIM_CONFIG, progress: bool | None = None) -> dict:
    """Simulate ``groups`` groups into the trace directory ``out``; returns the summary."""
    from groupcoord.adapters.replay.trace_files import write_manifest

    _check_sizes(groups=groups, members=members, duration_ms=duration_ms, jobs=jobs)
    if not incidents_per_min >= 0:
        raise ValueError(f"incidents_per_min must be at least 0, not {incidents_per_min}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("part-*"):
        old.unlink()
    suffix = {"parquet": ".parquet", "jsonl": ".jsonl"}[fmt]
    if groups_per_file is None:
        groups_per_file = max(1, min(5000, -(-groups // max(1, 4 * jobs))))
    config_kafka = {k: v for k, v in config.to_kafka().items() if v != CoordinatorConfig().to_kafka()[k]}
    tasks = []
    for n, start in enumerate(range(0, groups, groups_per_file)):
        indexes = list(range(start, min(groups, start + groups_per_file)))
        tasks.append((str(out / f"part-{n:05d}{suffix}"), indexes, seed, members, duration_ms, incidents_per_min,
                      config_kafka))
    bar = Progress(groups, "simulating groups", enabled=progress)
    started = time.perf_counter()
    per_group: list[dict] = []
    records = 0
    if jobs > 1 and len(tasks) > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(jobs) as pool:
            for path, info, stats in pool.imap(_simulate_file, tasks):
                per_group += stats
                records += info["records"]
                bar.advance(len(stats))
    else:
        for task in tasks:
            path, info, stats = _simulate_file(task)
            per_group += stats
            records += info["records"]
            bar.advance(len(stats))
    bar.close()
    elapsed = time.perf_counter() - started
    write_manifest(out, scope="group", outputs=True, config=config, groups_span_files=False,
                   generator={"command": "simulate", "groups": groups, "members": members, "seed": seed,
                              "duration_ms": duration_ms, "incidents_per_min": incidents_per_min})
    summary = summarize(per_group)
    summary.update({"groups": groups, "records": records, "files": len(tasks), "seed": seed,
                    "seconds": round(elapsed, 2), "trace": str(out)})
    (out / SUMMARY).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def _check_sizes(**sizes: int) -> None:
    """Refuse sizes below 1 before anything is written (0 groups would leave an empty trace)."""
    for name, n in sizes.items():
        if n < 1:
            raise ValueError(f"{name} must be at least 1, not {n}")


def summarize(per_group: list[dict]) -> dict:
    keys = ("inputs", "outputs", "rebalances", "not_stable_ms", "partitions_moved", "failovers", "fenced",
            "incidents", "delayed_assignments")
    total = {k: sum(g[k] for g in per_group) for k in keys}
    by_strategy: dict[str, dict] = {}
    for g in per_group:
        s = by_strategy.setdefault(g["strategy"], {"groups": 0, **{k: 0 for k in keys}})
        s["groups"] += 1
        for k in keys:
            s[k] += g[k]
    duration = sum(g["duration_ms"] for g in per_group) or 1
    total["not_stable_share"] = round(total["not_stable_ms"] / duration, 4)
    for s in by_strategy.values():
        s["rebalances_per_group"] = round(s["rebalances"] / s["groups"], 2)
        s["partitions_moved_per_group"] = round(s["partitions_moved"] / s["groups"], 2)
        s["not_stable_s_per_group"] = round(s["not_stable_ms"] / s["groups"] / 1000, 2)
    storms = sorted(per_group, key=lambda g: (-g["rebalances"], g["group_id"]))[:5]
    return {"totals": total, "by_strategy": dict(sorted(by_strategy.items())),
            "busiest_groups": [{"group_id": g["group_id"], "rebalances": g["rebalances"],
                                "strategy": g["strategy"]} for g in storms]}


class Progress:
    """A one-line progress bar on stderr (only on a terminal unless forced)."""

    def __init__(self, total: int, label: str, enabled: bool | None = None) -> None:
        self.total, self.label, self.done = max(1, total), label, 0
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.started = time.perf_counter()
        self._last = 0.0

    def advance(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < 0.2 and self.done < self.total:
            return
        self._last = now
        width = 30
        filled = int(width * self.done / self.total)
        rate = self.done / max(1e-9, now - self.started)
        eta = (self.total - self.done) / rate if rate else 0
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                         f"{rate:,.0f}/s eta {eta:,.0f}s ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def format_summary(summary: dict) -> str:
    t = summary["totals"]
    lines = [f"simulated {summary['groups']:,} groups in {summary['seconds']}s: {t['inputs']:,} events, "
             f"{summary['records']:,} trace records in {summary['files']} files -> {summary['trace']}",
             f"rebalances {t['rebalances']:,}; not Stable {t['not_stable_ms'] / 1000:,.0f}s "
             f"({t['not_stable_share']:.1%} of group time); partitions moved {t['partitions_moved']:,}; "
             f"failovers {t['failovers']:,}; incidents {t['incidents']:,}",
             f"{'strategy':<20}{'groups':>8}{'rebal/grp':>11}{'moved/grp':>11}{'notStable s/grp':>17}"]
    for name, s in summary["by_strategy"].items():
        lines.append(f"{name:<20}{s['groups']:>8}{s['rebalances_per_group']:>11}{s['partitions_moved_per_group']:>11}"
                     f"{s['not_stable_s_per_group']:>17}")
    return "\n".join(lines)
