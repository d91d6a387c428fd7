"""The group state machine's SyncGroup, Heartbeat, LeaveGroup and timers, step for step as
Kafka's GroupMetadataManager (classic part); section numbers refer to
spec/kafka-classic-semantics.md. Each function takes the input's ``StepContext`` (context.py):
it reads the group with ``s.current()``, changes it through the draft ``s.thaw()`` returns,
and emits through ``s.respond``, ``s.arm``, ``s.cancel`` and ``s.append``. ``heartbeat``
takes no context: it never changes a group.
"""

from __future__ import annotations

from ..commands import (
    HeartbeatResponse,
    HeartbeatTimer,
    InitialDelay,
    JoinGroupResponse,
    JoinTimer,
    LeaveGroupMemberResponse,
    LeaveGroupResponse,
    SetTimer,
    SyncGroupResponse,
    SyncTimer,
)
from ..continuations import AfterSync
from ..errors import Error, translate_append_error
from ..events import Heartbeat, LeaveGroup, SyncGroup
from ..frozen import evolve
from .context import StepContext
from .draft import GroupDraft
from .joining import (
    complete_join,
    maybe_complete_join,
    metadata_record,
    prepare_rebalance,
    propagate_assignment,
    rebalance_or_complete_join,
)
from .model import Group, MemberError, Parked, validate_member
from .states import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE

NONE = Error.NONE
_HEARTBEAT_OK = HeartbeatResponse(Error.NONE)
_HEARTBEAT_REBALANCING = HeartbeatResponse(Error.REBALANCE_IN_PROGRESS)
_HEARTBEAT_UNKNOWN = HeartbeatResponse(Error.UNKNOWN_MEMBER_ID)


# --------------------------------------------------------------- SyncGroup (§3.5)

def sync(s: StepContext, req: SyncGroup) -> None:
    group = s.current()
    if group is None or group.state is EMPTY:
        s.respond(req.request_id, SyncGroupResponse(error_code=Error.UNKNOWN_MEMBER_ID))
        return
    try:
        validate_member(group, req.member_id, req.group_instance_id)
    except MemberError as e:
        s.respond(req.request_id, SyncGroupResponse(error_code=e.error))
        return
    if req.generation_id != group.generation_id:
        error = Error.ILLEGAL_GENERATION
    elif (req.protocol_type is not None and group.protocol_type is not None
          and req.protocol_type != group.protocol_type) or (
            req.protocol_name is not None and group.protocol_name is not None
            and req.protocol_name != group.protocol_name):
        error = Error.INCONSISTENT_GROUP_PROTOCOL
    elif group.state is PREPARING_REBALANCE:
        error = Error.REBALANCE_IN_PROGRESS
    else:
        error = None
    if error is not None:
        s.respond(req.request_id, SyncGroupResponse(error_code=error))
        return
    g = s.thaw()
    member = g.members[req.member_id]
    if g.state is COMPLETING_REBALANCE:
        g.put(evolve(member, awaiting_sync=Parked(req.request_id, req.version)))
        _remove_pending_sync(s, g, req.member_id)
        if req.member_id == g.leader_id:
            assignments = dict(req.assignments)
            record = metadata_record(g, s.now, with_members=True,
                                      assignments={mid: assignments.get(mid, b"") for mid in g.members})
            s.append(record, AfterSync(g.group_id, g.generation_id, tuple(assignments.items())))
    else:  # Stable
        _remove_pending_sync(s, g, req.member_id)
        s.respond(req.request_id, SyncGroupResponse(
            error_code=NONE, protocol_type=g.protocol_type, protocol_name=g.protocol_name,
            assignment=member.assignment))


def _remove_pending_sync(s: StepContext, g: GroupDraft, member_id: str) -> None:
    g.pending_sync.discard(member_id)
    if not g.pending_sync:
        s.cancel(SyncTimer(g.partition, g.group_id))


def sync_written(s: StepContext, data: AfterSync, error: Error | None) -> None:
    generation_id, assignments = data.generation_id, data.assignments
    group = s.current()
    if group is None or group.state is not COMPLETING_REBALANCE or group.generation_id != generation_id:
        return
    g = s.thaw()
    if error is None:
        propagate_assignment(s, g, NONE, reset=False, assignments=dict(assignments))
        g.transition(STABLE, s.now)
    else:
        propagate_assignment(s, g, translate_append_error(error), reset=True)
        prepare_rebalance(s, g)


# --------------------------------------------------------------- Heartbeat (§3.6)

