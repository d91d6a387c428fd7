"""State-graph check: the core against every edge of TLC's reachable graph.

TLC dumps the whole state graph of a small configuration (``-dump dot``). Every node is a
spec state, including ``event`` (the action and its parameters that led there) and ``out``
(the commands it emitted). For each node the check builds the core state it stands for,
applies every input the spec's environment may send there, reads the core's new state and
commands back as spec values, and requires:

* unsound = 0: every core step is an edge of the graph (same action, same parameters, same
  next state, same commands);
* missing = 0: every edge of the graph is a step of the core;
* crashed = 0: the core raised on no input (an input it raised on is not also counted as the
  edges it then misses).

Nodes that differ only in ``out`` and ``event`` have the same successors, so each such class
is replayed once.
"""

from __future__ import annotations

import re
import time
from typing import Any

import attrs

from groupcoord.adapters.tla import storage
from groupcoord.adapters.tla.build import (
    Model,
    build_core,
    core_event,
    is_client,
    load_records,
    spec_inputs,
)
from groupcoord.adapters.tla.model import (
    CONFIG,
    PARTITION,
    REQ,
    Alpha,
    Ids,
    OutOfModel,
    apply_timers,
)
from groupcoord.adapters.tla.values import F, parse, show
from groupcoord.core import events as ev
from groupcoord.core.classic.states import EDGES, GroupState, edges_between
from groupcoord.core.coordinator import Coordinator

_NODE = re.compile(r'^(-?\d+) \[label="(.*)"(?:,style = filled)?\];?$')
_EDGE = re.compile(r"^(-?\d+) -> (-?\d+) \[")
_UNESCAPE = re.compile(r"\\(.)")


def _unescape(text: str) -> str:
    """DOT label escapes: \\\\ for a backslash, \\" for a quote, \\n for a line break."""
    return text.replace("\\\\", "\x00").replace("\\n", "\n").replace('\\"', '"').replace("\x00", "\\")


@attrs.define
class Graph:
    labels: dict = attrs.Factory(dict)  # fp -> label text
    succ: dict = attrs.Factory(dict)  # fp -> set of fps
    inits: set = attrs.Factory(set)
    edges: int = 0


def read_dot(path) -> Graph:
    g = Graph()
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("{rank = same;") and not g.inits:
                g.inits = {x for x in line[len("{rank = same;"):].strip(" ;}\n").split(";") if x}
                continue
            m = _EDGE.match(line)
            if m:
                g.succ.setdefault(m.group(1), set()).add(m.group(2))
                g.edges += 1
                continue
            m = _NODE.match(line.rstrip("\n"))
            if m and m.group(1) not in g.labels:
                g.labels[m.group(1)] = m.group(2)
    return g


def label_chunks(label: str) -> dict[str, str]:
    out = {}
    for part in _unescape(label).split("\n/\\ "):
        part = part.strip()
        if part.startswith("/\\ "):
            part = part[3:]
        name, _, value = part.partition(" = ")
        out[name.strip()] = value
    return out


