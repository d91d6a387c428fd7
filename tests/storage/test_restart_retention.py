"""Across restarts on the same SQLite store: groups reload as Kafka's do (with members: Stable,
session timers re-armed; without: Empty), and offset retention, explicit retention
(OffsetCommit v2-v4), the expiry of Empty groups and DeleteGroups tombstones behave as in Kafka.

Each "process" is a new GroupServer with a new SqliteStorage on the same directory and a
ManualClock, so time can jump across a restart and timers fire exactly when the test moves the
clock; the last test does the same with ``groupcoord serve`` processes and the real clock.
"""

from __future__ import annotations

import asyncio
import signal
import time

import pytest
from server_harness import InProcessServer, ServerProcess, wait_until

from groupcoord.adapters.client.kafka_client import KafkaClient
from groupcoord.adapters.storage.sqlite import SqliteStorage
from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.wire.clock import ManualClock
from groupcoord.core.config import CoordinatorConfig

MINUTE = 60_000
T0 = 1_700_000_000_000
SETTINGS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3",
            "offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "1000",
            "group.min.session.timeout.ms": "1000"}


class Process:
    """One coordinator "process" on ``data_dir`` whose clock starts at ``now_ms``."""

    def __init__(self, data_dir, now_ms: int) -> None:
        self.server = InProcessServer(config=CoordinatorConfig.from_kafka(SETTINGS),
                                      catalog=apis.TopicCatalog({"t": 4}), storage=SqliteStorage(data_dir),
                                      clock=ManualClock(now_ms))

    def advance(self, ms: int) -> None:
        self.server.call(lambda: self.server.server.controls.advance(ms))
        # the writes the expiry made are durable (and their outcomes fed back) before the next step looks
        self.server.run(self.server.server.storage.flush())
        self.server.run(asyncio.sleep(0))

    def request(self, api_key: int, fields: dict, version: int) -> dict:
        async def one():
            client = await KafkaClient.connect("127.0.0.1", self.server.port)
            try:
                return await client.request(api_key, fields, version)
            finally:
                await client.close()
        return asyncio.run(one())

    def offsets(self, group: str) -> dict[int, int]:
        r = self.request(9, {"group_id": group, "topics": None}, 7)
        return {p["partition_index"]: p["committed_offset"] for t in r["topics"] for p in t["partitions"]
                if p["committed_offset"] >= 0}

    def state(self, group: str) -> tuple[str, list[str]]:
        g = self.request(15, {"groups": [group]}, 5)["groups"][0]
        return g["group_state"], [m["member_id"] for m in g["members"]]

    def commit(self, group: str, offsets: dict[int, int], version: int = 8, retention_ms: int = -1,
               generation: int = -1, member: str = "") -> dict[int, int]:
        r = self.request(8, {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
                             "group_instance_id": None, "retention_time_ms": retention_ms,
                             "topics": [{"name": "t", "partitions": [
                                 {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                                  "committed_metadata": ""} for p, o in offsets.items()]}]}, version)
        return {p["partition_index"]: p["error_code"] for t in r["topics"] for p in t["partitions"]}

    def join(self, group_id: str, session_ms: int = 10_000) -> tuple[str, int]:
        """One consumer joins ``group_id`` and syncs: (member id, generation)."""
        group = group_id
        join = {"group_id": group, "session_timeout_ms": session_ms, "rebalance_timeout_ms": session_ms,
                "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00"}],
                "reason": None}

        async def go():
            client = await KafkaClient.connect("127.0.0.1", self.server.port)
            try:
                member = (await client.request(11, join, 9))["member_id"]
                parked = client.send(11, {**join, "member_id": member}, 9)
                # the join completes on its timer (delay 0): fire it once the join has armed it
                controls = self.server.server.controls
                await self.server.on_loop(controls.until(lambda: controls.armed(kind="join", group_id=group_id),
                                                         what=f"the join timer of {group_id}"))
                self.advance(0)
                joined = await asyncio.wait_for(parked, 10)
                synced = await client.request(14, {"group_id": group, "generation_id": joined["generation_id"],
                                                   "member_id": member, "group_instance_id": None,
                                                   "protocol_type": "consumer", "protocol_name": "range",
                                                   "assignments": [{"member_id": member, "assignment": b""}]}, 5)
                assert synced["error_code"] == 0
                return member, joined["generation_id"]
            finally:
                await client.close()
        return asyncio.run(go())

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture
def processes():
    started: list[Process] = []

    def start(data_dir, now_ms: int) -> Process:
        for p in started:
            p.stop()
        started.clear()
        p = Process(data_dir, now_ms)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


def test_a_stable_group_comes_back_stable_its_silent_member_expires_then_its_offsets(tmp_path, processes):
    p = processes(tmp_path, T0)
    member, generation = p.join("g", session_ms=10_000)
    assert p.commit("g", {0: 5, 1: 7}, generation=generation, member=member) == {0: 0, 1: 0}
    p = processes(tmp_path, T0 + 2_000)  # a restart
    assert p.state("g") == ("Stable", [member])
    heartbeat = p.request(12, {"group_id": "g", "generation_id": generation, "member_id": member,
                               "group_instance_id": None}, 4)
    assert heartbeat["error_code"] == 0  # the member carries on with the restarted coordinator
    assert p.offsets("g") == {0: 5, 1: 7}
    p.advance(9_000)
    assert p.state("g") == ("Stable", [member])  # the reloaded session timer was re-armed at load + heartbeat
    p.advance(2_000)
    assert p.state("g")[0] == "Empty"  # the session timed out: the member is gone
    assert p.offsets("g") == {0: 5, 1: 7}  # retention counts from when the group became Empty
    p = processes(tmp_path, T0 + 2_000 + 11_000 + 50_000)  # restart before the minute is over
    assert p.state("g")[0] == "Empty" and p.offsets("g") == {0: 5, 1: 7}
    p.advance(MINUTE - 50_000 + 1_000)
    assert p.offsets("g") == {} and p.state("g")[0] == "Dead"  # offsets expired; the Empty group went with them
    p = processes(tmp_path, T0 + 10 * MINUTE)
    assert p.offsets("g") == {} and p.state("g")[0] == "Dead"  # the tombstones were durable


