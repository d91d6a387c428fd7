"""Storage writes: one Write per operation and partition, the callbacks that run when it
completes or fails, and what a failed write reverts."""

from __future__ import annotations

from typing import Any

from . import events as ev
from .commands import JoinGroupResponse, SyncGroupResponse, SyncTimer, Write
from .continuations import (
    AfterNewGroup,
    AfterStaticReplace,
    AfterSync,
    DeleteResult,
    DropSimpleGroup,
    RestoreGroup,
    UndoOffsets,
)
from .error_responses import error_response
from .errors import Error, translate_append_error, translate_operation_error
from .frozen import evolve, frozen
from .classic.machine import Delete, GroupMachine, Written
from .classic.states import EMPTY


@frozen
class PendingWrite:
    write_id: int
    partition: int
    callbacks: tuple  # continuations (core/continuations.py) run when the write completes or fails
    request: Any = None  # the request whose response rides on this write
    response: Any = None  # that response, sent on success


class Writes:
    # ------------------------------------------------------------ storage writes

    def _append(self, partition: int, record, callback: tuple | None = None) -> None:
        records, callbacks = self._op.setdefault(partition, ([], []))
        records.append(record)
        if callback is not None:
            callbacks.append(callback)

    def _op_has_records(self, partition: int) -> bool:
        return bool(self._op.get(partition, ((),))[0])

    def _run_op(self, partition: int | None, request, operation, *args) -> None:
        """Run one operation; its records become one Write whose success releases the
        operation's response (and whose failure answers it with Kafka's translated error)."""
        self._op = {}
        response = operation(*args)
        op, self._op = self._op, {}
        if not op:
            if response is not None:
                self._result(partition, request.request_id, response)
            return
        self._emit_writes(op, request if response is not None else None, response)

    def _emit_writes(self, op: dict, request=None, response=None) -> list[int]:
        """One Write per partition an operation wrote to; returns their ids."""
        write_ids = []
        for part, (records, callbacks) in op.items():
            write_id = self._next_write_id
            self._next_write_id += 1
            write_ids.append(write_id)
            self._writes[write_id] = PendingWrite(write_id, part, tuple(callbacks), request, response)
            self._writes_on.setdefault(part, {})[write_id] = None
            self._out.append(Write(write_id, part, tuple(records)))
        return write_ids

    def _on_write_done(self, event) -> None:
        write = self._take_write(event.write_id)
        if write is None:
            return
        error = event.error if isinstance(event, ev.WriteFailed) else None
        self._finish_write(write, None if error in (None, Error.NONE) else Error.parse(error))
        self._release_deferred(write.partition)

    def _take_write(self, write_id: int) -> PendingWrite | None:
        """The write with this id, no longer in flight."""
        write = self._writes.pop(write_id, None)
        if write is not None:
            in_flight = self._writes_on[write.partition]
            del in_flight[write_id]
            if not in_flight:
                del self._writes_on[write.partition]
        return write

    def _finish_write(self, write: PendingWrite, error: Error | None) -> None:
        self._op = {}
        for callback in write.callbacks:
            if type(callback) is DeleteResult:
                self._delete_result(write.write_id, callback.request_id, callback.group_ids, error)
            else:
                self._run_callback(callback, error, write)
        # Callbacks do not write again in Kafka's classic coordinator; a failed write's
        # follow-up (a new rebalance) writes nothing until its own completion.
        followups, self._op = self._op, {}
        if followups:
            self._emit_writes(followups)
        if write.request is not None:
            if error is None:
                self._respond(write.request.request_id, write.response)
            else:
                self._respond(write.request.request_id,
                              error_response(write.request, translate_operation_error(error)))

    def _release_deferred(self, partition: int) -> None:
        """The partition's held responses whose writes have all completed, in the order held."""
        held = self._deferred.get(partition)
        if not held:
            return
        in_flight = self._writes_on.get(partition)
        lowest = next(iter(in_flight)) if in_flight else None
        if partition in self._deferred_unordered:
            keep = []
            for entry in held:
                if lowest is None or entry[0] < lowest:
                    self._out.append(entry[1])
                else:
                    keep.append(entry)
            held[:] = keep
        else:
            # the ids waited for only grow: the releasable ones are the first
            count = len(held) if lowest is None else next(
                (n for n, entry in enumerate(held) if entry[0] >= lowest), len(held))
            self._out.extend(respond for _, respond in held[:count])
            del held[:count]
        if not held:
            del self._deferred[partition]
            self._deferred_unordered.discard(partition)

    def _run_callback(self, callback, error: Error | None, write: PendingWrite) -> None:
        """``write``: the write whose outcome this is."""
        kind = type(callback)
        if kind is UndoOffsets:  # first: every commit's write carries one
            self._offsets_written(callback.changes, error)
        elif kind is AfterSync or kind is AfterStaticReplace:
            self._step(callback.group_id, Written(callback, error))
        elif kind is AfterNewGroup:
            if error is not None:
                later = any(i > write.write_id for i in self._writes_on.get(write.partition, ()))
                self._rollback_new_group(callback.group_id, error, callback.displaced, later)
        elif kind is RestoreGroup:
            # A failed tombstone brings the group back (its offsets come back through the
            # offsets' undo). If a new group took the id and its creation is still in flight,
            # the old group comes back should that creation fail too (Kafka reverts both). A
            # "simple" group that took it (nobody joining) has no record of its own: the log
            # holds the old group with its offsets, and memory follows the log.
            if error is not None:
                holder = self._groups.get(callback.group_id)
                if holder is None or (not self._displace_on_rollback(callback.group_id, callback.group)
                                      and _is_simple(holder) and not holder.pending_members):
                    self._groups[callback.group_id] = callback.group
        elif kind is DropSimpleGroup:
            gid = callback.group_id
            group = self._groups.get(gid)
            if error is not None and group is not None and _is_simple(group) and not self._offsets.get(gid):
                self._remove_group(gid)
        # AfterEmptyGroup: Kafka only logs a failure of that record.

    def _rollback_new_group(self, group_id: str, error: Error, displaced, later: bool) -> None:
        """The record committing a new group failed: the group never existed (Kafka reverts
        its in-memory state), and a group whose deletion failed meanwhile is back. Its parked
        requests are answered with the translated error. Offsets are left to their own
        writes' undo: they may be the deleted group's, restored. Kafka's revert removes the
        group even when its join completed meanwhile (nothing written since: the write is the
        newest); after writes that may record it (outcomes in order, D6) it stays."""
        group = self._groups.get(group_id)
        if group is None:
            # A later tombstone deleted the group meanwhile: its failure must not bring back a
            # group that never existed (Kafka reverts the creation and everything after it).
            self._forget_restores(group_id)
            if displaced is not None:
                self._groups[group_id] = displaced
            return
        if group.generation_id != 0 and later:
            return
        translated = translate_append_error(error)
        for member in group.members.values():
            if member.awaiting_join is not None:
                self._respond(member.awaiting_join.request_id, JoinGroupResponse(error_code=translated))
            if member.awaiting_sync is not None:
                self._respond(member.awaiting_sync.request_id, SyncGroupResponse(error_code=translated))
        if group.generation_id != 0:  # its join completed: a sync timer may be armed
            self._cancel(SyncTimer(group.partition, group_id))
        if displaced is None:
            del self._groups[group_id]
        else:
            self._groups[group_id] = displaced

    def _displace_on_rollback(self, group_id: str, group) -> bool:
        """Attach ``group`` to the in-flight creation write of the group now holding its id
        (False: there is none)."""
        for write_id, write in self._writes.items():
            callbacks = tuple(evolve(c, displaced=group) if type(c) is AfterNewGroup and c.group_id == group_id
                              and c.displaced is None else c for c in write.callbacks)
            if callbacks != write.callbacks:
                self._writes[write_id] = evolve(write, callbacks=callbacks)
                return True
        return False

    def _forget_restores(self, group_id: str) -> None:
        """Drop the group's RestoreGroup callbacks from the in-flight writes up to its next
        creation write (restores after that belong to the group that creation makes)."""
        for write_id, write in self._writes.items():
            if any(type(c) is AfterNewGroup and c.group_id == group_id for c in write.callbacks):
                return
            callbacks = tuple(c for c in write.callbacks if not (type(c) is RestoreGroup and c.group_id == group_id))
            if callbacks != write.callbacks:
                self._writes[write_id] = evolve(write, callbacks=callbacks)

    def _expire_held_pending(self, group_id: str, member_id: str) -> None:
        """A pending member's expiry also applies to the copies of its group that a failed
        write may bring back (RestoreGroup's group and AfterNewGroup's displaced one):
        otherwise the copy returns with a pending member no timer will ever remove, and
        every later join phase waits out its rebalance timeout (deviation D15)."""
        for write_id, write in self._writes.items():
            callbacks = tuple(_without_pending(c, group_id, member_id) for c in write.callbacks)
            if callbacks != write.callbacks:
                self._writes[write_id] = evolve(write, callbacks=callbacks)

    def _set_offsets(self, partition: int, changes) -> None:
        """Apply (group, key, entry-or-None) changes now and register their undo with the
        operation's write: on success they become what readers see, on failure they are
        reverted (where nothing changed them since)."""
        undo = []
        offsets, committed = self._offsets, self._committed
        for gid, key, entry in changes:
            stored = offsets.get(gid)
            if stored is None:
                stored = offsets[gid] = {}
            previous = stored.get(key)
            shadow = committed.get(gid)
            if shadow is None:
                shadow = committed[gid] = {}
            slot = shadow.get(key)
            if slot is None:
                shadow[key] = [previous, 1]
            else:
                slot[1] += 1
            if entry is None:
                stored.pop(key, None)
            else:
                stored[key] = entry
            undo.append((gid, key, previous, entry))
        if undo:
            self._op[partition][1].append(UndoOffsets(tuple(undo)))

    def _offsets_written(self, undo: tuple, error: Error | None) -> None:
        # A key's committed value stays while writes of it are in flight (an unload finishes
        # them before dropping the partition's offsets), so its slot is there.
        for gid, key, previous, written in undo:
            shadow = self._committed[gid]
            slot = shadow[key]
            slot[1] -= 1
            if error is None:
                slot[0] = written
            else:
                # Kafka reverts to the last committed state: with no other write of this key in
                # flight that is the committed value; otherwise undo this write where it is
                # still the latest.
                stored = self._offsets.setdefault(gid, {})
                value = slot[0] if slot[1] == 0 else (previous if stored.get(key) is written else stored.get(key))
                if value is None:
                    stored.pop(key, None)
                else:
                    stored[key] = value
            if slot[1] == 0:
                del shadow[key]
                if not shadow:
                    del self._committed[gid]

    def _committed_offsets(self, group_id: str) -> dict:
        """The offsets readers see: the latest ones, except keys whose write is in flight."""
        latest = self._offsets.get(group_id, {})
        shadow = self._committed.get(group_id)
        if not shadow:
            return latest
        view = dict(latest)
        for key, (committed, _) in shadow.items():
            if committed is None:
                view.pop(key, None)
            else:
                view[key] = committed
        return view

    def _delete_group(self, group_id: str, partition: int) -> RestoreGroup:
        """Remove a group and its offsets now (tombstones are replayed at once in Kafka);
        returns the callback that restores the group if the write fails. Kafka moves the group
        to Dead and evicts it; so does the group machine, and the coordinator drops the Dead group."""
        group = self._groups[group_id]
        self._step(group_id, Delete())
        self._set_offsets(partition, [(group_id, key, None) for key in sorted(self._offsets.get(group_id, {}))])
        return RestoreGroup(group_id, group)

    def _remove_group(self, group_id: str) -> None:
        """The group and its offsets go; the committed values of keys whose writes are still in
        flight stay, for those writes to settle (readers see them until then)."""
        self._groups.pop(group_id, None)
        self._offsets.pop(group_id, None)


def _is_simple(group) -> bool:
    """A group made by an OffsetCommit alone (generation -1 commits): no record of its own."""
    return group.state is EMPTY and group.protocol_type is None and group.generation_id == 0


def _without_pending(callback, group_id: str, member_id: str):
    """``callback`` with ``member_id`` no longer pending in the group snapshot it holds."""
    kind = type(callback)
    field = "group" if kind is RestoreGroup else "displaced" if kind is AfterNewGroup else None
    group = getattr(callback, field) if field is not None else None
    if group is None or callback.group_id != group_id or member_id not in group.pending_members:
        return callback
    return evolve(callback, **{field: GroupMachine.without_pending(group, member_id)})


