"""The coordinator: events in, commands out.

``Coordinator.handle(event)`` is the whole interface. It routes a request through Kafka's
service pre-checks (ownership, loading, group id, session timeout bounds) to the group state
machine (machine.GroupMachine) or the offset store, and turns what an operation did into
commands: responses, at most one storage write per operation and partition (with the
responses that depend on it held until WriteCompleted/WriteFailed), and timers.

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

from typing import Any

import attrs

from . import events as ev
from .commands import (
    CancelTimer,
    DeletableGroupResult,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsResponse,
    ExpirationTimer,
    FindCoordinatorResponse,
    GroupTombstone,
    HeartbeatTimer,
    JoinTimer,
    ListGroupsResponse,
    OffsetTombstone,
    Respond,
    SetTimer,
    SyncTimer,
)
from .commands import Coordinator as CoordinatorEndpoint
from .config import CoordinatorConfig
from .continuations import DeleteResult
from .error_responses import error_response
from .errors import Error, translate_operation_error
from .loading import Loading
from .classic.machine import GroupMachine
from .classic.model import Group
from .offsets import OffsetEntry, Offsets
from .partitioning import ACTIVE, LOADING, partition_for
from .classic.states import DEAD, EMPTY
from .writes import PendingWrite, Writes


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


class CoordinatorFailed(Exception):
    """``Coordinator.handle`` raised (the exception is the cause) or refused an event because
    an earlier one raised: the instance is failed for good (``Coordinator.failed``)."""

    def __init__(self, message: str, event: Any = None) -> None:
        super().__init__(message)
        self.event = event  # the event that failed the instance


class _Refused(dict):
    """A failed instance's handlers: every event is refused."""

    __slots__ = ("failed",)

    def __missing__(self, kind):
        raise CoordinatorFailed(f"refused {kind.__name__}: this coordinator failed handling "
                                f"{type(self.failed).__name__}; start a new one from storage", self.failed)


