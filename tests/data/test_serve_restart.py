"""``groupcoord serve`` keeps its partition log beside the group records (SQLite, the default):
what a producer had acknowledged, an auto-created topic and a group's commits are all there after
the server is killed with SIGKILL and started again on the same data directory."""

import signal
import time

from server_harness import ServerProcess

N = 200


def test_a_killed_serve_restarts_with_every_acknowledged_record(tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition

    data_dir = str(tmp_path / "data")
    server = ServerProcess("--data-dir", data_dir, topics=("orders=2",))
    try:
        producer = Producer({"bootstrap.servers": server.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5})
        acked = []
        for i in range(N):
            topic = "orders" if i % 2 else "auto"  # "auto": created by the producer's Metadata request
            producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i,
                             on_delivery=lambda e, m: acked.append((m.topic(), m.partition(), m.offset(), m.value()))
                             if e is None else None)
        assert producer.flush(30) == 0 and len(acked) == N
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "g", "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition("orders", 0, 3)], asynchronous=False)
        consumer.close()
    finally:
        server.signal(signal.SIGKILL)
        server.proc.wait(10)
        server.stop()
    restarted = ServerProcess("--data-dir", data_dir, topics=("orders=2",))
    try:
        consumer = Consumer({"bootstrap.servers": restarted.bootstrap, "group.id": "fresh",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["orders", "auto"])  # a consumer creates no topic: "auto" must have come back
        read = []
        deadline = time.monotonic() + 30
        while len(read) < N and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                read.append((message.topic(), message.partition(), message.offset(), message.value()))
        committed = Consumer({"bootstrap.servers": restarted.bootstrap, "group.id": "g"})
        (offset,) = committed.committed([TopicPartition("orders", 0)], timeout=10)
        committed.close()
        consumer.close()
    finally:
        restarted.stop()
    assert sorted(read) == sorted(acked)
    assert offset.offset == 3
