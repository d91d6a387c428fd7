"""What runs after a write fails (or, for DeleteGroups, completes), beyond the group machine's
own continuations: each a function of what it changes, passed explicitly. The coordinator's
``_AFTER_WRITE`` dispatches every continuation (core/continuations.py) once, here or to the
group machine or the offset store."""

from __future__ import annotations

from .classic.machine import GroupMachine
from .classic.states import EMPTY
from .commands import DeletableGroupResult, DeleteGroupsResponse, JoinGroupResponse, SyncGroupResponse, SyncTimer
from .context import Context
from .continuations import AfterNewGroup, DeleteResult, DropSimpleGroup, RestoreGroup
from .errors import Error, translate_append_error, translate_operation_error
from .frozen import evolve
from .offsets import OffsetStore
from .writes import PendingWrite, WriteLog


def new_group_failed(ctx: Context, groups: dict, log: WriteLog, continuation: AfterNewGroup, error: Error,
                     write: PendingWrite) -> None:
    """The record committing a new group failed: the group never existed (Kafka reverts
    its in-memory state), and a group whose deletion failed meanwhile is back. Its parked
    requests are answered with the translated error. Offsets are left to their own
    writes' undo: they may be the deleted group's, restored. Kafka's revert removes the
    group even when its join completed meanwhile (nothing written since: the write is the
    newest); after writes that may record it (outcomes in order, D6) it stays."""
    group_id, displaced = continuation.group_id, continuation.displaced
    group = groups.get(group_id)
    if group is None:
        # A later tombstone deleted the group meanwhile: its failure must not bring back a
        # group that never existed (Kafka reverts the creation and everything after it).
        log.edit(lambda c: c if not (type(c) is RestoreGroup and c.group_id == group_id) else None,
                 until=lambda w: any(type(c) is AfterNewGroup and c.group_id == group_id for c in w.continuations))
        if displaced is not None:
            groups[group_id] = displaced
        return
    if group.generation_id != 0 and log.later_on(write.partition, write.write_id):
        return
    translated = translate_append_error(error)
    for member in group.members.values():
        if member.awaiting_join is not None:
            ctx.respond(member.awaiting_join.request_id, JoinGroupResponse(error_code=translated))
        if member.awaiting_sync is not None:
            ctx.respond(member.awaiting_sync.request_id, SyncGroupResponse(error_code=translated))
    if group.generation_id != 0:  # its join completed: a sync timer may be armed
        ctx.cancel(SyncTimer(group.partition, group_id))
    if displaced is None:
        del groups[group_id]
    else:
        groups[group_id] = displaced


def tombstone_failed(groups: dict, log: WriteLog, continuation: RestoreGroup) -> None:
    """A failed tombstone brings the group back (its offsets come back through the offsets'
    undo). If a new group took the id and its creation is still in flight, the old group
    comes back should that creation fail too (Kafka reverts both). A "simple" group that
    took it (nobody joining) has no record of its own: the log holds the old group with
    its offsets, and memory follows the log."""
    gid, old = continuation.group_id, continuation.group
    holder = groups.get(gid)
    if holder is None or (not log.edit(lambda c: evolve(c, displaced=old) if type(c) is AfterNewGroup
                                       and c.group_id == gid and c.displaced is None else c, once=True)
                          and is_simple(holder) and not holder.pending_members):
        groups[gid] = old


def simple_group_failed(groups: dict, offsets: OffsetStore, continuation: DropSimpleGroup) -> None:
    """A "simple" group's first commit failed: the group goes, unless it took offsets since."""
    gid = continuation.group_id
    group = groups.get(gid)
    if group is not None and is_simple(group) and not offsets.of(gid):
        groups.pop(gid, None)
        offsets.remove(gid)


def delete_written(ctx: Context, pending_deletes: dict, continuation: DeleteResult, error: Error | None,
                   write: PendingWrite) -> None:
    """DeleteGroups' write on one partition is done: answered once all its writes are."""
    waiting, results = pending_deletes[continuation.request_id]
    waiting.discard(write.write_id)
    if error is not None:
        for gid in continuation.group_ids:
            if results[gid] is Error.NONE:
                results[gid] = translate_operation_error(error)
    if not waiting:
        del pending_deletes[continuation.request_id]
        ctx.respond(continuation.request_id,
                    DeleteGroupsResponse(tuple(DeletableGroupResult(g, e) for g, e in results.items())))


def is_simple(group) -> bool:
    """A group made by an OffsetCommit alone (generation -1 commits): no record of its own."""
    return group.state is EMPTY and group.protocol_type is None and group.generation_id == 0


def without_pending(continuation, group_id: str, member_id: str):
    """``continuation`` with ``member_id`` no longer pending in the group snapshot it holds."""
    kind = type(continuation)
    if kind is RestoreGroup:
        field = "group"
    elif kind is AfterNewGroup:
        field = "displaced"
    else:
        return continuation
    group = getattr(continuation, field)
    if group is None or continuation.group_id != group_id or member_id not in group.pending_members:
        return continuation
    return evolve(continuation, **{field: GroupMachine.without_pending(group, member_id)})
