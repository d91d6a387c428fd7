"""Spec states and events made into core ones: the core state a spec state stands for
(``build_core``), the stored records of an initial group (``load_records``), and every input the
spec's environment may send in a state (``spec_inputs``) as the core's event (``core_event``)."""

from __future__ import annotations

from typing import Any, Iterable

from groupcoord.adapters.tla import offsets, storage
from groupcoord.adapters.tla.model import (
    CLIENT,
    CONFIG,
    GROUP,
    NOW_MS,
    PARTITION,
    REQ,
    Alpha,
    Ids,
    core_timer,
    sbytes,
)
from groupcoord.adapters.tla.values import MV, F, fn
from groupcoord.core import CoordinatorState, Group, Member, Parked, PendingWrite, assemble_group
from groupcoord.core import continuations as cont
from groupcoord.core import events as ev
from groupcoord.core.classic.states import GroupState
from groupcoord.core.commands import (
    DeleteGroupsResponse,
    FetchedGroup,
    FetchedPartition,
    FetchedTopic,
    GroupMetadataRecord,
    HeartbeatResponse,
    InitialDelay,
    LeaveGroupMemberResponse,
    LeaveGroupResponse,
    MemberRecord,
    OffsetCommitRecord,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    PartitionResult,
    Respond,
    TopicResult,
)
from groupcoord.core.errors import Error
from groupcoord.core.frozen import evolve


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
    alpha.stored = s["stored"]
    state_name = s["state"]
    if state_name == "Dead":
        partitions, groups = {}, {}
    else:
        partitions = {PARTITION: "active"}
        groups = {} if state_name == "Absent" else {GROUP: _build_group(s, mem, core_id)}
    writes, deferred, deletes = {}, [], {}
    write_records = {}
    held_offsets = offsets.Built(s)
    for i, w in enumerate(s["writes"], start=1):
        callbacks = []
        for cb in w["cbs"]:
            if cb["k"] == "offsets":
                callbacks.append(held_offsets.undo(cb, GROUP, i))
            else:
                callbacks.append(_build_callback(cb, s, mem, core_id, i, deletes, alpha))
        request = response = None
        if w["resp"] is not None:
            api, mid = w["resp"]["to"]
            rid = ("held", api, mid, i)
            alpha.tags[rid] = (api, mid)
            request = _stand_in(api, rid, core_id(mid) if mid != "" else "", w["resp"]["r"])
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
        if key[0] == "join":
            payload = InitialDelay(payload[1], payload[2]) if payload else None
        elif key[0] != "sync":
            payload = None
        timers[core_timer(key, core_id)] = payload
    state = CoordinatorState(partitions=partitions, groups=groups,
                             offsets={GROUP: held_offsets.latest} if held_offsets.latest else {}, writes=writes,
                             deferred=tuple(deferred), next_write_id=len(writes) + 1, pending_deletes=deletes,
                             committed_offsets={GROUP: held_offsets.committed} if held_offsets.committed else {})
    return Built(state, timers, alpha, core_id)


def _stand_in(api: str, rid, member_id: str, response: F):
    """A request of type ``api`` whose result rides on a write: its type, its member and (for a
    commit, whose failure answers each key) its keys are read."""
    if api == "OffsetCommit":
        return ev.OffsetCommit(request_id=rid, now_ms=0, version=9, group_id=GROUP, member_id=member_id,
                               topics=_by_topic([(k, ev.CommitPartition(k[1], 0)) for k, _ in response["parts"]]))
    if api == "OffsetDelete":
        return ev.OffsetDelete(request_id=rid, now_ms=0, version=0, group_id=GROUP)
    return ev.LeaveGroup(request_id=rid, now_ms=0, version=3, group_id=GROUP, members=(ev.MemberIdentity(member_id),))


