"""A failed core is not used again (issue #34, point 3): a raising core step, planted in a real
server in this process, is answered and survived. Every request the failed instance held gets
NOT_COORDINATOR, the server logs one ``core_error`` line, drops the instance with its timers
and writes in flight, loads its partitions again from storage into a new one, and keeps
serving: the group re-forms and an offset committed and acknowledged before the failure is
fetched after it.

The plant raises once, at a chosen call, after the real step has run (the instance is left
half-updated and the commands of the step are lost, the worst case). No test sleeps: each
waits for what the server tells (``track_requests``, the test controls' ``until``), bounded.
"""

from __future__ import annotations

import asyncio
import json
import struct

import pytest
from server_harness import InProcessServer

from groupcoord.adapters.client.kafka_client import KafkaClient
from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.wire.log import Log
from groupcoord.core import events as ev
from groupcoord.core.classic.machine import GroupMachine
from groupcoord.core.commands import ExpirationTimer
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.context import Context
from groupcoord.core.coordinator import Coordinator
from groupcoord.core.errors import Error

CONFIG = CoordinatorConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=100,
                           offsets_topic_num_partitions=3)
SESSION_MS = 30_000  # no session ends during a test
WAIT_S = 20.0
NOT_COORDINATOR = int(Error.NOT_COORDINATOR)
# a consumer's subscription to t6 (consumer protocol v0: version, topics, no user data)
SUBSCRIPTION = struct.pack(">hih", 0, 1, 2) + b"t6" + struct.pack(">i", -1)


class LogLines:
    def __init__(self) -> None:
        self.lines: list[dict] = []

    def write(self, text: str) -> None:
        self.lines.append(json.loads(text))

    def flush(self) -> None:
        pass

    def events(self, name: str) -> list[dict]:
        return [line for line in self.lines if line["event"] == name]


@pytest.fixture
def server():
    log = LogLines()
    s = InProcessServer(config=CONFIG, catalog=apis.TopicCatalog({"t6": 6}), track_requests=True,
                        log=Log(log, fmt="json", level="info"))
    s.log_lines = log
    yield s
    s.stop()


class Plant:
    """``owner.method`` (a part of the core) raises once, on its ``at``-th call whose arguments
    match ``when``, after the real call ran. Every instance is planted (the new one too: it must
    not raise again)."""

    def __init__(self, monkeypatch, owner: type, method: str, when=lambda *args: True, at: int = 1) -> None:
        self.calls = 0
        self.fired = False
        real = getattr(owner, method)

        def planted(instance, *args):
            result = real(instance, *args)
            if not self.fired and when(*args):
                self.calls += 1
                if self.calls == at:
                    self.fired = True
                    raise RuntimeError(f"planted failure in {method}")
            return result

        monkeypatch.setattr(owner, method, planted)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


