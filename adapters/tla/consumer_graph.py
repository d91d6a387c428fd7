"""State-graph check of the consumer group spec (tla/ConsumerGroup.tla) against the core.

TLC dumps the whole state graph of ``MCConsumerGraph.cfg`` (``-dump dot,actionlabels``). For
every node the check builds the core holding the group the node describes (the coordinator's
variables: epochs, members, target, subscribed topics), derives from the node's clients every
input the spec's environment may send there (each running client's heartbeat with its epoch,
subscription and owned partitions; leaves, -2 leaves; session and rebalance timer firings),
applies each to the core (completing its write), reads the group, the rebalance timers it
armed or cancelled and its answer back as spec values, and requires:

* unsound = 0: the core's result is the coordinator part (and ``out``) of a successor the
  spec reaches by that input (the spec leaves the assignor open, so it may reach several: any
  legal target; the core picks one);
* missing = 0: every coordinator input the spec takes at a node is one the check derived
  there (clients' own steps change no coordinator state and are not replayed);
* crashed = 0.

The spec's clients are not compared: a client's next state follows from ``out``.

Spec names map to core ids: a dynamic member ``m1`` is member id ``m1``; a static member
``m2`` is instance id ``m2`` with member id ``m2.<minc>`` (a restarted static client joins
under a new member id).
"""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import attrs

from groupcoord.adapters.tla.graph import label_chunks, read_dot
from groupcoord.adapters.tla.run import run_tlc, workers_for_machine
from groupcoord.adapters.tla.values import parse
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
from groupcoord.core.consumer.model import ConsumerGroup, ConsumerMember, MemberState
from groupcoord.core.coordinator import Coordinator

GID = "g"
RTO = 30_000
TOPICS = {"a": "ida", "b": "idb"}  # name -> topic id (one partition each in the graph model)
TOPIC_NAMES = {tid: name for name, tid in TOPICS.items()}
STATES = {"stable": MemberState.STABLE, "unrevoked": MemberState.UNREVOKED_PARTITIONS,
          "unreleased": MemberState.UNRELEASED_PARTITIONS}
STATE_NAMES = {v: k for k, v in STATES.items()}
COORD_VARS = ("groupEpoch", "assignEpoch", "gstate", "gsubs", "members", "mepoch", "mprev", "mstate",
              "masg", "mpend", "msub", "target", "minc", "rebTimer")
REPLAYED = {"Heartbeat", "Leave", "StaticLeave", "SessionTimeout", "RebalanceTimeout", "LateRebalanceTimeout"}


# ------------------------------------------------------------------ names

def part_key(p: str) -> tuple[str, int]:
    """Spec partition "a0" -> (topic id, partition)."""
    return TOPICS[p[0]], int(p[1:])


def assignment(parts) -> dict[str, frozenset]:
    out: dict[str, set] = defaultdict(set)
    for p in parts:
        tid, n = part_key(p)
        out[tid].add(n)
    return {t: frozenset(ns) for t, ns in out.items()}


def spec_parts(asg) -> frozenset:
    return frozenset(f"{TOPIC_NAMES[t]}{n}" for t, ns in dict(asg or {}).items() for n in ns)


def owned_field(parts) -> tuple:
    a = assignment(parts)
    return tuple((t, tuple(sorted(a[t]))) for t in sorted(a))


def member_id(m: str, static: bool, inc: int) -> str:
    return f"{m}.{inc}" if static else m


def spec_name(mid: str) -> tuple[str, int]:
    name, _, inc = mid.partition(".")
    return name, int(inc) if inc else 0


# ------------------------------------------------------------------ spec states

@attrs.frozen
class Universe:
    members: tuple[str, ...]
    static: frozenset


def state_of(chunk: dict[str, str]) -> dict[str, Any]:
    return {k: parse(v) for k, v in chunk.items()}


