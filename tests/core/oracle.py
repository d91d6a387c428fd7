"""Kafka's answers, restated from Kafka's rules: an oracle for the property tests.

The invariants (``adapters/checks``) say the coordinator agrees with itself; this module says
what Kafka would have answered, and the property tests compare. Every rule below is written
from spec/kafka-classic-semantics.md and Kafka's source (commit 1eb7644:
``GroupMetadataManager``, ``ClassicGroup``, ``ClassicGroupMember``, ``OffsetMetadataManager``,
``OffsetExpirationConditionImpl``), never by calling the core: the oracle reads only plain
data (the groups and offsets the coordinator holds before and after an event, the event, the
commands), and uses the core's types only to name things (timer keys, response fields).

``KafkaOracle`` is a Driver observer: ``check(before, after, event, commands, coordinator)``
after every event returns the differences as ``"oracle_<check>: ..."`` strings. Its checks:

* ``oracle_error``: the answer of JoinGroup, SyncGroup, Heartbeat, LeaveGroup and
  OffsetCommit by group state × member status (``expected_join`` ... ``expected_commit``:
  the table), after the service pre-checks (``precheck``); metadata longer than
  ``offset.metadata.max.bytes`` (in UTF-16 units, Java's ``String.length``) and the
  ``group.max.size`` gate are part of it. Answers sent later (held behind a write) are
  compared when they are sent; a write that fails or an unload may replace them with the
  whole request's error.
* ``oracle_vote``: a join phase completing into CompletingRebalance elects the protocol Kafka
  elects (``kafka_vote``).
* ``oracle_timer``: every timer an event leaves armed has Kafka's length: the session
  timeout for a member's heartbeat, 300000 ms for a member added and not yet through a join
  phase, the request's session timeout for a pending member id, the old member's session for a
  static member's new id, the largest rebalance timeout of the members for the join and sync
  timers, the initial delay and its extension ``min(initial delay, remaining)``; and the
  timers Kafka arms at that point are there.
* ``oracle_expiry``: a heartbeat timer that fires removes the member unless it has satisfied
  its heartbeat (an old member with a parked JoinGroup or SyncGroup), and removes a pending
  id; a sync timer of the current generation removes the members that did not sync; a join
  phase that completes removes the dynamic members that did not rejoin.
* ``oracle_retention``: a run of the expiration job removes exactly the offsets whose
  retention has passed (``now >= expire timestamp``, else ``now - base >= retention``, the
  base by group as in §5.3) and deletes an Empty group left without offsets.

Where the project deliberately deviates from Kafka (spec/deviations.md) the oracle accepts
the project's documented choice, and says so where it does (D1, D13, D14).

Where the core is known to answer otherwise than Kafka (``KNOWN_DIVERGENCES``, none today;
each would have a strict xfail in test_oracle.py), the oracle would let the core's answer
pass and record it in ``tolerated`` instead of failing.

A small shadow of what the clients know is kept beside: which partitions this coordinator
owns (from LoadPartition/UnloadPartition), the answers still owed (held behind writes), and
the offsets held before the event.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from groupcoord.core import events as ev
from groupcoord.core.classic.states import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE
from groupcoord.core.commands import (
    CancelPartitionTimers,
    CancelTimer,
    ExpirationTimer,
    HeartbeatResponse,
    HeartbeatTimer,
    InitialDelay,
    JoinGroupResponse,
    JoinTimer,
    OffsetCommitResponse,
    Respond,
    SetTimer,
    SyncTimer,
)
from groupcoord.core.errors import Error

# Kafka's CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS (a constant, not a setting).
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000

NONE = Error.NONE
UNKNOWN_MEMBER = Error.UNKNOWN_MEMBER_ID

# What JoinGroup and SyncGroup do besides answering an error at once.
PARKED = "parked"  # held unanswered (a SyncGroup in CompletingRebalance)
ACCEPTED = "accepted"  # added or updated: parked, or NONE at once if the join phase completes now
CURRENT = "current"  # answered NONE at once with the current generation (no rebalance)

KNOWN_DIVERGENCES: dict[str, str] = {}  # none known: an entry names where the core answers otherwise

# The errors a client sees when the write its answer waits on fails (§3.0 item 6): append
# errors translated for every write, NETWORK_EXCEPTION also by the generic operation handler.
_APPEND_TRANSLATION = {
    Error.UNKNOWN_TOPIC_OR_PARTITION: Error.COORDINATOR_NOT_AVAILABLE,
    Error.NOT_ENOUGH_REPLICAS: Error.COORDINATOR_NOT_AVAILABLE,
    Error.REQUEST_TIMED_OUT: Error.COORDINATOR_NOT_AVAILABLE,
    Error.NOT_LEADER_OR_FOLLOWER: Error.NOT_COORDINATOR,
    Error.KAFKA_STORAGE_ERROR: Error.NOT_COORDINATOR,
    Error.MESSAGE_TOO_LARGE: Error.UNKNOWN_SERVER_ERROR,
    Error.RECORD_LIST_TOO_LARGE: Error.UNKNOWN_SERVER_ERROR,
    Error.INVALID_FETCH_SIZE: Error.UNKNOWN_SERVER_ERROR,
}


def failed_write_errors(error: Error) -> set[Error]:
    translated = _APPEND_TRANSLATION.get(error, error)
    return {translated, Error.COORDINATOR_LOAD_IN_PROGRESS if error is Error.NETWORK_EXCEPTION else translated}


# ------------------------------------------------------------------ small Kafka facts


def java_length(text: str) -> int:
    """Java's ``String.length()``: UTF-16 code units (a character outside the BMP counts 2)."""
    return sum(2 if ord(c) > 0xFFFF else 1 for c in text)


