"""The join phase of the group state machine: JoinGroup (§3.1), static-member replacement
(§6), prepareRebalance (§3.2) and join completion (§3.3), step for step as Kafka's
GroupMetadataManager. Functions of the input's ``StepContext`` (see membership.py for how
they read, change and emit)."""

from __future__ import annotations

from ..commands import (
    GroupMetadataRecord,
    HeartbeatTimer,
    InitialDelay,
    JoinGroupResponse,
    JoinGroupResponseMember,
    JoinTimer,
    MemberRecord,
    SyncGroupResponse,
    SyncTimer,
)
from ..config import NEW_MEMBER_JOIN_TIMEOUT_MS
from ..continuations import AfterEmptyGroup, AfterNewGroup, AfterStaticReplace
from ..errors import Error, translate_append_error
from ..events import JoinGroup
from ..frozen import evolve
from .context import StepContext
from .draft import GroupDraft, subscribed_topics
from .model import Member, MemberError, Parked, validate_member
from .states import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE

NONE = Error.NONE


# ------------------------------------------------------------------ JoinGroup (§3.1)

def join(s: StepContext, req: JoinGroup) -> None:
    gid = req.group_id
    group = s.current()
    is_new_member = req.member_id == ""
    is_new_group = group is None
    if group is None:
        if not is_new_member:
            s.respond(req.request_id, JoinGroupResponse(
                error_code=Error.UNKNOWN_MEMBER_ID, member_id=req.member_id))
            return
        group = s.create(gid)
    g = s.thaw()
    if not _accept_joining_member(s, g, req.member_id):
        g.remove(req.member_id)
        s.respond(req.request_id, JoinGroupResponse(error_code=Error.GROUP_MAX_SIZE_REACHED))
    elif is_new_member:
        _join_new_member(s, g, req)
    else:
        _join_existing_member(s, g, req)
    if is_new_group and not s.records:
        # A group created by JoinGroup is committed with an "empty" record (§3.1).
        s.append(metadata_record(g, s.now, with_members=False),
                     AfterNewGroup(gid, req.request_id))


def _accept_joining_member(s: StepContext, g: GroupDraft, member_id: str) -> bool:
    limit = s.config.group_max_size
    if g.state is EMPTY:
        return True
    member = g.members.get(member_id)
    if g.state is PREPARING_REBALANCE:
        return (member is not None and member.awaiting_join is not None) or g.num_awaiting_join < limit
    return member is not None or len(g.members) < limit


def _join_new_member(s: StepContext, g: GroupDraft, req: JoinGroup) -> None:
    if not g.supports_protocols(req.protocol_type, {name for name, _ in req.protocols}):
        s.respond(req.request_id, JoinGroupResponse(error_code=Error.INCONSISTENT_GROUP_PROTOCOL))
    elif req.group_instance_id is not None:
        new_id = f"{req.group_instance_id}-{req.new_member_uuid}"
        old_id = g.static_members.get(req.group_instance_id)
        if old_id is not None:
            _replace_static_member(s, g, req, req.group_instance_id, old_id, new_id)
        else:
            _add_member(s, g, req, new_id)
    else:
        new_id = f"{req.client_id}-{req.new_member_uuid}"
        if req.version >= 4:
            g.pending_members.add(new_id)
            s.arm(HeartbeatTimer(g.partition, g.group_id, new_id), req.session_timeout_ms)
            s.respond(req.request_id, JoinGroupResponse(
                error_code=Error.MEMBER_ID_REQUIRED, member_id=new_id))
        else:
            _add_member(s, g, req, new_id)