def coord_projection(s: dict[str, Any], uni: Universe) -> tuple:
    """The coordinator's part of a spec state, as comparable values."""
    members = frozenset(s["members"])
    per = tuple(
        (m, s["mepoch"][m], s["mprev"][m], s["mstate"][m], frozenset(s["masg"][m]), frozenset(s["mpend"][m]),
         frozenset(s["msub"][m]), frozenset(s["target"][m]), s["minc"][m] if m in uni.static else 0)
        for m in uni.members if m in members)
    timers = tuple(s["rebTimer"][m] for m in uni.members)
    return (s["groupEpoch"], s["assignEpoch"], s["gstate"], frozenset(s["gsubs"]), per, timers)


def out_projection(out: Any) -> tuple:
    if not out:
        return ()
    return (out["code"], out["ep"], frozenset(out["asg"]))


# ------------------------------------------------------------------ the core

_EMPTY: dict = {}


def _loaded():
    """A coordinator with the group's partition loaded and the topics known (built once)."""
    snap = _EMPTY.get("snap")
    if snap is None:
        c = Coordinator()
        c.handle(ev.LoadPartition(now_ms=0, partition=c.partition_of(GID)))
        c.handle(ev.TopicsChanged(now_ms=0, topics=tuple((name, tid, 1) for name, tid in TOPICS.items())))
        snap = _EMPTY["snap"] = c.snapshot()
    return snap


def build_core(s: dict[str, Any], uni: Universe) -> Coordinator:
    snap = _loaded()
    if s["groupEpoch"] == 0 and not s["members"]:
        return Coordinator.restore(snap)
    part = Coordinator().partition_of(GID)
    members, target = {}, {}
    for m in sorted(s["members"]):
        static = m in uni.static
        mid = member_id(m, static, s["minc"][m])
        members[mid] = ConsumerMember(
            member_id=mid, instance_id=m if static else None, client_id="client", client_host="/127.0.0.1",
            rebalance_timeout_ms=RTO, subscribed_topic_names=tuple(sorted(s["msub"][m])),
            member_epoch=s["mepoch"][m], previous_member_epoch=s["mprev"][m], state=STATES[s["mstate"][m]],
            assigned=assignment(s["masg"][m]), pending_revocation=assignment(s["mpend"][m]))
        target[mid] = assignment(s["target"][m])
    subscribed = {name: (TOPICS[name], 1) for name in sorted(s["gsubs"])}
    group = ConsumerGroup(group_id=GID, partition=part, group_epoch=s["groupEpoch"],
                          assignment_epoch=s["assignEpoch"], members=members, target=target,
                          subscribed=subscribed)
    return Coordinator.restore(attrs.evolve(snap, groups={GID: group}))


def core_projection(c: Coordinator, timers: dict[str, int], uni: Universe) -> tuple:
    g = c.group(GID)
    if g is None:
        return (0, 0, "Empty", frozenset(), (), tuple(timers[m] for m in uni.members))
    assert isinstance(g, ConsumerGroup)
    per = []
    for mid, mem in g.members.items():
        m, inc = spec_name(mid)
        per.append((m, mem.member_epoch, mem.previous_member_epoch, STATE_NAMES[mem.state],
                    spec_parts(mem.assigned), spec_parts(mem.pending_revocation),
                    frozenset(mem.subscribed_topic_names), spec_parts(g.target.get(mid, {})), inc))
    per.sort(key=lambda x: uni.members.index(x[0]))
    return (g.group_epoch, g.assignment_epoch, g.state.value, frozenset(g.subscribed), tuple(per),
            tuple(timers[m] for m in uni.members))


