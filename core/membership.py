"""The group state machine: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the timers.

This is the one place where groups change state. It follows Kafka's GroupMetadataManager
(classic part) step for step; section numbers refer to
shared/reference/kafka-classic-semantics.md. Methods here work on a GroupDraft obtained with
``self._edit`` and emit through ``self._respond``, ``self._arm``, ``self._cancel`` and
``self._append`` (see coordinator.Coordinator, which mixes this in).
"""

from __future__ import annotations

from .commands import (
    GroupMetadataRecord,
    HeartbeatResponse,
    JoinGroupResponse,
    JoinGroupResponseMember,
    LeaveGroupMemberResponse,
    LeaveGroupResponse,
    MemberRecord,
    Respond,
    SetTimer,
    SyncGroupResponse,
    heartbeat_key,
    join_key,
    sync_key,
)
from .config import NEW_MEMBER_JOIN_TIMEOUT_MS
from .consumer_protocol import subscription_topics
from .draft import GroupDraft
from .errors import Error, translate_append_error
from .events import Heartbeat, JoinGroup, LeaveGroup, SyncGroup
from .frozen import evolve
from .model import Group, Member, Parked
from .states import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE

NONE = Error.NONE
_HEARTBEAT_OK = HeartbeatResponse(Error.NONE)
_HEARTBEAT_REBALANCING = HeartbeatResponse(Error.REBALANCE_IN_PROGRESS)
_HEARTBEAT_UNKNOWN = HeartbeatResponse(Error.UNKNOWN_MEMBER_ID)


class MemberError(Exception):
    """Kafka's validation exceptions (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ...)."""

    def __init__(self, error: Error):
        super().__init__(error.name)
        self.error = error


def validate_member(group, member_id: str, instance_id: str | None) -> None:
    """ClassicGroup.validateMember: instance first (unknown -> 25, other member -> 82)."""
    if instance_id is not None:
        existing = group.static_members.get(instance_id)
        if existing is None:
            raise MemberError(Error.UNKNOWN_MEMBER_ID)
        if existing != member_id:
            raise MemberError(Error.FENCED_INSTANCE_ID)
    if member_id not in group.members:
        raise MemberError(Error.UNKNOWN_MEMBER_ID)


