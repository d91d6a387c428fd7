"""The coordinator's invariants, defined once.

Pure functions over the coordinator's frozen values (``model.Group``), its events and its
commands: the hypothesis tests call them after every event, and a trace replay or the TLA+
mapping can call them (or reuse their names) the same way. Each returns a list of violation
messages ``"<name>: <detail>"``; an empty list means the invariant holds. ``INVARIANT_NAMES``
lists every name, ``INVARIANTS`` maps each to the statement it checks.

* ``check_group(group)``: one group's state at rest (after an event).
* ``check_transition(before, after, event)``: one group across one event (``None`` = absent).
* ``check_commands(before_groups, after_groups, event, commands, ...)``: what one event emitted.
* ``check_response(request, group_at_request, response)``: one answer against the group as it
  was when the request arrived (validation happens then, even if the answer is sent later).
* ``check_timers(groups, armed)``: the armed timers (key -> (deadline, payload)) of a driver.

Section numbers refer to spec/kafka-classic-semantics.md (§7 lists the invariants).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from groupcoord.core import events as ev
from groupcoord.core.classic.model import Group
from groupcoord.core.classic.states import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    LEGAL_PREVIOUS,
    PREPARING_REBALANCE,
    STABLE,
)
from groupcoord.core.commands import (
    HeartbeatResponse,
    HeartbeatTimer,
    JoinGroupResponse,
    JoinTimer,
    LeaveGroupResponse,
    OffsetCommitResponse,
    SyncGroupResponse,
    SyncTimer,
)
from groupcoord.core.errors import Error

INVARIANTS: dict[str, str] = {}


def _name(name: str, statement: str) -> str:
    INVARIANTS[name] = statement
    return name


# --- one group at rest (§7 3-10, 16) ------------------------------------------------------
LEADER_IS_MEMBER = _name("leader_is_member", "the leader is a member iff the group has members")
EMPTY_HAS_NO_MEMBERS = _name("empty_has_no_members", "Empty => no members and no protocol name")
STATIC_MAP_CONSISTENT = _name(
    "static_map_consistent", "static_members is one-to-one and agrees with the members' instance ids")
AWAITING_JOIN_COUNT = _name("awaiting_join_count", "num_awaiting_join = members with a parked JoinGroup")
PROTOCOL_COUNTS = _name(
    "protocol_counts", "protocol_counts[n] = number of members listing n (a name listed twice counts once)")
PENDING_NOT_MEMBERS = _name("pending_not_members", "pending member ids are not member ids")
PENDING_SYNC_SUBSET = _name(
    "pending_sync_subset", "the members in pending_sync have no parked sync (an id that is no member is a "
    "replaced static member's, left there as Kafka does); non-empty only in CompletingRebalance/Stable")
SETTLED_GROUP_HAS_PROTOCOL = _name(
    "settled_group_has_protocol", "CompletingRebalance/Stable => >= 1 member and a protocol name "
    "listed by every member")
PARKED_SYNC_ONLY_COMPLETING = _name("parked_sync_only_completing", "a parked SyncGroup => CompletingRebalance")
PARKED_JOIN_STATE = _name(
    "parked_join_state", "a parked JoinGroup => PreparingRebalance, or Stable (a static replacement "
    "waiting for its write)")
NEW_MEMBER_ONLY_PREPARING = _name(
    "new_member_only_preparing", "a member that never completed a join phase => PreparingRebalance")
MEMBERS_SHARE_PROTOCOL_TYPE = _name(
    "members_share_protocol_type", "every member has the group's protocol type")
GENERATION_NON_NEGATIVE = _name("generation_non_negative", "generation >= 0")

# --- one group across one event (§7 1, 11, 13) ------------------------------------------------
LEGAL_TRANSITION = _name(
    "legal_transition", "state changes follow LEGAL_PREVIOUS; one event may start a rebalance and "
    "complete its join phase (Stable/CompletingRebalance -> PreparingRebalance -> "
    "CompletingRebalance/Empty)")
DEAD_IS_ABSORBING = _name("dead_is_absorbing", "Dead stays Dead (or the group is dropped)")
CREATION_STATE = _name(
    "creation_state", "a group appears in Empty/PreparingRebalance at generation 0, from a load, or "
    "back in Empty when the write of its tombstone fails")
REMOVAL_ALLOWED = _name(
    "removal_allowed", "a group disappears only from Empty (deletion, expiry), on unload, or when the "
    "write creating it fails")
GENERATION_MONOTONIC = _name("generation_monotonic", "the generation never decreases")
GENERATION_STEP = _name("generation_step", "one event completes at most one join phase: generation +0 or +1")
GENERATION_BUMP_IFF_JOIN_COMPLETED = _name(
    "generation_bump_iff_join_completed", "the generation grows exactly when a join phase completes "
    "(PreparingRebalance -> CompletingRebalance/Empty)")
STABLE_ONLY_ON_WRITE_COMPLETED = _name(
    "stable_only_on_write_completed", "a group becomes Stable only when the leader's assignment write "
    "succeeds (or when loaded)")

# --- what one event emits ------------------------------------------------------------------
ANSWERED_ONCE_PER_EVENT = _name("answered_once_per_event", "no request is answered twice by one event")
PARKED_REQUEST_NOT_LOST = _name(
    "parked_request_not_lost", "a parked JoinGroup/SyncGroup stays parked until answered, except "
    "where Kafka drops it (a newer request of the same member replaces it; the parked sync of a "
    "member that leaves)")
JOIN_OK_CURRENT_GENERATION = _name(
    "join_ok_current_generation", "a JoinGroup NONE carries the group's generation, protocol and a "
    "member id of the group as they are after the event")
JOIN_OK_LEADER = _name(
    "join_ok_leader", "a JoinGroup NONE names the current leader; only the leader gets the member list, "
    "and it lists every member")
SYNC_OK_CURRENT_ASSIGNMENT = _name(
    "sync_ok_current_assignment", "a SyncGroup NONE is sent in Stable, at the requested generation, with "
    "the member's stored assignment")
ASSIGNMENT_WRITE_FROM_LEADER = _name(
    "assignment_write_from_leader", "a SyncGroup writes an assignment only from the leader, in "
    "CompletingRebalance, at the current generation, with exactly the leader's assignment")
METADATA_WRITE_SOURCE = _name(
    "metadata_write_source", "group records are written only by the leader's sync, a static "
    "replacement in Stable, a group's creation or a join phase ending in Empty")
COMPLETION_WITNESSED = _name(
    "completion_witnessed", "a completed join phase answers the leader (CompletingRebalance) or "
    "writes the Empty record (Empty) with the new generation")
DYNAMIC_MEMBERS_REJOINED = _name(
    "dynamic_members_rejoined", "a join phase completing into CompletingRebalance answers every dynamic "
    "member left in the group (one that did not rejoin is removed; static ones are kept)")
MEMBER_ID_REQUIRED_IS_PENDING = _name(
    "member_id_required_is_pending", "a MEMBER_ID_REQUIRED reply's member id is a pending member")

# --- one answer against the group when its request arrived (§3, §6) --------------------------
JOIN_REQUIRES_KNOWN_MEMBER = _name(
    "join_requires_known_member", "a JoinGroup with an unknown or fenced member id never gets NONE")
JOIN_MEMBER_ID_FORMAT = _name(
    "join_member_id_format", "JoinGroup answers keep a known member id; new ids are "
    "<instance or client id>-<uuid>; MEMBER_ID_REQUIRED only for dynamic v4+ joins with id \"\"")
HEARTBEAT_REQUIRES_VALID_MEMBER = _name(
    "heartbeat_requires_valid_member", "Heartbeat NONE/REBALANCE_IN_PROGRESS only for a valid member "
    "at the group's generation (NONE in CompletingRebalance/Stable, 27 in PreparingRebalance)")
SYNC_REQUIRES_VALID_MEMBER = _name(
    "sync_requires_valid_member", "SyncGroup NONE only for a valid member at the group's generation")
COMMIT_REQUIRES_VALID_MEMBER = _name(
    "commit_requires_valid_member", "an OffsetCommit is accepted only from a valid member at the "
    "group's generation (not CompletingRebalance), or with generation < 0 for an Empty/absent group")
LEAVE_REQUIRES_KNOWN_MEMBER = _name(
    "leave_requires_known_member", "LeaveGroup removes (NONE) only a member, a pending member, or a "
    "static instance named with member id \"\"")

# --- timers (§7 14, 15) -------------------------------------------------------------------
JOIN_TIMER_WHEN_PREPARING = _name(
    "join_timer_when_preparing", "a PreparingRebalance group has a join timer (one left armed in "
    "another state, e.g. by a rolled-back creation, finds nothing to do and is replaced on the next "
    "rebalance)")
SYNC_TIMER_GENERATION = _name(
    "sync_timer_generation", "a sync timer exists only in CompletingRebalance/Stable, for the current "
    "generation")
PENDING_MEMBER_HAS_TIMER = _name("pending_member_has_timer", "every pending member has an expiry timer")

INVARIANT_NAMES: tuple[str, ...] = tuple(INVARIANTS)


def names_of(violations: Iterable[str]) -> set[str]:
    """The invariant names in a list of violation messages."""
    return {v.split(":", 1)[0] for v in violations}


def violation(name: str, group_id: Any, detail: str) -> str:
    return f"{name}: group {group_id!r}: {detail}"


def valid_member(group: Group, member_id: str, instance_id: str | None) -> bool:
    """ClassicGroup.validateMember succeeds (§6)."""
    if instance_id is not None and group.static_members.get(instance_id) != member_id:
        return False
    return member_id in group.members


def parked_requests(group: Group | None) -> dict[Any, tuple[str, str]]:
    """request id -> (member id, "join" | "sync") for every request the group holds."""
    parked: dict[Any, tuple[str, str]] = {}
    if group is not None:
        for mid, m in group.members.items():
            if m.awaiting_join is not None:
                parked[m.awaiting_join.request_id] = (mid, "join")
            if m.awaiting_sync is not None:
                parked[m.awaiting_sync.request_id] = (mid, "sync")
    return parked


# ------------------------------------------------------------------ check_group


def check_group(group: Group) -> list[str]:
    """Violations of the state invariants of one frozen group."""
    out: list[str] = []
    gid, state, members = group.group_id, group.state, group.members
    leader, protocol_name, protocol_type = group.leader_id, group.protocol_name, group.protocol_type

    def bad(name: str, detail: str) -> None:
        out.append(violation(name, gid, detail))

    if bool(members) != (leader in members):
        bad(LEADER_IS_MEMBER, f"leader {leader!r}, members {list(members)}")
    if not members and leader is not None:
        bad(LEADER_IS_MEMBER, f"leader {leader!r} without members")
    if state is EMPTY and (members or protocol_name is not None):
        bad(EMPTY_HAS_NO_MEMBERS, f"members {list(members)}, protocol {protocol_name!r}")

    # one pass over the members collects what the checks below compare
    expected_static: dict = {}
    static_twice = False
    awaiting = 0
    recount: dict = {}
    syncing = set()
    joining, fresh, unlisted = [], [], []
    odd = {}
    for mid, m in members.items():
        instance = m.group_instance_id
        if instance is not None:
            if instance in expected_static:
                static_twice = True
            expected_static[instance] = mid
        names = {n for n, _ in m.protocols}
        for name in names:
            recount[name] = recount.get(name, 0) + 1
        if protocol_name not in names:
            unlisted.append(mid)
        if m.awaiting_join is not None:
            awaiting += 1
            joining.append(mid)
        if m.awaiting_sync is not None:
            syncing.add(mid)
        if m.is_new:
            fresh.append(mid)
        if m.protocol_type != protocol_type:
            odd[mid] = m.protocol_type

    if static_twice or dict(group.static_members) != expected_static:
        bad(STATIC_MAP_CONSISTENT, f"static_members {dict(group.static_members)}, members say {expected_static}")

    if group.num_awaiting_join != awaiting:
        bad(AWAITING_JOIN_COUNT, f"num_awaiting_join {group.num_awaiting_join}, parked joins {awaiting}")

    counts = {k: v for k, v in group.protocol_counts.items() if v}
    if counts != recount:
        bad(PROTOCOL_COUNTS, f"protocol_counts {counts}, recount {recount}")

    if group.pending_members & members.keys():
        bad(PENDING_NOT_MEMBERS, f"{sorted(group.pending_members & members.keys())}")

    if not group.pending_sync & members.keys() <= members.keys() - syncing or (
            group.pending_sync and state not in (COMPLETING_REBALANCE, STABLE)):
        bad(PENDING_SYNC_SUBSET, f"pending_sync {sorted(group.pending_sync)} in {state}, "
                                 f"members {list(members)}, parked syncs {sorted(syncing)}")

    if state in (COMPLETING_REBALANCE, STABLE):
        if not members or protocol_name is None or unlisted:
            bad(SETTLED_GROUP_HAS_PROTOCOL, f"{state} with members {list(members)}, protocol "
                                            f"{protocol_name!r}, not listed by {unlisted}")
    if syncing and state is not COMPLETING_REBALANCE:
        bad(PARKED_SYNC_ONLY_COMPLETING, f"parked syncs of {sorted(syncing)} in {state}")
    if joining and state not in (PREPARING_REBALANCE, STABLE):
        bad(PARKED_JOIN_STATE, f"parked joins of {joining} in {state}")
    if fresh and state is not PREPARING_REBALANCE:
        bad(NEW_MEMBER_ONLY_PREPARING, f"new members {fresh} in {state}")
    if odd:
        bad(MEMBERS_SHARE_PROTOCOL_TYPE, f"group type {protocol_type!r}, members {odd}")
    if group.generation_id < 0:
        bad(GENERATION_NON_NEGATIVE, f"generation {group.generation_id}")
    return out


# ------------------------------------------------------------------ check_transition

_DIRECT = {(source, target) for target, sources in LEGAL_PREVIOUS.items() for source in sources}
# One event may start a rebalance and complete the join phase at once (prepareRebalance finds
# everyone joined); never from Empty, whose initial rebalance always waits for the delay.
_VIA_PREPARING = {(source, target) for source in (STABLE, COMPLETING_REBALANCE)
                  for target in (COMPLETING_REBALANCE, EMPTY)}
ONE_EVENT_TRANSITIONS = frozenset(_DIRECT | _VIA_PREPARING)


def reverted_recreation(before: Group | None, after: Group | None, event: Any) -> bool:
    """Whether ``after`` may be another group than ``before``: a failed write reverted both the
    creation of ``before`` (at any generation: Kafka's revert removes it even after its join
    completed) and the deletion of the Empty group it had replaced."""
    return (isinstance(event, ev.WriteFailed) and before is not None and after is not None
            and after.state is EMPTY)


def check_transition(before: Group | None, after: Group | None, event: Any = None) -> list[str]:
    """Violations for one group across one event; ``None`` means the group is absent."""
    out: list[str] = []
    if before is None and after is None:
        return out
    gid = (after or before).group_id

    def bad(name: str, detail: str) -> None:
        out.append(violation(name, gid, detail))

    if before is None:
        created = after.generation_id == 0 and after.state in (EMPTY, PREPARING_REBALANCE)
        restored = isinstance(event, ev.WriteFailed) and after.state is EMPTY
        if not (created or restored or isinstance(event, ev.LoadPartition)):
            bad(CREATION_STATE, f"created in {after.state} at generation {after.generation_id} "
                                f"by {type(event).__name__}")
        return out
    if after is None:
        allowed = (before.state is EMPTY or isinstance(event, ev.UnloadPartition)
                   or isinstance(event, ev.WriteFailed))  # a failed creation write reverts the group
        if not allowed:
            bad(REMOVAL_ALLOWED, f"removed from {before.state} (generation {before.generation_id}, members "
                                 f"{list(before.members)}) by {type(event).__name__}")
        return out

    if reverted_recreation(before, after, event):
        return out  # a removal (the creation failed) and a restore (the deletion failed), both allowed
    b, a = before.state, after.state
    if b is DEAD and a is not DEAD:
        bad(DEAD_IS_ABSORBING, f"Dead -> {a}")
    if b is not a and (b, a) not in ONE_EVENT_TRANSITIONS:
        bad(LEGAL_TRANSITION, f"{b} -> {a}")
    step = after.generation_id - before.generation_id
    if step < 0:
        bad(GENERATION_MONOTONIC, f"{before.generation_id} -> {after.generation_id}")
    elif step > 1:
        bad(GENERATION_STEP, f"{before.generation_id} -> {after.generation_id} in one event")
    completed = a in (COMPLETING_REBALANCE, EMPTY) and b in (PREPARING_REBALANCE, STABLE, COMPLETING_REBALANCE)
    must_complete = completed and b is not a
    if (step == 1 and not completed) or (step == 0 and must_complete):
        bad(GENERATION_BUMP_IFF_JOIN_COMPLETED, f"{b} -> {a} with generation "
                                                f"{before.generation_id} -> {after.generation_id}")
    if a is STABLE and b is not STABLE and event is not None and not isinstance(event, ev.WriteCompleted):
        bad(STABLE_ONLY_ON_WRITE_COMPLETED, f"{b} -> Stable on {type(event).__name__}")
    return out


# ------------------------------------------------------------------ check_response


def check_response(request: Any, group: Group | None, response: Any, loading: bool = False) -> list[str]:
    """Violations of one answer against ``group`` as it was when ``request`` arrived (None:
    absent). ``loading``: the group's partition was loading then (Heartbeat gets NONE)."""
    out: list[str] = []
    gid = getattr(request, "group_id", None)

    def bad(name: str, detail: str) -> None:
        out.append(violation(name, gid, f"{type(request).__name__} {request.request_id!r}: {detail}"))

    if isinstance(request, ev.JoinGroup) and isinstance(response, JoinGroupResponse):
        code, mid, inst = response.error_code, request.member_id, request.group_instance_id
        if mid and code in (Error.NONE, Error.MEMBER_ID_REQUIRED) and not (
                group is not None and (mid in group.pending_members or valid_member(group, mid, inst))):
            bad(JOIN_REQUIRES_KNOWN_MEMBER, f"member {mid!r} (instance {inst!r}) got {code.name}")
        if code is Error.MEMBER_ID_REQUIRED and not (
                request.version >= 4 and mid == "" and inst is None
                and response.member_id.startswith(f"{request.client_id}-")):
            bad(JOIN_MEMBER_ID_FORMAT, f"MEMBER_ID_REQUIRED with id {response.member_id!r} for v{request.version} "
                                       f"member {mid!r} instance {inst!r}")
        if code is Error.NONE:
            prefix = f"{inst}-" if inst is not None else f"{request.client_id}-"
            ok = response.member_id == mid if mid else (
                response.member_id.startswith(prefix) and (inst is not None or request.version < 4))
            if not ok:
                bad(JOIN_MEMBER_ID_FORMAT, f"NONE with member id {response.member_id!r} for member {mid!r} "
                                           f"instance {inst!r} v{request.version}")
    elif isinstance(request, ev.Heartbeat) and isinstance(response, HeartbeatResponse):
        code = response.error_code
        if code in (Error.NONE, Error.REBALANCE_IN_PROGRESS):
            if group is None:
                ok = loading and code is Error.NONE
            else:
                ok = (valid_member(group, request.member_id, request.group_instance_id)
                      and request.generation_id == group.generation_id
                      and group.state in ((COMPLETING_REBALANCE, STABLE) if code is Error.NONE
                                          else (PREPARING_REBALANCE,)))
            if not ok:
                bad(HEARTBEAT_REQUIRES_VALID_MEMBER, _member_detail(group, request, code))
    elif isinstance(request, ev.SyncGroup) and isinstance(response, SyncGroupResponse):
        if response.error_code is Error.NONE and not (
                group is not None and valid_member(group, request.member_id, request.group_instance_id)
                and request.generation_id == group.generation_id
                and group.state in (COMPLETING_REBALANCE, STABLE)):
            bad(SYNC_REQUIRES_VALID_MEMBER, _member_detail(group, request, Error.NONE))
    elif isinstance(request, ev.OffsetCommit) and isinstance(response, OffsetCommitResponse):
        accepted = any(p.error_code is Error.NONE for t in response.topics for p in t.partitions)
        if accepted:
            gen = request.generation_id
            if group is None:
                ok = gen < 0
            elif gen < 0 and group.state is EMPTY:
                ok = True
            else:
                ok = (valid_member(group, request.member_id, request.group_instance_id)
                      and gen == group.generation_id and group.state not in (COMPLETING_REBALANCE, DEAD))
            if not ok:
                bad(COMMIT_REQUIRES_VALID_MEMBER, _member_detail(group, request, Error.NONE))
    elif isinstance(request, ev.LeaveGroup) and isinstance(response, LeaveGroupResponse):
        for identity, result in zip(request.members, response.members):
            if result.error_code is not Error.NONE:
                continue
            mid, inst = identity.member_id, identity.group_instance_id
            known = group is not None and (
                (mid == "" and inst is not None and inst in group.static_members)
                or mid in group.pending_members
                or (mid != "" and valid_member(group, mid, inst)))
            if not known:
                bad(LEAVE_REQUIRES_KNOWN_MEMBER, f"member {mid!r} instance {inst!r} removed")
    return out


