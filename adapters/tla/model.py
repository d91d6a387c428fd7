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

from groupcoord.core import events as ev
from groupcoord.core.commands import (
    CancelPartitionTimers,
    CancelTimer,
    DeleteGroupsResponse,
    GroupMetadataRecord,
    GroupTombstone,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupResponse,
    MemberRecord,
    Respond,
    SetTimer,
    SyncGroupResponse,
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
from groupcoord.core import CoordinatorState, Group, Member, Parked, PendingWrite, assemble_group
from groupcoord.core.states import GroupState

from groupcoord.adapters.tla.values import F, MV, fn

GROUP = "g"
PARTITION = 0
SESSION_MS = 10000
CLIENT = "c"
NOW_MS = 1_000_000
REQ = ("req",)
CONFIG = CoordinatorConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=3000)


class OutOfModel(Exception):
    """The core did something the spec does not model (offsets, foreign writes, ...)."""


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


def timer_key(key: tuple, ids: Ids, gid: str = GROUP, partition: int = PARTITION) -> tuple | None:
    """The spec's key for a core timer key of this group (None: not this group's)."""
    if key[1] != partition:
        return None
    if key[0] == "expire":
        return ("expire",)
    if len(key) < 3 or key[2] != gid:
        return None
    if key[0] == "heartbeat":
        return ("hb", ids.spec(key[3]))
    if key[0] in ("join", "sync"):
        return (key[0],)
    return None


