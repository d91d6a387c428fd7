"""Trace validation of the consumer group spec (tla/ConsumerGroup.tla) against the core: a run
of the core, one consumer group's events with the group after each, checked by TLC step by step.

``ConsumerRecorder`` feeds core events to a coordinator and keeps one row per spec step: the
event read as the spec's action (a member's heartbeat with its epoch, subscription, owned
partitions and incarnation; a -1 or -2 leave; a session or rebalance timer firing) and the
coordinator's variables after it (epochs, members, their assignments, the target, the armed
rebalance timers) with the answer as the spec's ``out``. Inputs the spec does not see (the
writes' completions, offset commits and fetches, describes, other groups) are stepped over when
they change nothing the spec sees; anything else the spec does not model (regex subscriptions,
a refused request's validation, a failed write, a reload, a topic changed while the group lives,
classic members) ends the trace there: the prefix is what is checked, and the rest is
reported, never passed.

The generated module (``module_text``) walks the log with ``i``. Clients are the environment: an
``Env`` step sets the clients' variables to what the next logged request carries (any client
may send anything), then the spec's action must reach the logged coordinator state and answer.
The target is the core's own, required legal (``IsLegalTarget``) instead of enumerated.
Partitions are named ``topic:n``; a heartbeat that does not report its partitions (null) owns
every partition and one no topic has (``NULL_OWNED``): as Kafka reads it, it may still hold
whatever is revoked, and it is no subset of any assignment.
"""

from __future__ import annotations

from typing import Any, Iterable

import attrs

from groupcoord.adapters.tla.run import run_tlc
from groupcoord.adapters.tla.values import F, OutOfModel, fmt
from groupcoord.core import events as ev
from groupcoord.core.commands import (
    CancelTimer,
    ConsumerGroupHeartbeatResponse,
    RebalanceTimer,
    Respond,
    SessionTimer,
    SetTimer,
    Write,
)
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.consumer.model import ConsumerGroup, MemberState
from groupcoord.core.coordinator import Coordinator

NULL_OWNED = "?:0"  # the partition of no topic a null owned-partitions field is read as holding
STATE_NAMES = {MemberState.STABLE: "stable", MemberState.UNREVOKED_PARTITIONS: "unrevoked",
               MemberState.UNRELEASED_PARTITIONS: "unreleased"}
SPEC_ERRORS = {"FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID", "UNRELEASED_INSTANCE_ID"}
COORD_VARS = ("groupEpoch", "assignEpoch", "gstate", "gsubs", "members", "mepoch", "mprev", "mstate", "masg",
              "mpend", "msub", "target", "minc", "rebTimer", "lateTimer")
PER_MEMBER = {"mepoch": 0, "mprev": 0, "mstate": "stable", "masg": frozenset(), "mpend": frozenset(),
              "msub": frozenset(), "target": frozenset(), "minc": 0, "rebTimer": 0, "lateTimer": 0}
# the inputs that never change a consumer group's coordinator state (stepped over when they do not)
QUIET = (ev.OffsetCommit, ev.OffsetFetch, ev.ConsumerGroupDescribe, ev.DescribeGroups, ev.ListGroups,
         ev.WriteCompleted, ev.TopicsChanged)


@attrs.define
class ConsumerTrace:
    """One group's rows (``F(event=..., s=...)``; ``s`` holds per-member values only for the
    members present, the rest are the spec's defaults), the names of its members (``static``:
    those named by instance id) and partitions, and where and why it stopped short."""

    name: str
    rows: list
    names: set = attrs.Factory(set)
    static: set = attrs.Factory(set)
    partitions: dict = attrs.Factory(dict)  # "topic:n" -> topic
    balanced: bool = True  # the assignor gives targets the spec's Balanced allows (uniform)
    events: int = 0  # core events read
    stepped_over: int = 0
    stopped: str | None = None  # why the rest of the run was not checked

    @property
    def steps(self) -> int:
        return len(self.rows) - 1