def _member_detail(group: Group | None, request: Any, code: Error) -> str:
    if group is None:
        return f"{code.name} for member {request.member_id!r} of an absent group"
    return (f"{code.name} for member {request.member_id!r} instance {request.group_instance_id!r} "
            f"generation {request.generation_id}; group {group.state} generation {group.generation_id}, "
            f"members {list(group.members)}, static {dict(group.static_members)}")


# ------------------------------------------------------------------ check_timers


def check_timers(groups: Mapping[str, Group], armed: Mapping[tuple, tuple[int, Any]]) -> list[str]:
    """Violations of the timer invariants, given every armed timer as key -> (deadline, payload)
    (``TimerTable.armed()``). Groups absent from ``groups`` are not checked."""
    out = []
    for gid, group in groups.items():
        if group.state is PREPARING_REBALANCE and JoinTimer(group.partition, gid) not in armed:
            out.append(violation(JOIN_TIMER_WHEN_PREPARING, gid, "PreparingRebalance without a join timer"))
        sync = armed.get(SyncTimer(group.partition, gid))
        if sync is not None and (group.state not in (COMPLETING_REBALANCE, STABLE)
                                 or sync[1] != group.generation_id):
            out.append(violation(SYNC_TIMER_GENERATION, gid, f"sync timer for generation {sync[1]} in {group.state} "
                                                      f"at generation {group.generation_id}"))
        for mid in sorted(group.pending_members):
            if HeartbeatTimer(group.partition, gid, mid) not in armed:
                out.append(violation(PENDING_MEMBER_HAS_TIMER, gid, f"pending member {mid!r} has no timer"))
    return out
