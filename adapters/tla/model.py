"""The mapping between the core and tla/Coordinator.tla.

* ``Alpha`` reads a core state (``CoordinatorState`` + the adapter's armed timers) and the
  commands of one event as the spec's values: one group, its partition, its timers, its
  writes, its held results, and ``out``.
* ``build_core`` goes the other way: from a spec state (as parsed from TLC) to a
  ``CoordinatorState`` and a timer table, for the state-graph check.
* ``core_event`` turns a spec event (an edge label) into the core's input event, and
  ``spec_inputs`` lists every input the spec's environment may send in a state (the
  replay applies each of them to the core).

Member ids: a core id is ``<client id or instance>-<uuid>`` where the uuid is the JoinGroup's
``new_member_uuid``; the spec's id is the uuid. ``Ids`` keeps that correspondence.
"""

from __future__ import annotations

from typing import Any, Iterable

from groupcoord.adapters.tla import offsets, storage
from groupcoord.adapters.tla.storage import EMPTY
from groupcoord.adapters.tla.values import MV, F, OutOfModel, fn
from groupcoord.core import CoordinatorState, Group, PendingWrite
from groupcoord.core import events as ev
from groupcoord.core.commands import (
    CancelPartitionTimers,
    CancelTimer,
    DeleteGroupsResponse,
    ExpirationTimer,
    GroupMetadataRecord,
    GroupTombstone,
    HeartbeatResponse,
    HeartbeatTimer,
    JoinGroupResponse,
    JoinTimer,
    LeaveGroupResponse,
    Respond,
    SetTimer,
    SyncGroupResponse,
    SyncTimer,
    Write,
)
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.continuations import (
    AfterEmptyGroup,
    AfterNewGroup,
    AfterStaticReplace,
    AfterSync,
    DeleteResult,
    RestoreGroup,
)
from groupcoord.core.errors import Error

GROUP = "g"
PARTITION = 0
CLIENT = "c"
NOW_MS = 1_000_000
REQ = ("req",)
CONFIG = CoordinatorConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=3000)


def bstr(data: bytes) -> str:
    """Opaque bytes as a TLA+ string: printable ASCII as is, anything else as 0x<hex>."""
    if all(32 <= b < 127 and b not in (34, 92) for b in data) and not data.startswith(b"0x"):
        return data.decode("ascii")
    return "0x" + data.hex()


def sbytes(text: str) -> bytes:
    return bytes.fromhex(text[2:]) if text.startswith("0x") else text.encode("ascii")


def code(error: Error) -> str:
    return Error.parse(error).name


class Ids:
    """Spec ids <-> core ids, and spec instances <-> core instance ids."""

    def __init__(self, instances: Iterable[Any] = ()) -> None:
        self.to_spec: dict[str, Any] = {}
        self.inst_spec: dict[str, Any] = {}
        for i in instances:
            self.inst_spec[self.inst_name(i)] = i

    @staticmethod
    def name(x: Any) -> str:
        return x.name if isinstance(x, MV) else str(x)

    inst_name = name

    def learn(self, uuid_value: Any, client_id: str, instance: str | None) -> None:
        """A JoinGroup with member id "" may create ``<client>-<uuid>`` or ``<instance>-<uuid>``."""
        u = self.name(uuid_value)
        self.to_spec[f"{client_id}-{u}"] = uuid_value
        if instance is not None:
            self.to_spec[f"{instance}-{u}"] = uuid_value

    def spec(self, core_id: str | None) -> Any:
        if core_id is None:
            return None
        if core_id == "":
            return ""
        known = self.to_spec.get(core_id)
        return known if known is not None else "~" + core_id

    def inst(self, core_inst: str | None) -> Any:
        if core_inst is None:
            return None
        return self.inst_spec.get(core_inst, core_inst)


# ----------------------------------------------------------------------------- core -> spec


_SPEC_KEYS = {JoinTimer: ("join",), SyncTimer: ("sync",)}


