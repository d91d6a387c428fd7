"""kafka-python end to end (issue 36's point 4): an idempotent producer sends 10,000 keyed
messages to a ``groupcoord serve`` subprocess on SQLite; a group of three members, each its own
process, reads them with commits, while one member is killed with SIGKILL (taken out by its
session timeout) and ``serve`` is killed with SIGKILL and restarted on its data directory and
port (tests/support/delivery_run.py); ``groupcoord.testing.check_delivery`` finds every
acknowledged record read exactly once, in partition order, no offset skipped. Then
kafka-python's own README examples, producer and consumer, run against a server as written."""

from __future__ import annotations

import pytest
from delivery_run import GROUP, N, delivery_run
from doc_examples import Example, consume_what_is_produced


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return delivery_run("kafka-python", tmp_path_factory.mktemp("delivery"))


def test_every_acknowledged_record_is_read_once_across_a_killed_member_and_a_killed_serve(run):
    assert run.result.ok, run.result.report()
    assert run.result.acknowledged == N and run.result.reads == {GROUP: N}
    assert run.reads[run.victim], "the killed member had read its share before it was killed"
    print(run.result.summary, run.phases)


# kafka-python's README (3.0.12, as installed), "KafkaConsumer", its second block (a consumer
# group): the topic is the producer example's, and the server's address is given
# (bootstrap_servers: the example relies on the default, localhost:9092).
CONSUMER = """\
# join a consumer group for dynamic partition assignment and offset commits
from kafka import KafkaConsumer
consumer = KafkaConsumer('foobar', group_id='my_favorite_group', bootstrap_servers='BOOTSTRAP')
for msg in consumer:
    print (msg)
"""

# kafka-python's README (3.0.12, as installed), "KafkaProducer": its first four blocks one after
# the other, 'localhost:1234' replaced by the server's address.
PRODUCER = """\
from kafka import KafkaProducer
producer = KafkaProducer(bootstrap_servers='BOOTSTRAP')
for _ in range(100):
    # Fire-and-forget: send() is async and returns before delivery
    producer.send('foobar', b'some_message_bytes')

# To check the status of an async message delivery, use .get()
future = producer.send('foobar', b'another_message')
# future.get() will block until it can return the result or raise on error
result = future.get(timeout=60)

# Block until all pending messages are at least put on the network
# NOTE: This does not guarantee delivery or success! It is really
# only useful if you configure internal batching using linger_ms
producer.flush()

# Use a key for hashed-partitioning
producer.send('foobar', key=b'foo', value=b'bar')
"""


def test_the_readme_producer_and_consumer_run_as_written(groupcoord_server, tmp_path):
    bootstrap = groupcoord_server.bootstrap
    consumer = Example(CONSUMER.replace("BOOTSTRAP", bootstrap), tmp_path / "consumer.py")
    runs = []

    def produce():
        runs.append(Example(PRODUCER.replace("BOOTSTRAP", bootstrap), tmp_path / f"producer{len(runs)}.py").finish())

    try:
        # The consumer starts at the log's end (auto_offset_reset 'latest', the default): it goes first.
        consume_what_is_produced(consumer, produce, bootstrap, "my_favorite_group",
                                 lambda: consumer.printed("key=b'foo', value=b'bar'") >= 1)
        assert consumer.printed("value=b'some_message_bytes'") >= 100, consumer.output()
        assert consumer.printed("value=b'another_message'") >= 1, consumer.output()
    finally:
        consumer.stop()
    values = [r.value for r in groupcoord_server.records("foobar")]
    assert values == len(runs) * ([b"some_message_bytes"] * 100 + [b"another_message", b"bar"])
