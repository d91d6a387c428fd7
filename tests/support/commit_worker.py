"""A real Kafka consumer that commits offsets as fast as its coordinator acknowledges them, for
the crash and failover tests.

    python commit_worker.py CLIENT MODE BOOTSTRAP GROUP TOPIC PARTITIONS ACKS --lifetime S

CLIENT is kafka-python or confluent; MODE is ``assign`` (a simple group: commits without
membership) or ``subscribe`` (a member of GROUP, committing for the partitions it is assigned).
Each commit is synchronous and sets every partition's offset to the same value, one higher
than the previous attempt, so offsets only grow. After each commit the client acknowledged,
one line ``{"n": N, "partitions": [...]}`` is appended to the file ACKS (flushed), which the
test reads: every offset in it was acknowledged. Failed commits are retried with the next
value after a short pause. The worker stops after --lifetime seconds, when its stdin closes,
or when the file ``ACKS.stop`` exists.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("client", choices=["kafka-python", "confluent"])
    p.add_argument("mode", choices=["assign", "subscribe"])
    p.add_argument("bootstrap")
    p.add_argument("group")
    p.add_argument("topic")
    p.add_argument("partitions", type=int)
    p.add_argument("acks")
    p.add_argument("--lifetime", type=float, default=300)
    p.add_argument("--session-ms", type=int, default=6000)
    args = p.parse_args()
    stop = threading.Event()

    def watch_stdin() -> None:
        for _line in sys.stdin:
            pass
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    deadline = time.monotonic() + args.lifetime
    out = open(args.acks, "a", encoding="ascii")

    def running() -> bool:
        return not stop.is_set() and time.monotonic() < deadline and not os.path.exists(args.acks + ".stop")

    def acked(n: int, partitions: list[int]) -> None:
        out.write(json.dumps({"n": n, "partitions": partitions}) + "\n")
        out.flush()

    if args.client == "kafka-python":
        run_kafka_python(args, running, acked)
    else:
        run_confluent(args, running, acked)
    out.close()
    return 0


def run_kafka_python(args, running, acked) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, client_id=f"{args.group}-kp",
        enable_auto_commit=False, session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.session_ms // 6,
        max_poll_interval_ms=60000, request_timeout_ms=max(args.session_ms + 5000, 10000),
        reconnect_backoff_ms=20, reconnect_backoff_max_ms=200, retry_backoff_ms=50, fetch_max_wait_ms=100,
        metadata_max_age_ms=5000)
    everything = [TopicPartition(args.topic, p) for p in range(args.partitions)]
    if args.mode == "assign":
        consumer.assign(everything)
    else:
        consumer.subscribe([args.topic])
    n = 0
    while running():
        if args.mode == "subscribe":
            consumer.poll(timeout_ms=1000)
        owned = sorted(tp.partition for tp in consumer.assignment())
        if not owned:
            continue
        n += 1
        try:
            consumer.commit({TopicPartition(args.topic, p): OffsetAndMetadata(n, "", -1) for p in owned})
        except Exception as e:
            print(f"commit {n} failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            time.sleep(0.05)  # a pause before retrying (the coordinator is restarting)
            continue
        acked(n, owned)
    try:
        consumer.close(autocommit=False)
    except Exception:
        pass


def run_confluent(args, running, acked) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    conf = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": f"{args.group}-cf",
            "enable.auto.commit": False, "session.timeout.ms": args.session_ms,
            "heartbeat.interval.ms": args.session_ms // 6, "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200, "retry.backoff.ms": 50, "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 5000, "log_level": 0}
    consumer = Consumer(conf)
    if args.mode == "assign":
        consumer.assign([TopicPartition(args.topic, p) for p in range(args.partitions)])
    else:
        consumer.subscribe([args.topic])
    n = 0
    while running():
        consumer.poll(0.02)
        owned = sorted(tp.partition for tp in consumer.assignment())
        if not owned:
            continue
        n += 1
        try:
            result = consumer.commit(offsets=[TopicPartition(args.topic, p, n) for p in owned], asynchronous=False)
        except KafkaException as e:
            print(f"commit {n} failed: {e}", file=sys.stderr, flush=True)
            time.sleep(0.05)  # a pause before retrying (the coordinator is restarting)
            continue
        if any(tp.error is not None for tp in result or []):
            print(f"commit {n} failed: {[(tp.partition, str(tp.error)) for tp in result]}", file=sys.stderr, flush=True)
            continue
        acked(n, owned)
    try:
        consumer.close()
    except Exception:
        pass


if __name__ == "__main__":
    sys.exit(main())