def kafka_partition(group_id: str, partitions: int) -> int:
    """``Utils.abs(groupId.hashCode()) % partitions`` with Java's ``String.hashCode`` (over
    UTF-16 code units)."""
    raw = group_id.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + int.from_bytes(raw[i:i + 2], "big")) & 0xFFFFFFFF
    if h >= 1 << 31:  # a negative Java int: Math.abs, and 0 for Integer.MIN_VALUE
        h = 0 if h == 1 << 31 else (1 << 32) - h
    return h % partitions


def protocol_names(member) -> set[str]:
    # D13: a name a member lists twice counts once (Kafka counts it twice and wedges the group).
    return {name for name, _ in member.protocols}


def kafka_vote(members) -> set[str]:
    """ClassicGroup.selectProtocol: the candidates are the names every member lists; each
    member votes for the first candidate in its own list; the most votes win. Kafka breaks a
    tie by the iteration order of a HashMap (on a JDK: sticky, then range, then roundrobin);
    the spec (§4.1) and FORMAT.md accept any tied name, and D1 takes the first voted for.
    Returns the names that may win."""
    members = list(members)
    listed = Counter(name for m in members for name in protocol_names(m))
    candidates = {name for name, count in listed.items() if count == len(members)}
    votes = Counter(next((name for name, _ in m.protocols if name in candidates), None) for m in members)
    votes.pop(None, None)  # a member with no candidate: no protocol can be elected
    top = max(votes.values(), default=0)
    return {name for name, count in votes.items() if count == top}


def supports_protocols(group, protocol_type: str, names: set[str]) -> bool:
    """ClassicGroup.supportsProtocols (§3.1): the Empty rule by state, not by member count."""
    if group is None or group.state is EMPTY:
        return bool(protocol_type) and bool(names)
    listed = Counter(name for m in group.members.values() for name in protocol_names(m))
    return protocol_type == group.protocol_type and any(listed[n] == len(group.members) for n in names)


def member_error(group, member_id: str, instance_id: str | None) -> Error | None:
    """ClassicGroup.validateMember: an unknown instance 25, another member's instance 82,
    then an unknown member id 25."""
    if instance_id is not None:
        owner = group.static_members.get(instance_id)
        if owner is None:
            return UNKNOWN_MEMBER
        if owner != member_id:
            return Error.FENCED_INSTANCE_ID
    if member_id not in group.members:
        return UNKNOWN_MEMBER
    return None


def satisfied_heartbeat(member) -> bool:
    """ClassicGroupMember.hasSatisfiedHeartbeat."""
    return not member.is_new and (member.awaiting_join is not None or member.awaiting_sync is not None)