def timer_key(key: Any, ids: Ids, gid: str = GROUP, partition: int = PARTITION) -> tuple | None:
    """The spec's key for a core timer key of this group (None: not this group's)."""
    if getattr(key, "partition", None) != partition:
        return None
    kind = type(key)
    if kind is ExpirationTimer:
        return ("expire",)
    if key.group_id != gid:
        return None
    if kind is HeartbeatTimer:
        return ("hb", ids.spec(key.member_id))
    return _SPEC_KEYS.get(kind)


def timer_payload(key: Any, payload: Any) -> Any:
    """The spec's payload: a join timer's <<"initial", delay, remaining>> (or <<>>), a sync
    timer's generation."""
    if type(key) is JoinTimer:
        return () if payload is None else ("initial", payload.delay_ms, payload.remaining_ms)
    if type(key) is SyncTimer:
        return payload
    return None


def core_timer(key: tuple, core_id) -> Any:
    """The core's key for a spec timer key of the group."""
    if key[0] == "hb":
        return HeartbeatTimer(PARTITION, GROUP, core_id(key[1]))
    if key[0] == "expire":
        return ExpirationTimer(PARTITION)
    return JoinTimer(PARTITION, GROUP) if key[0] == "join" else SyncTimer(PARTITION, GROUP)