class Membership:
    # ------------------------------------------------------------------ JoinGroup (§3.1)

    def _join(self, req: JoinGroup) -> None:
        gid = req.group_id
        group = self._groups.get(gid)
        is_new_member = req.member_id == ""
        is_new_group = group is None
        if group is None:
            if not is_new_member:
                self._respond(req.request_id, JoinGroupResponse(
                    error_code=Error.UNKNOWN_MEMBER_ID, member_id=req.member_id))
                return
            group = self._create_group(gid)
        g = self._edit(gid)
        if not self._accept_joining_member(g, req.member_id):
            g.remove(req.member_id)
            self._respond(req.request_id, JoinGroupResponse(error_code=Error.GROUP_MAX_SIZE_REACHED))
        elif is_new_member:
            self._join_new_member(g, req)
        else:
            self._join_existing_member(g, req)
        if is_new_group and not self._op_has_records(g.partition):
            # A group created by JoinGroup is committed with an "empty" record (§3.1).
            self._append(g.partition, _metadata_record(g, self._now, with_members=False),
                         ("new_group", gid, req.request_id))

    def _accept_joining_member(self, g: GroupDraft, member_id: str) -> bool:
        limit = self.config.group_max_size
        if g.state in (EMPTY, DEAD):
            return True
        member = g.members.get(member_id)
        if g.state is PREPARING_REBALANCE:
            return (member is not None and member.awaiting_join is not None) or g.num_awaiting_join < limit
        return member is not None or len(g.members) < limit

    def _join_new_member(self, g: GroupDraft, req: JoinGroup) -> None:
        if g.state is DEAD:
            self._respond(req.request_id, JoinGroupResponse(error_code=Error.COORDINATOR_NOT_AVAILABLE))
        elif not g.supports_protocols(req.protocol_type, {name for name, _ in req.protocols}):
            self._respond(req.request_id, JoinGroupResponse(error_code=Error.INCONSISTENT_GROUP_PROTOCOL))
        elif req.group_instance_id is not None:
            new_id = f"{req.group_instance_id}-{req.new_member_uuid}"
            old_id = g.static_members.get(req.group_instance_id)
            if old_id is not None:
                self._replace_static_member(g, req, old_id, new_id)
            else:
                self._add_member(g, req, new_id)
        else:
            new_id = f"{req.client_id}-{req.new_member_uuid}"
            if req.version >= 4:
                g.pending_members.add(new_id)
                self._arm(heartbeat_key(g.partition, g.group_id, new_id), req.session_timeout_ms)
                self._respond(req.request_id, JoinGroupResponse(
                    error_code=Error.MEMBER_ID_REQUIRED, member_id=new_id))
            else:
                self._add_member(g, req, new_id)

    def _join_existing_member(self, g: GroupDraft, req: JoinGroup) -> None:
        mid = req.member_id
        if g.state is DEAD:
            self._respond(req.request_id, JoinGroupResponse(
                error_code=Error.COORDINATOR_NOT_AVAILABLE, member_id=mid))
            return
        if not g.supports_protocols(req.protocol_type, {name for name, _ in req.protocols}):
            self._respond(req.request_id, JoinGroupResponse(
                error_code=Error.INCONSISTENT_GROUP_PROTOCOL, member_id=mid))
            return
        if mid in g.pending_members:
            if req.group_instance_id is not None:
                # Kafka throws IllegalStateException here; the client sees UNKNOWN_SERVER_ERROR.
                self._respond(req.request_id, JoinGroupResponse(error_code=Error.UNKNOWN_SERVER_ERROR))
                return
            self._add_member(g, req, mid)
            return
        try:
            validate_member(g, mid, req.group_instance_id)
        except MemberError as e:
            self._respond(req.request_id, JoinGroupResponse(error_code=e.error, member_id=mid))
            return
        member = g.members[mid]
        if g.state is PREPARING_REBALANCE:
            self._update_member_then_rebalance(g, member, req)
        elif g.state is COMPLETING_REBALANCE:
            if member.protocols == req.protocols:
                # A retried join: answer with the current generation (§3.1 step 4).
                self._respond(req.request_id, self._join_response(g, mid, with_members=mid == g.leader_id))
            else:
                self._update_member_then_rebalance(g, member, req)
        elif g.state is STABLE:
            if mid == g.leader_id or member.protocols != req.protocols:
                self._update_member_then_rebalance(g, member, req)
            else:
                self._respond(req.request_id, self._join_response(g, mid, with_members=False))
        else:  # Empty: a member id cannot be known here
            self._respond(req.request_id, JoinGroupResponse(error_code=Error.UNKNOWN_MEMBER_ID, member_id=mid))

    def _join_response(self, g, member_id: str, with_members: bool) -> JoinGroupResponse:
        return JoinGroupResponse(
            error_code=NONE, generation_id=g.generation_id, protocol_type=g.protocol_type,
            protocol_name=g.protocol_name, leader=g.leader_id or "", member_id=member_id,
            members=_member_list(g) if with_members else ())

    def _update_member_then_rebalance(self, g: GroupDraft, member: Member, req: JoinGroup) -> None:
        g.update(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms,
                 Parked(req.request_id, req.version))
        self._rebalance_or_complete_join(g)

    def _add_member(self, g: GroupDraft, req: JoinGroup, member_id: str) -> None:
        member = Member(
            member_id=member_id, group_instance_id=req.group_instance_id, client_id=req.client_id,
            client_host=req.client_host, rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms, protocol_type=req.protocol_type,
            protocols=req.protocols, awaiting_join=Parked(req.request_id, req.version), is_new=True)
        if g.state is PREPARING_REBALANCE and g.previous_state is EMPTY:
            g.new_member_added = True
        g.add(member)
        self._arm(heartbeat_key(g.partition, g.group_id, member_id), NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._rebalance_or_complete_join(g)

    def _rebalance_or_complete_join(self, g: GroupDraft) -> None:
        if g.can_rebalance():
            self._prepare_rebalance(g)
        else:
            self._maybe_complete_join(g)

    def _maybe_complete_join(self, g: GroupDraft) -> None:
        if g.state is PREPARING_REBALANCE and g.previous_state is not EMPTY and g.has_all_members_joined:
            self._complete_join(g)

    # -------------------------------------------------------- static replacement (§6)

    def _replace_static_member(self, g: GroupDraft, req: JoinGroup, old_id: str, new_id: str) -> None:
        previous_leader = g.leader_id
        old, new = g.replace_static(req.group_instance_id, old_id, new_id)
        self._fence(old)
        self._arm(heartbeat_key(g.partition, g.group_id, new_id), new.session_timeout_ms)
        new = g.update(new, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms,
                       Parked(req.request_id, req.version))
        if g.state is STABLE:
            if (g.protocol_name or "") == g.select_protocol():
                # No rebalance: persist the new id first; the join is answered after the write.
                self._append(g.partition, _metadata_record(g, self._now, with_members=True),
                             ("static_replace", g.group_id, req.group_instance_id, old_id, new_id,
                              old.protocols, old.rebalance_timeout_ms, old.session_timeout_ms,
                              previous_leader, req.request_id, req.version))
            else:
                self._rebalance_or_complete_join(g)
        elif g.state is COMPLETING_REBALANCE:
            self._prepare_rebalance(g)
        elif g.state in (EMPTY, DEAD):
            raise AssertionError(f"static member {req.group_instance_id} rejoined {g.group_id} in {g.state}")
        else:
            self._maybe_complete_join(g)

    def _fence(self, old: Member) -> None:
        if old.awaiting_join is not None:
            self._respond(old.awaiting_join.request_id, JoinGroupResponse(
                error_code=Error.FENCED_INSTANCE_ID, member_id=old.member_id))
        if old.awaiting_sync is not None:
            self._respond(old.awaiting_sync.request_id, SyncGroupResponse(error_code=Error.FENCED_INSTANCE_ID))

    def _static_replace_written(self, data: tuple, error: Error | None) -> None:
        (_, gid, instance_id, old_id, new_id, old_protocols, old_rebalance_ms, old_session_ms,
         previous_leader, request_id, version) = data
        group = self._groups.get(gid)
        member = group.members.get(new_id) if group is not None else None
        parked = member is not None and member.awaiting_join is not None \
            and member.awaiting_join.request_id == request_id
        if error is None:
            if not parked:
                return
            g = self._edit(gid)
            member = g.members[new_id]
            g.put(evolve(member, awaiting_join=None))
            if version >= 9:
                is_leader = g.leader_id == new_id
                response = evolve(self._join_response(g, new_id, with_members=is_leader),
                                        skip_assignment=is_leader)
            else:
                response = evolve(self._join_response(g, new_id, with_members=False),
                                        leader=previous_leader or "")
            self._respond(request_id, response)
            return
        if parked and group.static_members.get(instance_id) == new_id:
            g = self._edit(gid)
            g.update(g.members[new_id], old_protocols, old_rebalance_ms, old_session_ms, None)
            g.replace_static(instance_id, new_id, old_id)
            self._arm(heartbeat_key(g.partition, gid, old_id), old_session_ms)
            group = g
        if parked:
            self._respond(request_id, JoinGroupResponse(
                error_code=translate_append_error(error), generation_id=group.generation_id,
                protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                leader=previous_leader or "", member_id=""))

    # ------------------------------------------------------- prepareRebalance (§3.2)

    def _prepare_rebalance(self, g: GroupDraft) -> None:
        if g.state is COMPLETING_REBALANCE:
            self._propagate_assignment(g, Error.REBALANCE_IN_PROGRESS, reset=True)
        g.pending_sync.clear()
        self._cancel(sync_key(g.partition, g.group_id))
        initial = g.state is EMPTY
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(g.rebalance_timeout_ms - delay, 0)
            self._arm(join_key(g.partition, g.group_id), delay, ("initial", delay, remaining))
        g.transition(PREPARING_REBALANCE, self._now)
        if not initial:
            if g.has_all_members_joined:
                self._complete_join(g)
            else:
                self._arm(join_key(g.partition, g.group_id), g.rebalance_timeout_ms)

    def _propagate_assignment(self, g: GroupDraft, error: Error, reset: bool,
                              assignments: dict[str, bytes] | None = None) -> None:
        ok = error is NONE
        for mid, member in list(g.members.items()):
            if reset or assignments is not None:
                new_assignment = b"" if reset else assignments.get(mid, b"")
                if new_assignment != member.assignment:
                    member = evolve(member, assignment=new_assignment)
                    g.put(member)
            if member.awaiting_sync is not None:
                self._respond(member.awaiting_sync.request_id, SyncGroupResponse(
                    error_code=error, protocol_type=g.protocol_type if ok else None,
                    protocol_name=g.protocol_name if ok else None, assignment=member.assignment))
                g.put(evolve(member, awaiting_sync=None))
                self._arm(heartbeat_key(g.partition, g.group_id, mid), member.session_timeout_ms)

    # ------------------------------------------------------- join completion (§3.3)

    def _complete_join(self, g: GroupDraft) -> None:
        self._cancel(join_key(g.partition, g.group_id))
        for mid, member in list(g.members.items()):
            if member.awaiting_join is None and not member.is_static:
                g.remove(mid)
                self._cancel(heartbeat_key(g.partition, g.group_id, mid))
        if g.state is DEAD:
            return
        if g.leader_id is not None and g.members[g.leader_id].awaiting_join is None:
            joined = next((mid for mid, m in g.members.items() if m.awaiting_join is not None), None)
            if joined is None:
                # Nobody rejoined (only static members left): wait another rebalance timeout,
                # at least 1 ms so that a 0 ms timeout cannot re-fire at the same instant forever.
                self._arm(join_key(g.partition, g.group_id), max(g.rebalance_timeout_ms, 1))
                return
            g.leader_id = joined
        elif g.leader_id is None and g.members:
            self._arm(join_key(g.partition, g.group_id), g.rebalance_timeout_ms)
            return
        self._init_next_generation(g)
        if g.state is EMPTY:
            self._append(g.partition, _metadata_record(g, self._now, with_members=False), ("empty_group",))
            return
        leader_members = _member_list(g)
        for mid, member in list(g.members.items()):
            if member.awaiting_join is not None:
                response = self._join_response(g, mid, with_members=False)
                if mid == g.leader_id:
                    response = evolve(response, members=leader_members)
                self._respond(member.awaiting_join.request_id, response)
            self._arm(heartbeat_key(g.partition, g.group_id, mid), member.session_timeout_ms)
            g.put(evolve(member, awaiting_join=None, is_new=False))
            g.pending_sync.add(mid)
        self._arm(sync_key(g.partition, g.group_id), g.rebalance_timeout_ms, g.generation_id)

    def _init_next_generation(self, g: GroupDraft) -> None:
        g.generation_id += 1
        if g.members:
            g.protocol_name = g.select_protocol()
            g.subscribed_topics = _subscribed_topics(g)
            g.transition(COMPLETING_REBALANCE, self._now)
        else:
            g.protocol_name = None
            g.subscribed_topics = _subscribed_topics(g)
            g.transition(EMPTY, self._now)
        g.pending_sync.clear()

    # --------------------------------------------------------------- SyncGroup (§3.5)

    def _sync(self, req: SyncGroup) -> None:
        group = self._groups.get(req.group_id)
        if group is None or group.state is EMPTY:
            self._respond(req.request_id, SyncGroupResponse(error_code=Error.UNKNOWN_MEMBER_ID))
            return
        if group.state is DEAD:
            self._respond(req.request_id, SyncGroupResponse(error_code=Error.COORDINATOR_NOT_AVAILABLE))
            return
        try:
            validate_member(group, req.member_id, req.group_instance_id)
        except MemberError as e:
            self._respond(req.request_id, SyncGroupResponse(error_code=e.error))
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
            self._respond(req.request_id, SyncGroupResponse(error_code=error))
            return
        g = self._edit(req.group_id)
        member = g.members[req.member_id]
        if g.state is COMPLETING_REBALANCE:
            g.put(evolve(member, awaiting_sync=Parked(req.request_id, req.version)))
            self._remove_pending_sync(g, req.member_id)
            if req.member_id == g.leader_id:
                assignments = dict(req.assignments)
                record = _metadata_record(g, self._now, with_members=True,
                                          assignments={mid: assignments.get(mid, b"") for mid in g.members})
                self._append(g.partition, record, ("sync", g.group_id, g.generation_id, tuple(assignments.items())))
        else:  # Stable
            self._remove_pending_sync(g, req.member_id)
            self._respond(req.request_id, SyncGroupResponse(
                error_code=NONE, protocol_type=g.protocol_type, protocol_name=g.protocol_name,
                assignment=member.assignment))

    def _remove_pending_sync(self, g: GroupDraft, member_id: str) -> None:
        g.pending_sync.discard(member_id)
        if not g.pending_sync:
            self._cancel(sync_key(g.partition, g.group_id))

    def _sync_written(self, data: tuple, error: Error | None) -> None:
        _, gid, generation_id, assignments = data
        group = self._groups.get(gid)
        if group is None or group.state is not COMPLETING_REBALANCE or group.generation_id != generation_id:
            return
        g = self._edit(gid)
        if error is None:
            self._propagate_assignment(g, NONE, reset=False, assignments=dict(assignments))
            g.transition(STABLE, self._now)
        else:
            self._propagate_assignment(g, translate_append_error(error), reset=True)
            self._prepare_rebalance(g)

    # --------------------------------------------------------------- Heartbeat (§3.6)

    def _heartbeat(self, req: Heartbeat, group: Group | None) -> None:
        # The hot path: written out flat, no allocation beyond the two commands.
        mid = req.member_id
        if group is None:
            error = Error.UNKNOWN_MEMBER_ID
        elif group.state is DEAD:
            error = Error.COORDINATOR_NOT_AVAILABLE
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
                    response = _HEARTBEAT_UNKNOWN
                else:
                    self._out.append(SetTimer(("heartbeat", group.partition, group.group_id, mid),
                                              self._now + member.session_timeout_ms))
                    response = _HEARTBEAT_REBALANCING if state is PREPARING_REBALANCE else _HEARTBEAT_OK
                if self._writes:
                    self._result(group.partition, req.request_id, response)
                else:
                    self._out.append(Respond(req.request_id, response))
                return
        self._out.append(Respond(req.request_id, HeartbeatResponse(error)))

    # -------------------------------------------------------------- LeaveGroup (§3.7)

    def _leave(self, req: LeaveGroup) -> LeaveGroupResponse | None:
        """Returns the response when it is the operation's result (held behind its write)."""
        group = self._groups.get(req.group_id)
        if group is None:
            self._respond(req.request_id, LeaveGroupResponse(NONE, tuple(
                LeaveGroupMemberResponse(m.member_id, m.group_instance_id, Error.UNKNOWN_MEMBER_ID)
                for m in req.members)))
            return None
        if group.state is DEAD:
            return LeaveGroupResponse(Error.COORDINATOR_NOT_AVAILABLE)
        g = self._edit(req.group_id)
        results, removed_any = [], False
        for identity in req.members:
            mid, instance_id = identity.member_id, identity.group_instance_id
            error = NONE
            if mid == "":
                target = g.static_members.get(instance_id) if instance_id is not None else None
                if target is None:
                    error = Error.UNKNOWN_MEMBER_ID
                else:
                    self._remove_member_for_leave(g, target)
            elif mid in g.pending_members:
                g.pending_members.discard(mid)
                self._cancel(heartbeat_key(g.partition, g.group_id, mid))
            else:
                try:
                    validate_member(g, mid, instance_id)
                    self._remove_member_for_leave(g, mid)
                except MemberError as e:
                    error = e.error
            removed_any |= error is NONE
            results.append(LeaveGroupMemberResponse(mid, instance_id, error))
        if removed_any:
            if g.state in (STABLE, COMPLETING_REBALANCE):
                self._prepare_rebalance(g)
            elif g.state is PREPARING_REBALANCE:
                self._maybe_complete_join(g)
        return LeaveGroupResponse(NONE, tuple(results))

    def _remove_member_for_leave(self, g: GroupDraft, member_id: str) -> None:
        member = g.members[member_id]
        self._cancel(heartbeat_key(g.partition, g.group_id, member_id))
        if member.awaiting_join is not None:
            self._respond(member.awaiting_join.request_id, JoinGroupResponse(error_code=Error.UNKNOWN_MEMBER_ID))
            member = evolve(member, awaiting_join=None)
            g.put(member)
        g.remove(member_id)

    # ------------------------------------------------------------------ timers (§3.10)

    def _heartbeat_expired(self, gid: str, mid: str) -> None:
        group = self._groups.get(gid)
        if group is None or group.state is DEAD:
            return
        if mid in group.pending_members:
            g = self._edit(gid)
            g.pending_members.discard(mid)
            if g.state is PREPARING_REBALANCE and g.has_all_members_joined:
                self._complete_join(g)
            return
        member = group.members.get(mid)
        if member is None or member.has_satisfied_heartbeat:
            return
        g = self._edit(gid)
        if member.awaiting_join is not None:
            self._respond(member.awaiting_join.request_id, JoinGroupResponse(error_code=Error.UNKNOWN_MEMBER_ID))
            g.put(evolve(member, awaiting_join=None))
        g.remove(mid)
        if g.state in (STABLE, COMPLETING_REBALANCE):
            self._rebalance_or_complete_join(g)
        elif g.state is PREPARING_REBALANCE and g.has_all_members_joined:
            self._complete_join(g)

    def _join_timer_fired(self, gid: str, payload) -> None:
        group = self._groups.get(gid)
        if group is None or group.state is not PREPARING_REBALANCE:
            return
        g = self._edit(gid)
        if payload is not None:  # the initial-rebalance delay (§3.4)
            _, delay, remaining = payload
            if g.new_member_added and remaining != 0:
                g.new_member_added = False
                new_delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
                self._arm(join_key(g.partition, gid), new_delay, ("initial", new_delay, max(remaining - delay, 0)))
                return
        self._complete_join(g)

    def _sync_timer_fired(self, gid: str, generation_id: int) -> None:
        group = self._groups.get(gid)
        if group is None or group.generation_id != generation_id:
            return
        if group.state not in (COMPLETING_REBALANCE, STABLE) or not group.pending_sync:
            return
        g = self._edit(gid)
        for mid in [m for m in g.members if m in g.pending_sync]:  # member order: deterministic output
            g.remove(mid)
            self._cancel(heartbeat_key(g.partition, gid, mid))
        self._prepare_rebalance(g)


def _member_list(g) -> tuple[JoinGroupResponseMember, ...]:
    return tuple(JoinGroupResponseMember(mid, m.group_instance_id, m.metadata(g.protocol_name))
                 for mid, m in g.members.items())


def _subscribed_topics(g) -> frozenset[str] | None:
    if g.protocol_type != "consumer":
        return None
    if not g.members:
        return frozenset()
    if g.protocol_name is None:
        return None
    topics: set[str] = set()
    for member in g.members.values():
        member_topics = subscription_topics(member.metadata(g.protocol_name))
        if member_topics is None:
            return None
        topics |= member_topics
    return frozenset(topics)


def _metadata_record(g, now_ms: int, with_members: bool,
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
