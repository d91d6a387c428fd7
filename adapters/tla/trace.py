"""Trace validation, the translation: a run of the core read as the spec's states, for TLC to
check against tla/Coordinator.tla.

A trace is the core's events of one group, each with the whole state after it and the
commands it emitted, read as the spec's values (``model.Alpha``): ``Recorder`` re-runs the
inputs through a core and keeps one row per step (``record``, ``scoped_record`` for a run the
spec can model, ``unit_trace`` for the part of a recorded unit it can check, stepping over
inputs it does not see). Where traces come from is ``trace_sources``; the generated TLA+
module is ``trace_module``'s, and TLC checks it in ``trace_check``.
"""

from __future__ import annotations

from typing import Any, Iterable

import attrs

from groupcoord.adapters.tla import storage
from groupcoord.adapters.tla.model import (
    PARTITION,
    Alpha,
    Ids,
    OutOfModel,
    apply_timers,
    timer_key,
)
from groupcoord.adapters.tla.offsets import aged
from groupcoord.adapters.tla.values import F
from groupcoord.core import events as ev
from groupcoord.core.commands import Respond
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator


@attrs.define
class Trace:
    """``initial_delay`` and ``retention_check_interval``: the settings the spec takes as
    constants (InitialDelay, RetentionCheckInterval: timer lengths)."""

    name: str
    rows: list  # F(event=..., s=F(all variables))
    initial_delay: int
    instances: set = attrs.Factory(set)
    retention_check_interval: int = CoordinatorConfig().offsets_retention_check_interval_ms

    @staticmethod
    def of(name: str, rows: list, config: CoordinatorConfig, instances: set) -> "Trace":
        return Trace(name, rows, config.group_initial_rebalance_delay_ms, instances,
                     config.offsets_retention_check_interval_ms)

    @property
    def constants(self) -> tuple[int, int]:
        """What traces checked in one TLC run must share."""
        return self.initial_delay, self.retention_check_interval


MODELLED_REQUESTS = (ev.JoinGroup, ev.SyncGroup, ev.Heartbeat, ev.LeaveGroup, ev.OffsetCommit, ev.OffsetDelete)