class ConsumerRecorder:
    """Feeds core events to a coordinator and keeps the rows of one consumer group ``gid``."""

    def __init__(self, gid: str, config: CoordinatorConfig | None = None, name: str = "trace",
                 complete_writes: bool = True) -> None:
        """``complete_writes``: complete each write at once (a generated run); else the run's
        own WriteCompleted events do (a recorded or scenario run), and a heartbeat's row waits
        for its answer."""
        self.gid = gid
        self.complete_writes = complete_writes
        self.completed: set[int] = set()
        self.topics: frozenset = frozenset()  # the topics image: (name, topic id, partitions)
        self.coordinator = Coordinator(config or CoordinatorConfig())
        self.part = self.coordinator.partition_of(gid)
        self.trace = ConsumerTrace(name, [])
        self.topic_names: dict[str, str] = {}  # topic id -> name
        self.armed: dict[str, int] = {}  # member id -> the epoch its rebalance timer was armed with
        self.incarnations: dict[str, list[str]] = {}  # instance id -> its member ids, first seen first
        self.pending: dict[Any, int] = {}  # request id -> its row, until answered
        self.loaded = False
        self.unloaded = False

    # ---------------------------------------------------------------- names

    def name_of(self, member_id: str, instance_id: str | None) -> str:
        if instance_id is None:
            return member_id
        ids = self.incarnations.setdefault(instance_id, [])
        if member_id and member_id not in ids:
            ids.append(member_id)
        return f"instance:{instance_id}"

    def incarnation(self, member_id: str, instance_id: str | None) -> int:
        if instance_id is None or not member_id:
            return 0
        return self.incarnations[instance_id].index(member_id)

    def parts(self, assignment) -> frozenset:
        return frozenset(f"{self.topic_names[t]}:{n}" for t, ns in dict(assignment or {}).items() for n in ns)

    # ---------------------------------------------------------------- the group as the spec sees it

    def projection(self) -> F:
        g = self.coordinator.group(self.gid)
        if g is None:
            return F(groupEpoch=0, assignEpoch=0, gstate="Empty", gsubs=frozenset(), members=F())
        if not isinstance(g, ConsumerGroup):
            raise OutOfModel(f"group {self.gid!r} is a classic group")
        members = {}
        for mid, m in g.members.items():
            if m.classic is not None:
                raise OutOfModel("a classic member in the consumer group")
            if m.state not in STATE_NAMES:
                raise OutOfModel(f"member state {m.state.name}")
            if m.subscribed_topic_regex:  # "" is none (librdkafka sends it with topic names)
                raise OutOfModel("a regular expression subscription")
            name = self.name_of(mid, m.instance_id)
            members[name] = F(
                mepoch=m.member_epoch, mprev=m.previous_member_epoch, mstate=STATE_NAMES[m.state],
                masg=self.parts(m.assigned), mpend=self.parts(m.pending_revocation),
                msub=frozenset(m.subscribed_topic_names or ()), target=self.parts(g.target.get(mid, {})),
                minc=self.incarnation(mid, m.instance_id), rebTimer=self.armed.get(mid, 0), lateTimer=0)
        return F(groupEpoch=g.group_epoch, assignEpoch=g.assignment_epoch, gstate=g.state.value,
                 gsubs=frozenset(g.subscribed), members=F(members))

    # ---------------------------------------------------------------- feeding

    def feed(self, event) -> list:
        """Run ``event`` through the core; a row if it is a spec step. OutOfModel when the spec
        cannot follow (the caller ends the trace there)."""
        self.trace.events += 1
        if self.unloaded:  # the run on this coordinator is over for the group
            if isinstance(event, ev.LoadPartition) and event.partition == self.part or \
                    getattr(event, "group_id", None) == self.gid:
                raise OutOfModel("the group after its partition was unloaded")
            self.trace.stepped_over += 1
            return []
        if isinstance(event, ev.UnloadPartition) and event.partition == self.part:
            self.unloaded = True
            self.trace.stepped_over += 1
            return self.coordinator.handle(event)
        if isinstance(event, ev.LoadPartition):
            return self._load(event)
        if not self.loaded:
            if isinstance(event, ev.TopicsChanged):
                self._topics(event)
            return self._quiet(event)
        if isinstance(event, ev.ConsumerGroupHeartbeat) and event.group_id == self.gid:
            return self._heartbeat(event)
        if isinstance(event, ev.TimerFired) and type(event.key) in (SessionTimer, RebalanceTimer) and \
                event.key.group_id == self.gid:
            return self._timer(event)
        if isinstance(event, ev.WriteFailed):
            raise OutOfModel("a failed write")
        if isinstance(event, ev.WriteCompleted) and event.write_id in self.completed:
            self.trace.stepped_over += 1  # completed already, when it was written
            return []
        if isinstance(event, ev.TopicsChanged):
            self._topics(event)
        return self._quiet(event)

    def _load(self, event: ev.LoadPartition) -> list:
        if event.partition != self.part:
            return self._quiet(event)
        if self.loaded or event.records:
            raise OutOfModel("a load of the group's partition with records (a reload)")
        self.loaded = True
        cmds = self.coordinator.handle(event)
        if self.coordinator.group(self.gid) is not None:
            raise OutOfModel("the group exists when its partition loads")
        self.trace.rows.append(F(event=F(type="Init"), s=self.projection()))
        return cmds

    def _topics(self, event: ev.TopicsChanged) -> None:
        if self.coordinator.group(self.gid) is not None and frozenset(event.topics) != self.topics:
            raise OutOfModel("the topics changed while the group lives")
        self.topics = frozenset(event.topics)
        self.topic_names = {tid: name for name, tid, _ in event.topics}
        self.trace.partitions = {f"{name}:{n}": name for name, _, count in event.topics for n in range(count)}

    def _quiet(self, event) -> list:
        """An input the spec does not see: it must change nothing the spec sees."""
        before = self.projection() if self.loaded else None
        cmds = self._run(event)
        if self.loaded and self.projection() != before:
            kind = type(event).__name__
            if isinstance(event, ev.Request) and not isinstance(event, QUIET):
                raise OutOfModel(f"a {kind} changing the group")
            raise OutOfModel(f"{kind} changed the group")
        self.trace.stepped_over += 1
        return cmds

    def _run(self, event) -> list:
        """The core's commands for ``event``, its writes completed at once (the spec has no
        writes); rebalance timers tracked; answers to rows waiting for them filled in."""
        cmds = list(self.coordinator.handle(event))
        k = 0
        while k < len(cmds):
            c = cmds[k]
            if isinstance(c, Write) and self.complete_writes:
                self.completed.add(c.write_id)
                cmds.extend(self.coordinator.handle(ev.WriteCompleted(now_ms=event.now_ms, write_id=c.write_id)))
            elif isinstance(c, SetTimer) and type(c.key) is RebalanceTimer and c.key.group_id == self.gid:
                self.armed[c.key.member_id] = c.payload
            elif isinstance(c, CancelTimer) and type(c.key) is RebalanceTimer and c.key.group_id == self.gid:
                self.armed.pop(c.key.member_id, None)
            elif isinstance(c, Respond) and c.request_id in self.pending:
                row = self.pending.pop(c.request_id)
                self.trace.rows[row] = self.trace.rows[row].set(resp=c.response)
                self._finish(row)
            k += 1
        return cmds

    def _heartbeat(self, req: ev.ConsumerGroupHeartbeat) -> list:
        if req.subscribed_topic_regex:
            raise OutOfModel("a regular expression subscription")
        g = self.coordinator.group(self.gid)
        member = g.members.get(req.member_id) if isinstance(g, ConsumerGroup) else None
        if member is not None and any(getattr(req, f) is not None and getattr(req, f) != getattr(member, f)
                                      for f in ("rack_id", "server_assignor")):
            raise OutOfModel("a change of rack or assignor")
        if req.server_assignor not in (None, "uniform"):
            self.trace.balanced = False
        if req.member_epoch == -1 and req.instance_id is not None:
            raise OutOfModel("a static member's -1 leave")
        # a static member's later heartbeats may leave its instance id out (null): the member id names it
        instance = member.instance_id if member is not None and req.instance_id is None else None
        if req.instance_id is None and member is None and req.member_epoch != 0 and \
                any(req.member_id in ids for ids in self.incarnations.values()):
            raise OutOfModel("a replaced static member's heartbeat without its instance id")
        # null: unchanged, so the spec's client sends what the member has
        sub = req.subscribed_topic_names
        if sub is None:
            sub = member.subscribed_topic_names if member is not None else ()
        row = len(self.trace.rows)
        self.pending[req.request_id] = row
        self.trace.rows.append(F(event=F(type="pending"), req=req, sub=frozenset(sub or ()), instance=instance,
                                 before=self.projection()))
        cmds = self._run(req)
        self.trace.rows[row] = self.trace.rows[row].set(s=self.projection())
        self._finish(row)
        r = self.trace.rows[row]
        if r["event"]["type"] == "refused":  # an error the spec has no check for: it must change nothing
            if r["s"] != r["before"]:
                raise OutOfModel(f"a heartbeat answered {r['event']['code']} changed the group")
            del self.trace.rows[row]
            self.trace.stepped_over += 1
        return cmds

    def _finish(self, row: int) -> None:
        """The row of a heartbeat once both the group after it and its answer are known."""
        r = self.trace.rows[row]
        if "s" not in r or "resp" not in r:
            return
        req: ev.ConsumerGroupHeartbeat = r["req"]
        resp: ConsumerGroupHeartbeatResponse = r["resp"]
        code = resp.error_code.name
        if code != "NONE" and code not in SPEC_ERRORS:  # refused before the spec's checks
            self.trace.rows[row] = F(event=F(type="refused", code=code), s=r["s"], before=r["before"])
            return
        mid = req.member_id or (resp.member_id or "")
        instance = req.instance_id or r["instance"]
        name = self.name_of(mid, instance)
        inc = self.incarnation(mid, instance)
        self.trace.names.add(name)
        if instance is not None:
            self.trace.static.add(name)
        none = frozenset()
        if req.member_epoch == -1:
            event = F(type="Leave", m=name, epoch=1, sub=none, owned=none, inc=0)
        elif req.member_epoch == -2:
            event = F(type="StaticLeave", m=name, epoch=1, sub=none, owned=none, inc=inc)
        else:
            owned = (frozenset(self.trace.partitions) | {NULL_OWNED}) if req.topic_partitions is None \
                else self.parts({t: ps for t, ps in req.topic_partitions})
            event = F(type="Heartbeat", m=name, epoch=req.member_epoch, sub=r["sub"], owned=owned, inc=inc)
        if code != "NONE":
            out = F(code=code, ep=0, asg=none)
        elif resp.assignment is not None:
            out = F(code=code, ep=resp.member_epoch, asg=self.parts({t: ps for t, ps in resp.assignment}))
        else:  # not sent: unchanged; the spec's answer always carries it
            held = r["s"]["members"].get(name)
            asg = held["masg"] if held is not None and event["type"] == "Heartbeat" else none
            out = F(code=code, ep=resp.member_epoch, asg=asg)
        self.trace.rows[row] = F(event=event, s=r["s"], out=out)

    def _timer(self, event: ev.TimerFired) -> list:
        mid = event.key.member_id
        g = self.coordinator.group(self.gid)
        member = g.members.get(mid) if isinstance(g, ConsumerGroup) else None
        if member is None:
            return self._quiet(event)  # a timer of a member id no longer in the group finds nobody
        name = self.name_of(mid, member.instance_id)
        rebalance = type(event.key) is RebalanceTimer
        if rebalance:
            if self.armed.get(mid) != event.payload:
                raise OutOfModel("a rebalance timer that is not the one armed fired")
            del self.armed[mid]
        cmds = self._run(event)
        e = F(type="RebalanceTimeout" if rebalance else "SessionTimeout", m=name,
              epoch=event.payload if rebalance else 0, sub=frozenset(), owned=frozenset(), inc=0)
        self.trace.rows.append(F(event=e, s=self.projection(), out=()))
        return cmds