def inputs(s: dict[str, Any], uni: Universe) -> list[tuple[tuple, Any]]:
    """Every coordinator input the spec's environment may send at ``s``: (event key, core event)."""
    part = Coordinator().partition_of(GID)
    out: list = []
    budget = s["budget"]
    members = set(s["members"])
    for m in uni.members:
        static = m in uni.static
        e, inc = s["cepoch"][m], s["cinc"][m]
        mid = member_id(m, static, inc)
        inst = m if static else None
        if e >= 0:
            out.append((("Heartbeat", m), ev.ConsumerGroupHeartbeat(
                request_id=("hb", m), now_ms=0, version=1, group_id=GID, member_id=mid, member_epoch=e,
                instance_id=inst, rebalance_timeout_ms=RTO, subscribed_topic_names=tuple(sorted(s["csub"][m])),
                topic_partitions=owned_field(s["cowned"][m]))))
        if e > 0 and budget >= 1:
            out.append((("StaticLeave" if static else "Leave", m), ev.ConsumerGroupHeartbeat(
                request_id=("leave", m), now_ms=0, version=1, group_id=GID, member_id=mid,
                member_epoch=-2 if static else -1, instance_id=inst)))
        alive = e >= 0 and inc == s["minc"][m]
        if m in members:
            if budget >= (1 if alive else 0):
                cur = member_id(m, static, s["minc"][m])
                out.append((("SessionTimeout", m), ev.TimerFired(now_ms=0, key=SessionTimer(part, GID, cur))))
        for var, name in (("rebTimer", "RebalanceTimeout"), ("lateTimer", "LateRebalanceTimeout")):
            if s[var][m] != 0 and budget >= (1 if alive else 0):
                cur = member_id(m, static, s["minc"][m])
                out.append(((name, m), ev.TimerFired(now_ms=0, key=RebalanceTimer(part, GID, cur),
                                                     payload=s[var][m])))
    return out


def step(c: Coordinator, event, s: dict[str, Any], uni: Universe) -> tuple[tuple, tuple]:
    """Apply ``event`` (and complete its writes); the core's coordinator projection and answer."""
    # the rebalance timers by core member id: the spec's, armed for the member ids in the group
    before = c.group(GID)
    timers: dict[str, int] = {}
    for mid in (before.members if before is not None else {}):
        timers[mid] = s["rebTimer"][spec_name(mid)[0]]
    if isinstance(event, ev.TimerFired) and type(event.key) is RebalanceTimer and \
            timers.get(event.key.member_id) == event.payload:
        timers[event.key.member_id] = 0  # the armed timer fired
    commands = list(c.handle(event))
    i = 0
    while i < len(commands):
        cmd = commands[i]
        if isinstance(cmd, Write):
            commands.extend(c.handle(ev.WriteCompleted(now_ms=0, write_id=cmd.write_id)))
        i += 1
    answer: tuple = ()
    for cmd in commands:
        if isinstance(cmd, SetTimer) and type(cmd.key) is RebalanceTimer:
            timers[cmd.key.member_id] = cmd.payload
        elif isinstance(cmd, CancelTimer) and type(cmd.key) is RebalanceTimer:
            timers[cmd.key.member_id] = 0
        elif isinstance(cmd, Respond) and isinstance(cmd.response, ConsumerGroupHeartbeatResponse):
            r = cmd.response
            code = r.error_code.name
            if code == "NONE":
                answer = (code, r.member_epoch, spec_parts({t: frozenset(ps) for t, ps in (r.assignment or ())}))
            else:
                answer = (code, 0, frozenset())
    g = c.group(GID)
    by_name = {m: 0 for m in uni.members}
    for mid in (g.members if g is not None else {}):  # a timer of a member id no longer in the group finds nobody
        by_name[spec_name(mid)[0]] = timers.get(mid, 0)
    return core_projection(c, by_name, uni), answer


# ------------------------------------------------------------------ the check