class Alpha:
    """Reads one group of a core state, and one event's commands, as the spec's values.

    ``tags``: request id -> the spec's name for a result that is held or rides on a write
    (``(api, member)``); filled by the caller as requests are seen (or built)."""

    def __init__(self, ids: Ids, gid: str = GROUP, partition: int = PARTITION) -> None:
        self.ids = ids
        self.gid = gid
        self.partition = partition
        self.tags: dict[Any, tuple] = {}
        self.write_records: dict[int, tuple] = {}  # write id -> its records (the core keeps them only in Write)
        self.metadata_max_bytes = CONFIG.offset_metadata_max_bytes  # offset metadata longer is out of the model
        self.stored = EMPTY  # the log, kept by the caller (storage.py)

    # --- values

    def protos(self, protocols) -> tuple:
        return tuple((name, bstr(meta)) for name, meta in protocols)

    def record(self, r) -> F:
        if isinstance(r, GroupMetadataRecord) and r.group_id == self.gid:
            return F(type="GroupMetadata", gen=r.generation_id, ptype=r.protocol_type, pname=r.protocol_name,
                     leader=self.ids.spec(r.leader_id), members=tuple(
                         F(id=self.ids.spec(m.member_id), inst=self.ids.inst(m.group_instance_id),
                           rto=m.rebalance_timeout_ms, sto=m.session_timeout_ms, meta=bstr(m.subscription),
                           asg=bstr(m.assignment))
                         for m in r.members))
        if isinstance(r, GroupTombstone) and r.group_id == self.gid:
            return F(type="GroupTombstone", gen=0, ptype="", pname=None, leader=None, members=())
        read = offsets.read_record(r, self.gid)
        if read is not None:
            return read
        raise OutOfModel(f"record {type(r).__name__} of {getattr(r, 'group_id', '?')!r}")

    def group(self, group: Group, writes: Iterable[PendingWrite] = ()) -> dict:
        ids = self.ids
        replacing = {cb.new_member_id: cb.request_id for w in writes for cb in w.continuations
                     if type(cb) is AfterStaticReplace}
        mem = {}
        for mid, m in group.members.items():
            join = ""
            if m.awaiting_join is not None:
                join = "R" if replacing.get(mid, object()) == m.awaiting_join.request_id else "J"
            mem[ids.spec(mid)] = F(inst=ids.inst(m.group_instance_id), protos=self.protos(m.protocols),
                                   rto=m.rebalance_timeout_ms, sto=m.session_timeout_ms, join=join,
                                   sync=m.awaiting_sync is not None,
                                   isNew=m.is_new, asg=bstr(m.assignment))
        return dict(state=group.state.value, prevState=group.previous_state.value, generation=group.generation_id,
                    protocolType=group.protocol_type, protocolName=group.protocol_name,
                    leader=ids.spec(group.leader_id), members=tuple(ids.spec(m) for m in group.members),
                    mem=fn(mem), pending=frozenset(ids.spec(m) for m in group.pending_members),
                    pendingSync=frozenset(ids.spec(m) for m in group.pending_sync),
                    newMemberAdded=group.new_member_added, subs=group.subscribed_topics)

    def snapshot(self, group: Group) -> F:
        g = self.group(group)
        return F(st=g["state"], prev=g["prevState"], gen=g["generation"], ptype=g["protocolType"],
                 pname=g["protocolName"], leader=g["leader"], members=g["members"], mem=g["mem"],
                 pending=g["pending"], psync=g["pendingSync"], nma=g["newMemberAdded"], subs=g["subs"])

    def callback(self, cb, places: dict[int, int]) -> F:
        kind = type(cb)
        ids = self.ids
        if kind is AfterSync and cb.group_id == self.gid:
            return F(k="sync", gen=cb.generation_id, asg=fn({ids.spec(m): bstr(b) for m, b in cb.assignments}))
        if kind is AfterStaticReplace and cb.group_id == self.gid:
            return F(k="static_replace", inst=ids.inst(cb.instance_id), old=ids.spec(cb.old_member_id),
                     new=ids.spec(cb.new_member_id), protos=self.protos(cb.old_protocols),
                     rto=cb.old_rebalance_timeout_ms, sto=cb.old_session_timeout_ms,
                     leader=ids.spec(cb.previous_leader_id), v9=cb.version >= 9)
        if kind is AfterNewGroup and cb.group_id == self.gid:
            # displaced: the group whose deletion failed meanwhile (_displace_on_rollback)
            return F(k="new_group", snap=None if cb.displaced is None else self.snapshot(cb.displaced))
        if kind is AfterEmptyGroup:
            return F(k="empty_group")
        if kind is RestoreGroup and cb.group_id == self.gid:
            return F(k="restore_group", snap=self.snapshot(cb.group))
        if kind is DeleteResult and tuple(cb.group_ids) == (self.gid,):
            return F(k="delete_result")
        read = offsets.read_callback(cb, self.gid, places)
        if read is not None:
            return read
        raise OutOfModel(f"write callback {kind.__name__}")

    def response(self, r) -> F:
        ids = self.ids
        if isinstance(r, JoinGroupResponse):
            return F(api="JoinGroup", code=code(r.error_code), gen=r.generation_id, ptype=r.protocol_type,
                     pname=r.protocol_name, leader=ids.spec(r.leader), mid=ids.spec(r.member_id),
                     members=tuple((ids.spec(m.member_id), ids.inst(m.group_instance_id), bstr(m.metadata))
                                   for m in r.members), skip=r.skip_assignment)
        if isinstance(r, SyncGroupResponse):
            return F(api="SyncGroup", code=code(r.error_code), ptype=r.protocol_type, pname=r.protocol_name,
                     asg=bstr(r.assignment))
        if isinstance(r, HeartbeatResponse):
            return F(api="Heartbeat", code=code(r.error_code))
        if isinstance(r, LeaveGroupResponse):
            return F(api="LeaveGroup", code=code(r.error_code), members=tuple(
                F(mid=ids.spec(m.member_id), inst=ids.inst(m.group_instance_id), code=code(m.error_code))
                for m in r.members))
        if isinstance(r, DeleteGroupsResponse):
            if [x.group_id for x in r.results] != [self.gid]:
                raise OutOfModel("a DeleteGroups of other groups")
            return F(api="DeleteGroups", code=code(r.results[0].error_code))
        read = offsets.read_response(r, self.gid)
        if read is not None:
            return read
        raise OutOfModel(f"response {type(r).__name__}")

    def tag_of_request(self, request) -> tuple:
        """The spec's name of a request's result when it is held or rides on a write."""
        ids = self.ids
        if isinstance(request, ev.LeaveGroup):
            return ("LeaveGroup", ids.spec(request.members[0].member_id) if request.members else "")
        if isinstance(request, ev.DeleteGroups):
            return ("DeleteGroups", "")
        return (type(request).__name__, ids.spec(getattr(request, "member_id", "")))

    # --- a whole state

    def state(self, snap: CoordinatorState, timers: dict, budget: int = -1) -> dict:
        p = self.partition
        writes = sorted((w for w in snap.writes.values() if w.partition == p), key=lambda w: w.write_id)
        out: dict[str, Any]
        group = snap.groups.get(self.gid) if p in snap.partitions else None
        if p not in snap.partitions:
            out = dict(state="Dead")
        elif group is None:
            out = dict(state="Absent")
        else:
            if snap.partitions[p] != "active":
                raise OutOfModel("a loading partition")
            out = self.group(group, writes)
        if len(out) == 1:
            out.update(prevState=None, generation=0, protocolType=None, protocolName=None, leader=None,
                       members=(), mem=(), pending=frozenset(), pendingSync=frozenset(), newMemberAdded=False,
                       subs=None)
        out.update(offsets.read_state(snap, self.gid, writes) if p in snap.partitions
                   else dict(offsets=(), committed=()))
        places = offsets.setters(self.gid, writes)
        out["writes"] = tuple(
            F(recs=self.write_records[w.write_id], cbs=tuple(self.callback(cb, places) for cb in w.continuations),
              resp=None if w.request is None else F(to=self.tag_of_request(w.request), r=self.response(w.response)))
            for w in writes)
        held = []
        for part, wait_for, respond in snap.deferred:
            if part != p or respond.request_id not in self.tags:
                continue
            held.append(F(to=self.tags[respond.request_id], r=self.response(respond.response),
                          wait=sum(1 for w in writes if w.write_id <= wait_for)))
        out["held"] = tuple(held)
        armed = {}
        for key, payload in timers.items():
            k = timer_key(key, self.ids, self.gid, p)
            if k is not None:
                armed[k] = timer_payload(key, payload)
        out["timers"] = fn(armed)
        out["stored"] = self.stored
        out["budget"] = budget
        return out

    def remember_writes(self, commands: list) -> None:
        """The spec's writes carry their records; the core keeps them only in the Write."""
        for c in commands:
            if isinstance(c, Write) and c.partition == self.partition:
                self.write_records[c.write_id] = tuple(self.record(r) for r in c.records)

    # --- commands

    def commands(self, commands: list, before: CoordinatorState | None, event) -> tuple:
        """The spec's ``out`` for ``event``'s commands: a SetTimer carries its length, the
        deadline minus the event's now (a wrong length is a wrong command)."""
        own = event.request_id if isinstance(event, ev.Request) else object()
        parked = {}
        group = before.groups.get(self.gid) if before is not None else None
        if group is not None:
            for mid, m in group.members.items():
                if m.awaiting_join is not None:
                    parked[m.awaiting_join.request_id] = ("join", self.ids.spec(mid))
                if m.awaiting_sync is not None:
                    parked[m.awaiting_sync.request_id] = ("sync", self.ids.spec(mid))
        out = []
        for c in commands:
            if isinstance(c, Respond):
                rid = c.request_id
                if rid == own:
                    to = REQ
                elif rid in parked:
                    to = parked[rid]
                elif rid in self.tags:
                    to = self.tags[rid]
                else:
                    continue  # another group's request
                out.append(F(c="Respond", to=to, r=self.response(c.response)))
            elif isinstance(c, Write):
                if c.partition == self.partition:
                    out.append(F(c="Write", recs=tuple(self.record(r) for r in c.records)))
            elif isinstance(c, SetTimer):
                k = timer_key(c.key, self.ids, self.gid, self.partition)
                if k is not None:
                    out.append(F(c="SetTimer", key=k, payload=timer_payload(c.key, c.payload),
                                 ms=c.deadline_ms - event.now_ms))
            elif isinstance(c, CancelTimer):
                k = timer_key(c.key, self.ids, self.gid, self.partition)
                if k is not None:
                    out.append(F(c="CancelTimer", key=k))
            elif isinstance(c, CancelPartitionTimers):
                if c.partition == self.partition:
                    out.append(F(c="CancelPartitionTimers"))
        return tuple(out)

    # --- events

    def event(self, event) -> F:
        ids = self.ids
        if isinstance(event, ev.JoinGroup):
            uuid = None
            if event.member_id == "":
                uuid = ids.to_spec.get(f"{event.client_id}-{event.new_member_uuid}", event.new_member_uuid)
            return F(type="JoinGroup", mid=ids.spec(event.member_id), inst=ids.inst(event.group_instance_id),
                     ptype=event.protocol_type, protos=self.protos(event.protocols), rto=event.rebalance_timeout_ms,
                     sto=event.session_timeout_ms, v=event.version, uuid=uuid)
        if isinstance(event, ev.SyncGroup):
            return F(type="SyncGroup", mid=ids.spec(event.member_id), inst=ids.inst(event.group_instance_id),
                     gen=event.generation_id, ptype=event.protocol_type, pname=event.protocol_name,
                     asg=fn({ids.spec(m): bstr(b) for m, b in dict(event.assignments).items()}))
        if isinstance(event, ev.Heartbeat):
            return F(type="Heartbeat", mid=ids.spec(event.member_id), inst=ids.inst(event.group_instance_id),
                     gen=event.generation_id)
        if isinstance(event, ev.LeaveGroup):
            return F(type="LeaveGroup", ids=tuple(F(mid=ids.spec(x.member_id), inst=ids.inst(x.group_instance_id))
                                                  for x in event.members))
        if isinstance(event, ev.DeleteGroups):
            return F(type="DeleteGroups")
        if isinstance(event, offsets.OFFSET_REQUESTS):
            return offsets.read_event(event, self.gid, ids.spec, ids.inst, self.metadata_max_bytes)
        if isinstance(event, ev.TimerFired):
            key = timer_key(event.key, ids, self.gid, self.partition)
            # an expiration's aged offsets are read from its commands (offsets.aged)
            return F(type="TimerFired", key=key, aged=()) if key == ("expire",) else F(type="TimerFired", key=key)
        if isinstance(event, ev.WriteFailed) and Error.parse(event.error) is not Error.NONE:
            return F(type="WriteFailed", error=code(event.error))
        if isinstance(event, (ev.WriteCompleted, ev.WriteFailed)):
            return F(type="WriteCompleted")
        if isinstance(event, ev.UnloadPartition):
            return F(type="UnloadPartition", durable=0)  # a later load shows any write that was durable
        if isinstance(event, ev.LoadPartition):
            return F(type="LoadPartition", group=self.load_record(event.records), durable=0)
        raise OutOfModel(f"event {type(event).__name__}")

    def log(self, records) -> F:
        """The group's log as a load reads these records (storage.py)."""
        return storage.apply_all(storage.EMPTY, (self.record(r) for r in records
                                                 if getattr(r, "group_id", None) == self.gid))

    def load_record(self, records) -> F | None:
        last = None
        for r in records:
            if getattr(r, "group_id", None) == self.gid and isinstance(r, (GroupMetadataRecord, GroupTombstone)):
                last = r
        stored = self.log(records)["offs"]
        if not isinstance(last, GroupMetadataRecord):
            if stored:
                raise OutOfModel("a simple group in storage (offsets without a group record)")
            return None
        ids = self.ids
        extra = dict(offs=stored) if stored else {}
        return F(**extra, gen=last.generation_id, ptype=last.protocol_type, pname=last.protocol_name,
                 leader=ids.spec(last.leader_id), members=tuple(
                     F(id=ids.spec(m.member_id), inst=ids.inst(m.group_instance_id),
                       protos=((last.protocol_name or "", bstr(m.subscription)),),
                       rto=m.session_timeout_ms if m.rebalance_timeout_ms == -1 else m.rebalance_timeout_ms,
                       sto=m.session_timeout_ms, asg=bstr(m.assignment))
                     for m in last.members))


def apply_timers(timers: dict, commands: Iterable) -> None:
    for c in commands:
        if isinstance(c, SetTimer):
            timers[c.key] = c.payload
        elif isinstance(c, CancelTimer):
            timers.pop(c.key, None)
        elif isinstance(c, CancelPartitionTimers):
            for key in [k for k in timers if k.partition == c.partition]:
                del timers[key]
