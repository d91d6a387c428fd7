"""Where the consumer traces come from: the consumer conformance scenarios (Kafka's own test
cases, re-expressed; ``scenario_traces``) and generated runs of clients behaving as the spec's
environment may (``client_trace``): heartbeats with stale epochs and stale or unreported
partitions, answers lost, subscriptions changed, crashes, restarts under new member ids, -1 and
-2 leaves, session and rebalance timeouts. The generated clients are not the spec's: they are a
seeded random walk over what real clients send, on more members and partitions than TLC's
configurations hold.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Iterable

import attrs

from groupcoord.adapters.tla.consumer_trace import ConsumerRecorder, ConsumerTrace, record
from groupcoord.adapters.tla.values import OutOfModel
from groupcoord.core import events as ev
from groupcoord.core.commands import ConsumerGroupHeartbeatResponse, RebalanceTimer, Respond, SessionTimer
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.consumer.model import ConsumerGroup


def scenario_trace(path: str | Path) -> ConsumerTrace:
    from groupcoord.adapters.tla.trace_sources import scenario_events

    events, config = scenario_events(path)
    gids = [e.group_id for e in events if isinstance(e, ev.ConsumerGroupHeartbeat)]
    if not gids:
        raise OutOfModel("no consumer group heartbeat")
    return record(events, gids[0], config, Path(path).stem)


def scenario_traces(paths: Iterable[str | Path]) -> tuple[list[ConsumerTrace], list[tuple[str, str]]]:
    """The traces of the scenarios with at least one step the spec follows, and the others with why."""
    from groupcoord.adapters.scenarios.runner import scenario_files

    found, left_out = [], []
    for p in scenario_files(paths):
        try:
            t = scenario_trace(p)
        except OutOfModel as e:
            left_out.append((Path(p).name, str(e)))
            continue
        if t.steps:
            found.append(t)
        else:
            left_out.append((Path(p).name, t.stopped or "no step of the spec"))
    return found, left_out


# ------------------------------------------------------------------ generated clients

GID = "g"
TOPICS = (("a", "id-a", 2), ("b", "id-b", 1), ("c", "id-c", 1))
SUBSCRIPTIONS = (("a", "b"), ("a",), ("b", "c"), ("a", "b", "c"))


@attrs.define
class Client:
    """What one consumer process holds: its epoch (-1: stopped), the partitions it owns and
    those it was last told, its subscription and member id."""

    key: str
    instance: str | None
    member_id: str
    sub: tuple
    epoch: int = 0
    owned: frozenset = frozenset()  # (topic id, partition)
    heard: frozenset = frozenset()
    sent_sub: tuple | None = None  # the subscription the coordinator last acknowledged
    restarts: int = 0


def _tp(parts: frozenset) -> tuple:
    by: dict = {}
    for t, n in sorted(parts):
        by.setdefault(t, []).append(n)
    return tuple((t, tuple(ns)) for t, ns in sorted(by.items()))


class Workload:
    """A seeded run: at each step one enabled action of one client, or a timer firing."""

    def __init__(self, seed: int, clients: int = 3, static: int = 1) -> None:
        self.rnd = random.Random(seed)
        self.rec = ConsumerRecorder(GID, CoordinatorConfig(), f"clients seed {seed}", complete_writes=True)
        self.clients = [Client(f"c{k}", f"i{k}" if k < static else None, f"c{k}-0",
                               self.rnd.choice(SUBSCRIPTIONS)) for k in range(clients)]
        self.now = 0
        self.requests = 0

    def start(self) -> None:
        self.rec.feed(ev.LoadPartition(now_ms=0, partition=self.rec.part, records=()))
        self.rec.feed(ev.TopicsChanged(now_ms=0, topics=TOPICS))

    def heartbeat(self, c: Client, epoch: int, lost: bool) -> None:
        self.requests += 1
        full = epoch == 0 or self.rnd.random() < 0.5
        req = ev.ConsumerGroupHeartbeat(
            request_id=("hb", self.requests), now_ms=self.now, version=1, group_id=GID, member_id=c.member_id,
            member_epoch=epoch, instance_id=c.instance, rebalance_timeout_ms=30_000 if epoch == 0 or full else -1,
            subscribed_topic_names=c.sub if full or c.sent_sub != c.sub else None,
            server_assignor="uniform" if epoch == 0 else None,
            topic_partitions=() if epoch == 0 else (_tp(c.owned) if full or self.rnd.random() < 0.5 else None))
        resp = self._answer(req)
        if epoch < 0 or lost or resp is None:
            return
        code = resp.error_code.name
        if code == "NONE":
            c.epoch = resp.member_epoch
            c.sent_sub = c.sub
            if resp.assignment is not None:
                c.heard = frozenset((t, n) for t, ns in resp.assignment for n in ns)
        elif code in ("FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"):
            c.epoch, c.owned, c.heard, c.sent_sub = 0, frozenset(), frozenset(), None
        else:
            c.epoch, c.owned, c.heard = -1, frozenset(), frozenset()

    def _answer(self, req) -> ConsumerGroupHeartbeatResponse | None:
        for cmd in self.rec.feed(req):
            if isinstance(cmd, Respond) and cmd.request_id == req.request_id:
                return cmd.response
        return None

    def actions(self) -> list:
        out: list = []
        for c in self.clients:
            if c.epoch >= 0:
                out += [("heartbeat", c)] * 4
                if c.owned != c.heard:
                    out += [("reconcile", c)] * 3
                out += [("lost", c), ("subscribe", c), ("crash", c)]
                if c.epoch > 0:
                    out.append(("leave", c))
            else:
                out.append(("restart", c))
        g = self.rec.coordinator.group(GID)
        if isinstance(g, ConsumerGroup):
            out += [("session", mid) for mid in g.members]
            out += [("rebalance", mid) for mid in self.rec.armed]
        return out

    def step(self) -> None:
        self.now += 1000
        action, who = self.rnd.choice(self.actions())
        part = self.rec.part
        if action in ("heartbeat", "lost"):
            self.heartbeat(who, who.epoch, lost=action == "lost")
        elif action == "reconcile":
            who.owned = who.heard
        elif action == "subscribe":
            who.sub = self.rnd.choice([s for s in SUBSCRIPTIONS if s != who.sub])
        elif action == "crash":
            who.epoch, who.owned, who.heard = -1, frozenset(), frozenset()
        elif action == "restart":
            who.restarts += 1
            who.member_id = f"{who.key}-{who.restarts}"
            who.epoch, who.sent_sub = 0, None
        elif action == "leave":
            self.heartbeat(who, -2 if who.instance is not None else -1, lost=False)
            who.epoch, who.owned, who.heard = -1, frozenset(), frozenset()
        elif action == "session":
            self.rec.feed(ev.TimerFired(now_ms=self.now, key=SessionTimer(part, GID, who)))
        elif action == "rebalance":
            self.rec.feed(ev.TimerFired(now_ms=self.now, key=RebalanceTimer(part, GID, who),
                                        payload=self.rec.armed[who]))


def client_trace(seed: int, steps: int = 60) -> ConsumerTrace:
    """A generated run of ``steps`` actions (seeded: the same seed, the same run)."""
    w = Workload(seed)
    try:
        w.start()
        for _ in range(steps):
            w.step()
    except OutOfModel as why:
        w.rec.trace.stopped = str(why)
    return w.rec.trace