class Recorder:
    """Reads core events and their commands as spec rows (one group, one partition).

    ``others``: what to do with an input that is no step of the spec for this group (another
    partition's load or timer, a write on another partition, a request the spec has no action
    for or of another group): "refuse" raises OutOfModel; "step over" runs it through the core
    and leaves it out of the rows if it changes nothing the spec sees (the group's state, its
    timers, the partition's writes and held results) and emits nothing the spec sees, counting
    it in ``stepped_over``, else raises OutOfModel saying so."""

    def __init__(self, config: CoordinatorConfig, gid: str, partition: int = PARTITION,
                 others: str = "refuse") -> None:
        self.config = config
        self.alpha = Alpha(Ids(), gid, partition)
        self.alpha.metadata_max_bytes = config.offset_metadata_max_bytes
        self.coordinator = Coordinator(config)
        self.timers: dict = {}
        self.rows: list[F] = []
        self.instances: set = set()
        self.others = others
        self.stepped_over: dict[str, int] = {}

    def is_other(self, event) -> bool:
        """Not a step of the spec for this group (see the class)."""
        alpha = self.alpha
        if isinstance(event, ev.TopicsChanged):  # consumer groups' topics: no classic group reads them
            return True
        if isinstance(event, (ev.LoadPartition, ev.UnloadPartition)):
            return event.partition != alpha.partition
        if isinstance(event, ev.TimerFired):
            return timer_key(event.key, alpha.ids, alpha.gid, alpha.partition) is None
        if isinstance(event, (ev.WriteCompleted, ev.WriteFailed)):
            write = self.coordinator.snapshot().writes.get(event.write_id)
            return write is None or write.partition != alpha.partition
        if isinstance(event, ev.DeleteGroups):
            return alpha.gid not in tuple(event.groups_names)
        if isinstance(event, ev.OffsetFetch):
            return alpha.gid not in {g.group_id for g in event.groups}
        if isinstance(event, ev.Request):
            return not isinstance(event, MODELLED_REQUESTS) or getattr(event, "group_id", None) != alpha.gid
        return False

    def step_over(self, event) -> None:
        alpha = self.alpha
        name = type(event).__name__
        snapshot = self.coordinator.snapshot()
        before = alpha.state(snapshot, self.timers, -1)
        commands = self.coordinator.handle(event)
        if isinstance(event, ev.TimerFired):
            self.timers.pop(event.key, None)
        apply_timers(self.timers, commands)
        own = event.request_id if isinstance(event, ev.Request) else object()
        seen = [c for c in commands if not (isinstance(c, Respond) and c.request_id == own)]
        try:
            alpha.remember_writes(seen)
            out = alpha.commands(seen, snapshot if self.rows else None, event)
            after = alpha.state(self.coordinator.snapshot(), self.timers, -1)
        except OutOfModel as e:
            raise OutOfModel(f"{_what(event)}, which changes what the spec sees of group {alpha.gid!r} and its "
                             f"partition: {e}") from None
        if out or after != before:
            raise OutOfModel(f"{_what(event)}, which changes what the spec sees of group {alpha.gid!r}")
        self.stepped_over[name] = self.stepped_over.get(name, 0) + 1

    def feed(self, event) -> None:
        # Not runtime.CommandRunner: write outcomes and timer firings are the trace's own inputs,
        # re-run one at a time; the commands are read into the spec state, not carried out.
        alpha = self.alpha
        if self.others == "step over" and self.is_other(event):
            self.step_over(event)
            return
        if isinstance(event, (ev.LoadPartition, ev.UnloadPartition)) and event.partition != alpha.partition:
            raise OutOfModel("another partition")
        if isinstance(event, ev.Request):
            gid = getattr(event, "group_id", None)
            if isinstance(event, ev.DeleteGroups):
                if tuple(event.groups_names) != (alpha.gid,):
                    raise OutOfModel("a DeleteGroups of other groups")
            elif isinstance(event, ev.OffsetFetch):
                gid = alpha.gid  # its groups are checked as it is read (offsets.read_event)
            elif gid != alpha.gid or not isinstance(event, MODELLED_REQUESTS):
                raise OutOfModel(_what(event))
            if gid == "":
                raise OutOfModel("the empty group id (INVALID_GROUP_ID is not in the spec)")
            if isinstance(event, ev.JoinGroup) and not (
                    self.config.group_min_session_timeout_ms <= event.session_timeout_ms
                    <= self.config.group_max_session_timeout_ms):
                raise OutOfModel("a session timeout out of bounds (INVALID_SESSION_TIMEOUT is not in the spec)")
            if isinstance(event, ev.JoinGroup) and event.member_id == "":
                alpha.ids.learn(event.new_member_uuid, event.client_id, event.group_instance_id)
            for inst in [getattr(event, "group_instance_id", None)] + [
                    m.group_instance_id for m in getattr(event, "members", ())]:
                if inst is not None:
                    self.instances.add(inst)
            alpha.tags[event.request_id] = alpha.tag_of_request(event)
        before = self.coordinator.snapshot()
        spec_event = alpha.event(event)
        if spec_event["type"] == "WriteFailed":
            spec_event = _failed_write(spec_event, event.write_id, before, alpha.partition)
        if isinstance(event, ev.LoadPartition):
            log = alpha.log(event.records)
            if self.rows and log != alpha.stored:
                raise OutOfModel("a load of records other than those the coordinator wrote")
            if self.rows:
                spec_event = F(type="LoadPartition", group=storage.rec_of(log), durable=0)
                if event.partition in self.coordinator.snapshot().partitions:  # a new coordinator takes over
                    self.coordinator, self.timers = Coordinator(self.config), {}
            alpha.stored = log
        acknowledged = ()
        if isinstance(event, (ev.WriteCompleted, ev.WriteFailed)) and spec_event["type"] == "WriteCompleted":
            acknowledged = alpha.write_records.get(event.write_id, ())
        commands = self.coordinator.handle(event)
        if isinstance(event, ev.TimerFired):
            self.timers.pop(event.key, None)  # a timer fires once
        apply_timers(self.timers, commands)
        alpha.remember_writes(commands)
        out = alpha.commands(commands, before if self.rows else None, event)
        alpha.stored = storage.apply_all(alpha.stored, acknowledged)
        if spec_event["type"] == "TimerFired" and spec_event["key"] == ("expire",):
            spec_event = spec_event.set(aged=aged(commands, alpha.gid, alpha.partition))
        state = alpha.state(self.coordinator.snapshot(), self.timers, -1)
        state["out"] = out
        state["event"] = spec_event
        self.rows.append(F(event=spec_event, s=F(state)))


