"""The simulated consumer: a simplified Kafka Java client (ConsumerCoordinator, heartbeat
thread and auto-commit) that joins with its group's assignment strategy
(``adapters/client/assignors.py``: range, roundrobin, sticky, cooperative-sticky; eager or
cooperative rebalancing, with the cooperative second round and optionally the delayed
reassignment of a bounced member's partitions), heartbeats, commits, stalls past
max.poll.interval when told to, and reacts to errors as the client does. It sends its requests
through its group's world (``world.GroupWorld``) and gets the answers back from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
from groupcoord.core import events as ev
from groupcoord.core.commands import FindCoordinatorResponse
from groupcoord.core.errors import Error

if TYPE_CHECKING:
    from groupcoord.adapters.sim.world import GroupWorld

RETRY_BACKOFF_MS = 100
JOIN_VERSION, SYNC_VERSION, HEARTBEAT_VERSION, LEAVE_VERSION, COMMIT_VERSION, FIND_VERSION = 9, 5, 4, 5, 8, 4
COORDINATOR_ERRORS = frozenset({Error.NOT_COORDINATOR, Error.COORDINATOR_NOT_AVAILABLE,
                                Error.COORDINATOR_LOAD_IN_PROGRESS})

# client states
STOPPED, UNJOINED, JOINING, SYNCING, STABLE_C = "stopped", "unjoined", "joining", "syncing", "stable"


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
