"""What happens to each simulated group, seeded by (seed, group index): its set-up
(``GroupSpec``: strategy, topics, static or dynamic members, timeouts) and a schedule of
incidents (members joining and leaving, crashes and restarts, members exceeding
max.poll.interval, slow heartbeats, rolling restarts and coordinator failovers, graceful or a
crash); ``simulate_group`` runs one group from start to end.
"""

from __future__ import annotations

import random

from groupcoord.adapters.sim.consumer import Consumer
from groupcoord.adapters.sim.world import GroupWorld
from groupcoord.adapters.traces.records import TraceColumns
from groupcoord.core.config import CoordinatorConfig

STRATEGIES = ("range", "roundrobin", "sticky", "cooperative-sticky")


class GroupSpec:
    """The seeded set-up of one group."""

    def __init__(self, seed: int, index: int, members: int, duration_ms: int, incidents_per_min: float) -> None:
        rng = self.rng = random.Random(f"{seed}:{index}")
        self.index = index
        self.group_id = f"group-{index:06d}"
        self.strategy = STRATEGIES[rng.randrange(len(STRATEGIES))]
        self.delay_ms = rng.choice((0, 0, 20_000)) if self.strategy == "cooperative-sticky" else 0
        n_topics = rng.choice((1, 1, 2, 3))
        self.topics = {f"topic-{chr(97 + t)}": rng.randint(1, 12) for t in range(n_topics)}
        self.uneven = n_topics > 1 and rng.random() < 0.3
        self.static = rng.random() < 0.35
        self.members = max(1, members + rng.choice((-1, 0, 0, 0, 1)) if members > 1 else members)
        self.session_ms = rng.choice((10_000, 10_000, 30_000))
        self.heartbeat_ms = max(1000, self.session_ms // 3)
        self.poll_ms = rng.choice((30_000, 45_000, 60_000))  # max.poll.interval.ms = rebalance timeout
        self.commit_ms = 5000
        self.duration_ms = duration_ms
        self.start_ms = rng.randrange(0, 1000)
        self.incidents_per_min = incidents_per_min

    def subscription(self, k: int) -> list[str]:
        topics = list(self.topics)
        if self.uneven:
            n = 1 + k % len(topics)
            return topics[:n] if k % 2 else topics[-n:]
        return topics


INCIDENTS = ("join", "leave", "crash", "poll_timeout", "slow_heartbeats", "rolling_restart", "failover")
INCIDENT_WEIGHTS = (3, 2, 3, 2, 2, 1, 1)


def simulate_group(spec: GroupSpec, config: CoordinatorConfig, columns: TraceColumns) -> dict:
    """Run one group from start to end; its records go to ``columns``; returns its stats."""
    rng = spec.rng
    world = GroupWorld(spec, config, columns)
    world.start_instance()
    for k in range(spec.members):
        consumer = Consumer(world, k)
        world.consumers.append(consumer)
        world.after(rng.randrange(0, 2000), consumer.start)
    end = spec.start_ms + spec.duration_ms
    n_incidents = _poisson(rng, spec.incidents_per_min * spec.duration_ms / 60_000)
    for _ in range(n_incidents):
        at = rng.randrange(4000, max(4001, spec.duration_ms - 2000))
        kind = rng.choices(INCIDENTS, INCIDENT_WEIGHTS)[0]
        world.after(at, lambda kind=kind: _incident(world, kind))
    finale = rng.random() < 0.25
    if finale:  # everyone leaves near the end; the group empties and may expire
        world.after(max(0, spec.duration_ms - 3000), lambda: [c.close() for c in world.consumers])
    world.run(end)
    stats = dict(world.stats)
    stats["records"] = world.recorder.seq
    stats["duration_ms"] = spec.duration_ms
    stats["strategy"] = spec.strategy
    stats["static"] = spec.static
    return stats


def _poisson(rng: random.Random, mean: float) -> int:
    n, t = 0, rng.expovariate(1.0) if mean > 0 else float("inf")
    while t < mean:
        n += 1
        t += rng.expovariate(1.0)
    return n


def _incident(world: GroupWorld, kind: str) -> None:
    rng, spec = world.rng, world.spec
    world.stats["incidents"] += 1
    running = [c for c in world.consumers if c.running]
    stopped = [c for c in world.consumers if not c.running]
    if kind == "join":
        if stopped and rng.random() < 0.5:
            rng.choice(stopped).start()
        else:
            consumer = Consumer(world, len(world.consumers))
            world.consumers.append(consumer)
            consumer.start()
    elif kind == "leave" and running:
        rng.choice(running).close()
    elif kind == "crash" and running:
        victim = rng.choice(running)
        victim.crash()
        if rng.random() < 0.6:
            world.after(rng.randrange(2000, 20_000), victim.start)
    elif kind == "poll_timeout" and running:
        rng.choice(running).stall(spec.poll_ms + rng.randrange(1000, 10_000))
    elif kind == "slow_heartbeats" and running:
        victim = rng.choice(running)
        victim.slow_until = world.now + rng.randrange(10_000, 40_000)
        victim.slow_factor = rng.choice((2, 3, 5))
    elif kind == "rolling_restart":
        for i, consumer in enumerate(running):
            down = rng.randrange(1000, 3000)
            world.after(i * 5000, consumer.close)
            world.after(i * 5000 + down, consumer.start)
    elif kind == "failover":
        world.failover(crash=rng.random() < 0.4, gap_ms=rng.randrange(200, 2000), loading_ms=rng.randrange(0, 3000))