def rebalance_timeout(group) -> int:
    """ClassicGroup.rebalanceTimeoutMs: the largest of the members' (0 without members)."""
    return max((m.rebalance_timeout_ms for m in group.members.values()), default=0) if group else 0


# ------------------------------------------------------------------ the table (§3.0-§3.8)


def precheck(request, status: str | None, config) -> Error | None:
    """The service pre-checks (§3.0): the group id, JoinGroup's session bounds, the partition.
    ``status``: this coordinator's hold on the group's partition (None: not owned)."""
    if request.group_id is None or (request.group_id == "" and not isinstance(request, ev.OffsetCommit)):
        return Error.INVALID_GROUP_ID
    if isinstance(request, ev.JoinGroup) and not (
            config.group_min_session_timeout_ms <= request.session_timeout_ms <= config.group_max_session_timeout_ms):
        return Error.INVALID_SESSION_TIMEOUT
    if status is None:
        return Error.NOT_COORDINATOR
    if status == "loading":
        return NONE if isinstance(request, ev.Heartbeat) else Error.COORDINATOR_LOAD_IN_PROGRESS
    return None


def expected_heartbeat(group, req: ev.Heartbeat) -> Error:
    """classicGroupHeartbeat (§3.6)."""
    if group is None:
        return UNKNOWN_MEMBER
    error = member_error(group, req.member_id, req.group_instance_id)
    if error is not None:
        return error
    if req.generation_id != group.generation_id:
        return Error.ILLEGAL_GENERATION
    if group.state is EMPTY:
        return UNKNOWN_MEMBER
    return Error.REBALANCE_IN_PROGRESS if group.state is PREPARING_REBALANCE else NONE


def expected_sync(group, req: ev.SyncGroup) -> Error | str:
    """classicGroupSync (§3.5): an error, PARKED (CompletingRebalance) or NONE (Stable)."""
    if group is None or group.state is EMPTY:
        return UNKNOWN_MEMBER
    error = member_error(group, req.member_id, req.group_instance_id)
    if error is not None:
        return error
    if req.generation_id != group.generation_id:
        return Error.ILLEGAL_GENERATION
    if (req.protocol_type is not None and group.protocol_type is not None and req.protocol_type != group.protocol_type) \
            or (req.protocol_name is not None and group.protocol_name is not None
                and req.protocol_name != group.protocol_name):
        return Error.INCONSISTENT_GROUP_PROTOCOL
    if group.state is PREPARING_REBALANCE:
        return Error.REBALANCE_IN_PROGRESS
    return PARKED if group.state is COMPLETING_REBALANCE else NONE


def accepts_joining_member(group, member_id: str, max_size: int) -> bool:
    """acceptJoiningMember, the group.max.size gate (§3.1 step 2)."""
    if group is None or group.state is EMPTY:
        return True
    member = group.members.get(member_id)
    if group.state is PREPARING_REBALANCE:
        awaiting = sum(1 for m in group.members.values() if m.awaiting_join is not None)
        return (member is not None and member.awaiting_join is not None) or awaiting < max_size
    return member is not None or len(group.members) < max_size


def expected_join(group, req: ev.JoinGroup, max_size: int) -> Error | str:
    """classicGroupJoinToClassicGroup (§3.1): an error, MEMBER_ID_REQUIRED, ACCEPTED or CURRENT."""
    mid, instance = req.member_id, req.group_instance_id
    if group is None and mid != "":
        return UNKNOWN_MEMBER
    if not accepts_joining_member(group, mid, max_size):
        return Error.GROUP_MAX_SIZE_REACHED
    if not supports_protocols(group, req.protocol_type, {name for name, _ in req.protocols}):
        return Error.INCONSISTENT_GROUP_PROTOCOL
    if mid == "":
        if instance is None and req.version >= 4:
            return Error.MEMBER_ID_REQUIRED
        return ACCEPTED  # a new member added, or a static member's replacement (§6)
    if mid in group.pending_members:
        return Error.UNKNOWN_SERVER_ERROR if instance is not None else ACCEPTED
    error = member_error(group, mid, instance)
    if error is not None:
        return error
    same = group.members[mid].protocols == req.protocols
    if group.state is PREPARING_REBALANCE:
        return ACCEPTED
    if group.state is COMPLETING_REBALANCE:
        return CURRENT if same else ACCEPTED
    if group.state is STABLE:
        return CURRENT if same and mid != group.leader_id else ACCEPTED
    return UNKNOWN_MEMBER  # Empty