class _States:
    """Parses node labels once each."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.chunks: dict[str, dict[str, str]] = {}
        self.values: dict[str, F] = {}
        self.part_cache: dict[str, Any] = {}

    def chunk(self, fp: str) -> dict[str, str]:
        c = self.chunks.get(fp)
        if c is None:
            c = self.chunks[fp] = label_chunks(self.graph.labels[fp])
        return c

    def key(self, fp: str) -> tuple:
        c = self.chunk(fp)
        return tuple(sorted((k, v) for k, v in c.items() if k not in ("out", "event")))

    def value(self, fp: str) -> F:
        v = self.values.get(fp)
        if v is None:
            parsed = {}
            for name, text in self.chunk(fp).items():
                cached = self.part_cache.get(text)
                if cached is None:
                    cached = self.part_cache[text] = parse(text)
                parsed[name] = cached
            v = self.values[fp] = F(parsed)
        return v


@attrs.define
class GraphCheck:
    nodes: int = 0
    edges: int = 0
    classes: int = 0
    inits: int = 0
    inputs: int = 0
    matched: int = 0
    unsound: list = attrs.Factory(list)
    missing: list = attrs.Factory(list)
    crashed: list = attrs.Factory(list)  # inputs the core raised on
    # what the first unsound or missing finding is about: the path of the first value where the
    # core and the spec differ (out[3].ms), "no spec edge" or "missing edge"
    first: str | None = None
    seconds: float = 0.0
    # (from, to) group state -> matched core steps that take that edge of the state table
    # (a step through PreparingRebalance, e.g. a rejoin completing at once, takes both edges)
    transitions: dict = attrs.Factory(dict)

    @property
    def uncovered(self) -> list[tuple[str, str]]:
        """Edges of the state table that no matched core step takes."""
        return [(s.value, t.value) for s, t in EDGES if (s, t) not in self.transitions]

    @property
    def ok(self) -> bool:
        return not self.unsound and not self.missing and not self.crashed and not self.uncovered

    def findings(self) -> list[str]:
        """Unsound and missing first, then crashes."""
        return self.unsound + self.missing + self.crashed

    def coverage(self) -> list[str]:
        """One line per edge of the state table, with how many matched core steps take it."""
        return [f"table edge {s.value} -> {t.value}: " + (f"taken by {self.transitions[(s, t)]} core steps"
                                                           if (s, t) in self.transitions else "TAKEN BY NO CORE STEP")
                for s, t in EDGES]

    def summary(self) -> str:
        return (f"graph check: {self.nodes} states ({self.classes} distinct without out/event), {self.edges} edges, "
                f"{self.inits} initial; {self.inputs} core steps, {self.matched} matched an edge; "
                f"unsound {len(self.unsound)}, missing {len(self.missing)}, crashed {len(self.crashed)} "
                f"({self.seconds:.1f} s)")


def core_step(built, e: F, s: F) -> F:
    """Apply the spec event ``e`` to the core state ``built`` (built from ``s``); the result
    read back as a full spec state (with out and event)."""
    alpha = Alpha(Ids())
    alpha.ids.to_spec = dict(built.alpha.ids.to_spec)
    alpha.ids.inst_spec = built.alpha.ids.inst_spec
    alpha.tags = dict(built.alpha.tags)
    alpha.write_records = dict(built.alpha.write_records)
    # the log beside the core: an acknowledged write's records, or the durable ones of an unload
    done = 1 if e["type"] == "WriteCompleted" else e.get("durable", 0)
    alpha.stored = storage.with_writes(s["stored"], s["writes"], done)
    local = type(built)(built.state, built.timers, alpha, built.core_id)
    event = core_event(e, local)
    timers = dict(built.timers)
    if isinstance(event, ev.TimerFired):
        timers.pop(event.key, None)
    if isinstance(event, ev.Request):
        alpha.tags[REQ] = alpha.tag_of_request(event)
    coordinator = Coordinator.restore(built.state, CONFIG)
    if isinstance(event, ev.LoadPartition) and s["state"] != "Dead":  # another coordinator takes over
        coordinator, timers = Coordinator(CONFIG), {}
    commands = coordinator.handle(event)
    apply_timers(timers, commands)
    alpha.remember_writes(commands)
    out = alpha.commands(commands, built.state, event)
    budget = s["budget"]
    if (is_client(e) or e["type"] == "LoadPartition") and budget > 0:
        budget -= 1
    state = alpha.state(coordinator.snapshot(), timers, budget)
    state["out"] = out
    state["event"] = e
    return F(state)


def init_step(e: F, instances, budget: int) -> F:
    alpha = Alpha(Ids(instances))
    coordinator = Coordinator(CONFIG)
    group = e["group"]
    if group is not None:
        for m in group["members"]:
            alpha.ids.learn(m["id"], "c", None if m["inst"] is None else Ids.name(m["inst"]))
    event = ev.LoadPartition(now_ms=0, partition=PARTITION, records=load_records(group, instances))
    alpha.stored = storage.stored_of(group)
    commands = coordinator.handle(event)
    timers: dict = {}
    apply_timers(timers, commands)
    state = alpha.state(coordinator.snapshot(), timers, budget)
    state["out"] = alpha.commands(commands, None, event)
    state["event"] = e
    return F(state)


def _diff(a: F, b: F) -> tuple[str, str]:
    """(where the core's state ``a`` and the spec's ``b`` first differ, every difference)."""
    wheres = [_where(k, a.get(k), b.get(k)) for k in a if a.get(k) != b.get(k)]
    return wheres[0][0], "; ".join(text for _, text in wheres[:4])


def _where(path: str, a: Any, b: Any) -> tuple[str, str]:
    """Where two values first differ: down through sequences of the same length and records
    with the same fields (``out[3].ms``, and ``out[3].ms: core 6000 / spec 10000``)."""
    while True:
        if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
            i = next(i for i in range(len(a)) if a[i] != b[i])
            path, a, b = f"{path}[{i + 1}]", a[i], b[i]
        elif isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b) and len(a) > 0:
            k = next(k for k in a if a[k] != b[k])
            path, a, b = f"{path}.{k}", a[k], b[k]
        else:
            return path, f"{path}: core {show(a, 300)} / spec {show(b, 300)}"


def check_graph(graph: Graph, model: Model, stop_at_first: bool = False, limit: int = 5) -> GraphCheck:
    """``stop_at_first``: stop at the first unsound or missing finding (crashes are collected
    on the way, and do not stop it)."""
    started = time.monotonic()
    res = GraphCheck(nodes=len(graph.labels), edges=graph.edges, inits=len(graph.inits))
    states = _States(graph)
    classes: dict[tuple, str] = {}
    for fp in graph.labels:
        classes.setdefault(states.key(fp), fp)
    res.classes = len(classes)
    instances = model.instances

    # Initial states: each is LoadPartition of its stored group.
    for fp in graph.inits:
        s = states.value(fp)
        got = init_step(s["event"], instances, s["budget"])
        res.inputs += 1
        if got == s:
            res.matched += 1
        else:
            where, text = _diff(got, s)
            res.first = res.first or where
            res.unsound.append(f"initial state {show(s['event'], 200)}: {text}")
            if stop_at_first:
                break

    for key, fp in classes.items():
        if stop_at_first and (res.unsound or res.missing):
            break
        s = states.value(fp)
        targets = {states.value(t): t for t in graph.succ.get(fp, ())}
        produced, raised = set(), set()
        try:
            built = build_core(s, instances, model.ids)
        except Exception as exc:
            res.unsound.append(f"state {_brief(s)}: cannot build the core state: {exc!r}")
            continue
        for e in spec_inputs(s, model):
            res.inputs += 1
            try:
                got = core_step(built, e, s)
            except OutOfModel as exc:
                res.unsound.append(f"state {_brief(s)} input {show(e, 200)}: out of the model: {exc}")
                continue
            except Exception as exc:
                res.crashed.append(f"state {_brief(s)} input {show(e, 200)}: the core raised {exc!r}")
                raised.add(e)
                continue
            if got in targets:
                res.matched += 1
                produced.add(got)
                _count_transition(res.transitions, s["state"], got["state"])
                continue
            same_event = [t for t in targets if t["event"] == e]
            where, detail = _diff(got, same_event[0]) if same_event else ("no spec edge",
                                                                          "the spec has no edge for this input")
            res.first = res.first or where
            res.unsound.append(f"state {_brief(s)} input {show(e, 200)}: {detail}")
            if stop_at_first:
                break
        if stop_at_first and res.unsound:
            break
        for t in targets:
            if t in produced or (t == s) or t["event"] in raised:  # `Done` stutters in Dead
                continue
            res.first = res.first or "missing edge"
            res.missing.append(f"state {_brief(s)}: spec edge {show(t['event'], 200)} -> "
                               f"{t['state']} out {show(t['out'], 300)} is produced by no core input")
            if stop_at_first:
                break
    res.seconds = time.monotonic() - started
    return res


_STATES = {g.value: g for g in GroupState}  # the spec's state names that are group states


def _count_transition(counts: dict, before: str, after: str) -> None:
    if before == after or before not in _STATES or after not in _STATES:
        return
    for edge in edges_between(_STATES[before], _STATES[after]):
        counts[edge] = counts.get(edge, 0) + 1


def _brief(s: F) -> str:
    return (f"[{s['state']} gen {s['generation']} members {show(s['members'], 80)} pending {show(s['pending'], 60)} "
            f"writes {len(s['writes'])} held {len(s['held'])} timers {show(s['timers'], 120)}]")


def model_from_cfg(cfg_text: str, mc_text: str) -> Model:
    """The environment's constants, read from an MC*.cfg and MC.tla."""
    consts = {}
    for line in cfg_text.splitlines():
        m = re.match(r"\s+(\w+)\s*(<-|=)\s*(.+)$", line)
        if m:
            consts[m.group(1)] = (m.group(2), m.group(3).strip())
    defs = {}
    for m in re.finditer(r"^(\w+) == (.+?)(?=^\S|\Z)", mc_text, re.M | re.S):
        defs[m.group(1)] = re.sub(r"\\\*[^\n]*", "", m.group(2)).strip()

    def value(name):
        op, text = consts[name]
        if op == "<-":
            text = defs[text]
        for d, body in defs.items():
            if re.fullmatch(r"[A-Z]\w*", d) and d in text and "(" not in body and "\\" not in body:
                text = re.sub(rf"\b{d}\b", body, text)
        return parse(text)

    for name, setting in (("InitialDelay", CONFIG.group_initial_rebalance_delay_ms),
                          ("RetentionCheckInterval", CONFIG.offsets_retention_check_interval_ms)):
        if value(name) != setting:
            raise ValueError(f"the configuration's {name} is {value(name)}; the core replayed against it "
                             f"has {setting}")
    return Model(ids=value("Ids"), instances=value("Instances"), protocols=value("Protocols"),
                 protocol_types=value("ProtocolTypes"), rebalance_timeouts=value("RebalanceTimeouts"),
                 session_timeouts=value("SessionTimeouts"), join_versions=value("JoinVersions"),
                 write_errors=value("WriteErrors"), reduce=value("Reduce"), offset_keys=value("OffsetKeys"),
                 offset_values=value("OffsetValues"), commit_versions=value("CommitVersions"),
                 partial_expiry=value("PartialExpiry"), reloads=value("Reloads"),
                 batch_leaves=value("BatchLeaves"), fail_order=value("FailOrder"))