def _build_member(m, r, core_id, ptype) -> Member:
    return Member(
        member_id=core_id(m), group_instance_id=None if r["inst"] is None else Ids.name(r["inst"]),
        client_id=CLIENT, client_host="h", rebalance_timeout_ms=r["rto"], session_timeout_ms=r["sto"],
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
    built = assemble_group(
        group, members.values(), protocol_type=ptype,
        pending_members={core_id(m) for m in s["pending"]},
        pending_sync={core_id(m) for m in (s["pendingSync"] if "pendingSync" in s else s["psync"])},
        new_member_added=s["newMemberAdded"] if "newMemberAdded" in s else s["nma"])
    return evolve(built, subscribed_topics=s["subs"])  # kept as the spec holds it, not derived again


def _prev(s) -> str:
    prev = s["prevState"] if "prevState" in s else s["prev"]
    return "Dead" if prev is None else prev


def _build_callback(cb, s, mem, core_id, write_id, deletes, alpha):
    k = cb["k"]
    if k == "sync":
        asg = cb["asg"] if isinstance(cb["asg"], dict) else {}
        return cont.AfterSync(GROUP, cb["gen"], tuple((core_id(m), sbytes(b)) for m, b in asg.items()))
    if k == "static_replace":
        new = cb["new"]
        parked = isinstance(mem, dict) and new in mem and mem[new]["join"] == "R"
        rid = ("join", new) if parked else ("replaced", new)
        inst = Ids.name(cb["inst"])
        return cont.AfterStaticReplace(GROUP, inst, f"{inst}-{Ids.name(cb['old'])}", core_id(new, cb["inst"]),
                                       core_protocols(cb["protos"]), cb["rto"], cb["sto"],
                                       core_id(cb["leader"]) if cb["leader"] is not None else None, rid,
                                       9 if cb["v9"] else 5)
    if k == "new_group":
        snap = cb["snap"]
        if snap is None:
            return cont.AfterNewGroup(GROUP, ("created", write_id))
        smem = snap["mem"] if isinstance(snap["mem"], dict) else {}
        return cont.AfterNewGroup(GROUP, ("created", write_id),
                                  _build_group(F(snap.set(state=snap["st"])), smem, core_id))
    if k == "empty_group":
        return cont.AfterEmptyGroup()
    if k == "restore_group":
        snap = cb["snap"]
        smem = snap["mem"] if isinstance(snap["mem"], dict) else {}
        return cont.RestoreGroup(GROUP, _build_group(F(snap.set(state=snap["st"])), smem, core_id))
    if k == "drop_simple":
        return cont.DropSimpleGroup(GROUP)
    if k == "delete_result":
        rid = ("held", "DeleteGroups", "", write_id)
        alpha.tags[rid] = ("DeleteGroups", "")
        deletes[rid] = (frozenset({write_id}), {GROUP: Error.NONE})
        return cont.DeleteResult(rid, (GROUP,))
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
    if api in ("OffsetCommit", "OffsetDelete"):
        topics = tuple(TopicResult(t, ps) for t, ps in _by_topic([(k, PartitionResult(k[1], Error[c]))
                                                                   for k, c in r["parts"]]))
        if api == "OffsetCommit":
            return OffsetCommitResponse(topics)
        return OffsetDeleteResponse(Error[r["code"]], topics)
    if api == "OffsetFetch":
        offs = r["offs"] if isinstance(r["offs"], dict) else {}
        topics = tuple(FetchedTopic(t, ps) for t, ps in _by_topic([(k, FetchedPartition(k[1], v))
                                                                   for k, v in sorted(offs.items())]))
        return OffsetFetchResponse((FetchedGroup(GROUP, topics, Error[r["code"]]),))
    raise ValueError(f"no held {api}")


def load_records(group: F | None, instances) -> tuple:
    """The storage a spec Init record stands for (LoadPartition's records)."""
    if group is None:
        return ()

    def cid(m, inst=None):
        return f"{Ids.name(inst) if inst is not None else CLIENT}-{Ids.name(m)}"

    members = tuple(MemberRecord(
        member_id=cid(x["id"], x["inst"]), group_instance_id=None if x["inst"] is None else Ids.name(x["inst"]),
        client_id=CLIENT, client_host="h", rebalance_timeout_ms=x["rto"], session_timeout_ms=x["sto"],
        subscription=sbytes(x["protos"][0][1]), assignment=sbytes(x["asg"])) for x in group["members"])
    leader = None
    for x in group["members"]:
        if x["id"] == group["leader"]:
            leader = cid(x["id"], x["inst"])
    return (GroupMetadataRecord(group_id=GROUP, protocol_type=group["ptype"], generation_id=group["gen"],
                                protocol_name=group["pname"], leader_id=leader, current_state_timestamp_ms=0,
                                members=members),) + _offset_records(group["offs"] if "offs" in group else ())


def _offset_records(offs) -> tuple:
    """The OffsetCommit records of a spec function key -> offset, in key order."""
    offs = offs if isinstance(offs, dict) else {}
    return tuple(OffsetCommitRecord(GROUP, topic, p, value, -1, "", 0) for (topic, p), value in sorted(offs.items()))


# ----------------------------------------------------------------------------- inputs


class Model:
    """The constants of one TLC configuration (what the environment may send)."""

    def __init__(self, ids, instances, protocols, protocol_types, rebalance_timeouts, session_timeouts,
                 join_versions, write_errors, reduce: bool, offset_keys=(), offset_values=(), commit_versions=(),
                 partial_expiry: bool = True, reloads: bool = False,
                 batch_leaves: bool = False, fail_order: str = "oldest") -> None:
        self.ids = sorted(ids)
        self.instances = sorted(instances)
        self.protocols = list(protocols)
        self.protocol_types = sorted(protocol_types)
        self.rebalance_timeouts = sorted(rebalance_timeouts)
        self.session_timeouts = sorted(session_timeouts)
        self.join_versions = sorted(join_versions)
        self.write_errors = sorted(write_errors)
        self.reduce = reduce
        self.offset_keys = tuple(offset_keys)
        self.offset_values = sorted(offset_values)
        self.commit_versions = sorted(commit_versions)
        self.partial_expiry = partial_expiry
        self.reloads = reloads
        self.batch_leaves = batch_leaves
        self.fail_order = fail_order


def spec_inputs(s: F, model: Model) -> list[F]:
    """Every event the spec's environment may send in state ``s`` (Client and Coordinator)."""
    out: list[F] = []
    mem = s["mem"] if isinstance(s["mem"], dict) else {}
    in_use = set(s["members"]) | set(s["pending"]) | set(s["pendingSync"])
    for w in s["writes"]:  # the spec's InUse: ids an in-flight write names (WriteIds)
        for cb in w["cbs"]:
            if cb["k"] == "static_replace":
                in_use |= {cb["old"], cb["new"]}
            elif cb["k"] in ("restore_group", "new_group") and cb["snap"] is not None:
                in_use |= set(cb["snap"]["members"]) | set(cb["snap"]["pending"])
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
                            for sto in model.session_timeouts:
                                for v in model.join_versions:
                                    if inst is not None and v < 5:
                                        continue
                                    if mid != "" and model.reduce and v != max_v:
                                        continue
                                    for u in (new_ids if mid == "" else [None]):
                                        out.append(F(type="JoinGroup", mid=mid, inst=inst, ptype=pt, protos=p,
                                                     rto=rto, sto=sto, v=v, uuid=u))
        for m in named:
            if s["state"] == "CompletingRebalance" and m == s["leader"]:
                full = fn({x: f"a{s['members'].index(x) + 1}" for x in mem})  # the spec's AssignmentOf
                asgs = [full] if model.reduce else [full, ()]
            else:
                asgs = [()]
            for inst in insts:
                for g in sorted({gen, gen - 1}):
                    for a in asgs:
                        out.append(F(type="SyncGroup", mid=m, inst=inst, gen=g, ptype=None, pname=None, asg=a))
                    out.append(F(type="Heartbeat", mid=m, inst=inst, gen=g))
        identities = [F(mid=m, inst=inst) for m in [""] + named for inst in insts]
        out.extend(F(type="LeaveGroup", ids=(x,)) for x in identities)
        if model.batch_leaves:  # the spec's BatchLeaves: two different BatchIdentities, either order
            batch = [F(mid=m, inst=mem[m]["inst"] if m in mem else None) for m in named]
            batch += [F(mid="", inst=i) for i in model.instances]
            out.extend(F(type="LeaveGroup", ids=(x, y)) for x in batch for y in batch if x != y)
        out.append(F(type="DeleteGroups"))
        out.extend(_offset_requests(s, model, named, insts))
    armed = s["timers"] if isinstance(s["timers"], dict) else {}
    for key in armed:
        if key == ("expire",):
            out.extend(F(type="TimerFired", key=key, aged=aged) for aged in _aged_choices(s, model))
        elif key[0] != "hb" or key[1] in model.ids:
            out.append(F(type="TimerFired", key=key))
    if s["writes"]:
        out.append(F(type="WriteCompleted"))
        for e in model.write_errors:
            if model.fail_order != "newest" or len(s["writes"]) == 1:
                out.append(F(type="WriteFailed", error=e))
            if model.fail_order != "oldest" and len(s["writes"]) >= 2:
                out.append(F(type="WriteFailedLast", error=e))
    if s["state"] != "Dead":
        out.extend(F(type="UnloadPartition", durable=k) for k in (range(len(s["writes"]) + 1) if model.reloads else [0]))
    elif model.reloads and s["budget"] != 0:
        out.append(F(type="LoadPartition", group=storage.rec_of(s["stored"]), durable=0))
    if s["state"] != "Dead" and model.reloads and s["budget"] != 0:  # Failover: another coordinator loads
        for k in range(len(s["writes"]) + 1):
            log = storage.with_writes(s["stored"], s["writes"], k)
            out.append(F(type="LoadPartition", group=storage.rec_of(log), durable=k))
    return out


def _offset_requests(s: F, model: Model, named: list, insts: list) -> list[F]:
    """The spec's CommitRequests, FetchRequests and OffsetDeleteRequests."""
    out = []
    gens = sorted({s["generation"], s["generation"] - 1, -1})
    for mid in [""] + named:
        for inst in insts:
            for g in gens:
                for v in model.commit_versions:
                    for k in model.offset_keys:
                        for o in model.offset_values:
                            out.append(F(type="OffsetCommit", mid=mid, inst=inst, gen=g, v=v, offs=((k, o),)))
    if model.offset_keys:
        for stable in (False, True):
            for keys in [None] + [(k,) for k in model.offset_keys]:
                out.append(F(type="OffsetFetch", stable=stable, keys=keys))
    out.extend(F(type="OffsetDelete", keys=(k,)) for k in model.offset_keys)
    return out


def _aged_choices(s: F, model: Model) -> list[tuple]:
    """The spec's AgedChoices: subsets of the expirable keys (all or none without PartialExpiry)."""
    keys = offsets.expirable(s)
    if not model.partial_expiry:
        return [()] + ([tuple(keys)] if keys else [])
    chosen = [()]
    for k in keys:
        chosen += [c + (k,) for c in chosen]
    return sorted(set(chosen))


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
        core_key = core_timer(e["key"], cid)
        # aged offsets: the retention has passed for the entries built (committed at time 0)
        now = NOW_MS + CONFIG.offsets_retention_ms if e.get("aged") else NOW_MS
        return ev.TimerFired(now_ms=now, key=core_key, payload=built.timers.get(core_key))
    if t == "WriteCompleted":
        return ev.WriteCompleted(now_ms=NOW_MS, write_id=1)
    if t == "WriteFailed":
        return ev.WriteFailed(now_ms=NOW_MS, write_id=1, error=Error[e["error"]])
    if t == "WriteFailedLast":  # the built core numbers its writes 1, 2, ... in the spec's order
        return ev.WriteFailed(now_ms=NOW_MS, write_id=max(built.state.writes),
                              error=Error[e["error"]])
    if t == "UnloadPartition":
        return ev.UnloadPartition(now_ms=NOW_MS, partition=PARTITION)
    if t == "LoadPartition":
        return ev.LoadPartition(now_ms=NOW_MS, partition=PARTITION, records=stored_records(built.alpha.stored))
    raise ValueError(f"no core event for {t}")


def stored_records(stored: F) -> tuple:
    """Records of the group's log: its group record, then its offsets (a simple group's alone)."""
    if stored["grp"] is None and stored["simple"]:
        return _offset_records(stored["offs"])
    return load_records(storage.rec_of(stored), ())


def client_request(e: F, request_id, now_ms: int, member, uuid: str | None = None):
    """The core's request for a spec client event; ``member`` maps a spec member id to the
    core's, ``uuid`` is the new member uuid a JoinGroup carries."""
    t = e["type"]
    if t == "DeleteGroups":
        return ev.DeleteGroups(request_id=request_id, now_ms=now_ms, client_id=CLIENT, version=2,
                               groups_names=(GROUP,))
    common = dict(request_id=request_id, now_ms=now_ms, client_id=CLIENT, group_id=GROUP)
    inst = lambda i: None if i is None else Ids.name(i)  # noqa: E731
    if t == "JoinGroup":
        return ev.JoinGroup(**common, version=e["v"], session_timeout_ms=e["sto"],
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
    if t == "OffsetCommit":
        return ev.OffsetCommit(**common, version=e["v"], generation_id=e["gen"], member_id=member(e["mid"]),
                               group_instance_id=inst(e["inst"]), topics=_by_topic(
                                   [(k, ev.CommitPartition(k[1], o)) for k, o in e["offs"]]))
    if t == "OffsetFetch":
        keys = e["keys"]
        topics = None if keys is None else _by_topic([(k, k[1]) for k in keys])
        return ev.OffsetFetch(request_id=request_id, now_ms=now_ms, client_id=CLIENT, version=8,
                              groups=(ev.FetchGroup(GROUP, topics),), require_stable=e["stable"])
    if t == "OffsetDelete":
        return ev.OffsetDelete(**common, version=0, topics=_by_topic([(k, k[1]) for k in e["keys"]]))
    raise ValueError(f"not a client request: {t}")


def _by_topic(items: list) -> tuple:
    """(key, value) pairs as a request's topics: (topic, (values...)) in order of first appearance."""
    topics: dict = {}
    for (topic, _), value in items:
        topics.setdefault(topic, []).append(value)
    return tuple((t, tuple(vs)) for t, vs in topics.items())


CLIENT_REQUESTS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "DeleteGroups", "OffsetCommit", "OffsetFetch",
                   "OffsetDelete")


def is_client(e: F) -> bool:
    return e["type"] in CLIENT_REQUESTS