def expected_leave(group, req: ev.LeaveGroup) -> list[Error]:
    """classicGroupLeave (§3.7): one error per member, in order; each removal counts for the
    entries after it."""
    if group is None:
        return [UNKNOWN_MEMBER] * len(req.members)
    members = {mid: m.group_instance_id for mid, m in group.members.items()}
    static = dict(group.static_members)
    pending = set(group.pending_members)
    out = []
    for identity in req.members:
        mid, instance = identity.member_id, identity.group_instance_id
        if mid == "":
            target = static.get(instance) if instance is not None else None
            error = NONE if target is not None else UNKNOWN_MEMBER
        elif mid in pending:
            error, target = NONE, None
            pending.discard(mid)
        else:
            owner = static.get(instance) if instance is not None else None
            if instance is not None and owner is None:
                error = UNKNOWN_MEMBER
            elif instance is not None and owner != mid:
                error = Error.FENCED_INSTANCE_ID
            else:
                error = NONE if mid in members else UNKNOWN_MEMBER
            target = mid if error is NONE else None
        if target is not None:
            static.pop(members.pop(target, None), None)
        out.append(error)
    return out


def commit_validation(group, req: ev.OffsetCommit) -> Error | None:
    """OffsetMetadataManager.validateOffsetCommit + ClassicGroup.validateOffsetCommit (§3.8)."""
    gen = req.generation_id
    if group is None:
        if gen < 0:
            return None  # a simple group is created
        return Error.GROUP_ID_NOT_FOUND if req.version >= 9 else Error.ILLEGAL_GENERATION
    if gen < 0 and group.state is EMPTY:
        return None
    if gen >= 0 or req.member_id != "" or req.group_instance_id is not None:
        error = member_error(group, req.member_id, req.group_instance_id)
        if error is not None:
            return error
        if gen != group.generation_id:
            return Error.ILLEGAL_GENERATION
    elif group.state is not EMPTY:
        return UNKNOWN_MEMBER
    if group.state is COMPLETING_REBALANCE:
        return Error.REBALANCE_IN_PROGRESS
    return None


def expected_commit(group, req: ev.OffsetCommit, metadata_max: int) -> list[list[Error]]:
    """Per topic, per partition: the validation error, else OFFSET_METADATA_TOO_LARGE for
    metadata longer than offset.metadata.max.bytes (exactly the maximum is fine), else NONE."""
    error = commit_validation(group, req)
    return [[error if error is not None else
             Error.OFFSET_METADATA_TOO_LARGE if p.committed_metadata is not None
             and java_length(p.committed_metadata) > metadata_max else NONE
             for p in partitions] for _, partitions in req.topics]


# ------------------------------------------------------------------ offsets (§5.3)


def expiration_base(group):
    """ClassicGroup.offsetExpirationCondition: the timestamp retention counts from, or None
    when the group's offsets cannot expire now."""
    if group.protocol_type is None:
        return lambda entry: entry.commit_timestamp_ms  # a simple group
    if group.state is EMPTY:
        return lambda entry: group.state_timestamp_ms if group.state_timestamp_ms is not None \
            else entry.commit_timestamp_ms
    if group.protocol_type == "consumer" and group.subscribed_topics is not None and group.state is STABLE:
        return lambda entry: entry.commit_timestamp_ms
    return None


def is_subscribed(group, topic: str) -> bool:
    """ClassicGroup.isSubscribedToTopic."""
    if group.subscribed_topics is not None:
        return topic in group.subscribed_topics
    return group.protocol_type == "consumer"


def offset_expired(entry, base: int, now: int, retention_ms: int) -> bool:
    """OffsetExpirationConditionImpl.isOffsetExpired."""
    if entry.expire_timestamp_ms is not None:
        return now >= entry.expire_timestamp_ms
    return now - base >= retention_ms