def _join_existing_member(s: StepContext, g: GroupDraft, req: JoinGroup) -> None:
    mid = req.member_id
    if not g.supports_protocols(req.protocol_type, {name for name, _ in req.protocols}):
        s.respond(req.request_id, JoinGroupResponse(
            error_code=Error.INCONSISTENT_GROUP_PROTOCOL, member_id=mid))
        return
    if mid in g.pending_members:
        if req.group_instance_id is not None:
            # Kafka throws IllegalStateException here; the client sees UNKNOWN_SERVER_ERROR.
            s.respond(req.request_id, JoinGroupResponse(error_code=Error.UNKNOWN_SERVER_ERROR))
            return
        _add_member(s, g, req, mid)
        return
    try:
        validate_member(g, mid, req.group_instance_id)
    except MemberError as e:
        s.respond(req.request_id, JoinGroupResponse(error_code=e.error, member_id=mid))
        return
    member = g.members[mid]
    if g.state is PREPARING_REBALANCE:
        _update_member_then_rebalance(s, g, member, req)
    elif g.state is COMPLETING_REBALANCE:
        if member.protocols == req.protocols:
            # A retried join: answer with the current generation (§3.1 step 4).
            s.respond(req.request_id, join_response(g, mid, with_members=mid == g.leader_id))
        else:
            _update_member_then_rebalance(s, g, member, req)
    elif g.state is STABLE:
        if mid == g.leader_id or member.protocols != req.protocols:
            _update_member_then_rebalance(s, g, member, req)
        else:
            s.respond(req.request_id, join_response(g, mid, with_members=False))
    else:  # Empty: a member id cannot be known here
        s.respond(req.request_id, JoinGroupResponse(error_code=Error.UNKNOWN_MEMBER_ID, member_id=mid))


def join_response(g, member_id: str, with_members: bool) -> JoinGroupResponse:
    return JoinGroupResponse(
        error_code=NONE, generation_id=g.generation_id, protocol_type=g.protocol_type,
        protocol_name=g.protocol_name, leader=g.leader_id or "", member_id=member_id,
        members=member_list(g) if with_members else ())


def _update_member_then_rebalance(s: StepContext, g: GroupDraft, member: Member, req: JoinGroup) -> None:
    g.update(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms,
             Parked(req.request_id, req.version))
    rebalance_or_complete_join(s, g)


def _add_member(s: StepContext, g: GroupDraft, req: JoinGroup, member_id: str) -> None:
    member = Member(
        member_id=member_id, group_instance_id=req.group_instance_id, client_id=req.client_id,
        client_host=req.client_host, rebalance_timeout_ms=req.rebalance_timeout_ms,
        session_timeout_ms=req.session_timeout_ms, protocol_type=req.protocol_type,
        protocols=req.protocols, awaiting_join=Parked(req.request_id, req.version), is_new=True)
    if g.state is PREPARING_REBALANCE and g.previous_state is EMPTY:
        g.new_member_added = True
    g.add(member)
    s.arm(HeartbeatTimer(g.partition, g.group_id, member_id), NEW_MEMBER_JOIN_TIMEOUT_MS)
    rebalance_or_complete_join(s, g)


def rebalance_or_complete_join(s: StepContext, g: GroupDraft) -> None:
    if g.can_rebalance():
        prepare_rebalance(s, g)
    else:
        maybe_complete_join(s, g)


def maybe_complete_join(s: StepContext, g: GroupDraft) -> None:
    if g.state is PREPARING_REBALANCE and g.previous_state is not EMPTY and g.has_all_members_joined:
        complete_join(s, g)


# -------------------------------------------------------- static replacement (§6)

def _replace_static_member(s: StepContext, g: GroupDraft, req: JoinGroup, instance_id: str, old_id: str,
                           new_id: str) -> None:
    previous_leader = g.leader_id
    old, new = g.replace_static(instance_id, old_id, new_id)
    _fence(s, old)
    s.arm(HeartbeatTimer(g.partition, g.group_id, new_id), new.session_timeout_ms)
    new = g.update(new, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms,
                   Parked(req.request_id, req.version))
    if g.state is STABLE:
        if (g.protocol_name or "") == g.select_protocol():
            # No rebalance: persist the new id first; the join is answered after the write.
            s.append(metadata_record(g, s.now, with_members=True),
                         AfterStaticReplace(g.group_id, instance_id, old_id, new_id,
                                            old.protocols, old.rebalance_timeout_ms, old.session_timeout_ms,
                                            previous_leader, req.request_id, req.version))
        else:
            rebalance_or_complete_join(s, g)
    elif g.state is COMPLETING_REBALANCE:
        prepare_rebalance(s, g)
    elif g.state is EMPTY:
        raise AssertionError(f"static member {instance_id} rejoined {g.group_id} in {g.state}")
    else:
        maybe_complete_join(s, g)


