"""The simulator's consumers over the wire: the simulated Java-like consumer
(adapters/sim/consumer.py: joins with its group's strategy, static or dynamic, heartbeats,
commits, leaves, stalls past max.poll.interval, crashes and restarts) drives real sockets,
one connection per consumer through ``groupcoord record`` to ``groupcoord serve``, on a real
clock with the group's timeouts scaled down; each request event goes out as the request Kafka's
client sends (``translate.request_body``) and each answer comes back to the consumer as the
attributes it reads. Every group of the recording conforms."""

from __future__ import annotations

import asyncio
import collections
import types

from observe_harness import RecorderProcess
from server_harness import ServerProcess

from groupcoord.adapters.cli.main import main
from groupcoord.adapters.client.kafka_client import KafkaClient
from groupcoord.adapters.protocol.codec import API_KEYS
from groupcoord.adapters.protocol.translate import request_body
from groupcoord.adapters.sim.consumer import Consumer
from groupcoord.adapters.sim.workload import GroupSpec
from groupcoord.core.errors import Error

SETTINGS = {"group.initial.rebalance.delay.ms": 300, "group.min.session.timeout.ms": 500}
DURATION_MS = 9000
SEED, GROUPS = 18, (1, 3, 8)  # cooperative-sticky, range, and roundrobin with static members


def _answer(value):
    """Kafka's response fields as the attributes the simulated consumer reads (error codes as
    Error)."""
    if isinstance(value, dict):
        return types.SimpleNamespace(**{k: Error(v) if k == "error_code" else _answer(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_answer(v) for v in value)
    return value


class WireWorld:
    """What a simulated consumer asks of its world (the clock, timers, its seeded choices, a
    place to send requests), on an asyncio loop and real sockets."""

    def __init__(self, spec: GroupSpec, port: int, loop: asyncio.AbstractEventLoop) -> None:
        self.spec, self.rng, self.loop, self.port = spec, spec.rng, loop, port
        self.stats: collections.Counter = collections.Counter()
        self.consumers: list[Consumer] = []
        self.clients: dict[int, KafkaClient] = {}
        self.errors: list[BaseException] = []
        self.leaves: list[asyncio.Future] = []
        self._rid = 0
        self._t0 = loop.time()

    @property
    def now(self) -> int:
        return int((self.loop.time() - self._t0) * 1000)

    def after(self, delay_ms: int, action) -> None:
        self.loop.call_later(max(0, delay_ms) / 1000, self._guarded, action)

    def _guarded(self, action) -> None:
        try:
            action()
        except Exception as e:  # a consumer's bug must fail the test, not vanish in the loop
            self.errors.append(e)

    def rid(self) -> int:
        self._rid += 1
        return self._rid

    def uuid(self) -> str:
        return f"{self.rng.getrandbits(128):032x}"

    async def connect(self, consumer: Consumer) -> None:
        self.clients[consumer.k] = await KafkaClient.connect("127.0.0.1", self.port, consumer.client_id)

    def request(self, consumer: Consumer, kind: str, event) -> None:
        api, body = request_body(event)
        future = self.clients[consumer.k].send(API_KEYS[api], body, version=event.version)
        epoch = consumer.epoch
        if kind == "leave":
            self.leaves.append(future)

        def answered(f: asyncio.Future) -> None:
            if not f.cancelled() and f.exception() is None and consumer.epoch == epoch:
                self._guarded(lambda: consumer.on_response(kind, event, _answer(f.result())))
        future.add_done_callback(answered)


async def _run_group(index: int, port: int) -> WireWorld:
    spec = GroupSpec(SEED, index, 3, DURATION_MS, 0)
    # the group's timeouts scaled down to the test's seconds
    spec.session_ms, spec.heartbeat_ms, spec.poll_ms, spec.commit_ms, spec.delay_ms = 1500, 400, 2500, 700, 0
    world = WireWorld(spec, port, asyncio.get_running_loop())
    rng = spec.rng
    for k in range(spec.members + 1):
        world.consumers.append(Consumer(world, k))
        await world.connect(world.consumers[-1])
    first = world.consumers[:spec.members]
    for c in first:
        world.after(rng.randrange(0, 300), c.start)
    spare = world.consumers[-1]
    # incidents, the simulator's kinds at the test's scale: a member joins late, one crashes and
    # comes back, one stalls past max.poll.interval, one heartbeats slowly, one leaves
    victims = rng.sample(first, len(first))
    world.after(1500, spare.start)
    world.after(2500, victims[0].crash)
    world.after(2500 + rng.randrange(500, 1500), victims[0].start)
    world.after(3500, lambda: victims[1].stall(spec.poll_ms + rng.randrange(300, 800)))
    world.after(4000, lambda: setattr(victims[-1], "slow_until", world.now + 1500)
                or setattr(victims[-1], "slow_factor", 5))
    world.after(6500, victims[-1].close)
    # the run's length on the real clock: the consumers' own timers drive everything until then
    await asyncio.sleep(DURATION_MS / 1000)
    for c in world.consumers:
        c.close()
    if world.leaves:  # (static members do not leave) the leaves answered, part of the recording
        _, late = await asyncio.wait(world.leaves, timeout=10)
        assert not late, f"{len(late)} LeaveGroup requests unanswered after 10 s"
    for client in world.clients.values():
        await client.close()
    return world


async def _groups(port: int, indexes) -> list[WireWorld]:
    return await asyncio.gather(*(_run_group(i, port) for i in indexes))


def test_the_simulator_s_consumers_over_the_wire_conform(tmp_path, capsys):
    topics: dict[str, int] = {}
    for i in GROUPS:
        for t, n in GroupSpec(SEED, i, 3, DURATION_MS, 0).topics.items():
            topics[t] = max(n, topics.get(t, 0))
    server = ServerProcess(topics=tuple(f"{t}={n}" for t, n in topics.items()), settings=SETTINGS)
    try:
        recorder = RecorderProcess(f"127.0.0.1:{server.port}", tmp_path / "rec")
        try:
            worlds = asyncio.run(asyncio.wait_for(_groups(recorder.port, GROUPS), 60))
        finally:
            recorder.stop()
    finally:
        server.stop()
    assert not [e for w in worlds for e in w.errors], [repr(e) for w in worlds for e in w.errors]
    records = recorder.records()
    apis = collections.Counter(r["api"] for r in records)
    assert apis["SyncGroup"] >= 6 and apis["Heartbeat"] > 20 and apis["LeaveGroup"] >= 3, apis
    assert {w.spec.strategy for w in worlds} == {"cooperative-sticky", "range", "roundrobin"}
    assert any(r["api"] == "JoinGroup" and r["request"].get("group_instance_id") for r in records)
    codes = collections.Counter(r["response"].get("error_code") for r in records if r["response"])
    assert codes[27] > 0 and codes[79] > 0, codes  # rebalances seen by heartbeats; dynamic members' first joins
    args = ["verify", str(tmp_path / "rec"), "--out", str(tmp_path / "report")]
    for k, v in SETTINGS.items():
        args += [f"--{k}", str(v)]
    code = main(args)
    out = capsys.readouterr().out
    assert code == 0 and "3 groups: 3 conform" in out, out