# ------------------------------------------------------------------ the oracle


class KafkaOracle:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """A new coordinator instance: it owes nothing; what it owns is read once, at its first
        event (a Driver loads its partitions before anyone observes it)."""
        self.partitions: dict[int, str] | None = None
        self.owed: dict[Any, tuple] = {}  # request id -> (request, what Kafka answers)
        self.offsets: dict[str, dict] = {}  # group -> offsets held after the last event
        self.armed: dict = {}  # timer key -> what the current event left armed (final_timers)
        self.tolerated: list = []  # (divergence, request id): where a known divergence showed

    def check(self, before: Mapping, after: Mapping, event, commands: list, coordinator) -> list[str]:
        config = coordinator.config
        found: list[str] = []
        answers = {c.request_id: c.response for c in commands if isinstance(c, Respond)}
        self.armed = final_timers(commands)
        if self.partitions is None:
            self.partitions = dict(coordinator.owned_partitions())  # "active" or "loading"
        if isinstance(event, ev.LoadPartition):
            self.partitions[event.partition] = "loading" if event.loading else "active"
        elif isinstance(event, ev.UnloadPartition):
            self.partitions.pop(event.partition, None)
        if isinstance(event, ev.Request) and hasattr(event, "group_id"):
            found += self._request(before, after, event, answers, config)
        for rid, response in answers.items():
            if rid in self.owed:
                found += self._owed_answer(rid, response, event)
        found += self._timers(before, after, event, answers, config)
        if isinstance(event, ev.TimerFired):
            found += self._expiry(before, after, event, coordinator, config)
        found += self._votes(before, after)
        self.offsets = {gid: coordinator.offsets(gid) for gid in after}
        return found

    # -------------------------------------------------------------- answers

    def _request(self, before, after, req, answers, config) -> list[str]:
        gid = req.group_id
        status = self.partitions.get(kafka_partition(gid, config.offsets_topic_num_partitions)) \
            if gid is not None else None
        group = before.get(gid)
        early = precheck(req, status, config)
        if isinstance(req, ev.Heartbeat):
            expected = early if early is not None else expected_heartbeat(group, req)
            self.owed[req.request_id] = (req, expected)
            out = []
            if early is None and expected in (NONE, Error.REBALANCE_IN_PROGRESS):
                out += _require_timer(HeartbeatTimer(group.partition, gid, req.member_id), req,
                                      group.members[req.member_id].session_timeout_ms, self.armed)
            return out
        if isinstance(req, ev.LeaveGroup):
            self.owed[req.request_id] = (req, early if early is not None else expected_leave(group, req))
            return []
        if isinstance(req, ev.OffsetCommit):
            if early is not None:
                self.owed[req.request_id] = (req, [[early] * len(ps) for _, ps in req.topics])
                return []
            self.owed[req.request_id] = (req, expected_commit(group, req, config.offset_metadata_max_bytes))
            if group is not None and commit_validation(group, req) is None \
                    and group.state in (STABLE, PREPARING_REBALANCE):
                return _require_timer(HeartbeatTimer(group.partition, gid, req.member_id), req,
                                      group.members[req.member_id].session_timeout_ms, self.armed)
            return []
        if isinstance(req, ev.SyncGroup):
            expected = early if early is not None else expected_sync(group, req)
            return _immediate(req, expected, answers.get(req.request_id), group)
        if isinstance(req, ev.JoinGroup):
            expected = early if early is not None else expected_join(group, req, config.group_max_size)
            out = _immediate(req, expected, answers.get(req.request_id), group)
            if expected is Error.GROUP_MAX_SIZE_REACHED:
                kept = after.get(gid)
                if kept is not None and (req.member_id in kept.members or req.member_id in kept.pending_members):
                    out.append(f"oracle_error: JoinGroup {req.request_id!r}: {req.member_id!r} refused with "
                               f"GROUP_MAX_SIZE_REACHED but still in group {gid!r} (Kafka removes it)")
            return out
        return []

    def _owed_answer(self, rid, response, event) -> list[str]:
        req, expected = self.owed.pop(rid)
        if isinstance(event, ev.WriteFailed):
            failures = failed_write_errors(Error.parse(event.error))
        elif isinstance(event, ev.UnloadPartition):
            failures = {Error.NOT_COORDINATOR}
        else:
            failures = set()
        if isinstance(req, ev.Heartbeat):
            got = response.error_code if isinstance(response, HeartbeatResponse) else response
            ok = got is expected or got in failures
        elif isinstance(req, ev.LeaveGroup):
            if not isinstance(expected, list):  # the whole request failed its pre-checks
                got = (response.error_code, [m.error_code for m in response.members])
                ok = got == (expected, [])
            else:
                got = (response.error_code, [m.error_code for m in response.members])
                ok = got == (NONE, expected) or (response.error_code in failures and not response.members)
                expected = (NONE, expected)
        else:  # OffsetCommit
            got = [[p.error_code for p in t.partitions] for t in response.topics] \
                if isinstance(response, OffsetCommitResponse) else response
            every = {e for t in (got if isinstance(got, list) else []) for e in t}
            ok = got == expected or (len(every) == 1 and every <= failures)
        if ok:
            return []
        return [f"oracle_error: {type(req).__name__} {rid!r} (group {req.group_id!r}, member "
                f"{getattr(req, 'member_id', None)!r}) answered {_show(got)} on {type(event).__name__}; "
                f"Kafka answers {_show(expected)}"]

    # -------------------------------------------------------------- timers

    def _timers(self, before, after, event, answers, config) -> list[str]:
        now = event.now_ms
        out = []
        for key, timer in self.armed.items():
            if timer is None:
                continue
            allowed, payload = self._timer_length(key, before, after, event, answers, config)
            if allowed is None:
                continue
            if timer.deadline_ms - now not in allowed or (payload is not _ANY and timer.payload != payload):
                out.append(f"oracle_timer: {type(event).__name__} armed {key} for {timer.deadline_ms - now} ms "
                           f"(payload {timer.payload}); Kafka: {sorted(allowed)} ms"
                           + ("" if payload is _ANY else f" (payload {payload})"))
        out += self._required_timers(before, after, event, self.armed)
        return out

    def _timer_length(self, key, before, after, event, answers, config):
        """(the lengths Kafka may arm ``key`` with in this event, the payload or _ANY);
        (None, _) when the oracle has no rule for it."""
        kind = type(key)
        if kind is ExpirationTimer:
            return {config.offsets_retention_check_interval_ms}, None
        gid = key.group_id
        b, a = before.get(gid), after.get(gid)
        if kind is HeartbeatTimer:
            return self._heartbeat_length(key.member_id, b, a, event, answers), _ANY
        longest = rebalance_timeout(a)
        if kind is SyncTimer:
            return {longest}, a.generation_id if a is not None else _ANY
        if kind is JoinTimer:
            initial = config.group_initial_rebalance_delay_ms
            timer = self.armed[key]
            if isinstance(timer.payload, InitialDelay):
                if isinstance(event, ev.TimerFired) and type(event.key) is JoinTimer \
                        and event.key.group_id == gid and isinstance(event.payload, InitialDelay):
                    # tryCompleteInitialRebalanceElseSchedule: extend by min(delay, remaining).
                    delay, remaining = event.payload.delay_ms, event.payload.remaining_ms
                    extension = min(initial, remaining)
                    return {extension}, InitialDelay(extension, max(remaining - delay, 0))
                return {initial}, InitialDelay(initial, max(longest - initial, 0))  # leaving Empty
            # The rebalance timeout; D14: at least 1 ms when nobody rejoined.
            return {longest, max(longest, 1)}, None
        return None, _ANY

    @staticmethod
    def _heartbeat_length(mid, b, a, event, answers) -> set[int] | None:
        if isinstance(event, ev.JoinGroup) and a is not None and event.group_id == a.group_id:
            answer = answers.get(event.request_id)
            if isinstance(answer, JoinGroupResponse) and answer.error_code is Error.MEMBER_ID_REQUIRED \
                    and answer.member_id == mid:
                return {event.session_timeout_ms}  # a pending member id (§3.1 step 3)
            member = a.members.get(mid)
            if member is not None and member.is_new:
                return {NEW_MEMBER_JOIN_TIMEOUT_MS}  # added, and not yet through a join phase
            completed = b is not None and a.generation_id == b.generation_id + 1
            instance = event.group_instance_id
            if member is not None and not completed and event.member_id == "" and b is not None \
                    and instance in b.static_members and mid not in b.members:
                # A static member's new id keeps the old member's session timeout (§6 step 3).
                return {b.members[b.static_members[instance]].session_timeout_ms}
        member = (a.members.get(mid) if a is not None else None) or (b.members.get(mid) if b is not None else None)
        return {member.session_timeout_ms} if member is not None else None

    def _required_timers(self, before, after, event, final) -> list[str]:
        """Timers Kafka arms at this point: the join timer when a group starts a join phase, the
        sync timer and every member's heartbeat when a join phase completes into
        CompletingRebalance, the join timeout of a member added to a rebalancing group."""
        out = []
        for gid, a in after.items():
            b = before.get(gid)
            if b is None and not isinstance(event, ev.JoinGroup):
                continue
            need = []
            if a.state is PREPARING_REBALANCE and (b is None or b.state is not PREPARING_REBALANCE):
                need.append(JoinTimer(a.partition, gid))
            if b is not None and a.state is COMPLETING_REBALANCE and a.generation_id == b.generation_id + 1:
                need.append(SyncTimer(a.partition, gid))
                need += [HeartbeatTimer(a.partition, gid, mid) for mid in a.members]
            if isinstance(event, ev.JoinGroup) and event.group_id == gid:
                need += [HeartbeatTimer(a.partition, gid, mid) for mid, m in a.members.items()
                         if m.is_new and (b is None or mid not in b.members)]
            out += [f"oracle_timer: {type(event).__name__} left {key} unarmed (group {gid!r} "
                    f"{b.state if b else 'absent'} -> {a.state})" for key in need if final.get(key) is None]
        return out

    # -------------------------------------------------------------- expiry and retention

    def _expiry(self, before, after, event, coordinator, config) -> list[str]:
        key = event.key
        if self.partitions.get(getattr(key, "partition", None)) != "active":
            return []
        kind = type(key)
        if kind is ExpirationTimer:
            return self._retention(before, after, key.partition, event.now_ms, coordinator, config)
        b = before.get(getattr(key, "group_id", None))
        if b is None:
            return []
        a = after.get(b.group_id)
        left = set(a.members) if a is not None else set()
        out = []

        def bad(detail: str) -> None:
            out.append(f"oracle_expiry: {key} fired: {detail} (group {b.group_id!r} {b.state})")

        if kind is HeartbeatTimer:
            mid = key.member_id
            if mid in b.pending_members:
                if a is not None and mid in a.pending_members:
                    bad(f"pending member {mid!r} kept")
            elif mid in b.members:
                satisfied = satisfied_heartbeat(b.members[mid])
                if satisfied and mid not in left:
                    bad(f"member {mid!r} removed although it satisfied its heartbeat")
                if not satisfied and mid in left:
                    bad(f"member {mid!r} kept (no heartbeat within its session timeout)")
        elif kind is SyncTimer:
            if event.payload == b.generation_id and b.state in (COMPLETING_REBALANCE, STABLE) and b.pending_sync:
                if b.pending_sync & left:
                    bad(f"members {sorted(b.pending_sync & left)} kept without a SyncGroup")
        elif kind is JoinTimer and b.state is PREPARING_REBALANCE:
            extended = isinstance(event.payload, InitialDelay) and b.new_member_added \
                and event.payload.remaining_ms != 0
            if not extended:
                stale = {mid for mid, m in b.members.items()
                         if m.awaiting_join is None and m.group_instance_id is None}
                if stale & left:
                    bad(f"dynamic members {sorted(stale & left)} kept without rejoining")
        return out

    def _retention(self, before, after, partition, now, coordinator, config) -> list[str]:
        retention_ms = config.offsets_retention_minutes * 60_000
        out = []
        for gid, b in before.items():
            if kafka_partition(gid, config.offsets_topic_num_partitions) != partition:
                continue
            held = self.offsets.get(gid, {})
            base = expiration_base(b)
            expired = {key for key, entry in held.items() if base is not None and not is_subscribed(b, key[0])
                       and offset_expired(entry, base(entry), now, retention_ms)}
            left = coordinator.offsets(gid)
            wrong = sorted((expired & left.keys()) | {k for k in held.keys() - expired if left.get(k) != held[k]})
            if wrong:
                out.append(f"oracle_retention: expiration at {now} ms (retention {retention_ms} ms): "
                           f"group {gid!r} ({b.state}) offsets {wrong}: expected expired {sorted(expired)}, "
                           f"held {_entries(held)}, left {_entries(left)}")
            deleted = b.state is EMPTY and expired == held.keys()
            if deleted != (gid not in after):
                out.append(f"oracle_retention: expiration at {now} ms: Empty group {gid!r} with offsets "
                           f"{_entries(held)} {'kept' if deleted else 'deleted'}; Kafka "
                           f"{'deletes' if deleted else 'keeps'} it")
        return out

    # -------------------------------------------------------------- the vote

    @staticmethod
    def _votes(before, after) -> list[str]:
        out = []
        for gid, a in after.items():
            b = before.get(gid)
            if b is None or a.state is not COMPLETING_REBALANCE or a.generation_id != b.generation_id + 1:
                continue
            winners = kafka_vote(a.members.values())
            if a.protocol_name not in winners:
                prefs = {mid: [n for n, _ in m.protocols] for mid, m in a.members.items()}
                out.append(f"oracle_vote: group {gid!r} generation {a.generation_id} elected "
                           f"{a.protocol_name!r}; Kafka elects {sorted(winners)} (preferences {prefs})")
        return out


