"""The asyncio embedding example (adapters/runtime/embedded.py) on a real event loop with a fake
clock: time moves only when the test advances it, and the service's tasks run during bounded
``asyncio.sleep(0)`` loops, never during real sleeps."""

from __future__ import annotations

import asyncio
import itertools

from groupcoord.adapters.protocol.translate import request_event
from groupcoord.adapters.runtime.embedded import EmbeddedCoordinator
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.errors import Error

SESSION_MS = REBALANCE_MS = 10_000


class FakeClock:
    """Alarms run synchronously inside ``advance``, like loop.call_at callbacks coming due."""

    class Handle:
        def __init__(self, deadline_ms, callback):
            self.deadline_ms, self.callback, self.cancelled = deadline_ms, callback, False

        def cancel(self):
            self.cancelled = True

    def __init__(self) -> None:
        self.now = 0
        self.alarms: list[FakeClock.Handle] = []

    def now_ms(self) -> int:
        return self.now

    def call_at(self, deadline_ms, callback):
        handle = self.Handle(deadline_ms, callback)
        self.alarms.append(handle)
        return handle

    def advance(self, ms: int) -> None:
        self.now += ms
        due = [h for h in self.alarms if h.deadline_ms <= self.now and not h.cancelled]
        self.alarms = [h for h in self.alarms if h not in due and not h.cancelled]
        for handle in due:
            handle.callback()


async def settle(rounds: int = 30) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


class Client:
    def __init__(self, service: EmbeddedCoordinator, client_id: str) -> None:
        self.service, self.client_id = service, client_id
        self.member_id, self.generation = "", -1
        self._ids = itertools.count()

    def send(self, api: str, version: int, body: dict) -> asyncio.Task:
        event = request_event(api, version, {"group_id": "g", **body}, client_id=self.client_id,
                              request_id=f"{self.client_id}-{next(self._ids)}", now_ms=0)
        return asyncio.create_task(self.service.request(event))

    async def call(self, api: str, version: int, body: dict):
        task = self.send(api, version, body)
        await settle()
        assert task.done(), f"{api} from {self.client_id} is still unanswered"
        return task.result()

    def join(self) -> asyncio.Task:
        return self.send("JoinGroup", 5, {
            "member_id": self.member_id, "session_timeout_ms": SESSION_MS,
            "rebalance_timeout_ms": REBALANCE_MS, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]})

    async def heartbeat(self):
        return await self.call("Heartbeat", 4, {"generation_id": self.generation, "member_id": self.member_id})


def test_two_members_form_a_group_and_a_silent_member_is_removed():
    async def scenario():
        clock = FakeClock()
        uuids = (f"uuid-{n}" for n in itertools.count(1))
        service = EmbeddedCoordinator(CoordinatorConfig(offsets_topic_num_partitions=1),
                                      clock=clock, new_uuid=lambda: next(uuids))
        await service.start()
        a, b = Client(service, "a"), Client(service, "b")
        try:
            # JoinGroup v5 with no member id: MEMBER_ID_REQUIRED with an id built from the uuid.
            for client in (a, b):
                task = client.join()
                await settle()
                response = task.result()
                assert response.error_code is Error.MEMBER_ID_REQUIRED
                client.member_id = response.member_id
            assert (a.member_id, b.member_id) == ("a-uuid-1", "b-uuid-2")

            joins = [a.join(), b.join()]
            await settle()
            assert not any(t.done() for t in joins)
            assert str(service.coordinator.group("g").state) == "PreparingRebalance"

            clock.advance(3000)  # initial delay: b joined meanwhile, so it is extended once
            await settle()
            assert not any(t.done() for t in joins)
            clock.advance(3000)
            await settle()
            ja, jb = (t.result() for t in joins)
            assert (ja.error_code, jb.error_code) == (Error.NONE, Error.NONE)
            assert ja.generation_id == jb.generation_id == 1
            assert ja.leader == a.member_id and len(ja.members) == 2 and jb.members == ()
            a.generation = b.generation = 1

            follower_sync = b.send("SyncGroup", 3, {"generation_id": 1, "member_id": b.member_id})
            leader_sync = await a.call("SyncGroup", 3, {
                "generation_id": 1, "member_id": a.member_id,
                "assignments": [{"member_id": a.member_id, "assignment": b"A"},
                                {"member_id": b.member_id, "assignment": b"B"}]})
            assert leader_sync.assignment == b"A"
            assert follower_sync.done() and follower_sync.result().assignment == b"B"
            assert str(service.coordinator.group("g").state) == "Stable"
            assert service.storage.log[0], "the assignment was written"

            # a keeps heartbeating; b goes silent. b's session ends at 6000 + 10000.
            for _ in range(3):
                clock.advance(3000)
                await settle()
                assert (await a.heartbeat()).error_code is Error.NONE
            assert set(service.coordinator.group("g").members) == {a.member_id, b.member_id}
            clock.advance(1000)
            await settle()
            group = service.coordinator.group("g")
            assert set(group.members) == {a.member_id}
            assert str(group.state) == "PreparingRebalance"

            assert (await a.heartbeat()).error_code is Error.REBALANCE_IN_PROGRESS
            rejoin = a.join()
            await settle()
            response = rejoin.result()
            assert response.generation_id == 2 and [m.member_id for m in response.members] == [a.member_id]
        finally:
            await service.stop()

    asyncio.run(scenario())


def test_stop_fails_requests_still_parked():
    async def scenario():
        service = EmbeddedCoordinator(CoordinatorConfig(offsets_topic_num_partitions=1), clock=FakeClock(),
                                      new_uuid=lambda: "u")
        await service.start()
        parked = Client(service, "c").send("JoinGroup", 3, {
            "member_id": "", "session_timeout_ms": SESSION_MS, "rebalance_timeout_ms": REBALANCE_MS,
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
        await settle()
        assert not parked.done()
        await service.stop()
        await settle()
        assert parked.done() and type(parked.exception()).__name__ == "CoordinatorStopped"

    asyncio.run(scenario())
