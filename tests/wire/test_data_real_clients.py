"""Real clients produce and consume through the ``groupcoord_server`` fixture: kafka-python,
aiokafka and confluent-kafka each send 200 keyed messages with an idempotent producer and a
compression codec it has (gzip for the Python clients, lz4 for librdkafka), then a consumer
group reads them: a first member reads part and commits, a second takes over from the
commits and reads the rest. Every message is read exactly once, in partition order."""

from __future__ import annotations

import asyncio
import time

import pytest

N = 200
TOPIC = "orders"
DEADLINE_S = 30


def messages():
    return [(b"k%d" % (i % 10), b"v%d" % i) for i in range(N)]


@pytest.fixture
def server(groupcoord_server_factory):
    return groupcoord_server_factory({TOPIC: 3})


def check(server, delivered, consumed, read_log=True):
    """``delivered``: (key, value, partition, offset) the producer was told; ``consumed``: the
    same as the group read them, in order."""
    assert len(delivered) == N and sorted(v for _k, v, _p, _o in delivered) == sorted(v for _k, v in messages())
    assert len(consumed) == N, f"read {len(consumed)} of {N}"
    assert sorted(consumed, key=lambda r: (r[2], r[3])) == sorted(delivered, key=lambda r: (r[2], r[3]))
    for partition in {p for _k, _v, p, _o in consumed}:
        offsets = [o for _k, _v, p, o in consumed if p == partition]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    keys = {}
    for key, _v, partition, _o in delivered:  # one key, one partition
        assert keys.setdefault(key, partition) == partition
    if read_log:
        log = {(r.partition, r.offset): (r.key, r.value) for r in server.records(TOPIC)}
        assert log == {(p, o): (k, v) for k, v, p, o in delivered}


def idempotent(server) -> bool:
    """The producer asked for a producer id (InitProducerId): its batches carried sequences."""
    return server.call(lambda: server.server.data_log.producer_ids.next_id) == 1


def until(condition, what):
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")


def test_kafka_python(server):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    producer = KafkaProducer(bootstrap_servers=server.bootstrap, enable_idempotence=True, acks="all",
                             compression_type="gzip", linger_ms=5)
    try:
        futures = [(k, v, producer.send(TOPIC, key=k, value=v)) for k, v in messages()]
        producer.flush(DEADLINE_S)
        delivered = [(k, v, f.get(DEADLINE_S).partition, f.get(DEADLINE_S).offset) for k, v, f in futures]
    finally:
        producer.close(5)
    assert idempotent(server)
    consumed = []

    def member(stop_at):
        consumer = KafkaConsumer(TOPIC, bootstrap_servers=server.bootstrap, group_id="billing",
                                 auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100,
                                 max_poll_records=30)
        try:
            def read():
                batch = consumer.poll(timeout_ms=200)
                for tp, records in batch.items():
                    consumed.extend((r.key, r.value, tp.partition, r.offset) for r in records)
                    consumer.commit({TopicPartition(TOPIC, tp.partition): OffsetAndMetadata(records[-1].offset + 1,
                                                                                            "", -1)})
                return len(consumed) >= stop_at
            until(read, f"{stop_at} messages")
        finally:
            consumer.close()

    member(N // 2)
    first = len(consumed)
    member(N)
    assert first < N  # the second member read the rest, from the first one's commits
    check(server, delivered, consumed)


def test_aiokafka(server):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.structs import OffsetAndMetadata

    async def main():
        producer = AIOKafkaProducer(bootstrap_servers=server.bootstrap, enable_idempotence=True,
                                    compression_type="gzip", linger_ms=5)
        await producer.start()
        try:
            futures = [(k, v, await producer.send(TOPIC, key=k, value=v)) for k, v in messages()]
            delivered = [(k, v, m.partition, m.offset) for k, v, m in [(k, v, await f) for k, v, f in futures]]
        finally:
            await producer.stop()
        consumed = []

        async def member(stop_at):
            consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=server.bootstrap, group_id="billing",
                                        auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100)
            await consumer.start()
            try:
                deadline = time.monotonic() + DEADLINE_S
                while len(consumed) < stop_at:
                    assert time.monotonic() < deadline, f"timed out waiting for {stop_at} messages"
                    for tp, records in (await consumer.getmany(timeout_ms=200, max_records=30)).items():
                        consumed.extend((r.key, r.value, tp.partition, r.offset) for r in records)
                        await consumer.commit({TopicPartition(TOPIC, tp.partition):
                                               OffsetAndMetadata(records[-1].offset + 1, "")})
            finally:
                await consumer.stop()

        await member(N // 2)
        assert len(consumed) < N  # the second member reads the rest, from the first one's commits
        await member(N)
        return delivered, consumed

    delivered, consumed = asyncio.run(asyncio.wait_for(main(), DEADLINE_S * 3))
    assert idempotent(server)
    check(server, delivered, consumed)


def test_confluent_kafka(server):
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": server.bootstrap, "enable.idempotence": True,
                         "compression.type": "lz4", "linger.ms": 5})
    delivered, errors = [], []

    def on_delivery(error, message):
        if error is not None:
            errors.append(error)
        else:
            delivered.append((message.key(), message.value(), message.partition(), message.offset()))

    for k, v in messages():
        producer.produce(TOPIC, key=k, value=v, on_delivery=on_delivery)
    assert producer.flush(DEADLINE_S) == 0 and errors == []
    assert idempotent(server)
    consumed = []

    def member(stop_at):
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "billing",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        consumer.subscribe([TOPIC])
        try:
            def read():
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    consumed.append((message.key(), message.value(), message.partition(), message.offset()))
                    consumer.commit(offsets=[TopicPartition(TOPIC, message.partition(), message.offset() + 1)],
                                    asynchronous=False)
                return len(consumed) >= stop_at
            until(read, f"{stop_at} messages")
        finally:
            consumer.close()

    member(N // 2)
    assert len(consumed) < N  # the second member reads the rest, from the first one's commits
    member(N)
    # lz4 batches: the log's own reading needs an lz4 library, which the suite does not install
    check(server, delivered, consumed, read_log=False)
