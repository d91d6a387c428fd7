"""The coordinator: events in, commands out.

``Coordinator.handle(event)`` is the whole interface. It routes a request through Kafka's
service pre-checks (ownership, loading, group id, session timeout bounds) to the group state
machine (classic.machine.GroupMachine) or the offsets (offsets.py), and turns what an operation did into
commands: responses, at most one storage write per operation and partition (with the
responses that depend on it held until WriteCompleted/WriteFailed), and timers.

Each event is handled with a ``Context`` made for it (its time and the commands it emits) and
each operation with its own ``Records``, both passed explicitly (context.py). The coordinator
holds its collaborators: the group store (a dict by group id), the ``OffsetStore``, the
``WriteLog`` (writes in flight, answers held behind them) and the group machine. What runs
after a write (a continuation, core/continuations.py) has one dispatch: ``_AFTER_WRITE``.

Deterministic: no clock, randomness, I/O or logging. Everything the coordinator holds is a
frozen value (groups, members, offsets, pending writes) in plain dictionaries; ``snapshot``
and ``restore`` move it in and out, e.g. for model checking against the TLA+ spec.

An exception inside ``handle`` (a bug) may leave that state half-updated, so the instance is
not used again: it keeps the event in ``failed``, raises ``CoordinatorFailed`` (the exception
as its cause), and refuses every later event with ``CoordinatorFailed``. The embedder answers
what the instance held with a retriable error and starts a new one from storage
(spec/contract.md, "A failed instance").
"""

from __future__ import annotations

from typing import Any, Callable

import attrs

from . import admin, after_write
from . import events as ev
from . import offsets as offset_ops
from .classic.machine import Delete, GroupMachine, Rebalance, Unload, Written
from .classic.model import Group
from .classic.states import DEAD
from .commands import (
    CancelPartitionTimers,
    DeletableGroupResult,
    DeleteGroupsResponse,
    ExpirationTimer,
    GroupTombstone,
    HeartbeatTimer,
    JoinTimer,
    OffsetTombstone,
    Respond,
    SyncTimer,
)
from .config import CoordinatorConfig
from .consumer.model import ConsumerGroup
from .consumer_ops import CONSUMER_TIMERS, ConsumerGroups
from .context import Context, Records
from .continuations import (
    AfterEmptyGroup,
    AfterNewGroup,
    AfterStaticReplace,
    AfterSync,
    DeleteResult,
    DropSimpleGroup,
    RestoreGroup,
    RevertConsumerGroup,
    UndoOffsets,
)
from .error_responses import error_like, error_response
from .errors import Error, translate_operation_error
from .loading import read_partition
from .offsets import OffsetEntry, OffsetStore
from .partitioning import ACTIVE, LOADING, partition_for
from .writes import PendingWrite, WriteLog


@attrs.frozen
class CoordinatorState:
    """Everything a Coordinator holds, as one immutable value."""

    partitions: Any  # Mapping[int, "active" | "loading"]
    groups: Any  # Mapping[str, Group]
    offsets: Any  # Mapping[str, Mapping[(topic, partition), OffsetEntry]]
    writes: Any  # Mapping[int, PendingWrite]
    deferred: tuple  # (partition, wait_for_write_id, Respond)
    next_write_id: int
    pending_deletes: Any = attrs.Factory(dict)  # DeleteGroups request id -> (write ids, results)
    committed_offsets: Any = attrs.Factory(dict)  # group -> key -> (committed value, writes in flight)
    topics: Any = attrs.Factory(dict)  # the topics image: name -> (topic id, partitions)


class CoordinatorFailed(Exception):
    """``Coordinator.handle`` raised (the exception is the cause) or refused an event because
    an earlier one raised: the instance is failed for good (``Coordinator.failed``)."""

    def __init__(self, message: str, event: Any = None) -> None:
        super().__init__(message)
        self.event = event  # the event that failed the instance


class _Refused(dict):
    """A failed instance's handlers: every event is refused."""

    __slots__ = ("failed",)
    failed: Any

    def __missing__(self, kind):
        raise CoordinatorFailed(f"refused {kind.__name__}: this coordinator failed handling "
                                f"{type(self.failed).__name__}; start a new one from storage", self.failed)