def _fence(s: StepContext, old: Member) -> None:
    if old.awaiting_join is not None:
        s.respond(old.awaiting_join.request_id, JoinGroupResponse(
            error_code=Error.FENCED_INSTANCE_ID, member_id=old.member_id))
    if old.awaiting_sync is not None:
        s.respond(old.awaiting_sync.request_id, SyncGroupResponse(error_code=Error.FENCED_INSTANCE_ID))


def static_replace_written(s: StepContext, data: AfterStaticReplace, error: Error | None) -> None:
    gid, instance_id, old_id, new_id = data.group_id, data.instance_id, data.old_member_id, data.new_member_id
    old_protocols, old_rebalance_ms, old_session_ms = (data.old_protocols, data.old_rebalance_timeout_ms,
                                                       data.old_session_timeout_ms)
    previous_leader, request_id, version = data.previous_leader_id, data.request_id, data.version
    group = s.current()
    member = group.members.get(new_id) if group is not None else None
    if group is None or member is None or member.awaiting_join is None \
            or member.awaiting_join.request_id != request_id:
        return  # the join is no longer parked: answered already, or its member gone
    if error is None:
        g = s.thaw()
        member = g.members[new_id]
        g.put(evolve(member, awaiting_join=None))
        if version >= 9:
            is_leader = g.leader_id == new_id
            response = evolve(join_response(g, new_id, with_members=is_leader),
                                    skip_assignment=is_leader)
        else:
            response = evolve(join_response(g, new_id, with_members=False),
                                    leader=previous_leader or "")
        s.respond(request_id, response)
        return
    if group.static_members.get(instance_id) == new_id:
        g = s.thaw()
        g.update(g.members[new_id], old_protocols, old_rebalance_ms, old_session_ms, None)
        g.replace_static(instance_id, new_id, old_id)
        s.arm(HeartbeatTimer(g.partition, gid, old_id), old_session_ms)
        group = g
    s.respond(request_id, JoinGroupResponse(
        error_code=translate_append_error(error), generation_id=group.generation_id,
        protocol_type=group.protocol_type, protocol_name=group.protocol_name,
        leader=previous_leader or "", member_id=""))


# ------------------------------------------------------- prepareRebalance (§3.2)

def prepare_rebalance(s: StepContext, g: GroupDraft) -> None:
    if g.state is COMPLETING_REBALANCE:
        propagate_assignment(s, g, Error.REBALANCE_IN_PROGRESS, reset=True)
    g.pending_sync.clear()
    s.cancel(SyncTimer(g.partition, g.group_id))
    initial = g.state is EMPTY
    if initial:
        delay = s.config.group_initial_rebalance_delay_ms
        remaining = max(g.rebalance_timeout_ms - delay, 0)
        s.arm(JoinTimer(g.partition, g.group_id), delay, InitialDelay(delay, remaining))
    g.transition(PREPARING_REBALANCE, s.now)
    if not initial:
        if g.has_all_members_joined:
            complete_join(s, g)
        else:
            s.arm(JoinTimer(g.partition, g.group_id), g.rebalance_timeout_ms)


