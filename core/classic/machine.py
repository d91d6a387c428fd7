"""The group state machine as one unit: the only code that changes a group.

``GroupMachine.step(group, input, now_ms)`` takes a group (None: no such group) and one
input, and returns a ``Step``: the group as the input left it, the commands it emits
(responses and timers, in order) and the records to write, each with the continuation to
run when its write completes or fails. The coordinator routes inputs here and owns the
rest: partitions, offsets, writes and the responses held behind them.

Inputs: JoinGroup, SyncGroup, LeaveGroup; TimerFired of a group's HeartbeatTimer, JoinTimer
or SyncTimer; ``Written`` (the outcome of a write this machine asked for); ``Rebalance`` (a
loaded group over group.max.size), ``Unload`` and ``Delete`` (the group goes to Dead).
Heartbeat has its own call, ``heartbeat``: it never changes a group, and it is the hot path.
"""

from __future__ import annotations

from typing import Any

from ..commands import (
    CancelTimer,
    HeartbeatTimer,
    JoinGroupResponse,
    JoinTimer,
    Respond,
    SetTimer,
    SyncGroupResponse,
    SyncTimer,
)
from ..config import CoordinatorConfig
from ..continuations import AfterStaticReplace, AfterSync
from .draft import GroupDraft
from ..errors import Error
from ..events import JoinGroup, LeaveGroup, SyncGroup, TimerFired
from ..frozen import evolve, frozen
from .membership import Membership
from .model import Group
from ..partitioning import partition_for
from .states import COMPLETING_REBALANCE, DEAD, PREPARING_REBALANCE, STABLE


class Step:
    """What one input did to one group."""

    __slots__ = ("group", "commands", "records", "result")

    def __init__(self, group: Group | None, commands: list, records: list, result: Any) -> None:
        self.group = group  # the group after the input (None: there is none); Dead: drop it
        self.commands = commands  # Respond, SetTimer, CancelTimer, in order
        self.records = records  # (record, continuation or None) to write on the group's partition
        self.result = result  # the operation's own response (LeaveGroup), answered behind writes


@frozen
class Written:
    """The write that carried ``continuation`` completed (``error`` None) or failed."""

    continuation: AfterSync | AfterStaticReplace
    error: Error | None


@frozen
class Rebalance:
    """A group loaded with more members than group.max.size: rebalance it (§3.11)."""


@frozen
class Unload:
    """The group's partition is unloaded: answer its parked requests, go to Dead (§3.11)."""


@frozen
class Delete:
    """The group is deleted (DeleteGroups, or expired while Empty): go to Dead."""


class GroupMachine(Membership):
    def __init__(self, config: CoordinatorConfig) -> None:
        self.config = config
        c = type(self)  # functions, not bound methods: no reference cycle (see Coordinator)
        self._handlers = {
            JoinGroup: c._join, SyncGroup: c._sync, LeaveGroup: c._leave, TimerFired: c._timer,
            Written: c._written, Rebalance: c._rebalance, Unload: c._unload, Delete: c._delete,
        }

    def step(self, group: Group | None, event, now_ms: int) -> Step:
        self._now = now_ms
        self._group = group
        self._draft: GroupDraft | None = None
        out = self._out = []
        records = self._records = []
        result = self._handlers[type(event)](self, event)
        group = self._group if self._draft is None else self._draft.freeze()
        self._group = self._draft = None
        return Step(group, out, records, result)

    @staticmethod
    def without_pending(group: Group, member_id: str) -> Group:
        """``group`` after its pending member ``member_id`` expired (for the copies of a group
        that a failed write may bring back)."""
        if member_id not in group.pending_members:
            return group
        return evolve(group, pending_members=group.pending_members - {member_id})

    # ------------------------------------------------------------------ inputs

    def _timer(self, event: TimerFired) -> None:
        """A timer of this group (the coordinator routes by the key's group id)."""
        key = event.key
        kind = type(key)
        if kind is HeartbeatTimer:
            self._heartbeat_expired(key.member_id)
        elif kind is JoinTimer:
            self._join_timer_fired(event.payload)
        elif kind is SyncTimer:
            self._sync_timer_fired(event.payload)

    def _written(self, event: Written) -> None:
        if type(event.continuation) is AfterSync:
            self._sync_written(event.continuation, event.error)
        else:
            self._static_replace_written(event.continuation, event.error)

    def _rebalance(self, event: Rebalance) -> None:
        self._prepare_rebalance(self._thaw())

    def _unload(self, event: Unload) -> None:
        g = self._thaw()
        for member in g.members.values():
            if g.state is PREPARING_REBALANCE and member.awaiting_join is not None:
                self._respond(member.awaiting_join.request_id, JoinGroupResponse(
                    error_code=Error.NOT_COORDINATOR, member_id=member.member_id))
            elif g.state in (COMPLETING_REBALANCE, STABLE) and member.awaiting_sync is not None:
                self._respond(member.awaiting_sync.request_id, SyncGroupResponse(error_code=Error.NOT_COORDINATOR))
        g.transition(DEAD, self._now)

    def _delete(self, event: Delete) -> None:
        self._thaw().transition(DEAD, self._now)

    # ------------------------------------------------------------------ the group, and output

    def _current(self) -> Group | GroupDraft | None:
        return self._group if self._draft is None else self._draft

    def _thaw(self) -> GroupDraft:
        if self._draft is None:
            self._draft = GroupDraft(self._group)
        return self._draft

    def _create(self, group_id: str) -> Group:
        self._group = Group(group_id=group_id,
                            partition=partition_for(group_id, self.config.offsets_topic_num_partitions))
        return self._group

    def _respond(self, request_id, response) -> None:
        self._out.append(Respond(request_id, response))

    def _arm(self, key, delay_ms: int, payload=None) -> None:
        self._out.append(SetTimer(key, self._now + delay_ms, payload))

    def _cancel(self, key) -> None:
        self._out.append(CancelTimer(key))

    def _append(self, record, continuation=None) -> None:
        self._records.append((record, continuation))