@attrs.define
class ConsumerGraphResult:
    nodes: int = 0
    classes: int = 0
    edges: int = 0
    steps: int = 0
    unsound: int = 0
    missing: int = 0
    crashed: int = 0
    tlc_seconds: float = 0.0
    replay_seconds: float = 0.0
    examples: list = attrs.Factory(list)

    @property
    def ok(self) -> bool:
        return self.nodes > 0 and self.unsound == 0 and self.missing == 0 and self.crashed == 0

    def line(self) -> str:
        return (f"consumer graph check: {self.nodes:,} states of MCConsumerGraph ({self.classes:,} distinct "
                f"without out and event), {self.edges:,} edges; {self.steps:,} core steps; unsound {self.unsound}, "
                f"missing {self.missing}, crashed {self.crashed} (TLC {self.tlc_seconds:.1f} s, replay "
                f"{self.replay_seconds:.1f} s)")


def dump_graph(dot: Path, config: str = "MCConsumerGraph.cfg", replace: dict | None = None):
    return run_tlc(config, "MCConsumer", workers=workers_for_machine(), dump=dot, timeout=600,
                   extra_args=["-deadlock"], replace=replace, name="consumer-graph")


def check_graph(dot: Path, uni: Universe, patch: Callable[[], Any] | None = None) -> ConsumerGraphResult:
    """Replay every node of the dumped graph through the core. ``patch``: a context manager
    factory applied around the replay (a core mutant)."""
    started = time.monotonic()
    g = read_dot(dot)
    res = ConsumerGraphResult(nodes=len(g.labels), edges=g.edges)
    states: dict[str, dict] = {}

    def state(fp: str) -> dict:
        st = states.get(fp)
        if st is None:
            st = states[fp] = state_of(label_chunks(g.labels[fp]))
        return st

    seen: set = set()
    import contextlib
    ctx = patch() if patch is not None else contextlib.nullcontext()
    with ctx:
        for fp in g.labels:
            s = state(fp)
            key = tuple(sorted((k, v) for k, v in label_chunks(g.labels[fp]).items() if k not in ("out", "event")))
            if key in seen:
                continue
            seen.add(key)
            # the spec's successors by coordinator input
            succ: dict[tuple, set] = defaultdict(set)
            for t in g.succ.get(fp, ()):
                ts = state(t)
                evt = ts["event"]
                if evt[0] not in REPLAYED:
                    continue
                succ[(evt[0], evt[1])].add((coord_projection(ts, uni), out_projection(ts["out"])))
            derived = inputs(s, uni)
            keys = {k for k, _ in derived}
            for k in succ:
                if k not in keys:
                    res.missing += 1
                    if len(res.examples) < 5:
                        res.examples.append(f"missing: {k} at {fp}")
            for k, event in derived:
                res.steps += 1
                try:
                    got = step(build_core(s, uni), event, s, uni)
                except Exception as e:
                    res.crashed += 1
                    if len(res.examples) < 5:
                        res.examples.append(f"crashed: {k} at {fp}: {type(e).__name__}: {e}")
                    continue
                if got not in succ.get(k, set()):
                    res.unsound += 1
                    if len(res.examples) < 5:
                        want = sorted(map(repr, succ.get(k, set())))[:2]
                        res.examples.append(f"unsound: {k} at {fp}: core {got!r}; spec {want}")
    res.classes = len(seen)
    res.replay_seconds = time.monotonic() - started
    return res


GRAPH_UNIVERSE = Universe(members=("m1", "m2"), static=frozenset({"m2"}))


def run_graph_check(patch: Callable[[], Any] | None = None, dot: Path | None = None) -> ConsumerGraphResult:
    with tempfile.TemporaryDirectory(prefix="groupcoord-cg-") as tmp:
        path = dot or Path(tmp) / "consumer.dot"
        tlc_seconds = 0.0
        if dot is None or not dot.exists():
            r = dump_graph(path)
            if not r.ok:
                raise RuntimeError(f"TLC failed on MCConsumerGraph.cfg: {r.violation()}")
            tlc_seconds = r.seconds
        res = check_graph(path, GRAPH_UNIVERSE, patch)
        res.tlc_seconds = tlc_seconds
        return res