class Coordinator:
    def __init__(self, config: CoordinatorConfig | None = None):
        self.config = config or CoordinatorConfig()
        self.config.validate()
        self.failed: Any = None  # the event whose handling raised; from then on every event is refused
        self._partitions: dict[int, str] = {}
        self._groups: dict[str, Group | ConsumerGroup] = {}  # the group store: one group of one kind per id
        self._machine = GroupMachine(self.config)
        self._kip848 = ConsumerGroups(self.config)  # KIP-848's groups, their machine and the topics image
        self._offsets = OffsetStore()
        self._log = WriteLog()
        self._pending_deletes: dict[Any, tuple[set[int], dict[str, Error]]] = {}
        # the class's functions, not bound methods: a coordinator holding its own bound methods
        # is a reference cycle, freed only by the garbage collector (a replay makes thousands)
        c = type(self)
        self._handlers: dict[type, Callable[..., None]] = {
            ev.JoinGroup: c._on_group_request, ev.SyncGroup: c._on_group_request, ev.Heartbeat: c._on_heartbeat,
            ev.LeaveGroup: c._on_group_request, ev.OffsetCommit: c._on_offset_commit,
            ev.OffsetFetch: c._on_offset_fetch, ev.DescribeGroups: c._on_describe,
            ev.ListGroups: c._on_list, ev.DeleteGroups: c._on_delete_groups,
            ev.OffsetDelete: c._on_offset_delete, ev.FindCoordinator: c._on_find_coordinator,
            ev.TimerFired: c._on_timer, ev.WriteCompleted: c._on_write_done,
            ev.WriteFailed: c._on_write_done, ev.LoadPartition: c._on_load,
            ev.UnloadPartition: c._on_unload,
            ev.ConsumerGroupHeartbeat: c._on_consumer_heartbeat,
            ev.ConsumerGroupDescribe: c._on_consumer_describe, ev.TopicsChanged: c._on_topics,
        }

    # ------------------------------------------------------------------ the interface

    def handle(self, event) -> list:
        """Apply one event; return the commands it produces, in order. If applying it raises,
        the instance is failed: CoordinatorFailed now and for every later event."""
        try:
            ctx = Context(event.now_ms)
            self._handlers[type(event)](self, ctx, event)
        except Exception as e:
            if self.failed is not None:
                raise  # refused
            self._fail(event)
            raise CoordinatorFailed(f"{type(e).__name__}: {e} (handling {type(event).__name__})", event) from e
        except BaseException:  # an interrupt inside a step leaves it as half-done as an error does
            if self.failed is None:
                self._fail(event)
            raise
        return ctx.out

    def _fail(self, event) -> None:
        self.failed = event
        refused = self._handlers = _Refused()
        refused.failed = event

    def group(self, group_id: str) -> Group | ConsumerGroup | None:
        return self._groups.get(group_id)

    def groups(self) -> dict[str, Group | ConsumerGroup]:
        return dict(self._groups)

    def offsets(self, group_id: str) -> dict[tuple[str, int], OffsetEntry]:
        return dict(self._offsets.of(group_id))

    def owned_partitions(self) -> dict[int, str]:
        return dict(self._partitions)

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def snapshot(self) -> CoordinatorState:
        latest, committed = self._offsets.snapshot()
        return CoordinatorState(
            partitions=dict(self._partitions), groups=dict(self._groups), offsets=latest,
            writes=dict(self._log.pending), committed_offsets=committed, deferred=tuple(self._log.held()),
            next_write_id=self._log.next_write_id,
            pending_deletes={k: (frozenset(w), dict(r)) for k, (w, r) in self._pending_deletes.items()},
            topics=self._kip848.image)  # never changed in place: a new one per TopicsChanged

    @classmethod
    def restore(cls, state: CoordinatorState, config: CoordinatorConfig | None = None) -> "Coordinator":
        c = cls(config)
        c._partitions = dict(state.partitions)
        c._groups = dict(state.groups)
        c._offsets = OffsetStore.restore(state.offsets, state.committed_offsets)
        c._log = WriteLog.restore(state.writes, state.deferred, state.next_write_id)
        c._pending_deletes = {k: (set(w), dict(r)) for k, (w, r) in state.pending_deletes.items()}
        c._kip848.image = state.topics  # the same object: groups keep what they refreshed against
        return c

    # ------------------------------------------------------------ operations and the group machine

    def _run_op(self, ctx: Context, partition: int | None, request, operation, *args) -> None:
        """Run one operation, ``operation(ctx, records, *args)``; its records become one Write
        per partition whose success releases the operation's response (and whose failure
        answers it with Kafka's translated error)."""
        records = Records()
        response = operation(ctx, records, *args)
        if not records:
            if response is not None:
                self._log.result(ctx, partition, request.request_id, response)
            return
        self._log.emit(ctx, records, request if response is not None else None, response)

    def _step(self, ctx: Context, records: Records, group_id: str, event):
        """Route ``event`` to the group machine and take what it did: the group (dropped once
        Dead), its commands, its records (into the operation's write). Returns its result."""
        current = self._groups.get(group_id)
        assert not isinstance(current, ConsumerGroup), "a consumer group is not the classic machine's"
        step = self._machine.step(current, event, ctx.now)
        group = step.group
        if group is not None:
            if group.state is DEAD:
                self._groups.pop(group_id, None)
            else:
                self._groups[group_id] = group
            for record, continuation in step.records:
                records.append(group.partition, record, continuation)
        ctx.out.extend(step.commands)
        return step.result

    def _delete_group(self, ctx: Context, records: Records, group_id: str, partition: int) -> None:
        """Remove a group and its offsets now (tombstones are replayed at once in Kafka), writing
        the group's tombstones with the continuation that restores it if the write fails. Kafka
        moves a classic group to Dead and evicts it; so does the group machine, and the store
        drops it."""
        group = self._groups[group_id]
        if isinstance(group, ConsumerGroup):
            tombstones = self._kip848.delete(self._groups, group)
        else:
            self._step(ctx, records, group_id, Delete())
            tombstones = [GroupTombstone(group_id)]
        for topic, p in sorted(self._offsets.of(group_id)):
            records.append(partition, OffsetTombstone(group_id, topic, p))
        offset_ops.then_undo(records, partition, self._offsets.set(
            [(group_id, key, None) for key in sorted(self._offsets.of(group_id))]))
        for record in tombstones[:-1]:
            records.append(partition, record)
        records.append(partition, tombstones[-1], RestoreGroup(group_id, group))

    # ------------------------------------------------------------ request pre-checks

    def _route(self, ctx: Context, request, group_id: str | None) -> int | None:
        """Kafka's service-layer checks for one group; answers and returns None on failure."""
        if group_id is None or (group_id == "" and not isinstance(request, _EMPTY_ID_ALLOWED)):
            ctx.respond(request.request_id, error_response(request, Error.INVALID_GROUP_ID))
            return None
        if isinstance(request, ev.JoinGroup) and not (
                self.config.group_min_session_timeout_ms <= request.session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            ctx.respond(request.request_id, error_response(request, Error.INVALID_SESSION_TIMEOUT))
            return None
        partition = self.partition_of(group_id)
        status = self._partitions.get(partition)
        if status is ACTIVE:
            return partition
        if status is None:
            error = Error.NOT_COORDINATOR
        elif isinstance(request, ev.Heartbeat):
            error = Error.NONE  # Kafka answers a heartbeat while loading with NONE
        else:
            error = Error.COORDINATOR_LOAD_IN_PROGRESS
        ctx.respond(request.request_id, error_response(request, error, runtime=True))
        return None

    def _on_group_request(self, ctx: Context, req: ev.JoinGroup | ev.SyncGroup | ev.LeaveGroup) -> None:
        partition = self._route(ctx, req, req.group_id)
        group = self._groups.get(req.group_id)
        if partition is not None and isinstance(group, ConsumerGroup):
            if type(req) is ev.JoinGroup and not group.members:
                # an empty consumer group gives way to the classic group the join makes
                self._run_op(ctx, None, req, self._kip848.give_way, self._groups, group, req,
                             lambda c, r: self._step(c, r, req.group_id, req))
            else:
                self._run_op(ctx, None if type(req) is ev.JoinGroup else partition, req,
                             self._kip848.classic_request, self._groups, req, self._rebalance)
        elif partition is not None:
            # a LeaveGroup's result waits behind writes in flight; a join's or sync's rides on its own
            self._run_op(ctx, partition if type(req) is ev.LeaveGroup else None, req, self._step, req.group_id, req)

    def _on_heartbeat(self, ctx: Context, req: ev.Heartbeat) -> None:
        group = self._groups.get(req.group_id)
        # the common case skips the generic route: a known group on an active partition
        if (group is not None and req.group_id and self._partitions.get(group.partition) is ACTIVE) \
                or self._route(ctx, req, req.group_id) is not None:
            if isinstance(group, ConsumerGroup):
                self._run_op(ctx, group.partition, req, self._kip848.classic_request, self._groups, req,
                             self._rebalance)
                return
            response, timer, held = self._machine.heartbeat(group, req, ctx.now)
            if timer is not None:
                ctx.out.append(timer)
            if held and group is not None and self._log.pending:
                self._log.result(ctx, group.partition, req.request_id, response)
            else:
                ctx.out.append(Respond(req.request_id, response))

    # ------------------------------------------------------------ consumer groups (consumer_ops.py)

    def _on_topics(self, ctx: Context, event: ev.TopicsChanged) -> None:
        self._kip848.topics(event)

    def _on_consumer_heartbeat(self, ctx: Context, req: ev.ConsumerGroupHeartbeat) -> None:
        refused = self._kip848.refused(req)
        if refused is not None:
            ctx.respond(req.request_id, refused)
            return
        partition = self._route(ctx, req, req.group_id)
        if partition is not None:
            self._run_op(ctx, partition, req, self._kip848.heartbeat, self._groups, req, partition, self._rebalance)

    def _on_consumer_describe(self, ctx: Context, req: ev.ConsumerGroupDescribe) -> None:
        ctx.respond(req.request_id, self._kip848.describe(
            req, self._groups, lambda gid: self._partitions.get(self.partition_of(gid))))

    def _rebalance(self, ctx: Context, records: Records, group_id: str) -> None:
        """A group the migration made classic starts its first join phase."""
        self._step(ctx, records, group_id, Rebalance())

    def _consumer_written(self, ctx, records, continuation: RevertConsumerGroup, error, write) -> None:
        self._kip848.written(self._groups, continuation, error)

    # ------------------------------------------------------------ offsets (offsets.py)

    def _routed_partition(self, ctx: Context, req: ev.OffsetCommit | ev.OffsetDelete) -> int | None:
        gid = req.group_id
        # the common case skips the generic route: a named group on an active partition
        partition = self.partition_of(gid) if gid else None
        if partition is None or self._partitions.get(partition) is not ACTIVE:
            partition = self._route(ctx, req, gid)
        return partition

    def _on_offset_commit(self, ctx: Context, req: ev.OffsetCommit) -> None:
        partition = self._routed_partition(ctx, req)
        if partition is not None:
            self._run_op(ctx, partition, req, self._commit, req, partition)

    def _commit(self, ctx: Context, records: Records, req: ev.OffsetCommit, partition: int):
        group = self._groups.get(req.group_id)
        response = offset_ops.commit(ctx, records, self._offsets, self.config, group, req, partition)
        if group is None and partition in records:  # a "simple" group, created by its first commit
            self._groups[req.group_id] = Group(group_id=req.group_id, partition=partition)
            records.then(partition, DropSimpleGroup(req.group_id))  # after the offsets' undo, as in Kafka
        return response

    def _on_offset_delete(self, ctx: Context, req: ev.OffsetDelete) -> None:
        partition = self._routed_partition(ctx, req)
        if partition is not None:
            self._run_op(ctx, partition, req, offset_ops.delete, self._offsets, self._groups.get(req.group_id),
                         req, partition)

    def _on_offset_fetch(self, ctx: Context, req: ev.OffsetFetch) -> None:
        response, waits = offset_ops.fetch(req, self._offsets, self._groups, self._partitions, self.partition_of)
        if req.require_stable and len(set(waits)) == 1:
            self._log.result(ctx, waits[0], req.request_id, response)
        else:
            ctx.respond(req.request_id, response)

    # ------------------------------------------------------------ admin (admin.py), deletes

    def _on_describe(self, ctx: Context, req: ev.DescribeGroups) -> None:
        ctx.respond(req.request_id, admin.describe(req, lambda gid: self._partitions.get(self.partition_of(gid)),
                                                   self._groups))

    def _on_list(self, ctx: Context, req: ev.ListGroups) -> None:
        ctx.respond(req.request_id, admin.list_groups(req, self._partitions, self._groups))

    def _on_find_coordinator(self, ctx: Context, req: ev.FindCoordinator) -> None:
        ctx.respond(req.request_id, admin.find_coordinator(
            req, lambda key: self._partitions.get(self.partition_of(key)) is not None, self.config))

    def _on_delete_groups(self, ctx: Context, req: ev.DeleteGroups) -> None:
        by_partition, results = admin.routed(req.groups_names, self._partitions, self.partition_of)
        records = Records()
        for partition, gids in by_partition.items():
            for gid in gids:
                group = self._groups.get(gid)
                if group is None:
                    results[gid] = Error.GROUP_ID_NOT_FOUND
                elif group.state.value != "Empty":
                    results[gid] = Error.NON_EMPTY_GROUP
                else:
                    results[gid] = Error.NONE
                    self._delete_group(ctx, records, gid, partition)
        response = DeleteGroupsResponse(tuple(DeletableGroupResult(g, e) for g, e in results.items()))
        if not records:
            ctx.respond(req.request_id, response)
            return
        # One write per partition; the response waits for all of them. Kafka answers each
        # partition's groups separately; a failure marks only that partition's groups.
        for partition in records:
            records.then(partition, DeleteResult(req.request_id, tuple(by_partition[partition])))
        write_ids = self._log.emit(ctx, records)
        self._pending_deletes[req.request_id] = (set(write_ids), dict(results))

    # ------------------------------------------------------------ timers

    def _on_timer(self, ctx: Context, event: ev.TimerFired) -> None:
        key = event.key
        kind = type(key)
        if self._partitions.get(getattr(key, "partition", -1)) is not ACTIVE:
            return  # not a key of an owned partition (nor a key at all)
        records = Records()
        if kind is ExpirationTimer:
            partition = key.partition
            offset_ops.expire(ctx, records, self._offsets, self.config,
                              [g for g in self._groups.values() if g.partition == partition], partition,
                              lambda gid: self._delete_group(ctx, records, gid, partition))
        elif kind in CONSUMER_TIMERS:
            self._kip848.timer(ctx, records, self._groups, event, self._rebalance)
        elif kind is HeartbeatTimer or kind is JoinTimer or kind is SyncTimer:
            self._step(ctx, records, key.group_id, event)
            if kind is HeartbeatTimer:
                self._expire_held_pending(key.group_id, key.member_id)
        self._log.emit(ctx, records)

    # ------------------------------------------------------------ load and unload (§3.11)

    def _on_load(self, ctx: Context, event: ev.LoadPartition) -> None:
        partition = event.partition
        if self._partitions.get(partition) is ACTIVE:
            return  # already loaded; a new owner instance starts from a new Coordinator
        if event.loading:
            self._partitions[partition] = LOADING
            return
        loaded, offsets = read_partition(event.records, partition)
        self._partitions[partition] = ACTIVE
        for group, _ in loaded:
            self._groups[group.group_id] = group
        self._offsets.latest.update(offsets)
        records = Records()
        for group, written in loaded:
            if not written:
                continue
            if isinstance(group, ConsumerGroup):
                self._kip848.loaded(ctx, group)
                continue
            for mid, member in group.members.items():
                ctx.arm(HeartbeatTimer(partition, group.group_id, mid), member.session_timeout_ms)
            if len(group.members) > self.config.group_max_size:
                self._step(ctx, records, group.group_id, Rebalance())
        self._log.emit(ctx, records)  # a rebalance writes nothing until its join phase ends
        ctx.arm(ExpirationTimer(partition), self.config.offsets_retention_check_interval_ms)

    def _on_unload(self, ctx: Context, event: ev.UnloadPartition) -> None:
        partition = event.partition
        if partition not in self._partitions:
            return
        for write in self._log.on(partition):
            self._log.take(write.write_id)
            self._finish_write(ctx, write, Error.NOT_COORDINATOR)
        for respond in self._log.drop_held(partition):
            ctx.respond(respond.request_id, error_like(respond.response, Error.NOT_COORDINATOR))
        records = Records()
        for gid, group in list(self._groups.items()):
            if group.partition == partition:
                if isinstance(group, ConsumerGroup):
                    del self._groups[gid]  # nothing parked: its timers go with the partition's
                else:
                    self._step(ctx, records, gid, Unload())  # Kafka's onUnloaded: parked requests answered, Dead
        assert not records, "an unload writes nothing"
        # Every offset of the partition goes, also a group's left without it (its creation
        # rolled back while a commit was in flight): a later load reads them from storage.
        # (No committed value is left: the writes were finished above.)
        for gid in [g for g in self._offsets.latest if self.partition_of(g) == partition]:
            self._offsets.remove(gid)
        del self._partitions[partition]
        # Last, so that timers armed by the failed writes' follow-ups are cancelled too.
        ctx.out.append(CancelPartitionTimers(partition))

    # ------------------------------------------------------------ write outcomes and continuations

    def _on_write_done(self, ctx: Context, event) -> None:
        write = self._log.take(event.write_id)
        if write is None:
            return
        error = event.error if isinstance(event, ev.WriteFailed) else None
        self._finish_write(ctx, write, None if error in (None, Error.NONE) else Error.parse(error))
        self._log.release(ctx, write.partition)

    def _finish_write(self, ctx: Context, write: PendingWrite, error: Error | None) -> None:
        """Run the write's continuations, in order, then answer the request it carried."""
        records = Records()
        for continuation in write.continuations:
            _AFTER_WRITE[type(continuation)](self, ctx, records, continuation, error, write)
        # Continuations do not write again in Kafka's classic coordinator; a failed write's
        # follow-up (a new rebalance) writes nothing until its own completion.
        self._log.emit(ctx, records)
        if write.request is not None:
            if error is None:
                ctx.respond(write.request.request_id, write.response)
            else:
                ctx.respond(write.request.request_id, error_response(write.request, translate_operation_error(error)))

    def _offsets_written(self, ctx, records, continuation: UndoOffsets, error, write) -> None:
        self._offsets.written(continuation.changes, error)

    def _group_written(self, ctx, records, continuation: AfterSync | AfterStaticReplace, error, write) -> None:
        self._step(ctx, records, continuation.group_id, Written(continuation, error))

    def _new_group_written(self, ctx, records, continuation: AfterNewGroup, error, write) -> None:
        if error is not None:
            after_write.new_group_failed(ctx, self._groups, self._log, continuation, error, write)

    def _tombstone_written(self, ctx, records, continuation: RestoreGroup, error, write) -> None:
        if error is not None:
            after_write.tombstone_failed(self._groups, self._log, continuation)

    def _simple_group_written(self, ctx, records, continuation: DropSimpleGroup, error, write) -> None:
        if error is not None:
            after_write.simple_group_failed(self._groups, self._offsets, continuation)

    def _delete_written(self, ctx, records, continuation: DeleteResult, error, write) -> None:
        after_write.delete_written(ctx, self._pending_deletes, continuation, error, write)

    def _empty_group_written(self, ctx, records, continuation: AfterEmptyGroup, error, write) -> None:
        """Kafka only logs a failure of that record."""

    def _expire_held_pending(self, group_id: str, member_id: str) -> None:
        """A pending member's expiry also applies to the copies of its group that a failed
        write may bring back (RestoreGroup's group and AfterNewGroup's displaced one):
        otherwise the copy returns with a pending member no timer will ever remove, and
        every later join phase waits out its rebalance timeout (deviation D15)."""
        self._log.edit(lambda c: after_write.without_pending(c, group_id, member_id))


# What runs after a write, by continuation (core/continuations.py): one dispatch for all. The
# offsets' undo comes first in every commit's write.
_AFTER_WRITE: dict[type, Callable[..., None]] = {
    UndoOffsets: Coordinator._offsets_written, AfterSync: Coordinator._group_written,
    AfterStaticReplace: Coordinator._group_written, AfterNewGroup: Coordinator._new_group_written,
    RestoreGroup: Coordinator._tombstone_written, DropSimpleGroup: Coordinator._simple_group_written,
    RevertConsumerGroup: Coordinator._consumer_written,
    DeleteResult: Coordinator._delete_written, AfterEmptyGroup: Coordinator._empty_group_written,
}
_EMPTY_ID_ALLOWED = (ev.OffsetCommit, ev.OffsetFetch, ev.DescribeGroups, ev.DeleteGroups)



