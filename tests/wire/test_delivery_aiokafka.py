"""aiokafka end to end (issue 36's point 4): an idempotent producer sends 10,000 keyed messages
to a ``groupcoord serve`` subprocess on SQLite; a group of three members, each its own process,
reads them with commits, while one member is killed with SIGKILL (taken out by its session
timeout) and ``serve`` is killed with SIGKILL and restarted on its data directory and port
(tests/support/delivery_run.py); ``groupcoord.testing.check_delivery`` finds every acknowledged
record read exactly once, in partition order, no offset skipped. Then aiokafka's own README
examples, producer and consumer, run against a server as written."""

from __future__ import annotations

import pytest
from delivery_run import GROUP, N, delivery_run
from doc_examples import Example, consume_what_is_produced


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return delivery_run("aiokafka", tmp_path_factory.mktemp("delivery"))


def test_every_acknowledged_record_is_read_once_across_a_killed_member_and_a_killed_serve(run):
    assert run.result.ok, run.result.report()
    assert run.result.acknowledged == N and run.result.reads == {GROUP: N}
    assert run.reads[run.victim], "the killed member had read its share before it was killed"
    print(run.result.summary, run.phases)


# aiokafka's README (0.14.0, as installed), "AIOKafkaConsumer": 'localhost:9092' replaced by the
# server's address.
CONSUMER = """\
from aiokafka import AIOKafkaConsumer
import asyncio

async def consume():
    consumer = AIOKafkaConsumer(
        'my_topic', 'my_other_topic',
        bootstrap_servers='BOOTSTRAP',
        group_id="my-group")
    # Get cluster layout and join group `my-group`
    await consumer.start()
    try:
        # Consume messages
        async for msg in consumer:
            print("consumed: ", msg.topic, msg.partition, msg.offset,
                  msg.key, msg.value, msg.timestamp)
    finally:
        # Will leave consumer group; perform autocommit if enabled.
        await consumer.stop()

asyncio.run(consume())
"""

# aiokafka's README (0.14.0, as installed), "AIOKafkaProducer": 'localhost:9092' replaced by the
# server's address.
PRODUCER = """\
from aiokafka import AIOKafkaProducer
import asyncio

async def send_one():
    producer = AIOKafkaProducer(bootstrap_servers='BOOTSTRAP')
    # Get cluster layout and initial topic/partition leadership information
    await producer.start()
    try:
        # Produce message
        await producer.send_and_wait("my_topic", b"Super message")
    finally:
        # Wait for all pending messages to be delivered or expire.
        await producer.stop()

asyncio.run(send_one())
"""


def test_the_readme_producer_and_consumer_run_as_written(groupcoord_server, tmp_path):
    bootstrap = groupcoord_server.bootstrap
    consumer = Example(CONSUMER.replace("BOOTSTRAP", bootstrap), tmp_path / "consumer.py")
    runs = []

    def produce():
        runs.append(Example(PRODUCER.replace("BOOTSTRAP", bootstrap), tmp_path / f"producer{len(runs)}.py").finish())

    try:
        # The consumer starts at the log's end (auto_offset_reset 'latest', the default): it goes first.
        consume_what_is_produced(consumer, produce, bootstrap, "my-group",
                                 lambda: consumer.printed("consumed:  my_topic 0 ") >= 1)
        assert consumer.printed("None b'Super message'") >= 1, consumer.output()
    finally:
        consumer.stop()
    assert [r.value for r in groupcoord_server.records("my_topic")] == [b"Super message"] * len(runs)
