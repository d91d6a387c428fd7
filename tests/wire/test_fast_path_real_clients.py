"""Real clients' offset commits take the server's OffsetCommit fast path (``wire.fast_frames``):
the general path would answer them alike, only slower, so a test of answers alone would not see
a client fall back to it. In process: the fast path's reader is wrapped to count what it read."""

from __future__ import annotations

import asyncio
import collections

import pytest
from server_harness import InProcessServer

from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.wire import handlers
from groupcoord.core.config import CoordinatorConfig

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def counted(monkeypatch):
    """(the server, a Counter of (OffsetCommit version, read by the fast path))."""
    read = handlers.read_offset_commit
    seen: collections.Counter = collections.Counter()

    def counting(frame: bytes, max_version: int):
        fields = read(frame, max_version)
        seen[(int.from_bytes(frame[2:4], "big"), fields is not None)] += 1
        return fields

    monkeypatch.setattr(handlers, "read_offset_commit", counting)
    server = InProcessServer(config=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
                             catalog=apis.TopicCatalog({"t6": 6}))
    yield server, seen
    server.stop()


def _only_fast(seen: collections.Counter) -> bool:
    return sum(seen.values()) >= 1 and all(fast for (_version, fast) in seen)


def test_confluent_kafka_commits_take_the_fast_path(counted):
    from confluent_kafka import Consumer, TopicPartition
    server, seen = counted
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{server.port}", "group.id": "confluent",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("t6", 0, 5)], asynchronous=False)
    finally:
        consumer.close()
    assert _only_fast(seen), seen


def test_kafka_python_commits_take_the_fast_path(counted):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    server, seen = counted
    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{server.port}", group_id="kafka-python",
                             enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition("t6", 0)])
        consumer.commit({TopicPartition("t6", 0): OffsetAndMetadata(7, "", -1)})
    finally:
        consumer.close()
    assert _only_fast(seen), seen


def test_aiokafka_commits_take_the_fast_path(counted):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition
    server, seen = counted

    async def commit():
        consumer = AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{server.port}", group_id="aiokafka",
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition("t6", 0)])
            await consumer.commit({TopicPartition("t6", 0): 9})
        finally:
            await consumer.stop()

    asyncio.run(asyncio.wait_for(commit(), 60))
    assert _only_fast(seen), seen
