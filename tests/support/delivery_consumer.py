"""One member of a consumer group that reads and commits, in its own process, for the delivery
tests (tests/support/delivery_run.py).

    python delivery_consumer.py CLIENT BOOTSTRAP GROUP TOPIC OUT --name N [--session-ms MS] ...

CLIENT is kafka-python, confluent or aiokafka. The consumer subscribes to TOPIC and, for each
batch a poll gives, commits the offsets after it (synchronously) and, once the commit is
acknowledged, appends the batch's records to OUT, one JSON line each, in the order the client
delivered them (``{"p": partition, "o": offset, "k": key, "v": value}``, key and value as
latin-1 text), flushed at once: OUT is what this member processed, each record covered by a
commit. A commit the group refuses (a rebalance under way, the member fenced) drops the batch
and seeks back to its first offsets, so the records are read again, by this member or by the
partition's next owner from the commit; a commit that could not reach the coordinator (the
server restarting) is sent again until it is answered.

Events on stdout, one JSON object a line: ready, assignment (partitions), held, closed, error.
Commands on stdin: ``{"cmd": "hold"}`` (finish the batch in hand, then stop polling but stay a
member: the client heartbeats on its own), ``{"cmd": "close"}`` (close: a clean leave). The
process exits by itself after --lifetime seconds.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import time
import traceback

COMMIT_DEADLINE_S = 60


def emit(**fields) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def stdin_commands() -> queue.Queue:
    q: queue.Queue = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            if line.strip():
                q.put(json.loads(line))
        q.put({"cmd": "close"})  # stdin closed: the test is gone

    threading.Thread(target=read, daemon=True).start()
    return q


class Member:
    """What every client's loop shares: the output, the assignment events, the commands."""

    def __init__(self, args) -> None:
        self.args = args
        self.out = open(args.out, "a", encoding="utf-8")
        self.commands = stdin_commands()
        self.assignment: list[int] | None = None
        self.holding = False
        self.closing = False
        self.deadline = time.monotonic() + args.lifetime
        self.dropped = 0

    def running(self) -> bool:
        return not self.closing and time.monotonic() < self.deadline

    def assigned(self, partitions) -> None:
        now = sorted(partitions)
        if now != self.assignment:
            self.assignment = now
            emit(event="assignment", partitions=now)

    def command(self, wait: float = 0.0) -> None:
        try:
            cmd = self.commands.get(timeout=wait) if wait else self.commands.get_nowait()
        except queue.Empty:
            return
        if cmd["cmd"] == "close":
            self.closing = True
        elif cmd["cmd"] == "hold":
            self.holding = True
            emit(event="held")

    def processed(self, records) -> None:
        for p, o, k, v in records:
            self.out.write(json.dumps({"p": p, "o": o, "k": None if k is None else k.decode("latin-1"),
                                       "v": None if v is None else v.decode("latin-1")}) + "\n")
        self.out.flush()

    def handle(self, records, commit, seek) -> None:
        """``records``: [(partition, offset, key, value)] as delivered; ``commit(offsets)`` returns
        True (acknowledged) or False (refused by the group), raises on anything else (retried);
        ``seek(partition, offset)`` moves the position back."""
        if not records:
            return
        nxt: dict[int, int] = {}
        first: dict[int, int] = {}
        for p, o, _k, _v in records:
            nxt[p] = o + 1
            first.setdefault(p, o)
        give_up = time.monotonic() + COMMIT_DEADLINE_S
        while True:
            try:
                accepted = commit(nxt)
                break
            except Exception as e:  # the coordinator not reachable for now (e.g. restarting): again
                if time.monotonic() > give_up:
                    raise
                emit(event="commit_retry", error=f"{type(e).__name__}: {e}")
                time.sleep(0.1)
        if accepted:
            self.processed(records)
            return
        self.dropped += len(records)
        emit(event="commit_refused", records=len(records))
        for p, o in first.items():
            try:
                seek(p, o)
            except Exception:  # no longer assigned: its next owner starts from the last commit
                pass

    def close(self) -> None:
        self.out.close()
        emit(event="closed", dropped=self.dropped)


