"""One real Kafka consumer in its own process, driven by the real-client tests.

    python client_worker.py CLIENT BOOTSTRAP GROUP TOPIC [--assignor A] [--instance-id I] ...

CLIENT is kafka-python, confluent or aiokafka. The consumer subscribes to TOPIC and polls.
It prints one JSON object per line on stdout:

    {"event": "ready"}                             the consumer exists
    {"event": "assignment", "partitions": [...]}   whenever its assignment changes
    {"event": "committed", ...}                    answers to commands
    {"event": "error", "error": "..."}

and reads commands, one JSON object per line, on stdin:

    {"cmd": "commit", "offsets": {"0": 5, "1": 7}}     synchronous commit (partition -> offset)
    {"cmd": "committed", "partitions": [0, 1]}          read committed offsets (OffsetFetch)
    {"cmd": "close"}                                    close the consumer (a dynamic member leaves)

Every run is bounded: the worker exits by itself after --lifetime seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
import time
import traceback


def emit(**fields) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def stdin_commands() -> queue.Queue:
    q: queue.Queue = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            line = line.strip()
            if line:
                q.put(json.loads(line))
        q.put({"cmd": "close"})  # stdin closed: the test is gone

    threading.Thread(target=read, daemon=True).start()
    return q


def run_kafka_python(args, commands: queue.Queue) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    classes = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
               "cooperative-sticky": CooperativeStickyAssignor}
    assignors = [classes[a] for a in args.assignor.split(",")]
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id,
        group_instance_id=args.instance_id, session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=args.heartbeat_ms, max_poll_interval_ms=max(args.session_ms * 3, 30000),
        partition_assignment_strategy=assignors, enable_auto_commit=False, auto_offset_reset="earliest",
        request_timeout_ms=max(args.session_ms + 5000, 30000), fetch_max_wait_ms=200)
    consumer.subscribe([args.topic])
    emit(event="ready")
    last = None
    deadline = time.time() + args.lifetime
    while time.time() < deadline:
        # Not shorter: kafka-python 3.0.12 loses a rebalance that completes after poll() timed out
        # while waiting for it (join_group_async never consumes the finished join task once
        # need_rejoin() is False: no assignment, heartbeats stay disabled, the member expires).
        consumer.poll(timeout_ms=1000)
        now = sorted(tp.partition for tp in consumer.assignment())
        if now != last:
            last = now
            emit(event="assignment", partitions=now)
        try:
            cmd = commands.get_nowait()
        except queue.Empty:
            continue
        if cmd["cmd"] == "close":
            break
        if cmd["cmd"] == "commit":
            consumer.commit({TopicPartition(args.topic, int(p)): OffsetAndMetadata(o, "", -1)
                             for p, o in cmd["offsets"].items()})
            emit(event="committed")
        elif cmd["cmd"] == "committed":
            got = {str(p): consumer.committed(TopicPartition(args.topic, p)) for p in cmd["partitions"]}
            emit(event="committed_offsets", offsets=got)
    consumer.close()
    emit(event="closed")


def run_confluent(args, commands: queue.Queue) -> None:
    from confluent_kafka import Consumer, TopicPartition

    conf = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.client_id,
            "session.timeout.ms": args.session_ms, "heartbeat.interval.ms": args.heartbeat_ms,
            "partition.assignment.strategy": args.assignor, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": 200,
            "topic.metadata.refresh.interval.ms": 1000, "log_level": 3}
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    consumer = Consumer(conf)
    consumer.subscribe([args.topic])
    emit(event="ready")
    last = None
    deadline = time.time() + args.lifetime
    while time.time() < deadline:
        consumer.poll(0.1)
        now = sorted(tp.partition for tp in consumer.assignment())
        if now != last:
            last = now
            emit(event="assignment", partitions=now)
        try:
            cmd = commands.get_nowait()
        except queue.Empty:
            continue
        if cmd["cmd"] == "close":
            break
        if cmd["cmd"] == "commit":
            consumer.commit(offsets=[TopicPartition(args.topic, int(p), o) for p, o in cmd["offsets"].items()],
                            asynchronous=False)
            emit(event="committed")
        elif cmd["cmd"] == "committed":
            got = consumer.committed([TopicPartition(args.topic, p) for p in cmd["partitions"]], timeout=10)
            emit(event="committed_offsets", offsets={str(tp.partition): (tp.offset if tp.offset >= 0 else None)
                                                     for tp in got})
    consumer.close()
    emit(event="closed")


def run_aiokafka(args, commands: queue.Queue) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.structs import OffsetAndMetadata

    classes = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    assignors = tuple(classes[a] for a in args.assignor.split(","))

    async def main() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id,
            group_instance_id=args.instance_id, session_timeout_ms=args.session_ms,
            heartbeat_interval_ms=args.heartbeat_ms, partition_assignment_strategy=assignors,
            enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=200,
            max_poll_interval_ms=max(args.session_ms * 3, 30000), request_timeout_ms=max(args.session_ms + 5000, 40000),
            metadata_max_age_ms=1000)
        await consumer.start()
        consumer.subscribe([args.topic])
        emit(event="ready")
        last = None
        deadline = time.time() + args.lifetime
        while time.time() < deadline:
            await consumer.getmany(timeout_ms=100)
            now = sorted(tp.partition for tp in consumer.assignment())
            if now != last:
                last = now
                emit(event="assignment", partitions=now)
            try:
                cmd = commands.get_nowait()
            except queue.Empty:
                continue
            if cmd["cmd"] == "close":
                break
            if cmd["cmd"] == "commit":
                await consumer.commit({TopicPartition(args.topic, int(p)): OffsetAndMetadata(o, "")
                                       for p, o in cmd["offsets"].items()})
                emit(event="committed")
            elif cmd["cmd"] == "committed":
                got = {str(p): await consumer.committed(TopicPartition(args.topic, p)) for p in cmd["partitions"]}
                emit(event="committed_offsets", offsets=got)
        await consumer.stop()
        emit(event="closed")

    asyncio.run(main())


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("client", choices=["kafka-python", "confluent", "aiokafka"])
    p.add_argument("bootstrap")
    p.add_argument("group")
    p.add_argument("topic")
    p.add_argument("--assignor", default="range", help="assignor names, in preference order, comma separated")
    p.add_argument("--client-id", default="worker")
    p.add_argument("--instance-id", default=None)
    p.add_argument("--session-ms", type=int, default=3000)
    p.add_argument("--heartbeat-ms", type=int, default=300)
    p.add_argument("--lifetime", type=float, default=120)
    args = p.parse_args()
    if os.environ.get("WORKER_LOG_DIR"):  # debugging: the client library's own log, per worker
        import logging
        logging.basicConfig(filename=os.path.join(os.environ["WORKER_LOG_DIR"], f"{args.client_id}.log"),
                            level=logging.DEBUG, format="%(asctime)s %(threadName)s %(name)s %(message)s")
    commands = stdin_commands()
    try:
        {"kafka-python": run_kafka_python, "confluent": run_confluent, "aiokafka": run_aiokafka}[args.client](args, commands)
    except Exception as e:
        emit(event="error", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-3000:])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