_ANY = object()


def _immediate(req, expected, answer, group) -> list[str]:
    """JoinGroup and SyncGroup: an error is answered at once; a parked request is not; an
    accepted join is answered NONE at once only if its join phase completes now."""
    got = getattr(answer, "error_code", None)
    if expected is PARKED:
        ok = answer is None
    elif expected is ACCEPTED:
        ok = answer is None or got is NONE
    elif expected is CURRENT:
        ok = got is NONE and answer.generation_id == group.generation_id
    else:
        ok = got is expected
    if ok:
        return []
    return [f"oracle_error: {type(req).__name__} {req.request_id!r} v{req.version} (member {req.member_id!r}, "
            f"instance {req.group_instance_id!r}, generation {getattr(req, 'generation_id', None)}) to "
            f"{'absent' if group is None else group.state} group {req.group_id!r} "
            f"(generation {getattr(group, 'generation_id', None)}, members {list(getattr(group, 'members', {}))}) "
            f"answered {_show(got) if answer is not None else 'nothing yet'}; Kafka: {_show(expected)}"]


def final_timers(commands: list) -> dict:
    """Timer key -> the SetTimer an event leaves in place (None: cancelled), the last command
    on each key winning."""
    final: dict = {}
    for c in commands:
        if isinstance(c, SetTimer):
            final[c.key] = c
        elif isinstance(c, CancelTimer):
            final[c.key] = None
        elif isinstance(c, CancelPartitionTimers):
            final = {k: (None if k.partition == c.partition else v) for k, v in final.items()}
    return final


def _require_timer(key, req, session_ms: int, armed: dict) -> list[str]:
    timer = armed.get(key)
    if timer is not None and timer.deadline_ms == req.now_ms + session_ms:
        return []
    return [f"oracle_timer: {type(req).__name__} {req.request_id!r} accepted but {key} "
            f"{'not re-armed' if timer is None else f'armed for {timer.deadline_ms - req.now_ms} ms'}; "
            f"Kafka re-arms it for the session timeout, {session_ms} ms"]


def _show(value) -> str:
    if isinstance(value, Error):
        return value.name
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)


def _entries(offsets: Mapping) -> str:
    return "{" + ", ".join(f"{t}-{p}: commit {e.commit_timestamp_ms} expire {e.expire_timestamp_ms}"
                           for (t, p), e in sorted(offsets.items())) + "}"
