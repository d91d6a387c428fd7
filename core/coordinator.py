"""The coordinator: events in, commands out.

``Coordinator.handle(event)`` is the whole interface. It routes a request through Kafka's
service pre-checks (ownership, loading, group id, session timeout bounds) to the group state
machine (membership.Membership) or the offset store, and turns what an operation did into
commands: responses, at most one storage write per operation and partition (with the
responses that depend on it held until WriteCompleted/WriteFailed), and timers.

Deterministic: no clock, randomness, I/O or logging. Everything the coordinator holds is a
frozen value (groups, members, offsets, pending writes) in plain dictionaries; ``snapshot``
and ``restore`` move it in and out, e.g. for model checking against the TLA+ spec.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable

import attrs

from . import events as ev
from .commands import (
    CancelPartitionTimers,
    CancelTimer,
    Coordinator as CoordinatorEndpoint,
    DeletableGroupResult,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedMember,
    DescribeGroupsResponse,
    FetchedGroup,
    FetchedPartition,
    FetchedTopic,
    FindCoordinatorResponse,
    GroupMetadataRecord,
    GroupTombstone,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListedGroup,
    ListGroupsResponse,
    OffsetCommitRecord,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    OffsetTombstone,
    PartitionResult,
    Respond,
    SetTimer,
    SyncGroupResponse,
    TopicResult,
    Write,
    expiration_key,
    heartbeat_key,
)
from .config import CoordinatorConfig
from .draft import GroupDraft
from .errors import Error, translate_operation_error
from .frozen import evolve, frozen
from .membership import Membership, MemberError, _subscribed_topics
from .model import EMPTY_MAP, Group, Member, OffsetEntry
from .states import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE

ACTIVE, LOADING = "active", "loading"


@lru_cache(maxsize=1 << 16)
def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % partitions`` (Java's UTF-16 string hash)."""
    h = 0
    raw = group_id.encode("utf-16-be")
    for i in range(0, len(raw), 2):
        h = (31 * h + (raw[i] << 8 | raw[i + 1])) & 0xFFFFFFFF
    if h >= 0x80000000:  # negative as a Java int: Utils.abs is Math.abs, and 0 for MIN_VALUE
        h = 0 if h == 0x80000000 else 0x100000000 - h
    return h % num_partitions


@frozen
class PendingWrite:
    write_id: int
    partition: int
    callbacks: tuple  # ("kind", ...) tuples run when the write completes or fails
    request: Any = None  # the request whose response rides on this write
    response: Any = None  # that response, sent on success


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