_NOT_IN_SPEC = {
    "FindCoordinator": "the spec has no FindCoordinator (it models one coordinator)",
    "DescribeGroups": "the spec has no DescribeGroups", "ListGroups": "the spec has no ListGroups",
    "TopicsChanged": "the classic spec has no topics (KIP-848's consumer groups read them)",
}


def _what(event) -> str:
    """An input the spec has no step for, and why."""
    name = type(event).__name__
    gid = getattr(event, "group_id", None)
    named = f"{name} of {gid!r}" if gid is not None else name
    why = _NOT_IN_SPEC.get(name)
    return f"{named} ({why})" if why else named


def record(events: Iterable, config: CoordinatorConfig, gid: str, name: str) -> Trace:
    r = Recorder(config, gid)
    for e in events:
        r.feed(e)
    return Trace.of(name, r.rows, config, r.instances)


def scoped_record(events: list, config: CoordinatorConfig, name: str) -> Trace:
    """``record`` of a run the spec can model (one group, one offsets partition, no size limit);
    OutOfModel saying why not otherwise."""
    gids = {getattr(e, "group_id", None) for e in events if isinstance(e, ev.Request)} - {None}
    if len(gids) != 1:
        raise OutOfModel(f"groups {sorted(gids)} (the spec models one)")
    if config.offsets_topic_num_partitions != 1:
        raise OutOfModel("several offsets partitions (the spec models one)")
    if config.group_max_size != CoordinatorConfig().group_max_size:
        raise OutOfModel("group.max.size (not in the spec)")
    return record(events, config, gids.pop(), name)


@attrs.define
class Unit:
    """One unit of a recorded trace for ``tla validate``: a group of a group-scoped recording,
    or a group of an instance-scoped file (one coordinator's recording). ``trace``: what TLC
    checks, None when nothing can be; ``stopped``: why the inputs from ``inputs_used + 1`` on
    are not checked (None: all are; ``inputs_used`` None: the unit as a whole);
    ``stepped_over``: inputs the spec does not see (another partition's, a request it has no
    action for), run through the core and shown to change nothing the spec sees, by type."""

    name: str
    inputs: int
    trace: Any = None  # a Trace, or a consumer_trace.ConsumerTrace for a consumer group
    inputs_used: int | None = None
    stopped: str | None = None
    stepped_over: dict = attrs.Factory(dict)

    def not_checked(self) -> str:
        """What is not checked, and why."""
        if self.inputs_used is None:
            return self.stopped
        return f"inputs {self.inputs_used + 1}-{self.inputs} of {self.inputs}, from {self.stopped}"

    @property
    def partial(self) -> bool:
        return self.trace is not None and self.stopped is not None


def unit_trace(events: list, config: CoordinatorConfig, gid: str, name: str) -> Unit:
    """The part of a recorded unit the spec can check: its inputs re-run through the core for
    group ``gid``, stepping over inputs the spec does not see, up to the first input that
    leaves the spec's scope (a prefix of a run is a run: what comes before it is checked)."""
    unit = Unit(name, len(events))
    if config.group_max_size != CoordinatorConfig().group_max_size:
        unit.stopped = "group.max.size is set (not in the spec)"
        return unit
    from groupcoord.core.partitioning import partition_for

    r = Recorder(config, gid, partition_for(gid, config.offsets_topic_num_partitions), others="step over")
    used = 0
    for k, e in enumerate(events):
        try:
            r.feed(e)
        except OutOfModel as x:
            unit.stopped = str(x)
            break
        used = k + 1
    if unit.stopped is not None:
        unit.inputs_used = used
    unit.stepped_over = dict(sorted(r.stepped_over.items()))
    if len(r.rows) >= 2:  # a LoadPartition alone checks nothing past Init
        unit.trace = Trace.of(name, r.rows, config, r.instances)
    elif unit.stopped is None:
        unit.stopped = "nothing for the spec to check: no step of the group after its partition's load"
    return unit


def _failed_write(spec_event: F, write_id: int, before, partition: int) -> F:
    """A failed write is the oldest of its partition's in flight (WriteFailed) or, of several,
    the newest (WriteFailedLast: an append that fails first); the spec has no other order."""
    ids = sorted(w.write_id for w in before.writes.values() if w.partition == partition)
    if write_id == ids[0]:
        return spec_event
    if write_id == ids[-1]:
        return F(type="WriteFailedLast", error=spec_event["error"])
    raise OutOfModel("a write failed while older and newer writes of its partition were in flight")