def join_fields(member_id="", group="g"):
    return {"group_id": group, "session_timeout_ms": SESSION_MS, "rebalance_timeout_ms": SESSION_MS,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": SUBSCRIPTION}]}


def commit_fields(member_id, generation, partition, offset, group="g"):
    return {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
            "group_instance_id": None,
            "topics": [{"name": "t6", "partitions": [{"partition_index": partition, "committed_offset": offset,
                                                      "committed_leader_epoch": -1,
                                                      "committed_metadata": ""}]}]}


async def fetched(c: KafkaClient, group="g") -> dict[int, int]:
    r = await c.request(9, {"group_id": group, "topics": None}, 5)
    assert r["error_code"] == 0, r
    return {p["partition_index"]: p["committed_offset"] for t in r["topics"] for p in t["partitions"]}


async def form(server, clients: list[KafkaClient], ids: list[str] | None = None, group="g"):
    """Every client joins (again, with its id) and syncs as a consumer does, rejoining when told
    to; returns (member ids, generation) once all have synced in one generation."""
    ids = list(ids) if ids else [""] * len(clients)

    async def member(i: int, c: KafkaClient):
        for _attempt in range(50):
            joined = await c.request(11, join_fields(ids[i], group), 5)
            if joined["error_code"] == 79:
                ids[i] = joined["member_id"]
                continue
            assert joined["error_code"] == 0, joined
            ids[i], generation = joined["member_id"], joined["generation_id"]
            assignments = ([{"member_id": m["member_id"], "assignment": b""} for m in joined["members"]]
                           if joined["leader"] == ids[i] else [])
            synced = await c.request(14, {"group_id": group, "generation_id": generation, "member_id": ids[i],
                                          "group_instance_id": None, "assignments": assignments}, 3)
            if synced["error_code"] == 0:
                return generation
            assert synced["error_code"] in (22, 25, 27), synced
        raise AssertionError("could not join")

    for _round in range(20):
        generations = await asyncio.gather(*[member(i, c) for i, c in enumerate(clients)])
        if len(set(generations)) == 1:
            return ids, generations[0]
    raise AssertionError("members never met in one generation")


async def park_rejoin(server, a: KafkaClient, a_id: str) -> asyncio.Future:
    """a rejoins: the rebalance waits for the other member, so the server parks a's JoinGroup."""
    parked = a.send(11, join_fields(a_id), 5)
    assert await server.handled(a) == "pending"
    return parked


def served_again(server) -> dict:
    """Once the new instance has loaded every partition again (from storage)."""
    core = server.server.core
    return server.until(lambda: core.replaced and set(core.coordinator.owned_partitions().values()) == {"active"}
                        and len(core.coordinator.owned_partitions()) == CONFIG.offsets_topic_num_partitions
                        and core.coordinator.owned_partitions(), WAIT_S, "the partitions to be loaded again")


def every_request_answered(server, clients: list[KafkaClient]) -> None:
    listener = server.server.listener
    for c in clients:
        peer = c.local_address
        statuses = {cid: listener.request_status(peer, cid) for cid in range(1, c.last_correlation_id + 1)}
        assert set(statuses.values()) == {"answered"}, (peer, statuses)


def test_a_request_that_fails_the_core_is_answered_with_what_it_held(server, monkeypatch):
    """b's rejoin raises in the group machine's step, after the step completed the join phase
    (whose answers are lost with the step). The failed instance held a's parked JoinGroup and
    b's commit behind a held write: all three are answered NOT_COORDINATOR; the held write is
    dropped with the instance (its client was never told it succeeded); the old instance's
    timers are gone; the group re-forms and the acknowledged offset is still there."""
    async def main():
        # b commits on a connection of its own (a connection's next request waits for its answer)
        a, b, b2 = [await KafkaClient.connect("127.0.0.1", server.port, client_id=n) for n in ("a", "b", "b")]
        try:
            (a_id, b_id), generation = await form(server, [a, b])
            acked = await a.request(8, commit_fields(a_id, generation, 0, 42), 8)
            assert acked["topics"][0]["partitions"][0]["error_code"] == 0

            server.call(server.server.controls.hold_writes)
            held_commit = b2.send(8, commit_fields(b_id, generation, 1, 43), 8)
            assert await server.handled(b2) == "pending"
            parked_join = await park_rejoin(server, a, a_id)
            assert server.call(lambda: server.server.controls.armed(kind="join", group_id="g"))

            plant = Plant(monkeypatch, GroupMachine, "step", when=lambda *args: any(
                isinstance(a, ev.JoinGroup) and a.member_id == b_id for a in args))
            b_join = await b.request(11, join_fields(b_id), 5)
            assert plant.fired
            assert b_join["error_code"] == NOT_COORDINATOR
            assert (await asyncio.wait_for(parked_join, WAIT_S))["error_code"] == NOT_COORDINATOR
            held = await asyncio.wait_for(held_commit, WAIT_S)
            assert held["topics"][0]["partitions"][0]["error_code"] == NOT_COORDINATOR

            # the old instance's timers went with it; its held write never reaches the new one
            assert not server.call(lambda: server.server.controls.armed(kind="join"))
            server.call(server.server.controls.release_writes)
            served_again(server)
            assert server.call(lambda: server.server.core.coordinator.snapshot().writes) == {}

            ids, new_generation = await form(server, [a, b], [a_id, b_id])
            assert ids == [a_id, b_id] and new_generation > generation
            offsets = await fetched(a)
            assert offsets[0] == 42  # acknowledged before the failure
            assert offsets.get(1, -1) == -1  # never acknowledged: dropped with the instance
            every_request_answered(server, [a, b, b2])
        finally:
            for c in (a, b, b2):
                await c.close()

    run(main())
    failures = server.log_lines.events("core_error")
    assert len(failures) == 1, failures
    line = failures[0]
    assert line["event_type"] == "JoinGroup" and line["error"] == "RuntimeError: planted failure in step"
    assert line["answered"] == 3 and line["reloading"] == [0, 1, 2]
    assert server.server.core.replaced == 1


def test_a_write_outcome_that_fails_the_core_releases_its_held_answers(server, monkeypatch):
    """The core raises while handling a WriteCompleted, after the write's callbacks ran: the
    commit answer held behind the write is lost with the step. The server answers it, and
    a's parked JoinGroup, with NOT_COORDINATOR; the new instance reads the write back from
    storage (it completed there); the group re-forms; the offsets committed and acknowledged
    before the failure are all fetched."""
    async def main():
        a, b = [await KafkaClient.connect("127.0.0.1", server.port, client_id=n) for n in ("a", "b")]
        try:
            (a_id, b_id), generation = await form(server, [a, b])
            for partition, offset in ((0, 42), (2, 44)):
                acked = await a.request(8, commit_fields(a_id, generation, partition, offset), 8)
                assert acked["topics"][0]["partitions"][0]["error_code"] == 0
            parked_join = await park_rejoin(server, a, a_id)

            plant = Plant(monkeypatch, Coordinator, "_finish_write")
            commit = await b.request(8, commit_fields(b_id, generation, 1, 43), 8)
            assert plant.fired
            assert commit["topics"][0]["partitions"][0]["error_code"] == NOT_COORDINATOR
            assert (await asyncio.wait_for(parked_join, WAIT_S))["error_code"] == NOT_COORDINATOR

            served_again(server)
            ids, new_generation = await form(server, [a, b], [a_id, b_id])
            assert ids == [a_id, b_id] and new_generation > generation
            assert await fetched(b) == {0: 42, 1: 43, 2: 44}
            every_request_answered(server, [a, b])
        finally:
            await a.close()
            await b.close()

    run(main())
    failures = server.log_lines.events("core_error")
    assert len(failures) == 1, failures
    assert failures[0]["event_type"] == "WriteCompleted" and failures[0]["answered"] == 2
    assert failures[0]["reloading"] == [0, 1, 2]


def test_a_failed_load_is_not_loaded_again(server, monkeypatch):
    """A LoadPartition that fails the core (its records would fail the next instance too) is
    left out of the reload; the other partitions are served again."""
    core, partitions = server.server.core, server.server.partitions
    server.call(partitions.unload_partitions, {1})
    Plant(monkeypatch, Context, "arm", when=lambda *args: ExpirationTimer(1) in args)
    server.call(partitions.assign_partitions, {1})  # the ownership path: marked loading, read, loaded
    server.until(lambda: core.replaced == 1, WAIT_S, "the failed instance to be replaced")
    server.until(lambda: core.coordinator.owned_partitions() == {0: "active", 2: "active"}, WAIT_S,
                 "partitions 0 and 2 to be served again")
    line = server.log_lines.events("core_error")[-1]
    assert line["event_type"] == "LoadPartition" and line["not_reloaded"] == 1 and line["reloading"] == [0, 2]