def record(events: Iterable, gid: str, config: CoordinatorConfig | None = None, name: str = "trace",
           complete_writes: bool = False) -> ConsumerTrace:
    """The trace of ``gid`` in ``events``, up to the first input the spec cannot follow (and
    before the first heartbeat left unanswered)."""
    rec = ConsumerRecorder(gid, config, name, complete_writes)
    for e in events:
        try:
            rec.feed(e)
        except OutOfModel as why:
            rec.trace.stopped = f"{why} (event {rec.trace.events}, {type(e).__name__})"
            break
    rows = rec.trace.rows
    waiting = [k for k, r in enumerate(rows) if r["event"]["type"] == "pending"]
    if waiting:
        del rows[waiting[0]:]
        rec.trace.stopped = rec.trace.stopped or "a heartbeat never answered"
    return rec.trace


# ------------------------------------------------------------------ the generated module

def _state(s: F, names: list[str]) -> F:
    members = s["members"]
    out = {k: s[k] for k in ("groupEpoch", "assignEpoch", "gstate", "gsubs")}
    out["members"] = frozenset(members)
    for var, default in PER_MEMBER.items():
        out[var] = F({m: (members[m][var] if m in members else default) for m in names})
    return F(out)


def module_text(traces: list[ConsumerTrace]) -> tuple[str, str]:
    """ConsumerTraceCheck.tla and .cfg for a batch of traces (``k`` picks one; the constants are
    the union of theirs, so the traces of one batch share whether targets must be balanced)."""
    if len({t.balanced for t in traces}) != 1:
        raise ValueError("a batch of traces shares Balanced")
    names = sorted(set().union(*(t.names for t in traces), *(set(r["s"]["members"]) for t in traces
                                                             for r in t.rows)))
    static = sorted(set().union(*(t.static for t in traces)))
    partitions = {NULL_OWNED: "?"}
    for t in traces:
        partitions.update(t.partitions)
    logs = ",\n".join("<<\n  " + ",\n  ".join(
        f"[event |-> {fmt(r['event'])},\n   out |-> {fmt(r.get('out', ()))},\n   s |-> {fmt(_state(r['s'], names))}]"
        for r in t.rows) + ">>" for t in traces)
    matches = "\n".join(f"    /\\ {v}' = t.s.{v}" for v in COORD_VARS)
    text = f"""---- MODULE ConsumerTraceCheck ----
\\* Generated by groupcoord.adapters.tla.consumer_trace from the traces: {', '.join(t.name for t in traces)}; do not edit.
EXTENDS ConsumerGroup, Sequences
VARIABLES i, k, ph
TraceMembers == {fmt(frozenset(names))}
TraceStatic == {fmt(frozenset(static))}
TracePartitions == {fmt(frozenset(partitions))}
TraceTopicOf == {fmt(F(partitions))}
TraceNothing == {{}}
TraceInitSub == [m \\in TraceMembers |-> {{}}]
TraceBudget == 1000
TraceLogs == <<
{logs}
>>
TraceLog == TraceLogs[k]
TraceTargets(M, s) ==
    LET t == TraceLog[i + 1].s.target IN IF IsLegalTarget(t, M, s) THEN {{t}} ELSE {{}}
Env(e) ==
    /\\ cepoch' = [o \\in Members |-> IF o = e.m THEN e.epoch ELSE -1]
    /\\ csub' = [o \\in Members |-> IF o = e.m THEN e.sub ELSE {{}}]
    /\\ cowned' = [o \\in Members |-> IF o = e.m THEN e.owned ELSE {{}}]
    /\\ casg' = [o \\in Members |-> {{}}]
    /\\ cinc' = [o \\in Members |-> IF o = e.m THEN e.inc ELSE 0]
    /\\ budget' = Budget
    /\\ UNCHANGED <<coord, removed, out, event>>
Step(e) ==
    CASE e.type = "Heartbeat" -> Heartbeat(e.m, FALSE)
      [] e.type = "Leave" -> Leave(e.m)
      [] e.type = "StaticLeave" -> StaticLeave(e.m)
      [] e.type = "SessionTimeout" -> SessionTimeout(e.m)
      [] e.type = "RebalanceTimeout" -> RebalanceTimeout(e.m) /\\ event'[3] = e.epoch
MatchNext(t) ==
{matches}
    /\\ out' = t.out
TraceInit ==
    /\\ k \\in 1..Len(TraceLogs) /\\ i = 1 /\\ ph = "env" /\\ Init
    /\\ groupEpoch = TraceLog[1].s.groupEpoch /\\ members = TraceLog[1].s.members
TraceNext ==
    \\/ /\\ ph = "env" /\\ i < Len(TraceLog)
       /\\ Env(TraceLog[i + 1].event)
       /\\ ph' = "core" /\\ UNCHANGED <<i, k>>
    \\/ /\\ ph = "core"
       /\\ Step(TraceLog[i + 1].event)
       /\\ MatchNext(TraceLog[i + 1])
       /\\ i' = i + 1 /\\ ph' = "env" /\\ UNCHANGED k
    \\/ ph = "env" /\\ i = Len(TraceLog) /\\ UNCHANGED <<vars, i, k, ph>>
TraceSpec == TraceInit /\\ [][TraceNext]_<<vars, i, k, ph>>
====
"""
    cfg = f"""CONSTANTS
    Members <- TraceMembers
    Static <- TraceStatic
    Partitions <- TracePartitions
    TopicOf <- TraceTopicOf
    Subs <- TraceNothing
    InitSub <- TraceInitSub
    InitRunning <- TraceNothing
    Budget <- TraceBudget
    DeferAssignment = FALSE
    LateTimers = FALSE
    EpochZeroRejoin = TRUE
    EmptyCatchesUp = TRUE
    LeaveRefreshes = TRUE
    Balanced = {str(traces[0].balanced).upper()}
    LegalTargets <- TraceTargets
SPECIFICATION TraceSpec
INVARIANTS
    TypeOK
    NoDoubleOwnership
    EpochsOrdered
    StateAgrees
    EmptyEpochsMatch
    PendingDisjoint
PROPERTIES
    FencedToldSo
    RebalanceFencesLaggardsOnly
    StaticLeaveKeepsPlace
    EpochsForward
"""
    return text, cfg