class Coordinator(Membership):
    def __init__(self, config: CoordinatorConfig | None = None):
        self.config = config or CoordinatorConfig()
        self.config.validate()
        self._partitions: dict[int, str] = {}
        self._groups: dict[str, Group | GroupDraft] = {}
        # Offsets as write operations see them: a commit or a deletion changes them at once,
        # as Kafka replays its records on append. Readers see the committed value of a key
        # whose write is still in flight: _committed[group][key] = [value, writes in flight].
        self._offsets: dict[str, dict[tuple[str, int], OffsetEntry]] = {}
        self._committed: dict[str, dict[tuple[str, int], list]] = {}
        self._writes: dict[int, PendingWrite] = {}
        self._deferred: list[tuple[int, int, Respond]] = []
        self._next_write_id = 1
        self._pending_deletes: dict[Any, tuple[set[int], dict[str, Error]]] = {}
        self._drafts: list[str] = []
        self._op: dict[int, tuple[list, list]] = {}
        self._now = 0
        self._out: list = []
        self._handlers = {
            ev.JoinGroup: self._on_join, ev.SyncGroup: self._on_sync, ev.Heartbeat: self._on_heartbeat,
            ev.LeaveGroup: self._on_leave, ev.OffsetCommit: self._on_offset_commit,
            ev.OffsetFetch: self._on_offset_fetch, ev.DescribeGroups: self._on_describe,
            ev.ListGroups: self._on_list, ev.DeleteGroups: self._on_delete_groups,
            ev.OffsetDelete: self._on_offset_delete, ev.FindCoordinator: self._on_find_coordinator,
            ev.TimerFired: self._on_timer, ev.WriteCompleted: self._on_write_done,
            ev.WriteFailed: self._on_write_done, ev.LoadPartition: self._on_load,
            ev.UnloadPartition: self._on_unload,
        }

    # ------------------------------------------------------------------ the interface

    def handle(self, event) -> list:
        """Apply one event; return the commands it produces, in order."""
        self._now = event.now_ms
        out = self._out = []
        self._handlers[type(event)](event)
        if self._drafts:
            for gid in self._drafts:
                draft = self._groups.get(gid)
                if isinstance(draft, GroupDraft):
                    self._groups[gid] = draft.freeze()
            self._drafts.clear()
        return out

    def group(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def groups(self) -> dict[str, Group]:
        return dict(self._groups)

    def offsets(self, group_id: str) -> dict[tuple[str, int], OffsetEntry]:
        return dict(self._offsets.get(group_id, {}))

    def owned_partitions(self) -> dict[int, str]:
        return dict(self._partitions)

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    _partition_of = partition_of

    def snapshot(self) -> CoordinatorState:
        return CoordinatorState(
            partitions=dict(self._partitions), groups=dict(self._groups),
            offsets={g: dict(o) for g, o in self._offsets.items()}, writes=dict(self._writes),
            committed_offsets={g: {k: tuple(v) for k, v in o.items()} for g, o in self._committed.items()},
            deferred=tuple(self._deferred), next_write_id=self._next_write_id,
            pending_deletes={k: (frozenset(w), dict(r)) for k, (w, r) in self._pending_deletes.items()})

    @classmethod
    def restore(cls, state: CoordinatorState, config: CoordinatorConfig | None = None) -> "Coordinator":
        c = cls(config)
        c._partitions = dict(state.partitions)
        c._groups = dict(state.groups)
        c._offsets = {g: dict(o) for g, o in state.offsets.items()}
        c._committed = {g: {k: list(v) for k, v in o.items()} for g, o in state.committed_offsets.items()}
        c._writes = dict(state.writes)
        c._deferred = list(state.deferred)
        c._next_write_id = state.next_write_id
        c._pending_deletes = {k: (set(w), dict(r)) for k, (w, r) in state.pending_deletes.items()}
        return c

    # ------------------------------------------------------------ emitting commands

    def _respond(self, request_id, response) -> None:
        self._out.append(Respond(request_id, response))

    def _result(self, partition: int, request_id, response) -> None:
        """An operation's own result: held behind writes still in flight on its partition
        (Kafka answers a write operation without records only once earlier writes commit)."""
        pending = [w for w in self._writes.values() if w.partition == partition] if self._writes else ()
        if pending:
            self._deferred.append((partition, max(w.write_id for w in pending), Respond(request_id, response)))
        else:
            self._out.append(Respond(request_id, response))

    def _arm(self, key: tuple, delay_ms: int, payload=None) -> None:
        self._out.append(SetTimer(key, self._now + delay_ms, payload))

    def _cancel(self, key: tuple) -> None:
        self._out.append(CancelTimer(key))

    def _edit(self, group_id: str) -> GroupDraft:
        group = self._groups[group_id]
        if isinstance(group, GroupDraft):
            return group
        draft = self._groups[group_id] = GroupDraft(group)
        self._drafts.append(group_id)
        return draft

    def _create_group(self, group_id: str) -> Group:
        group = self._groups[group_id] = Group(group_id=group_id, partition=self.partition_of(group_id))
        return group

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
            self._out.append(Write(write_id, part, tuple(records)))
        return write_ids

    def _on_write_done(self, event) -> None:
        write = self._writes.pop(event.write_id, None)
        if write is None:
            return
        error = event.error if isinstance(event, ev.WriteFailed) else None
        self._finish_write(write, None if error in (None, Error.NONE) else Error.parse(error))
        self._release_deferred(write.partition)

    def _finish_write(self, write: PendingWrite, error: Error | None) -> None:
        self._op = {}
        for callback in write.callbacks:
            if callback[0] == "delete_result":
                self._delete_result(write.write_id, callback[1], callback[2], error)
            else:
                self._run_callback(callback, error)
        # Callbacks do not write again in Kafka's classic coordinator; a failed write's
        # follow-up (a new rebalance) writes nothing until its own completion.
        followups, self._op = self._op, {}
        self._emit_writes(followups)
        if write.request is not None:
            if error is None:
                self._respond(write.request.request_id, write.response)
            else:
                self._respond(write.request.request_id,
                              error_response(write.request, translate_operation_error(error)))

    def _release_deferred(self, partition: int) -> None:
        if not self._deferred:
            return
        lowest = min((w.write_id for w in self._writes.values() if w.partition == partition), default=None)
        keep = []
        for entry in self._deferred:
            part, wait_for, respond = entry
            if part == partition and (lowest is None or wait_for < lowest):
                self._out.append(respond)
            else:
                keep.append(entry)
        self._deferred = keep

    def _run_callback(self, callback: tuple, error: Error | None) -> None:
        kind = callback[0]
        if kind == "sync":
            self._sync_written(callback, error)
        elif kind == "static_replace":
            self._static_replace_written(callback, error)
        elif kind == "new_group":
            if error is not None:
                self._rollback_new_group(callback[1], callback[2], error, *callback[3:])
        elif kind == "offsets":
            self._offsets_written(callback[1], error)
        elif kind == "restore_group":
            # A failed tombstone brings the group back (its offsets come back through the
            # "offsets" undo). If a new group took the id meanwhile and its creation is still
            # in flight, the old group comes back should that creation fail too (Kafka reverts
            # both operations).
            if error is not None:
                if callback[1] not in self._groups:
                    self._groups[callback[1]] = callback[2]
                else:
                    self._displace_on_rollback(callback[1], callback[2])
        elif kind == "drop_simple_group":
            group = self._groups.get(callback[1])
            if error is not None and group is not None and group.state is EMPTY and group.protocol_type is None \
                    and group.generation_id == 0 and not self._offsets.get(callback[1]):
                self._remove_group(callback[1])
        # "empty_group": Kafka only logs a failure of that record.

    def _rollback_new_group(self, group_id: str, request_id, error: Error, displaced=None) -> None:
        """The record committing a new group failed: the group never existed (Kafka reverts
        its in-memory state), and a group whose deletion failed meanwhile is back. Its parked
        requests are answered with the translated error. Offsets are left to their own
        writes' undo: they may be the deleted group's, restored."""
        from .errors import translate_append_error

        group = self._groups.get(group_id)
        if group is None:
            # A later tombstone deleted the group meanwhile: its failure must not bring back a
            # group that never existed (Kafka reverts the creation and everything after it).
            self._forget_restores(group_id)
            if displaced is not None:
                self._groups[group_id] = displaced
            return
        if group.generation_id != 0:
            return
        translated = translate_append_error(error)
        for member in group.members.values():
            if member.awaiting_join is not None:
                self._respond(member.awaiting_join.request_id, JoinGroupResponse(error_code=translated))
            if member.awaiting_sync is not None:
                self._respond(member.awaiting_sync.request_id, SyncGroupResponse(error_code=translated))
        if displaced is None:
            del self._groups[group_id]
        else:
            self._groups[group_id] = displaced

    def _displace_on_rollback(self, group_id: str, group) -> None:
        """Attach ``group`` to the in-flight creation write of the group now holding its id."""
        for write_id, write in self._writes.items():
            callbacks = tuple(c + (group,) if c[0] == "new_group" and c[1] == group_id and len(c) == 3 else c
                              for c in write.callbacks)
            if callbacks != write.callbacks:
                self._writes[write_id] = evolve(write, callbacks=callbacks)
                return

    def _forget_restores(self, group_id: str) -> None:
        """Drop the group's "restore_group" callbacks from the in-flight writes up to its next
        creation write (restores after that belong to the group that creation makes)."""
        for write_id, write in self._writes.items():
            if any(c[0] == "new_group" and c[1] == group_id for c in write.callbacks):
                return
            callbacks = tuple(c for c in write.callbacks if not (c[0] == "restore_group" and c[1] == group_id))
            if callbacks != write.callbacks:
                self._writes[write_id] = evolve(write, callbacks=callbacks)

    def _expire_held_pending(self, group_id: str, member_id: str) -> None:
        """A pending member's expiry also applies to the copies of its group that a failed
        write may bring back (the "restore_group" and displaced "new_group" snapshots):
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
        for gid, key, entry in changes:
            stored = self._offsets.setdefault(gid, {})
            previous = stored.get(key)
            slot = self._committed.setdefault(gid, {}).get(key)
            if slot is None:
                self._committed[gid][key] = [previous, 1]
            else:
                slot[1] += 1
            if entry is None:
                stored.pop(key, None)
            else:
                stored[key] = entry
            undo.append((gid, key, previous, entry))
        if undo:
            self._op[partition][1].append(("offsets", tuple(undo)))

    def _offsets_written(self, undo: tuple, error: Error | None) -> None:
        for gid, key, previous, written in undo:
            shadow = self._committed.get(gid, {})
            slot = shadow.get(key)
            if slot is None:  # the partition was unloaded meanwhile
                continue
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

    def _delete_group(self, group_id: str, partition: int) -> tuple:
        """Remove a group and its offsets now (tombstones are replayed at once in Kafka);
        returns the callback that restores the group if the write fails."""
        group = self._groups.pop(group_id)
        self._set_offsets(partition, [(group_id, key, None) for key in sorted(self._offsets.get(group_id, {}))])
        return ("restore_group", group_id, group)

    def _remove_group(self, group_id: str) -> None:
        self._groups.pop(group_id, None)
        self._offsets.pop(group_id, None)
        self._committed.pop(group_id, None)

    # ------------------------------------------------------------ request pre-checks

    def _route(self, request, group_id: str | None) -> int | None:
        """Kafka's service-layer checks for one group; answers and returns None on failure."""
        if group_id is None or (group_id == "" and not isinstance(request, _EMPTY_ID_ALLOWED)):
            self._respond(request.request_id, error_response(request, Error.INVALID_GROUP_ID))
            return None
        if isinstance(request, ev.JoinGroup) and not (
                self.config.group_min_session_timeout_ms <= request.session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            self._respond(request.request_id, error_response(request, Error.INVALID_SESSION_TIMEOUT))
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
        self._respond(request.request_id, error_response(request, error, runtime=True))
        return None

    def _on_join(self, req: ev.JoinGroup) -> None:
        if self._route(req, req.group_id) is not None:
            self._run_op(None, req, self._join, req)

    def _on_sync(self, req: ev.SyncGroup) -> None:
        if self._route(req, req.group_id) is not None:
            self._run_op(None, req, self._sync, req)

    def _on_heartbeat(self, req: ev.Heartbeat) -> None:
        group = self._groups.get(req.group_id)
        if group is not None and req.group_id and self._partitions.get(group.partition) is ACTIVE:
            self._heartbeat(req, group)  # the common case, without the generic route
        elif self._route(req, req.group_id) is not None:
            self._heartbeat(req, group)

    def _on_leave(self, req: ev.LeaveGroup) -> None:
        partition = self._route(req, req.group_id)
        if partition is not None:
            self._run_op(partition, req, self._leave, req)

    # ------------------------------------------------------------ offsets (§3.8, §3.9)

    def _on_offset_commit(self, req: ev.OffsetCommit) -> None:
        partition = self._route(req, req.group_id)
        if partition is not None:
            self._run_op(partition, req, self._commit, req, partition)

    def _commit(self, req: ev.OffsetCommit, partition: int):
        group = self._groups.get(req.group_id)
        try:
            if group is None:
                if req.generation_id >= 0:
                    raise MemberError(Error.GROUP_ID_NOT_FOUND if req.version >= 9 else Error.ILLEGAL_GENERATION)
            else:
                _validate_offset_commit(group, req)
        except MemberError as e:
            self._respond(req.request_id, error_response(req, e.error))
            return None
        if group is not None and group.state in (STABLE, PREPARING_REBALANCE):
            member = group.members[req.member_id]
            self._arm(heartbeat_key(partition, req.group_id, req.member_id), member.session_timeout_ms)
        expire = None if req.retention_time_ms == -1 else self._now + req.retention_time_ms
        limit = self.config.offset_metadata_max_bytes
        topics, entries = [], []
        for name, partitions in req.topics:
            results = []
            for p in partitions:
                metadata = p.committed_metadata
                if metadata is not None and len(metadata.encode("utf-16-le")) // 2 > limit:  # Java length
                    results.append(PartitionResult(p.partition_index, Error.OFFSET_METADATA_TOO_LARGE))
                    continue
                results.append(PartitionResult(p.partition_index, Error.NONE))
                entry = OffsetEntry(p.committed_offset, p.committed_leader_epoch, metadata or "", self._now, expire)
                entries.append(((name, p.partition_index), entry))
                self._append(partition, OffsetCommitRecord(
                    req.group_id, name, p.partition_index, entry.offset, entry.leader_epoch,
                    entry.metadata, entry.commit_timestamp_ms, expire))
            topics.append(TopicResult(name, tuple(results)))
        if entries:
            if group is None:  # a "simple" group, created by its first commit
                self._create_group(req.group_id)
                self._op[partition][1].append(("drop_simple_group", req.group_id))
            self._set_offsets(partition, [(req.group_id, key, entry) for key, entry in entries])
        return OffsetCommitResponse(tuple(topics))

    def _on_offset_fetch(self, req: ev.OffsetFetch) -> None:
        results: list[FetchedGroup] = []
        waits = []
        for fetch in req.groups:
            if fetch.group_id is None:
                results.append(FetchedGroup(fetch.group_id, (), Error.INVALID_GROUP_ID))
                continue
            partition = self.partition_of(fetch.group_id)
            status = self._partitions.get(partition)
            if status is not ACTIVE:
                error = Error.NOT_COORDINATOR if status is None else Error.COORDINATOR_LOAD_IN_PROGRESS
                results.append(FetchedGroup(fetch.group_id, (), error))
                continue
            results.append(self._fetch_group(fetch, latest=req.require_stable))
            waits.append(partition)
        response = OffsetFetchResponse(tuple(results))
        if req.require_stable and len(set(waits)) == 1:
            self._result(waits[0], req.request_id, response)
        else:
            self._respond(req.request_id, response)

    def _fetch_group(self, fetch: ev.FetchGroup, latest: bool) -> FetchedGroup:
        """require_stable reads the latest offsets (and waits for their writes); a plain fetch
        reads the committed ones, as Kafka's read operations do."""
        gid = fetch.group_id
        if latest:
            stored = self._offsets.get(gid, {}) if gid in self._groups else {}
        else:
            stored = self._committed_offsets(gid) if gid in self._groups or gid in self._committed else {}
        if fetch.topics is None:
            by_topic: dict[str, list[FetchedPartition]] = {}
            for (topic, p), entry in sorted(stored.items()):
                by_topic.setdefault(topic, []).append(_fetched(p, entry))
            topics = tuple(FetchedTopic(t, tuple(ps)) for t, ps in by_topic.items())
        else:
            topics = tuple(FetchedTopic(topic, tuple(_fetched(p, stored.get((topic, p))) for p in partitions))
                           for topic, partitions in fetch.topics)
        return FetchedGroup(fetch.group_id, topics)

    def _on_offset_delete(self, req: ev.OffsetDelete) -> None:
        partition = self._route(req, req.group_id)
        if partition is not None:
            self._run_op(partition, req, self._offset_delete, req, partition)

    def _offset_delete(self, req: ev.OffsetDelete, partition: int):
        group = self._groups.get(req.group_id)
        if group is None or group.state is DEAD:
            self._respond(req.request_id, OffsetDeleteResponse(Error.GROUP_ID_NOT_FOUND))
            return None
        if group.state in (STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE) and group.protocol_type != "consumer":
            self._respond(req.request_id, OffsetDeleteResponse(Error.NON_EMPTY_GROUP))
            return None
        stored = self._offsets.get(req.group_id, {})
        topics, deleted = [], []
        for name, partitions in req.topics:
            if _is_subscribed(group, name):
                topics.append(TopicResult(name, tuple(
                    PartitionResult(p, Error.GROUP_SUBSCRIBED_TO_TOPIC) for p in partitions)))
                continue
            for p in partitions:
                if (name, p) in stored:
                    deleted.append((name, p))
                    self._append(partition, OffsetTombstone(req.group_id, name, p))
            topics.append(TopicResult(name, tuple(PartitionResult(p, Error.NONE) for p in partitions)))
        self._set_offsets(partition, [(req.group_id, key, None) for key in deleted])
        return OffsetDeleteResponse(Error.NONE, tuple(topics))

    # ------------------------------------------------------------ admin reads and deletes

    def _on_describe(self, req: ev.DescribeGroups) -> None:
        described = []
        for gid in req.groups:
            if gid is None:
                described.append(DescribedGroup(group_id=gid, error_code=Error.INVALID_GROUP_ID))
                continue
            status = self._partitions.get(self.partition_of(gid))
            if status is not ACTIVE:
                error = Error.NOT_COORDINATOR if status is None else Error.COORDINATOR_LOAD_IN_PROGRESS
                described.append(DescribedGroup(group_id=gid, error_code=error))
                continue
            described.append(_describe(gid, self._groups.get(gid)))
        self._respond(req.request_id, DescribeGroupsResponse(tuple(described)))

    def _on_list(self, req: ev.ListGroups) -> None:
        if any(status is LOADING for status in self._partitions.values()):
            self._respond(req.request_id, ListGroupsResponse(Error.COORDINATOR_LOAD_IN_PROGRESS))
            return
        states = {s.strip().lower() for s in req.states_filter}
        types = {t.strip().lower() for t in req.types_filter}
        listed = tuple(
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if (not states or g.state.value.lower() in states) and (not types or "classic" in types))
        self._respond(req.request_id, ListGroupsResponse(Error.NONE, listed))

    def _on_delete_groups(self, req: ev.DeleteGroups) -> None:
        by_partition: dict[int, list[str]] = {}
        results: dict[str, Error] = {}
        for gid in req.groups_names:
            if gid is None:
                results[gid] = Error.INVALID_GROUP_ID
                continue
            partition = self.partition_of(gid)
            status = self._partitions.get(partition)
            if status is not ACTIVE:
                results[gid] = Error.NOT_COORDINATOR if status is None else Error.COORDINATOR_LOAD_IN_PROGRESS
                continue
            by_partition.setdefault(partition, []).append(gid)
        self._op = {}
        for partition, gids in by_partition.items():
            for gid in gids:
                group = self._groups.get(gid)
                if group is None or group.state is DEAD:
                    results[gid] = Error.GROUP_ID_NOT_FOUND
                elif group.state is not EMPTY:
                    results[gid] = Error.NON_EMPTY_GROUP
                else:
                    results[gid] = Error.NONE
                    for topic, p in sorted(self._offsets.get(gid, {})):
                        self._append(partition, OffsetTombstone(gid, topic, p))
                    self._append(partition, GroupTombstone(gid), self._delete_group(gid, partition))
        op, self._op = self._op, {}
        response = DeleteGroupsResponse(tuple(DeletableGroupResult(g, e) for g, e in results.items()))
        if not op:
            self._respond(req.request_id, response)
            return
        # One write per partition; the response waits for all of them. Kafka answers each
        # partition's groups separately; a failure marks only that partition's groups.
        for partition, (records, callbacks) in op.items():
            callbacks.append(("delete_result", req.request_id, tuple(by_partition[partition])))
        write_ids = self._emit_writes(op)
        self._pending_deletes[req.request_id] = (set(write_ids), dict(results))

    def _delete_result(self, write_id: int, request_id, group_ids: tuple, error: Error | None) -> None:
        waiting, results = self._pending_deletes[request_id]
        waiting.discard(write_id)
        if error is not None:
            for gid in group_ids:
                if results[gid] is Error.NONE:
                    results[gid] = translate_operation_error(error)
        if not waiting:
            del self._pending_deletes[request_id]
            self._respond(request_id, DeleteGroupsResponse(tuple(DeletableGroupResult(g, e) for g, e in results.items())))

    def _on_find_coordinator(self, req: ev.FindCoordinator) -> None:
        coordinators = []
        for key in req.coordinator_keys:
            if req.key_type != 0:
                error = Error.INVALID_REQUEST
            else:
                owned = self._partitions.get(self.partition_of(key)) is not None
                error = Error.NONE if owned else Error.COORDINATOR_NOT_AVAILABLE
            if error is Error.NONE:
                coordinators.append(CoordinatorEndpoint(key, self.config.node_id, self.config.advertised_host,
                                                        self.config.advertised_port, error))
            else:
                coordinators.append(CoordinatorEndpoint(key, -1, "", -1, error))
        self._respond(req.request_id, FindCoordinatorResponse(tuple(coordinators)))

    # ------------------------------------------------------------ timers

    def _on_timer(self, event: ev.TimerFired) -> None:
        key = event.key
        kind, partition = key[0], key[1]
        if self._partitions.get(partition) is not ACTIVE:
            return
        self._op = {}
        if kind == "heartbeat":
            self._heartbeat_expired(key[2], key[3])
            self._expire_held_pending(key[2], key[3])
        elif kind == "join":
            self._join_timer_fired(key[2], event.payload)
        elif kind == "sync":
            self._sync_timer_fired(key[2], event.payload)
        elif kind == "expire":
            self._expire(partition)
        op, self._op = self._op, {}
        self._emit_writes(op)

    def _expire(self, partition: int) -> None:
        """The periodic offset/group expiration (GroupCoordinatorShard.cleanupGroupMetadata)."""
        retention_ms = self.config.offsets_retention_ms
        for gid, group in list(self._groups.items()):
            if group.partition != partition:
                continue
            stored = self._offsets.get(gid, {})
            all_expired = True
            if stored:
                base = _expiration_base(group)
                if base is None:
                    all_expired = False
                else:
                    expired = []
                    for (topic, p), entry in sorted(stored.items()):
                        if _is_subscribed(group, topic):
                            all_expired = False
                            continue
                        if entry.expire_timestamp_ms is not None:
                            gone = self._now >= entry.expire_timestamp_ms
                        else:
                            gone = self._now - base(entry) >= retention_ms
                        if gone:
                            expired.append((topic, p))
                            self._append(partition, OffsetTombstone(gid, topic, p))
                        else:
                            all_expired = False
                    self._set_offsets(partition, [(gid, key, None) for key in expired])
            if all_expired and group.state is EMPTY:
                self._append(partition, GroupTombstone(gid), self._delete_group(gid, partition))
        self._arm(expiration_key(partition), self.config.offsets_retention_check_interval_ms)

    # ------------------------------------------------------------ load and unload (§3.11)

    def _on_load(self, event: ev.LoadPartition) -> None:
        partition = event.partition
        if self._partitions.get(partition) is ACTIVE:
            return  # already loaded; a new owner instance starts from a new Coordinator
        if event.loading:
            self._partitions[partition] = LOADING
            return
        groups: dict[str, GroupMetadataRecord | None] = {}
        offsets: dict[str, dict[tuple[str, int], OffsetEntry]] = {}
        for record in event.records:
            if isinstance(record, GroupMetadataRecord):
                groups[record.group_id] = record
            elif isinstance(record, GroupTombstone):
                groups[record.group_id] = None
                offsets.pop(record.group_id, None)
            elif isinstance(record, OffsetCommitRecord):
                offsets.setdefault(record.group_id, {})[(record.topic, record.partition)] = OffsetEntry(
                    record.offset, record.leader_epoch, record.metadata, record.commit_timestamp_ms,
                    record.expire_timestamp_ms)
                if groups.get(record.group_id) is None:  # also after a tombstone
                    groups[record.group_id] = "simple"
            elif isinstance(record, OffsetTombstone):
                offsets.get(record.group_id, {}).pop((record.topic, record.partition), None)
            else:
                raise TypeError(f"not a coordinator record: {record!r}")
        self._partitions[partition] = ACTIVE
        for gid, record in groups.items():
            if record is None:
                continue
            group = Group(group_id=gid, partition=partition) if record == "simple" else _group_from_record(record, partition)
            self._groups[gid] = group
            if offsets.get(gid):
                self._offsets[gid] = offsets[gid]
        self._op = {}
        for gid, record in groups.items():
            group = self._groups.get(gid)
            if group is None or group.partition != partition or record in (None, "simple"):
                continue
            for mid, member in group.members.items():
                self._arm(heartbeat_key(partition, gid, mid), member.session_timeout_ms)
            if len(group.members) > self.config.group_max_size:
                self._prepare_rebalance(self._edit(gid))
        self._op = {}
        self._arm(expiration_key(partition), self.config.offsets_retention_check_interval_ms)

    def _on_unload(self, event: ev.UnloadPartition) -> None:
        partition = event.partition
        if partition not in self._partitions:
            return
        for write in [w for w in self._writes.values() if w.partition == partition]:
            del self._writes[write.write_id]
            self._finish_write(write, Error.NOT_COORDINATOR)
        keep = []
        for entry in self._deferred:
            if entry[0] == partition:
                request_id = entry[2].request_id
                self._respond(request_id, _unload_error(entry[2].response))
            else:
                keep.append(entry)
        self._deferred = keep
        for gid, group in list(self._groups.items()):
            if group.partition != partition:
                continue
            for member in group.members.values():
                if group.state is PREPARING_REBALANCE and member.awaiting_join is not None:
                    self._respond(member.awaiting_join.request_id, JoinGroupResponse(
                        error_code=Error.NOT_COORDINATOR, member_id=member.member_id))
                elif group.state in (COMPLETING_REBALANCE, STABLE) and member.awaiting_sync is not None:
                    self._respond(member.awaiting_sync.request_id, SyncGroupResponse(error_code=Error.NOT_COORDINATOR))
            del self._groups[gid]
            self._offsets.pop(gid, None)
            self._committed.pop(gid, None)
        del self._partitions[partition]
        # Last, so that timers armed by the failed writes' follow-ups are cancelled too.
        self._out.append(CancelPartitionTimers(partition))


_EMPTY_ID_ALLOWED = (ev.OffsetCommit, ev.OffsetFetch, ev.DescribeGroups, ev.DeleteGroups)


def _validate_offset_commit(group, req: ev.OffsetCommit) -> None:
    """ClassicGroup.validateOffsetCommit (non-transactional)."""
    if group.state is DEAD:
        raise MemberError(Error.COORDINATOR_NOT_AVAILABLE)
    if req.generation_id < 0 and group.state is EMPTY:
        return
    if req.generation_id >= 0 or req.member_id != "" or req.group_instance_id is not None:
        from .membership import validate_member

        validate_member(group, req.member_id, req.group_instance_id)
        if req.generation_id != group.generation_id:
            raise MemberError(Error.ILLEGAL_GENERATION)
    elif group.state is not EMPTY:
        raise MemberError(Error.UNKNOWN_MEMBER_ID)
    if group.state is COMPLETING_REBALANCE:
        raise MemberError(Error.REBALANCE_IN_PROGRESS)


def _without_pending(callback: tuple, group_id: str, member_id: str) -> tuple:
    """``callback`` with ``member_id`` no longer pending in the group snapshot it holds."""
    held = 2 if callback[0] == "restore_group" else 3 if callback[0] == "new_group" and len(callback) == 4 else None
    if held is None or callback[1] != group_id or member_id not in callback[held].pending_members:
        return callback
    group = callback[held]
    return callback[:held] + (evolve(group, pending_members=group.pending_members - {member_id}),) + callback[held + 1:]


def _is_subscribed(group, topic: str) -> bool:
    if group.subscribed_topics is not None:
        return topic in group.subscribed_topics
    return group.protocol_type == "consumer"


def _expiration_base(group):
    """Which timestamp an offset's retention counts from, or None if it cannot expire (§5.3)."""
    if group.protocol_type is not None:
        if group.state is EMPTY:
            return lambda entry: group.state_timestamp_ms if group.state_timestamp_ms is not None \
                else entry.commit_timestamp_ms
        if group.protocol_type == "consumer" and group.subscribed_topics is not None and group.state is STABLE:
            return lambda entry: entry.commit_timestamp_ms
        return None
    return lambda entry: entry.commit_timestamp_ms


def _fetched(partition: int, entry: OffsetEntry | None) -> FetchedPartition:
    if entry is None:
        return FetchedPartition(partition)
    return FetchedPartition(partition, entry.offset, entry.leader_epoch, entry.metadata)


def _describe(group_id: str, group) -> DescribedGroup:
    if group is None:
        return DescribedGroup(group_id=group_id, group_state=DEAD.value)
    stable = group.state is STABLE
    members = tuple(
        DescribedMember(mid, m.group_instance_id, m.client_id, m.client_host,
                        m.metadata(group.protocol_name) if stable else b"", m.assignment)
        for mid, m in group.members.items())
    return DescribedGroup(group_id=group_id, group_state=group.state.value, protocol_type=group.protocol_type or "",
                          protocol_data=group.protocol_name or "" if stable else "", members=members)


def _group_from_record(record: GroupMetadataRecord, partition: int) -> Group:
    draft = GroupDraft(Group(
        group_id=record.group_id, partition=partition, state=STABLE if record.members else EMPTY,
        generation_id=record.generation_id, protocol_type=record.protocol_type or None,
        protocol_name=record.protocol_name, leader_id=record.leader_id,
        state_timestamp_ms=None if record.current_state_timestamp_ms == -1 else record.current_state_timestamp_ms))
    for m in record.members:
        draft.add(Member(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.session_timeout_ms if m.rebalance_timeout_ms == -1 else m.rebalance_timeout_ms,
            session_timeout_ms=m.session_timeout_ms, protocol_type=record.protocol_type,
            protocols=((record.protocol_name or "", m.subscription),), assignment=m.assignment))
    draft.leader_id = record.leader_id
    draft.subscribed_topics = _subscribed_topics(draft)
    return draft.freeze()


def _unload_error(response):
    return error_like(response, Error.NOT_COORDINATOR)


def error_like(response, error: Error):
    if isinstance(response, HeartbeatResponse):
        return HeartbeatResponse(error)
    if isinstance(response, LeaveGroupResponse):
        return LeaveGroupResponse(error)
    if isinstance(response, OffsetFetchResponse):
        return OffsetFetchResponse(tuple(FetchedGroup(g.group_id, (), error) for g in response.groups))
    if isinstance(response, OffsetCommitResponse):
        return OffsetCommitResponse(tuple(
            TopicResult(t.name, tuple(PartitionResult(p.partition_index, error) for p in t.partitions))
            for t in response.topics))
    if isinstance(response, DeleteGroupsResponse):
        return DeleteGroupsResponse(tuple(DeletableGroupResult(r.group_id, error) for r in response.results))
    if isinstance(response, OffsetDeleteResponse):
        return OffsetDeleteResponse(error)
    raise TypeError(f"no error form for {type(response).__name__}")


def error_response(request, error: Error, runtime: bool = False):
    """The response Kafka gives ``request`` when the whole request fails with ``error``."""
    if isinstance(request, ev.JoinGroup):
        # Service-level rejections echo the member id; runtime failures do not.
        return JoinGroupResponse(error_code=error, member_id="" if runtime else request.member_id)
    if isinstance(request, ev.SyncGroup):
        return SyncGroupResponse(error_code=error)
    if isinstance(request, ev.Heartbeat):
        return HeartbeatResponse(error)
    if isinstance(request, ev.LeaveGroup):
        return LeaveGroupResponse(error)
    if isinstance(request, ev.OffsetCommit):
        return OffsetCommitResponse(tuple(
            TopicResult(name, tuple(PartitionResult(p.partition_index, error) for p in partitions))
            for name, partitions in request.topics))
    if isinstance(request, ev.OffsetFetch):
        return OffsetFetchResponse(tuple(FetchedGroup(g.group_id, (), error) for g in request.groups))
    if isinstance(request, ev.DescribeGroups):
        return DescribeGroupsResponse(tuple(DescribedGroup(group_id=g, error_code=error) for g in request.groups))
    if isinstance(request, ev.ListGroups):
        return ListGroupsResponse(error)
    if isinstance(request, ev.DeleteGroups):
        return DeleteGroupsResponse(tuple(DeletableGroupResult(g, error) for g in request.groups_names))
    if isinstance(request, ev.OffsetDelete):
        return OffsetDeleteResponse(error)
    if isinstance(request, ev.FindCoordinator):
        return FindCoordinatorResponse(tuple(
            CoordinatorEndpoint(k, -1, "", -1, error) for k in request.coordinator_keys))
    raise TypeError(f"not a request: {request!r}")
