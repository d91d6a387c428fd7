"""The group state machine's SyncGroup, Heartbeat, LeaveGroup and timers, step for step as
Kafka's GroupMetadataManager (classic part); section numbers refer to
spec/kafka-classic-semantics.md. Part of ``machine.GroupMachine``: methods read the group
with ``self._current()``, change it through the draft ``self._thaw()`` returns, and emit
through ``self._respond``, ``self._arm``, ``self._cancel`` and ``self._append``.
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
from .draft import GroupDraft
from ..errors import Error, translate_append_error
from ..events import Heartbeat, LeaveGroup, SyncGroup
from ..frozen import evolve
from .joining import Joining, metadata_record
from .model import Group, MemberError, Parked, validate_member
from .states import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE


NONE = Error.NONE
_HEARTBEAT_OK = HeartbeatResponse(Error.NONE)
_HEARTBEAT_REBALANCING = HeartbeatResponse(Error.REBALANCE_IN_PROGRESS)
_HEARTBEAT_UNKNOWN = HeartbeatResponse(Error.UNKNOWN_MEMBER_ID)


class Membership(Joining):
    # --------------------------------------------------------------- SyncGroup (§3.5)

    def _sync(self, req: SyncGroup) -> None:
        group = self._current()
        if group is None or group.state is EMPTY:
            self._respond(req.request_id, SyncGroupResponse(error_code=Error.UNKNOWN_MEMBER_ID))
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
        g = self._thaw()
        member = g.members[req.member_id]
        if g.state is COMPLETING_REBALANCE:
            g.put(evolve(member, awaiting_sync=Parked(req.request_id, req.version)))
            self._remove_pending_sync(g, req.member_id)
            if req.member_id == g.leader_id:
                assignments = dict(req.assignments)
                record = metadata_record(g, self._now, with_members=True,
                                          assignments={mid: assignments.get(mid, b"") for mid in g.members})
                self._append(record, AfterSync(g.group_id, g.generation_id, tuple(assignments.items())))
        else:  # Stable
            self._remove_pending_sync(g, req.member_id)
            self._respond(req.request_id, SyncGroupResponse(
                error_code=NONE, protocol_type=g.protocol_type, protocol_name=g.protocol_name,
                assignment=member.assignment))

    def _remove_pending_sync(self, g: GroupDraft, member_id: str) -> None:
        g.pending_sync.discard(member_id)
        if not g.pending_sync:
            self._cancel(SyncTimer(g.partition, g.group_id))

    def _sync_written(self, data: AfterSync, error: Error | None) -> None:
        generation_id, assignments = data.generation_id, data.assignments
        group = self._current()
        if group is None or group.state is not COMPLETING_REBALANCE or group.generation_id != generation_id:
            return
        g = self._thaw()
        if error is None:
            self._propagate_assignment(g, NONE, reset=False, assignments=dict(assignments))
            g.transition(STABLE, self._now)
        else:
            self._propagate_assignment(g, translate_append_error(error), reset=True)
            self._prepare_rebalance(g)

    # --------------------------------------------------------------- Heartbeat (§3.6)

    def heartbeat(self, group: Group | None, req: Heartbeat, now_ms: int) -> tuple:
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

    def _leave(self, req: LeaveGroup) -> LeaveGroupResponse | None:
        """Returns the response when it is the operation's result (held behind its write)."""
        group = self._current()
        if group is None:
            self._respond(req.request_id, LeaveGroupResponse(NONE, tuple(
                LeaveGroupMemberResponse(m.member_id, m.group_instance_id, Error.UNKNOWN_MEMBER_ID)
                for m in req.members)))
            return None
        g = self._thaw()
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
                self._cancel(HeartbeatTimer(g.partition, g.group_id, mid))
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
        self._cancel(HeartbeatTimer(g.partition, g.group_id, member_id))
        if member.awaiting_join is not None:
            self._respond(member.awaiting_join.request_id, JoinGroupResponse(error_code=Error.UNKNOWN_MEMBER_ID))
            member = evolve(member, awaiting_join=None)
            g.put(member)
        g.remove(member_id)

    # ------------------------------------------------------------------ timers (§3.10)

    def _heartbeat_expired(self, mid: str) -> None:
        group = self._current()
        if group is None:
            return
        if mid in group.pending_members:
            g = self._thaw()
            g.pending_members.discard(mid)
            if g.state is PREPARING_REBALANCE and g.has_all_members_joined:
                self._complete_join(g)
            return
        member = group.members.get(mid)
        if member is None or member.has_satisfied_heartbeat:
            return
        g = self._thaw()
        if member.awaiting_join is not None:
            self._respond(member.awaiting_join.request_id, JoinGroupResponse(error_code=Error.UNKNOWN_MEMBER_ID))
            g.put(evolve(member, awaiting_join=None))
        g.remove(mid)
        if g.state in (STABLE, COMPLETING_REBALANCE):
            self._rebalance_or_complete_join(g)
        elif g.state is PREPARING_REBALANCE and g.has_all_members_joined:
            self._complete_join(g)

    def _join_timer_fired(self, payload) -> None:
        group = self._current()
        if group is None or group.state is not PREPARING_REBALANCE:
            return
        g = self._thaw()
        if payload is not None:  # the initial-rebalance delay (§3.4)
            delay, remaining = payload.delay_ms, payload.remaining_ms
            if g.new_member_added and remaining != 0:
                g.new_member_added = False
                new_delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
                self._arm(JoinTimer(g.partition, g.group_id), new_delay, InitialDelay(new_delay, max(remaining - delay, 0)))
                return
        self._complete_join(g)

    def _sync_timer_fired(self, generation_id: int) -> None:
        group = self._current()
        if group is None or group.generation_id != generation_id:
            return
        if group.state not in (COMPLETING_REBALANCE, STABLE) or not group.pending_sync:
            return
        g = self._thaw()
        for mid in [m for m in g.members if m in g.pending_sync]:  # member order: deterministic output
            g.remove(mid)
            self._cancel(HeartbeatTimer(g.partition, g.group_id, mid))
        self._prepare_rebalance(g)