def test_explicit_retention_of_offset_commit_v2_across_a_restart(tmp_path, processes):
    p = processes(tmp_path, T0)
    assert p.commit("short", {0: 1}, version=2, retention_ms=5_000) == {0: 0}
    assert p.commit("default", {0: 2}, version=2, retention_ms=-1) == {0: 0}
    p = processes(tmp_path, T0 + 4_000)
    assert p.offsets("short") == {0: 1} and p.offsets("default") == {0: 2}
    p.advance(1_500)  # past the explicit expiry, well inside the broker's retention
    assert p.offsets("short") == {} and p.offsets("default") == {0: 2}
    p = processes(tmp_path, T0 + 30_000)
    assert p.offsets("short") == {} and p.offsets("default") == {0: 2}
    p.advance(MINUTE)
    assert p.offsets("default") == {}


def test_an_empty_group_without_offsets_expires_and_stays_gone(tmp_path, processes):
    p = processes(tmp_path, T0)
    member, _generation = p.join("lonely")
    r = p.request(13, {"group_id": "lonely", "members": [{"member_id": member, "group_instance_id": None}]}, 3)
    assert r["error_code"] == 0
    assert p.state("lonely") == ("Empty", [])
    p = processes(tmp_path, T0 + 1_000)
    assert p.state("lonely") == ("Empty", [])  # an Empty group is stored, and comes back
    p.advance(1_000)  # the first expiry check: no offsets, Empty -> deleted (Kafka's cleanupGroupMetadata)
    assert p.state("lonely")[0] == "Dead"
    p = processes(tmp_path, T0 + 5_000)
    assert p.state("lonely")[0] == "Dead"


def test_delete_groups_tombstones_survive_a_restart_and_later_commits_count(tmp_path, processes):
    p = processes(tmp_path, T0)
    assert p.commit("gone", {0: 1, 1: 2}) == {0: 0, 1: 0}
    assert p.commit("again", {0: 3, 1: 4}) == {0: 0, 1: 0}
    r = p.request(42, {"groups_names": ["gone", "again"]}, 2)
    assert [x["error_code"] for x in r["results"]] == [0, 0]
    assert p.commit("again", {2: 9}) == {2: 0}  # a new simple group of the same name
    p = processes(tmp_path, T0 + 1_000)
    assert p.offsets("gone") == {} and p.state("gone")[0] == "Dead"
    assert p.offsets("again") == {2: 9}


def test_serve_restarts_keep_explicit_expiry_on_the_real_clock(tmp_path):
    """``groupcoord serve`` processes, the real clock: offsets survive a SIGKILL and restart;
    the one committed with 6 s of retention then disappears once its expiry passed, and stays
    gone, while the one committed with an hour of retention stays."""
    args = ("--data-dir", str(tmp_path), "--offsets.retention.check.interval.ms", "200")

    async def commit(port, partition, offset, retention_time_ms):
        client = await KafkaClient.connect("127.0.0.1", port)
        try:
            r = await client.request(8, {"group_id": "real", "generation_id_or_member_epoch": -1, "member_id": "",
                                         "retention_time_ms": retention_time_ms, "topics": [{"name": "t6", "partitions": [
                                             {"partition_index": partition, "committed_offset": offset,
                                              "committed_metadata": ""}]}]}, 2)
            return r["topics"][0]["partitions"][0]["error_code"]
        finally:
            await client.close()

    async def fetch(port):
        client = await KafkaClient.connect("127.0.0.1", port)
        try:
            r = await client.request(9, {"group_id": "real", "topics": [{"name": "t6", "partition_indexes": [0, 1]}]}, 1)
            return {p["partition_index"]: p["committed_offset"] for p in r["topics"][0]["partitions"]}
        finally:
            await client.close()

    server = ServerProcess(*args)
    try:
        assert asyncio.run(commit(server.port, 1, 22, 3_600_000)) == 0  # outlives the test: checked unconditionally
        committed_at = time.time()
        assert asyncio.run(commit(server.port, 0, 11, 6_000)) == 0
    finally:
        server.signal(signal.SIGKILL)
        server.proc.wait(10)
    server = ServerProcess(*args)
    try:
        assert asyncio.run(fetch(server.port))[1] == 22
        wait_until(lambda: asyncio.run(fetch(server.port))[0] == -1, 30, "the offset to expire")
        assert time.time() - committed_at >= 6 - 0.1
        assert asyncio.run(fetch(server.port))[1] == 22
    finally:
        assert server.stop() == 143
    server = ServerProcess(*args)
    try:
        assert asyncio.run(fetch(server.port)) == {0: -1, 1: 22}
    finally:
        assert server.stop() == 143
