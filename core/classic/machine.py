"""The classic group state machine: the only code that changes a classic group.

Theory of operation
-------------------
A group is a frozen value (model.py). Its states are Kafka's: Empty, PreparingRebalance,
CompletingRebalance, Stable and Dead, with the moves states.py's table allows (Kafka's
``ClassicGroupState`` and its valid previous states). A join phase (PreparingRebalance) collects
the members' JoinGroup requests, parked until it ends; its end (every member joined, or the
join timer) starts a generation, answers the joins and waits for the leader's assignment
(CompletingRebalance), whose write makes the group Stable. A member's session timer, the
join timer and the sync timer are the only clocks; each firing is an input here.

Who may change a group: nothing but ``GroupMachine.step``. The coordinator routes each input
of one group here with the group as it is (None: there is none) and the time; ``step`` makes
a ``StepContext`` for that input alone (context.py), the functions of ``joining`` and
``membership`` change the group through its draft, and ``step`` returns a ``Step``: the group
as the input left it, the commands in order (responses, timers) and the records to write,
each with the continuation to run when its write completes or fails. A Dead group is dropped.

What is held behind writes, and why: Kafka answers a request only once what it changed is in
the log (``appendForGroup``), so the answers that depend on a record wait for its write: the
leader's SyncGroup and the members' (the assignment), a static member's replacement in Stable
(its new member id), a LeaveGroup's removals, a new group's first record. The write's outcome
comes back as ``Written`` with the continuation: on success the held answers go out; on a
failure Kafka's error goes to them and what the write would have made true is undone (a new
generation's assignment is dropped and the group rebalances; a replaced static member gets its
old id back). The coordinator (core/writes.py) holds the other answers on the partition behind
writes in flight, in order, so no client hears of a change before the log has it.

Inputs: JoinGroup, SyncGroup, LeaveGroup; TimerFired of a group's HeartbeatTimer, JoinTimer
or SyncTimer; ``Written``; ``Rebalance`` (a loaded group over group.max.size), ``Unload`` and
``Delete`` (the group goes to Dead). Heartbeat has its own call, ``heartbeat``: it never changes
a group, and it is the hot path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..commands import HeartbeatTimer, JoinGroupResponse, JoinTimer, SyncGroupResponse, SyncTimer
from ..config import CoordinatorConfig
from ..continuations import AfterStaticReplace, AfterSync
from ..errors import Error
from ..events import JoinGroup, LeaveGroup, SyncGroup, TimerFired
from ..frozen import evolve, frozen
from . import joining, membership
from .context import Step, StepContext
from .model import Group
from .states import COMPLETING_REBALANCE, DEAD, PREPARING_REBALANCE, STABLE

__all__ = ["Delete", "GroupMachine", "Rebalance", "Step", "Unload", "Written"]


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


class GroupMachine:
    """Routes one input of one group to its function; holds nothing between inputs but the config."""

    def __init__(self, config: CoordinatorConfig) -> None:
        self.config = config
        self._handlers: dict[type, Callable[[StepContext, Any], Any]] = {
            JoinGroup: joining.join, SyncGroup: membership.sync, LeaveGroup: membership.leave,
            TimerFired: _timer, Written: _written, Rebalance: _rebalance, Unload: _unload, Delete: _delete,
        }
        self.heartbeat = membership.heartbeat  # looked up here, as the handlers are: a mutant set before is used

    def step(self, group: Group | None, event, now_ms: int) -> Step:
        s = StepContext(self.config, group, now_ms)
        return s.finish(self._handlers[type(event)](s, event))

    @staticmethod
    def without_pending(group: Group, member_id: str) -> Group:
        """``group`` after its pending member ``member_id`` expired (for the copies of a group
        that a failed write may bring back)."""
        if member_id not in group.pending_members:
            return group
        return evolve(group, pending_members=group.pending_members - {member_id})


# ---------------------------------------------------------------------- inputs

def _timer(s: StepContext, event: TimerFired) -> None:
    """A timer of this group (the coordinator routes by the key's group id)."""
    key = event.key
    kind = type(key)
    if kind is HeartbeatTimer:
        membership.heartbeat_expired(s, key.member_id)
    elif kind is JoinTimer:
        membership.join_timer_fired(s, event.payload)
    elif kind is SyncTimer:
        membership.sync_timer_fired(s, event.payload)


def _written(s: StepContext, event: Written) -> None:
    continuation = event.continuation
    if isinstance(continuation, AfterSync):
        membership.sync_written(s, continuation, event.error)
    else:
        joining.static_replace_written(s, continuation, event.error)


def _rebalance(s: StepContext, event: Rebalance) -> None:
    joining.prepare_rebalance(s, s.thaw())


def _unload(s: StepContext, event: Unload) -> None:
    g = s.thaw()
    for member in g.members.values():
        if g.state is PREPARING_REBALANCE and member.awaiting_join is not None:
            s.respond(member.awaiting_join.request_id, JoinGroupResponse(
                error_code=Error.NOT_COORDINATOR, member_id=member.member_id))
        elif g.state in (COMPLETING_REBALANCE, STABLE) and member.awaiting_sync is not None:
            s.respond(member.awaiting_sync.request_id, SyncGroupResponse(error_code=Error.NOT_COORDINATOR))
    g.transition(DEAD, s.now)


def _delete(s: StepContext, event: Delete) -> None:
    s.thaw().transition(DEAD, s.now)