def timer_payload(key: tuple, payload: Any) -> Any:
    if key[0] == "join":
        return () if payload is None else tuple(payload)
    if key[0] == "sync":
        return payload
    return None


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

    # --- values

    def protos(self, protocols) -> tuple:
        return tuple((name, bstr(meta)) for name, meta in protocols)

    def record(self, r) -> F:
        if isinstance(r, GroupMetadataRecord) and r.group_id == self.gid:
            return F(type="GroupMetadata", gen=r.generation_id, ptype=r.protocol_type, pname=r.protocol_name,
                     leader=self.ids.spec(r.leader_id), members=tuple(
                         F(id=self.ids.spec(m.member_id), inst=self.ids.inst(m.group_instance_id),
                           rto=m.rebalance_timeout_ms, meta=bstr(m.subscription), asg=bstr(m.assignment))
                         for m in r.members))
        if isinstance(r, GroupTombstone) and r.group_id == self.gid:
            return F(type="GroupTombstone", gen=0, ptype="", pname=None, leader=None, members=())
        raise OutOfModel(f"record {type(r).__name__} of {getattr(r, 'group_id', '?')!r}")

    def group(self, group: Group, writes: Iterable[PendingWrite] = ()) -> dict:
        ids = self.ids
        replacing = {cb.new_member_id: cb.request_id for w in writes for cb in w.callbacks
                     if type(cb) is AfterStaticReplace}
        mem = {}
        for mid, m in group.members.items():
            join = ""
            if m.awaiting_join is not None:
                join = "R" if replacing.get(mid, object()) == m.awaiting_join.request_id else "J"
            mem[ids.spec(mid)] = F(inst=ids.inst(m.group_instance_id), protos=self.protos(m.protocols),
                                   rto=m.rebalance_timeout_ms, join=join, sync=m.awaiting_sync is not None,
                                   isNew=m.is_new, asg=bstr(m.assignment))
        return dict(state=group.state.value, prevState=group.previous_state.value, generation=group.generation_id,
                    protocolType=group.protocol_type, protocolName=group.protocol_name,
                    leader=ids.spec(group.leader_id), members=tuple(ids.spec(m) for m in group.members),
                    mem=fn(mem), pending=frozenset(ids.spec(m) for m in group.pending_members),
                    pendingSync=frozenset(ids.spec(m) for m in group.pending_sync),
                    newMemberAdded=group.new_member_added)

    def snapshot(self, group: Group) -> F:
        g = self.group(group)
        return F(st=g["state"], prev=g["prevState"], gen=g["generation"], ptype=g["protocolType"],
                 pname=g["protocolName"], leader=g["leader"], members=g["members"], mem=g["mem"],
                 pending=g["pending"], psync=g["pendingSync"], nma=g["newMemberAdded"])

    def callback(self, cb) -> F:
        kind = type(cb)
        ids = self.ids
        if kind is AfterSync and cb.group_id == self.gid:
            return F(k="sync", gen=cb.generation_id, asg=fn({ids.spec(m): bstr(b) for m, b in cb.assignments}))
        if kind is AfterStaticReplace and cb.group_id == self.gid:
            return F(k="static_replace", inst=ids.inst(cb.instance_id), old=ids.spec(cb.old_member_id),
                     new=ids.spec(cb.new_member_id), protos=self.protos(cb.old_protocols),
                     rto=cb.old_rebalance_timeout_ms, leader=ids.spec(cb.previous_leader_id), v9=cb.version >= 9)
        if kind is AfterNewGroup and cb.group_id == self.gid:
            # displaced: the group whose deletion failed meanwhile (_displace_on_rollback)
            return F(k="new_group", snap=None if cb.displaced is None else self.snapshot(cb.displaced))
        if kind is AfterEmptyGroup:
            return F(k="empty_group")
        if kind is RestoreGroup and cb.group_id == self.gid:
            return F(k="restore_group", snap=self.snapshot(cb.group))
        if kind is DeleteResult and tuple(cb.group_ids) == (self.gid,):
            return F(k="delete_result")
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
                       members=(), mem=(), pending=frozenset(), pendingSync=frozenset(), newMemberAdded=False)
        out["writes"] = tuple(
            F(recs=self.write_records[w.write_id], cbs=tuple(self.callback(cb) for cb in w.callbacks),
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
        out["budget"] = budget
        return out

    def remember_writes(self, commands: list) -> None:
        """The spec's writes carry their records; the core keeps them only in the Write."""
        for c in commands:
            if isinstance(c, Write) and c.partition == self.partition:
                self.write_records[c.write_id] = tuple(self.record(r) for r in c.records)

    # --- commands

    def commands(self, commands: list, before: CoordinatorState | None, event) -> tuple:
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
                    out.append(F(c="SetTimer", key=k, payload=timer_payload(c.key, c.payload)))
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
                     v=event.version, uuid=uuid)
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
        if isinstance(event, ev.TimerFired):
            return F(type="TimerFired", key=timer_key(event.key, ids, self.gid, self.partition))
        if isinstance(event, ev.WriteFailed) and Error.parse(event.error) is not Error.NONE:
            return F(type="WriteFailed", error=code(event.error))
        if isinstance(event, (ev.WriteCompleted, ev.WriteFailed)):
            return F(type="WriteCompleted")
        if isinstance(event, ev.UnloadPartition):
            return F(type="UnloadPartition")
        if isinstance(event, ev.LoadPartition):
            return F(type="LoadPartition", group=self.load_record(event.records))
        raise OutOfModel(f"event {type(event).__name__}")

    def load_record(self, records) -> F | None:
        last = None
        for r in records:
            if getattr(r, "group_id", None) != self.gid:
                continue
            if isinstance(r, (GroupMetadataRecord, GroupTombstone)):
                last = r
            else:
                raise OutOfModel("offsets of the group in storage")
        if not isinstance(last, GroupMetadataRecord):
            return None
        ids = self.ids
        return F(gen=last.generation_id, ptype=last.protocol_type, pname=last.protocol_name,
                 leader=ids.spec(last.leader_id), members=tuple(
                     F(id=ids.spec(m.member_id), inst=ids.inst(m.group_instance_id),
                       protos=((last.protocol_name or "", bstr(m.subscription)),),
                       rto=m.session_timeout_ms if m.rebalance_timeout_ms == -1 else m.rebalance_timeout_ms,
                       asg=bstr(m.assignment))
                     for m in last.members))


def apply_timers(timers: dict, commands: Iterable) -> None:
    for c in commands:
        if isinstance(c, SetTimer):
            timers[c.key] = c.payload
        elif isinstance(c, CancelTimer):
            timers.pop(c.key, None)
        elif isinstance(c, CancelPartitionTimers):
            for key in [k for k in timers if k[1] == c.partition]:
                del timers[key]


# ----------------------------------------------------------------------------- spec -> core


class Built:
    """A core state built from a spec state, with what the replay needs to read it back."""

    def __init__(self, state: CoordinatorState | None, timers: dict, alpha: Alpha, core_id) -> None:
        self.state = state
        self.timers = timers
        self.alpha = alpha
        self.core_id = core_id


def core_protocols(protos) -> tuple:
    return tuple((name, sbytes(meta)) for name, meta in protos)


def build_core(s: F, instances: Iterable[MV], pool: Iterable[MV]) -> Built:
    """The core state (and armed timers) that the spec state ``s`` stands for."""
    ids = Ids(instances)
    for m in pool:  # any prefix maps back; members get theirs below
        ids.to_spec[f"{CLIENT}-{m.name}"] = m
        for i in instances:
            ids.to_spec[f"{i.name}-{m.name}"] = m
    mem = s["mem"] if isinstance(s["mem"], dict) else {}
    core_of: dict[Any, str] = {}

    def core_id(m, inst=None) -> str:
        if m == "" or m is None:
            return "" if m == "" else None
        if m in core_of:
            return core_of[m]
        return f"{Ids.name(inst) if inst is not None else CLIENT}-{Ids.name(m)}"

    for m, r in mem.items():
        core_of[m] = core_id(m, r["inst"])
    alpha = Alpha(ids)
    state_name = s["state"]
    if state_name == "Dead":
        partitions, groups = {}, {}
    else:
        partitions = {PARTITION: "active"}
        groups = {} if state_name == "Absent" else {GROUP: _build_group(s, mem, core_id)}
    writes, deferred, deletes = {}, [], {}
    write_records = {}
    for i, w in enumerate(s["writes"], start=1):
        callbacks = []
        for cb in w["cbs"]:
            callbacks.append(_build_callback(cb, s, mem, core_id, i, deletes, alpha))
        request = response = None
        if w["resp"] is not None:
            api, mid = w["resp"]["to"]
            rid = ("held", api, mid, i)
            alpha.tags[rid] = (api, mid)
            request = ev.LeaveGroup(request_id=rid, now_ms=0, version=3, group_id=GROUP,
                                    members=(ev.MemberIdentity(core_id(mid) if mid != "" else ""),))
            response = _build_response(w["resp"]["r"], core_id)
        writes[i] = PendingWrite(i, PARTITION, tuple(callbacks), request, response)
        write_records[i] = w["recs"]
    for j, h in enumerate(s["held"]):
        api, mid = h["to"]
        rid = ("held", api, mid, "h", j)
        alpha.tags[rid] = (api, mid)
        deferred.append((PARTITION, h["wait"], Respond(rid, _build_response(h["r"], core_id))))
    alpha.write_records = write_records
    timers = {}
    armed = s["timers"] if isinstance(s["timers"], dict) else {}
    for key, payload in armed.items():
        if key[0] == "hb":
            timers[("heartbeat", PARTITION, GROUP, core_id(key[1]))] = None
        elif key[0] == "join":
            timers[("join", PARTITION, GROUP)] = tuple(payload) if payload else None
        elif key[0] == "sync":
            timers[("sync", PARTITION, GROUP)] = payload
        else:
            timers[("expire", PARTITION)] = None
    state = CoordinatorState(partitions=partitions, groups=groups, offsets={}, writes=writes,
                             deferred=tuple(deferred), next_write_id=len(writes) + 1, pending_deletes=deletes)
    return Built(state, timers, alpha, core_id)


def _build_member(m, r, core_id, ptype) -> Member:
    return Member(
        member_id=core_id(m), group_instance_id=None if r["inst"] is None else Ids.name(r["inst"]),
        client_id=CLIENT, client_host="h", rebalance_timeout_ms=r["rto"], session_timeout_ms=SESSION_MS,
        protocol_type=ptype, protocols=core_protocols(r["protos"]), assignment=sbytes(r["asg"]),
        awaiting_join=Parked(("join", m), 5) if r["join"] else None,
        awaiting_sync=Parked(("sync", m), 5) if r["sync"] else None, is_new=r["isNew"])


def _build_group(s, mem, core_id) -> Group:
    ptype = s["protocolType"] if "protocolType" in s else s["ptype"]
    members = {}
    order = s["members"]
    for m in order:
        members[core_id(m)] = _build_member(m, mem[m], core_id, ptype)
    group = Group(
        group_id=GROUP, partition=PARTITION, state=GroupState(s.get("state", s.get("st"))),
        previous_state=GroupState(_prev(s)), state_timestamp_ms=0,
        generation_id=s["generation"] if "generation" in s else s["gen"], protocol_type=ptype,
        protocol_name=s["protocolName"] if "protocolName" in s else s["pname"],
        leader_id=core_id(s["leader"]) if s["leader"] is not None else None)
    return assemble_group(
        group, members.values(), protocol_type=ptype,
        pending_members={core_id(m) for m in s["pending"]},
        pending_sync={core_id(m) for m in (s["pendingSync"] if "pendingSync" in s else s["psync"])},
        new_member_added=s["newMemberAdded"] if "newMemberAdded" in s else s["nma"])


def _prev(s) -> str:
    prev = s["prevState"] if "prevState" in s else s["prev"]
    return "Dead" if prev is None else prev


def _build_callback(cb, s, mem, core_id, write_id, deletes, alpha):
    k = cb["k"]
    if k == "sync":
        asg = cb["asg"] if isinstance(cb["asg"], dict) else {}
        return AfterSync(GROUP, cb["gen"], tuple((core_id(m), sbytes(b)) for m, b in asg.items()))
    if k == "static_replace":
        new = cb["new"]
        parked = isinstance(mem, dict) and new in mem and mem[new]["join"] == "R"
        rid = ("join", new) if parked else ("replaced", new)
        inst = Ids.name(cb["inst"])
        return AfterStaticReplace(GROUP, inst, f"{inst}-{Ids.name(cb['old'])}", core_id(new, cb["inst"]),
                                  core_protocols(cb["protos"]), cb["rto"], SESSION_MS,
                                  core_id(cb["leader"]) if cb["leader"] is not None else None, rid,
                                  9 if cb["v9"] else 5)
    if k == "new_group":
        snap = cb["snap"]
        if snap is None:
            return AfterNewGroup(GROUP, ("created", write_id))
        smem = snap["mem"] if isinstance(snap["mem"], dict) else {}
        return AfterNewGroup(GROUP, ("created", write_id), _build_group(F(snap.set(state=snap["st"])), smem, core_id))
    if k == "empty_group":
        return AfterEmptyGroup()
    if k == "restore_group":
        snap = cb["snap"]
        smem = snap["mem"] if isinstance(snap["mem"], dict) else {}
        return RestoreGroup(GROUP, _build_group(F(snap.set(state=snap["st"])), smem, core_id))
    if k == "delete_result":
        rid = ("held", "DeleteGroups", "", write_id)
        alpha.tags[rid] = ("DeleteGroups", "")
        deletes[rid] = (frozenset({write_id}), {GROUP: Error.NONE})
        return DeleteResult(rid, (GROUP,))
    raise ValueError(f"unknown callback {k}")


def _build_response(r, core_id):
    api = r["api"]
    if api == "Heartbeat":
        return HeartbeatResponse(Error[r["code"]])
    if api == "LeaveGroup":
        return LeaveGroupResponse(Error[r["code"]], tuple(
            LeaveGroupMemberResponse(core_id(x["mid"]) if x["mid"] != "" else "",
                                     None if x["inst"] is None else Ids.name(x["inst"]), Error[x["code"]])
            for x in r["members"]))
    if api == "DeleteGroups":
        return DeleteGroupsResponse(())
    raise ValueError(f"no held {api}")


def load_records(group: F | None, instances) -> tuple:
    """The storage a spec Init record stands for (LoadPartition's records)."""
    if group is None:
        return ()

    def cid(m, inst=None):
        return f"{Ids.name(inst) if inst is not None else CLIENT}-{Ids.name(m)}"

    members = tuple(MemberRecord(
        member_id=cid(x["id"], x["inst"]), group_instance_id=None if x["inst"] is None else Ids.name(x["inst"]),
        client_id=CLIENT, client_host="h", rebalance_timeout_ms=x["rto"], session_timeout_ms=SESSION_MS,
        subscription=sbytes(x["protos"][0][1]), assignment=sbytes(x["asg"])) for x in group["members"])
    leader = None
    for x in group["members"]:
        if x["id"] == group["leader"]:
            leader = cid(x["id"], x["inst"])
    return (GroupMetadataRecord(group_id=GROUP, protocol_type=group["ptype"], generation_id=group["gen"],
                                protocol_name=group["pname"], leader_id=leader, current_state_timestamp_ms=0,
                                members=members),)


# ----------------------------------------------------------------------------- inputs


class Model:
    """The constants of one TLC configuration (what the environment may send)."""

    def __init__(self, ids, instances, protocols, protocol_types, rebalance_timeouts, join_versions,
                 write_errors, reduce: bool) -> None:
        self.ids = sorted(ids)
        self.instances = sorted(instances)
        self.protocols = list(protocols)
        self.protocol_types = sorted(protocol_types)
        self.rebalance_timeouts = sorted(rebalance_timeouts)
        self.join_versions = sorted(join_versions)
        self.write_errors = sorted(write_errors)
        self.reduce = reduce


def spec_inputs(s: F, model: Model) -> list[F]:
    """Every event the spec's environment may send in state ``s`` (Client and Coordinator)."""
    out: list[F] = []
    mem = s["mem"] if isinstance(s["mem"], dict) else {}
    in_use = set(s["members"]) | set(s["pending"])
    for w in s["writes"]:
        for cb in w["cbs"]:
            if cb["k"] == "static_replace":
                in_use |= {cb["old"], cb["new"]}
    free = [m for m in model.ids if m not in in_use]

    def canonical(xs):
        return xs[:1] if model.reduce and xs else xs

    new_ids = canonical(free)
    named = sorted(in_use & set(model.ids)) + canonical(free)
    insts = [None] + model.instances
    gen = s["generation"]
    if s["budget"] != 0:
        max_v = max(model.join_versions)
        for mid in [""] + named:
            for inst in insts:
                for pt in model.protocol_types:
                    for p in model.protocols:
                        for rto in model.rebalance_timeouts:
                            for v in model.join_versions:
                                if inst is not None and v < 5:
                                    continue
                                if mid != "" and model.reduce and v != max_v:
                                    continue
                                for u in (new_ids if mid == "" else [None]):
                                    out.append(F(type="JoinGroup", mid=mid, inst=inst, ptype=pt, protos=p, rto=rto,
                                                 v=v, uuid=u))
        for m in named:
            if s["state"] == "CompletingRebalance" and m == s["leader"]:
                full = fn({x: "A" for x in mem})
                asgs = [full] if model.reduce else [full, ()]
            else:
                asgs = [()]
            for inst in insts:
                for g in sorted({gen, gen - 1}):
                    for a in asgs:
                        out.append(F(type="SyncGroup", mid=m, inst=inst, gen=g, ptype=None, pname=None, asg=a))
                    out.append(F(type="Heartbeat", mid=m, inst=inst, gen=g))
        for m in [""] + named:
            for inst in insts:
                out.append(F(type="LeaveGroup", ids=(F(mid=m, inst=inst),)))
        out.append(F(type="DeleteGroups"))
    armed = s["timers"] if isinstance(s["timers"], dict) else {}
    for key in armed:
        if key[0] != "hb" or key[1] in model.ids:
            out.append(F(type="TimerFired", key=key))
    if s["writes"]:
        out.append(F(type="WriteCompleted"))
        for e in model.write_errors:
            out.append(F(type="WriteFailed", error=e))
    if s["state"] != "Dead":
        out.append(F(type="UnloadPartition"))
    return out


def core_event(e: F, built: Built):
    """The core's input for a spec event, in the core state ``built``."""
    t = e["type"]
    cid = built.core_id

    def inst(i):
        return None if i is None else Ids.name(i)

    def member(m, i=None):
        if m == "":
            return ""
        return cid(m)

    if t == "JoinGroup":
        uuid = Ids.name(e["uuid"]) if e["uuid"] is not None else "unused"
        if e["uuid"] is not None:
            built.alpha.ids.learn(e["uuid"], CLIENT, inst(e["inst"]))
    else:
        uuid = None
    if is_client(e):
        return client_request(e, REQ, NOW_MS, member, uuid)
    if t == "TimerFired":
        key = e["key"]
        if key[0] == "hb":
            core_key = ("heartbeat", PARTITION, GROUP, cid(key[1]))
        elif key[0] == "expire":
            core_key = ("expire", PARTITION)
        else:
            core_key = (key[0], PARTITION, GROUP)
        return ev.TimerFired(now_ms=NOW_MS, key=core_key, payload=built.timers.get(core_key))
    if t == "WriteCompleted":
        return ev.WriteCompleted(now_ms=NOW_MS, write_id=1)
    if t == "WriteFailed":
        return ev.WriteFailed(now_ms=NOW_MS, write_id=1, error=Error[e["error"]])
    if t == "UnloadPartition":
        return ev.UnloadPartition(now_ms=NOW_MS, partition=PARTITION)
    raise ValueError(f"no core event for {t}")


def client_request(e: F, request_id, now_ms: int, member, uuid: str | None = None,
                   session_timeout_ms: int = SESSION_MS):
    """The core's request for a spec client event; ``member`` maps a spec member id to the
    core's, ``uuid`` is the new member uuid a JoinGroup carries."""
    t = e["type"]
    if t == "DeleteGroups":
        return ev.DeleteGroups(request_id=request_id, now_ms=now_ms, client_id=CLIENT, version=2,
                               groups_names=(GROUP,))
    common = dict(request_id=request_id, now_ms=now_ms, client_id=CLIENT, group_id=GROUP)
    inst = lambda i: None if i is None else Ids.name(i)  # noqa: E731
    if t == "JoinGroup":
        return ev.JoinGroup(**common, version=e["v"], session_timeout_ms=session_timeout_ms,
                            rebalance_timeout_ms=e["rto"], member_id=member(e["mid"]),
                            group_instance_id=inst(e["inst"]), protocol_type=e["ptype"],
                            protocols=core_protocols(e["protos"]), new_member_uuid=uuid)
    if t == "SyncGroup":
        asg = e["asg"] if isinstance(e["asg"], dict) else {}
        return ev.SyncGroup(**common, version=5, generation_id=e["gen"], member_id=member(e["mid"]),
                            group_instance_id=inst(e["inst"]), protocol_type=e["ptype"], protocol_name=e["pname"],
                            assignments=tuple((member(m), sbytes(b)) for m, b in asg.items()))
    if t == "Heartbeat":
        return ev.Heartbeat(**common, version=4, generation_id=e["gen"], member_id=member(e["mid"]),
                            group_instance_id=inst(e["inst"]))
    if t == "LeaveGroup":
        return ev.LeaveGroup(**common, version=3, members=tuple(
            ev.MemberIdentity(member(x["mid"]), inst(x["inst"])) for x in e["ids"]))
    raise ValueError(f"not a client request: {t}")


def is_client(e: F) -> bool:
    return e["type"] in ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "DeleteGroups")