@attrs.define
class ConsumerTraceResult:
    name: str
    steps: int
    accepted: bool
    diverged_at: int | None = None  # the log's row TLC could not reach (1-based; row 1 is Init)
    seconds: float = 0.0
    detail: str = ""

    def line(self) -> str:
        if self.accepted:
            return f"consumer trace {self.name}: {self.steps} steps, accepted ({self.seconds:.1f} s)"
        return (f"consumer trace {self.name}: {self.steps} steps, REJECTED at row {self.diverged_at} "
                f"({self.seconds:.1f} s) {self.detail}")


def check(traces: list[ConsumerTrace], workers: int = 1, timeout: float = 300,
          replace: dict | None = None) -> ConsumerTraceResult:
    """One TLC run over a batch: accepted if the spec reaches every row of every trace."""
    import re

    traces = [t for t in traces if t.steps > 0]
    name = traces[0].name if len(traces) == 1 else f"{len(traces)} traces"
    if not traces:
        return ConsumerTraceResult(name, 0, False, detail="no steps to check")
    text, cfg = module_text(traces)
    res = run_tlc("ConsumerTraceCheck.cfg", "ConsumerTraceCheck", workers=workers, name=name, timeout=timeout,
                  replace=replace,
                  extra_files={"ConsumerTraceCheck.tla": text, "ConsumerTraceCheck.cfg": cfg})
    out = ConsumerTraceResult(name, sum(t.steps for t in traces), res.ok, seconds=res.seconds)
    if not res.ok:
        found = re.findall(r"^/\\ i = (\d+)$", res.output, re.M)
        ks = re.findall(r"^/\\ k = (\d+)$", res.output, re.M)
        if ks:
            out.name = traces[int(ks[-1]) - 1].name
        last = int(found[-1]) if found else 0
        out.diverged_at = last + 1 if res.exit_code == 11 else max(last, 1)
        out.detail = res.violation()[:400]
    return out


def batches(traces: list[ConsumerTrace]) -> list[list[ConsumerTrace]]:
    """Traces grouped by the constants they fix (the partitions and their topics, Balanced): one
    TLC run each."""
    by: dict = {}
    for t in traces:
        if t.steps:
            by.setdefault((t.balanced, tuple(sorted(t.partitions.items()))), []).append(t)
    return [by[k] for k in sorted(by)]