def run_kafka_python(m: Member) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.errors import (
        CommitFailedError,
        IllegalGenerationError,
        KafkaConnectionError,
        KafkaError,
        RebalanceInProgressError,
        UnknownMemberIdError,
    )

    a = m.args
    consumer = KafkaConsumer(a.topic, bootstrap_servers=a.bootstrap, group_id=a.group, client_id=a.name,
                             session_timeout_ms=a.session_ms, heartbeat_interval_ms=a.heartbeat_ms,
                             max_poll_interval_ms=30000, request_timeout_ms=a.session_ms + 5000,
                             enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                             reconnect_backoff_max_ms=200, retry_backoff_ms=50)

    def commit(offsets) -> bool:
        try:
            consumer.commit({TopicPartition(a.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
            return True
        except (CommitFailedError, IllegalGenerationError, RebalanceInProgressError, UnknownMemberIdError):
            return False

    emit(event="ready")
    while m.running():
        m.command(0.1 if m.holding else 0)
        if m.holding:
            continue
        # Not shorter: kafka-python 3.0.12 loses a rebalance that completes after poll() timed out
        # waiting for it (tests/support/client_worker.py).
        try:
            batch = consumer.poll(timeout_ms=1000)
        except KafkaError as e:
            # kafka-python 3.0.12's poll() can raise KafkaConnectionError while the server restarts
            # (a metadata refresh finding the port closed): an application polls again.
            if not (isinstance(e, KafkaConnectionError) or e.retriable):
                raise
            emit(event="poll_retry", error=f"{type(e).__name__}: {e}")
            continue
        m.assigned(tp.partition for tp in consumer.assignment())
        m.handle([(tp.partition, r.offset, r.key, r.value) for tp, rs in batch.items() for r in rs], commit,
                 lambda p, o: consumer.seek(TopicPartition(a.topic, p), o))
    consumer.close()
    m.close()


def run_confluent(m: Member) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    a = m.args
    consumer = Consumer({"bootstrap.servers": a.bootstrap, "group.id": a.group, "client.id": a.name,
                         "session.timeout.ms": a.session_ms, "heartbeat.interval.ms": a.heartbeat_ms,
                         "partition.assignment.strategy": "range", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100, "log_level": 3,
                         "reconnect.backoff.max.ms": 200})
    consumer.subscribe([a.topic])

    def commit(offsets) -> bool:
        try:
            consumer.commit(offsets=[TopicPartition(a.topic, p, o) for p, o in offsets.items()], asynchronous=False)
            return True
        except KafkaException as e:
            if e.args[0].retriable():
                raise
            return False

    emit(event="ready")
    while m.running():
        m.command(0.1 if m.holding else 0)
        if m.holding:
            continue
        messages = consumer.consume(num_messages=500, timeout=0.2)
        m.assigned(tp.partition for tp in consumer.assignment())
        m.handle([(x.partition(), x.offset(), x.key(), x.value()) for x in messages if x.error() is None], commit,
                 lambda p, o: consumer.seek(TopicPartition(a.topic, p, o)))
    consumer.close()
    m.close()


def run_aiokafka(m: Member) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError

    a = m.args

    async def main() -> None:
        consumer = AIOKafkaConsumer(a.topic, bootstrap_servers=a.bootstrap, group_id=a.group, client_id=a.name,
                                    session_timeout_ms=a.session_ms, heartbeat_interval_ms=a.heartbeat_ms,
                                    max_poll_interval_ms=30000, request_timeout_ms=a.session_ms + 5000,
                                    enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                                    retry_backoff_ms=50)
        await consumer.start()
        emit(event="ready")
        loop = asyncio.get_running_loop()
        while m.running():
            m.command()
            if m.holding:
                await asyncio.sleep(0.1)  # waiting for a command; the heartbeat task runs meanwhile
                continue
            batch = await consumer.getmany(timeout_ms=200, max_records=500)
            m.assigned(tp.partition for tp in consumer.assignment())
            records = [(tp.partition, r.offset, r.key, r.value) for tp, rs in batch.items() for r in rs]
            if not records:
                continue
            nxt: dict[int, int] = {}
            for p, o, _k, _v in records:
                nxt[p] = o + 1
            # The commit is a coroutine; Member.handle is plain code: run it here, hand its outcome over.
            outcome: dict = {}
            give_up = loop.time() + 60
            while True:
                try:
                    await consumer.commit({TopicPartition(a.topic, p): o for p, o in nxt.items()})
                    outcome["ok"] = True
                    break
                except (CommitFailedError, IllegalStateError):
                    outcome["ok"] = False
                    break
                except KafkaError as e:
                    if loop.time() > give_up:
                        raise
                    emit(event="commit_retry", error=f"{type(e).__name__}: {e}")
                    await asyncio.sleep(0.1)
            m.handle(records, lambda _offsets: outcome["ok"],
                     lambda p, o: consumer.seek(TopicPartition(a.topic, p), o))
        await consumer.stop()

    asyncio.run(main())
    m.close()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("client", choices=["kafka-python", "confluent", "aiokafka"])
    p.add_argument("bootstrap")
    p.add_argument("group")
    p.add_argument("topic")
    p.add_argument("out")
    p.add_argument("--name", default="member")
    p.add_argument("--session-ms", type=int, default=6000)
    p.add_argument("--heartbeat-ms", type=int, default=1000)
    p.add_argument("--lifetime", type=float, default=150)
    args = p.parse_args()
    member = Member(args)
    try:
        {"kafka-python": run_kafka_python, "confluent": run_confluent, "aiokafka": run_aiokafka}[args.client](member)
    except Exception as e:
        emit(event="error", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-3000:])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