def heartbeat(group: Group | None, req: Heartbeat, now_ms: int) -> tuple:
    """(response, SetTimer or None, held): a heartbeat never changes its group. ``held``:
    the response is the operation's result, answered behind writes in flight; an error
    of the request itself is answered at once. The hot path: flat, no draft."""
    mid = req.member_id
    if group is None:
        error = Error.UNKNOWN_MEMBER_ID
    else:
        member = group.members.get(mid)
        instance_id = req.group_instance_id
        if member is None or (instance_id is not None and group.static_members.get(instance_id) != mid):
            try:
                validate_member(group, mid, instance_id)
            except MemberError as e:
                error = e.error
        elif req.generation_id != group.generation_id:
            error = Error.ILLEGAL_GENERATION
        else:
            state = group.state
            if state is EMPTY:
                return _HEARTBEAT_UNKNOWN, None, True
            timer = SetTimer(HeartbeatTimer(group.partition, group.group_id, mid),
                             now_ms + member.session_timeout_ms)
            return _HEARTBEAT_REBALANCING if state is PREPARING_REBALANCE else _HEARTBEAT_OK, timer, True
    return HeartbeatResponse(error), None, False


# -------------------------------------------------------------- LeaveGroup (§3.7)

def leave(s: StepContext, req: LeaveGroup) -> LeaveGroupResponse | None:
    """Returns the response when it is the operation's result (held behind its write)."""
    group = s.current()
    if group is None:
        s.respond(req.request_id, LeaveGroupResponse(NONE, tuple(
            LeaveGroupMemberResponse(m.member_id, m.group_instance_id, Error.UNKNOWN_MEMBER_ID)
            for m in req.members)))
        return None
    g = s.thaw()
    results, removed_any = [], False
    for identity in req.members:
        mid, instance_id = identity.member_id, identity.group_instance_id
        error = NONE
        if mid == "":
            target = g.static_members.get(instance_id) if instance_id is not None else None
            if target is None:
                error = Error.UNKNOWN_MEMBER_ID
            else:
                _remove_member_for_leave(s, g, target)
        elif mid in g.pending_members:
            g.pending_members.discard(mid)
            s.cancel(HeartbeatTimer(g.partition, g.group_id, mid))
        else:
            try:
                validate_member(g, mid, instance_id)
                _remove_member_for_leave(s, g, mid)
            except MemberError as e:
                error = e.error
        removed_any |= error is NONE
        results.append(LeaveGroupMemberResponse(mid, instance_id, error))
    if removed_any:
        if g.state in (STABLE, COMPLETING_REBALANCE):
            prepare_rebalance(s, g)
        elif g.state is PREPARING_REBALANCE:
            maybe_complete_join(s, g)
    return LeaveGroupResponse(NONE, tuple(results))


def _remove_member_for_leave(s: StepContext, g: GroupDraft, member_id: str) -> None:
    member = g.members[member_id]
    s.cancel(HeartbeatTimer(g.partition, g.group_id, member_id))
    if member.awaiting_join is not None:
        s.respond(member.awaiting_join.request_id, JoinGroupResponse(error_code=Error.UNKNOWN_MEMBER_ID))
        member = evolve(member, awaiting_join=None)
        g.put(member)
    g.remove(member_id)


# ------------------------------------------------------------------ timers (§3.10)

def heartbeat_expired(s: StepContext, mid: str) -> None:
    group = s.current()
    if group is None:
        return
    if mid in group.pending_members:
        g = s.thaw()
        g.pending_members.discard(mid)
        if g.state is PREPARING_REBALANCE and g.has_all_members_joined:
            complete_join(s, g)
        return
    member = group.members.get(mid)
    if member is None or member.has_satisfied_heartbeat:
        return
    g = s.thaw()
    if member.awaiting_join is not None:
        s.respond(member.awaiting_join.request_id, JoinGroupResponse(error_code=Error.UNKNOWN_MEMBER_ID))
        g.put(evolve(member, awaiting_join=None))
    g.remove(mid)
    if g.state in (STABLE, COMPLETING_REBALANCE):
        rebalance_or_complete_join(s, g)
    elif g.state is PREPARING_REBALANCE and g.has_all_members_joined:
        complete_join(s, g)


def join_timer_fired(s: StepContext, payload) -> None:
    group = s.current()
    if group is None or group.state is not PREPARING_REBALANCE:
        return
    g = s.thaw()
    if payload is not None:  # the initial-rebalance delay (§3.4)
        delay, remaining = payload.delay_ms, payload.remaining_ms
        if g.new_member_added and remaining != 0:
            g.new_member_added = False
            new_delay = min(s.config.group_initial_rebalance_delay_ms, remaining)
            s.arm(JoinTimer(g.partition, g.group_id), new_delay, InitialDelay(new_delay, max(remaining - delay, 0)))
            return
    complete_join(s, g)


def sync_timer_fired(s: StepContext, generation_id: int) -> None:
    group = s.current()
    if group is None or group.generation_id != generation_id:
        return
    if group.state not in (COMPLETING_REBALANCE, STABLE) or not group.pending_sync:
        return
    g = s.thaw()
    for mid in [m for m in g.members if m in g.pending_sync]:  # member order: deterministic output
        g.remove(mid)
        s.cancel(HeartbeatTimer(g.partition, g.group_id, mid))
    prepare_rebalance(s, g)