def propagate_assignment(s: StepContext, g: GroupDraft, error: Error, reset: bool,
                          assignments: dict[str, bytes] | None = None) -> None:
    ok = error is NONE
    for mid, member in list(g.members.items()):
        if reset or assignments is not None:
            new_assignment = b"" if reset or assignments is None else assignments.get(mid, b"")
            if new_assignment != member.assignment:
                member = evolve(member, assignment=new_assignment)
                g.put(member)
        if member.awaiting_sync is not None:
            s.respond(member.awaiting_sync.request_id, SyncGroupResponse(
                error_code=error, protocol_type=g.protocol_type if ok else None,
                protocol_name=g.protocol_name if ok else None, assignment=member.assignment))
            g.put(evolve(member, awaiting_sync=None))
            s.arm(HeartbeatTimer(g.partition, g.group_id, mid), member.session_timeout_ms)


# ------------------------------------------------------- join completion (§3.3)

def complete_join(s: StepContext, g: GroupDraft) -> None:
    s.cancel(JoinTimer(g.partition, g.group_id))
    for mid, member in list(g.members.items()):
        if member.awaiting_join is None and not member.is_static:
            g.remove(mid)
            s.cancel(HeartbeatTimer(g.partition, g.group_id, mid))
    if g.leader_id is not None and g.members[g.leader_id].awaiting_join is None:
        joined = next((mid for mid, m in g.members.items() if m.awaiting_join is not None), None)
        if joined is None:
            # Nobody rejoined (only static members left): wait another rebalance timeout,
            # at least 1 ms so that a 0 ms timeout cannot re-fire at the same instant forever.
            s.arm(JoinTimer(g.partition, g.group_id), max(g.rebalance_timeout_ms, 1))
            return
        g.leader_id = joined
    elif g.leader_id is None and g.members:
        s.arm(JoinTimer(g.partition, g.group_id), g.rebalance_timeout_ms)
        return
    _init_next_generation(s, g)
    if g.state is EMPTY:
        s.append(metadata_record(g, s.now, with_members=False), AfterEmptyGroup())
        return
    leader_members = member_list(g)
    for mid, member in list(g.members.items()):
        if member.awaiting_join is not None:
            response = join_response(g, mid, with_members=False)
            if mid == g.leader_id:
                response = evolve(response, members=leader_members)
            s.respond(member.awaiting_join.request_id, response)
        s.arm(HeartbeatTimer(g.partition, g.group_id, mid), member.session_timeout_ms)
        g.put(evolve(member, awaiting_join=None, is_new=False))
        g.pending_sync.add(mid)
    s.arm(SyncTimer(g.partition, g.group_id), g.rebalance_timeout_ms, g.generation_id)


def _init_next_generation(s: StepContext, g: GroupDraft) -> None:
    g.generation_id += 1
    if g.members:
        g.protocol_name = g.select_protocol()
        g.subscribed_topics = subscribed_topics(g)
        g.transition(COMPLETING_REBALANCE, s.now)
    else:
        g.protocol_name = None
        g.subscribed_topics = subscribed_topics(g)
        g.transition(EMPTY, s.now)
    g.pending_sync.clear()


def member_list(g) -> tuple[JoinGroupResponseMember, ...]:
    return tuple(JoinGroupResponseMember(mid, m.group_instance_id, m.metadata(g.protocol_name))
                 for mid, m in g.members.items())


def metadata_record(g, now_ms: int, with_members: bool,
                     assignments: dict[str, bytes] | None = None) -> GroupMetadataRecord:
    """Kafka's GroupMetadata record for the group as it is now (§4.5)."""
    if not with_members:
        return GroupMetadataRecord(
            group_id=g.group_id, protocol_type=g.protocol_type or "", generation_id=g.generation_id,
            protocol_name=None, leader_id=None, current_state_timestamp_ms=now_ms)
    members = tuple(
        MemberRecord(
            member_id=mid, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
            session_timeout_ms=m.session_timeout_ms, subscription=m.metadata(g.protocol_name),
            assignment=assignments[mid] if assignments is not None else m.assignment)
        for mid, m in g.members.items())
    return GroupMetadataRecord(
        group_id=g.group_id, protocol_type=g.protocol_type or "", generation_id=g.generation_id,
        protocol_name=g.protocol_name, leader_id=g.leader_id, current_state_timestamp_ms=now_ms,
        members=members)
