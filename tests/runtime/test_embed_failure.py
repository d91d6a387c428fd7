"""The asyncio embedding example (adapters/runtime/embedded.py) when its core raises
(spec/contract.md, "A failed instance"): every request the failed instance held is answered
NOT_COORDINATOR, the instance is replaced, its partitions are loaded again from storage once
the writer has handled its writes, and what was acknowledged is still there. Fake clock, no
real sleeps (test_embed_example's)."""

from __future__ import annotations

import asyncio

from test_embed_example import Client, FakeClock, settle

from groupcoord.adapters.runtime.embedded import EmbeddedCoordinator
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator
from groupcoord.core.errors import Error

CONFIG = CoordinatorConfig(offsets_topic_num_partitions=1)


def commit_body(partition: int, offset: int) -> dict:
    return {"generation_id_or_member_epoch": -1, "member_id": "",
            "topics": [{"name": "t", "partitions": [{"partition_index": partition, "committed_offset": offset}]}]}


def test_a_failed_core_is_replaced_and_what_it_held_is_answered(monkeypatch):
    async def scenario():
        clock = FakeClock()
        service = EmbeddedCoordinator(CONFIG, clock=clock, new_uuid=lambda: "u")
        await service.start()
        c = Client(service, "c")
        try:
            acked = await c.call("OffsetCommit", 8, commit_body(0, 42))
            assert acked.topics[0].partitions[0].error_code is Error.NONE

            parked = c.send("JoinGroup", 3, {  # v3: joins at once, parked in the initial delay
                "group_id": "h", "member_id": "", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
                "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
            await settle()
            assert not parked.done()

            real = Coordinator._finish_write

            def raising(self, write, error):
                real(self, write, error)  # the commit's answer is made, then lost with the step
                raise RuntimeError("planted")

            monkeypatch.setattr(Coordinator, "_finish_write", raising)
            failing = c.send("OffsetCommit", 8, commit_body(1, 43))
            await settle()
            monkeypatch.undo()
            failed_answer = failing.result()
            assert failed_answer.topics[0].partitions[0].error_code is Error.NOT_COORDINATOR
            assert parked.result().error_code is Error.NOT_COORDINATOR
            assert service.replaced == 1
            assert service.coordinator.failed is None and service.coordinator.owned_partitions() == {0: "active"}
            assert service._runner.timers.armed() == {k: v for k, v in service._runner.timers.armed().items()
                                                      if k.kind == "expire"}  # the join timer went with it

            fetched = await c.call("OffsetFetch", 5, {"topics": None})
            # 42 was acknowledged; 43 completed in storage (its client was told NOT_COORDINATOR)
            assert {p.partition_index: p.committed_offset for t in fetched.groups[0].topics
                    for p in t.partitions} == {0: 42, 1: 43}
            again = await c.call("OffsetCommit", 8, commit_body(2, 44))
            assert again.topics[0].partitions[0].error_code is Error.NONE
        finally:
            await service.stop()

    asyncio.run(scenario())


def test_a_store_that_raises_fails_the_write_and_the_writer_goes_on():
    """A storage bug (not a StorageError) fails that one write: the commit is answered with
    Kafka's translation of KAFKA_STORAGE_ERROR, and the next write is written."""
    from groupcoord.adapters.storage.memory import MemoryStorage

    class Broken(MemoryStorage):
        broken = True

        async def append(self, partition, records):
            if self.broken:
                self.broken = False
                raise ValueError("planted")
            return await super().append(partition, records)

    async def scenario():
        service = EmbeddedCoordinator(CONFIG, clock=FakeClock(), new_uuid=lambda: "u", storage=Broken())
        await service.start()
        c = Client(service, "c")
        try:
            failed = await c.call("OffsetCommit", 8, commit_body(0, 42))
            assert failed.topics[0].partitions[0].error_code is Error.NOT_COORDINATOR
            acked = await c.call("OffsetCommit", 8, commit_body(0, 43))
            assert acked.topics[0].partitions[0].error_code is Error.NONE
        finally:
            await service.stop()

    asyncio.run(scenario())