class Coordinator(Writes, Offsets, Loading):
    def __init__(self, config: CoordinatorConfig | None = None):
        self.config = config or CoordinatorConfig()
        self.config.validate()
        self.failed: Any = None  # the event whose handling raised; from then on every event is refused
        self._partitions: dict[int, str] = {}
        self._groups: dict[str, Group] = {}
        self._machine = GroupMachine(self.config)
        # Offsets as write operations see them: a commit or a deletion changes them at once,
        # as Kafka replays its records on append. Readers see the committed value of a key
        # whose write is still in flight: _committed[group][key] = [value, writes in flight].
        self._offsets: dict[str, dict[tuple[str, int], OffsetEntry]] = {}
        self._committed: dict[str, dict[tuple[str, int], list]] = {}
        self._writes: dict[int, PendingWrite] = {}
        # the ids of _writes by partition, lowest first (derived: a slow store keeps thousands in
        # flight, and each completion asks for its partition's lowest)
        self._writes_on: dict[int, dict[int, None]] = {}
        # responses held behind writes, by partition: (the highest write id they wait for, Respond)
        self._deferred: dict[int, list[tuple[int, Respond]]] = {}
        # partitions whose held responses do not wait for ever higher ids (a write completed
        # before an earlier one): released by a whole scan, not from the front (derived)
        self._deferred_unordered: set[int] = set()
        self._next_write_id = 1
        self._pending_deletes: dict[Any, tuple[set[int], dict[str, Error]]] = {}
        self._op: dict[int, tuple[list, list]] = {}
        self._now = 0
        self._out: list = []
        # the class's functions, not bound methods: a coordinator holding its own bound methods
        # is a reference cycle, freed only by the garbage collector (a replay makes thousands)
        c = type(self)
        self._handlers = {
            ev.JoinGroup: c._on_join, ev.SyncGroup: c._on_sync, ev.Heartbeat: c._on_heartbeat,
            ev.LeaveGroup: c._on_leave, ev.OffsetCommit: c._on_offset_commit,
            ev.OffsetFetch: c._on_offset_fetch, ev.DescribeGroups: c._on_describe,
            ev.ListGroups: c._on_list, ev.DeleteGroups: c._on_delete_groups,
            ev.OffsetDelete: c._on_offset_delete, ev.FindCoordinator: c._on_find_coordinator,
            ev.TimerFired: c._on_timer, ev.WriteCompleted: c._on_write_done,
            ev.WriteFailed: c._on_write_done, ev.LoadPartition: c._on_load,
            ev.UnloadPartition: c._on_unload,
        }

    # ------------------------------------------------------------------ the interface

    def handle(self, event) -> list:
        """Apply one event; return the commands it produces, in order. If applying it raises,
        the instance is failed: CoordinatorFailed now and for every later event."""
        try:
            self._now = event.now_ms
            out = self._out = []
            self._handlers[type(event)](self, event)
        except Exception as e:
            if self.failed is not None:
                raise  # refused
            self._fail(event)
            raise CoordinatorFailed(f"{type(e).__name__}: {e} (handling {type(event).__name__})", event) from e
        except BaseException:  # an interrupt inside a step leaves it as half-done as an error does
            if self.failed is None:
                self._fail(event)
            raise
        return out

    def _fail(self, event) -> None:
        self.failed = event
        refused = self._handlers = _Refused()
        refused.failed = event

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
            deferred=tuple((p, w, r) for p, held in self._deferred.items() for w, r in held),
            next_write_id=self._next_write_id,
            pending_deletes={k: (frozenset(w), dict(r)) for k, (w, r) in self._pending_deletes.items()})

    @classmethod
    def restore(cls, state: CoordinatorState, config: CoordinatorConfig | None = None) -> "Coordinator":
        c = cls(config)
        c._partitions = dict(state.partitions)
        c._groups = dict(state.groups)
        c._offsets = {g: dict(o) for g, o in state.offsets.items()}
        c._committed = {g: {k: list(v) for k, v in o.items()} for g, o in state.committed_offsets.items()}
        c._writes = dict(state.writes)
        for write_id in sorted(state.writes):
            c._writes_on.setdefault(state.writes[write_id].partition, {})[write_id] = None
        for partition, wait_for, respond in state.deferred:
            c._hold(partition, wait_for, respond)
        c._next_write_id = state.next_write_id
        c._pending_deletes = {k: (set(w), dict(r)) for k, (w, r) in state.pending_deletes.items()}
        return c

    # ------------------------------------------------------------ emitting commands

    def _respond(self, request_id, response) -> None:
        self._out.append(Respond(request_id, response))

    def _result(self, partition: int, request_id, response) -> None:
        """An operation's own result: held behind writes still in flight on its partition
        (Kafka answers a write operation without records only once earlier writes commit)."""
        pending = self._writes_on.get(partition)
        if pending:
            self._hold(partition, next(reversed(pending)), Respond(request_id, response))
        else:
            self._out.append(Respond(request_id, response))

    def _hold(self, partition: int, wait_for: int, respond: Respond) -> None:
        held = self._deferred.setdefault(partition, [])
        if held and wait_for < held[-1][0]:
            self._deferred_unordered.add(partition)
        held.append((wait_for, respond))

    def _arm(self, key: tuple, delay_ms: int, payload=None) -> None:
        self._out.append(SetTimer(key, self._now + delay_ms, payload))

    def _cancel(self, key: tuple) -> None:
        self._out.append(CancelTimer(key))

    def _step(self, group_id: str, event):
        """Route ``event`` to the group machine and take what it did: the group (dropped once
        Dead), its commands, its records (into the operation's write). Returns its result."""
        step = self._machine.step(self._groups.get(group_id), event, self._now)
        group = step.group
        if group is not None:
            if group.state is DEAD:
                self._groups.pop(group_id, None)
            else:
                self._groups[group_id] = group
            for record, continuation in step.records:
                self._append(group.partition, record, continuation)
        self._out.extend(step.commands)
        return step.result

    def _create_group(self, group_id: str) -> Group:
        group = self._groups[group_id] = Group(group_id=group_id, partition=self.partition_of(group_id))
        return group

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
            self._run_op(None, req, self._step, req.group_id, req)

    def _on_sync(self, req: ev.SyncGroup) -> None:
        if self._route(req, req.group_id) is not None:
            self._run_op(None, req, self._step, req.group_id, req)

    def _on_heartbeat(self, req: ev.Heartbeat) -> None:
        group = self._groups.get(req.group_id)
        # the common case skips the generic route: a known group on an active partition
        if (group is not None and req.group_id and self._partitions.get(group.partition) is ACTIVE) \
                or self._route(req, req.group_id) is not None:
            response, timer, held = self._machine.heartbeat(group, req, self._now)
            if timer is not None:
                self._out.append(timer)
            if held and self._writes:
                self._result(group.partition, req.request_id, response)
            else:
                self._out.append(Respond(req.request_id, response))

    def _on_leave(self, req: ev.LeaveGroup) -> None:
        partition = self._route(req, req.group_id)
        if partition is not None:
            self._run_op(partition, req, self._step, req.group_id, req)

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
            group = self._groups.get(gid)
            described.append(DescribedGroup(group_id=gid, group_state=DEAD.value) if group is None
                             else group.described())
        self._respond(req.request_id, DescribeGroupsResponse(tuple(described)))

    def _on_list(self, req: ev.ListGroups) -> None:
        if any(status is LOADING for status in self._partitions.values()):
            self._respond(req.request_id, ListGroupsResponse(Error.COORDINATOR_LOAD_IN_PROGRESS))
            return
        # Kafka: states lower-cased and trimmed as Java's trim() does; types lower-cased only
        states = {s.lower().strip(_JAVA_TRIMMED) for s in req.states_filter}
        types = {t.lower() for t in req.types_filter}
        listed = tuple(g.listed() for g in self._groups.values()
                       if (not states or g.state.value.lower() in states) and (not types or g.KIND in types))
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
                if group is None:
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
            callbacks.append(DeleteResult(req.request_id, tuple(by_partition[partition])))
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
        kind = type(key)
        if self._partitions.get(getattr(key, "partition", None)) is not ACTIVE:
            return  # not a key of an owned partition (nor a key at all)
        self._op = {}
        if kind is ExpirationTimer:
            self._expire(key.partition)
        elif kind is HeartbeatTimer or kind is JoinTimer or kind is SyncTimer:
            self._step(key.group_id, event)
            if kind is HeartbeatTimer:
                self._expire_held_pending(key.group_id, key.member_id)
        op, self._op = self._op, {}
        self._emit_writes(op)


_JAVA_TRIMMED = "".join(map(chr, range(0x21)))  # String.trim(): every char up to U+0020
_EMPTY_ID_ALLOWED = (ev.OffsetCommit, ev.OffsetFetch, ev.DescribeGroups, ev.DeleteGroups)


