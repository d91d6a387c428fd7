"""confluent-kafka end to end (issue 36's point 4): an idempotent producer sends 10,000 keyed
messages to a ``groupcoord serve`` subprocess on SQLite; a group of three members, each its own
process, reads them with commits, while one member is killed with SIGKILL (taken out by its
session timeout) and ``serve`` is killed with SIGKILL and restarted on its data directory and
port (tests/support/delivery_run.py); ``groupcoord.testing.check_delivery`` finds every
acknowledged record read exactly once, in partition order, no offset skipped, and catches a
record taken out of that run's data and one read twice. Then confluent-kafka's own README
examples, producer and consumer, run against a server as written."""

from __future__ import annotations

import pytest
from delivery_run import GROUP, N, delivery_run
from doc_examples import Example
from server_harness import wait_until

from groupcoord.testing import check_delivery


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return delivery_run("confluent", tmp_path_factory.mktemp("delivery"))


def test_every_acknowledged_record_is_read_once_across_a_killed_member_and_a_killed_serve(run):
    assert run.result.ok, run.result.report()
    assert run.result.acknowledged == N and run.result.reads == {GROUP: N}
    assert run.reads[run.victim], "the killed member had read its share before it was killed"
    print(run.result.summary, run.phases)


def test_the_check_catches_a_record_removed_from_or_read_twice_in_a_real_run(run):
    reads = {name: list(records) for name, records in run.reads.items()}
    survivor = next(name for name in reads if name != run.victim)
    lost = reads[survivor].pop(len(reads[survivor]) // 2)
    result = check_delivery(run.acked, {GROUP: reads}, log=run.bounds)
    assert [(f.kind, f.partition, f.offset) for f in result.findings] == [("lost", lost[1], lost[2])], result.report()
    assert result.verdict == "findings" and "1 lost" in result.summary

    reads = {name: list(records) for name, records in run.reads.items()}
    again = reads[run.victim][-1]  # the killed member's last record, read again by a survivor
    reads[survivor].append(again)
    result = check_delivery(run.acked, {GROUP: reads}, log=run.bounds)
    (finding,) = result.findings
    assert (finding.kind, finding.partition, finding.offset) == ("duplicate", again[1], again[2])
    assert f"consumer {run.victim!r}" in finding.detail and f"consumer {survivor!r}" in finding.detail


# confluent-kafka-python's README, "Basic Consumer example" (confluent-kafka 2.16.1, as installed):
# 'mybroker' replaced by the server's address.
CONSUMER = """\
from confluent_kafka import Consumer

c = Consumer({
    'bootstrap.servers': 'BOOTSTRAP',
    'group.id': 'mygroup',
    'auto.offset.reset': 'earliest'
})

c.subscribe(['mytopic'])

while True:
    msg = c.poll(1.0)

    if msg is None:
        continue
    if msg.error():
        print(f"Consumer error: {msg.error()}")
        continue

    print(f"Received message: {msg.value().decode('utf-8')}")

c.close()
"""

# confluent-kafka-python's README, "Basic Producer example" as it stood before 2.16's README made
# it serialize through a Schema Registry (which that version needs: the json and schemaregistry
# extras and a registry at localhost:8081, neither of which is a Kafka broker's part):
# 'mybroker1,mybroker2' replaced by the server's address, ``some_data_source`` (the example's
# own placeholder) given.
PRODUCER = """\
from confluent_kafka import Producer

some_data_source = ['first', 'second', 'third']

p = Producer({'bootstrap.servers': 'BOOTSTRAP'})

def delivery_report(err, msg):
    \"\"\" Called once for each message produced to indicate delivery result.
        Triggered by poll() or flush(). \"\"\"
    if err is not None:
        print('Message delivery failed: {}'.format(err))
    else:
        print('Message delivered to {} [{}]'.format(msg.topic(), msg.partition()))

for data in some_data_source:
    # Trigger any available delivery report callbacks from previous produce() calls
    p.poll(0)

    # Asynchronously produce a message, the delivery report callback
    # will be triggered from poll() above, or flush() below, when the message has
    # been successfully delivered or failed permanently.
    p.produce('mytopic', data.encode('utf-8'), callback=delivery_report)

# Wait for any outstanding messages to be delivered and delivery report
# callbacks to be triggered.
p.flush()
"""


def test_the_readme_producer_and_consumer_run_as_written(groupcoord_server, tmp_path):
    bootstrap = groupcoord_server.bootstrap
    producer = Example(PRODUCER.replace("BOOTSTRAP", bootstrap), tmp_path / "producer.py")
    printed = producer.finish()
    assert printed.count("Message delivered to mytopic [0]") == 3, printed
    consumer = Example(CONSUMER.replace("BOOTSTRAP", bootstrap), tmp_path / "consumer.py")
    try:
        wait_until(lambda: consumer.printed("Received message: third"), 60, consumer.output)
        assert [line for line in consumer.lines if line.startswith("Received")] == [
            "Received message: first", "Received message: second", "Received message: third"]
    finally:
        consumer.stop()
    assert [r.value for r in groupcoord_server.records("mytopic")] == [b"first", b"second", b"third"]
