"""One end-to-end delivery run with a real client, for tests/wire/test_delivery_*.py.

A ``groupcoord serve`` subprocess on SQLite (its data directory and port kept across a
restart); three members of group ``billing`` (tests/support/delivery_consumer.py, each in its
own process) read topic ``orders`` (6 partitions) and commit; the client's own producer (in
this process, idempotent) sends 10,000 keyed messages:

1. the three members join; the first 5,000 messages are sent and acknowledged; the group reads
   them all;
2. one member stops polling (all it read is committed) and is killed with SIGKILL: no
   LeaveGroup, so only its session timeout (6 s) takes it out of the group;
3. the next 2,500 are sent and, once the first of them is acknowledged, ``serve`` is killed
   with SIGKILL (batches in flight) and started again on the same data directory and port;
   the last 2,500 are sent; the producer retries what it had in flight (its sequence numbers
   make a retried batch that was written a duplicate, answered with its first offsets);
4. the two left read everything, the dead member's partitions once its session expired on the
   restarted server; they close;
5. the log's bounds (ListOffsets earliest and latest, by the same client) and what each member
   processed go to ``groupcoord.testing.check_delivery``.

Every process started is stopped in ``finally``; every wait polls a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from server_harness import ServerProcess, free_port, wait_until

from groupcoord.testing import check_delivery

HERE = Path(__file__).resolve().parent
TOPIC, PARTITIONS, GROUP, N = "orders", 6, "billing", 10_000
SESSION_MS, HEARTBEAT_MS = 6000, 1000
DEADLINE_S = 60


def messages() -> list[tuple[bytes, bytes]]:
    return [(b"k%d" % (i % 97), b"v%d" % i) for i in range(N)]


class Member:
    """A delivery_consumer.py process: its events, and the records it processed (OUT)."""

    def __init__(self, client: str, bootstrap: str, out: Path, name: str) -> None:
        self.name, self.out = name, out
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "delivery_consumer.py"), client, bootstrap, GROUP, TOPIC, str(out),
             "--name", name, "--session-ms", str(SESSION_MS), "--heartbeat-ms", str(HEARTBEAT_MS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events: list[dict] = []
        self.stderr: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._pump, args=(self.proc.stdout, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, False), daemon=True).start()
        self._pos, self._records = 0, []

    def _pump(self, stream, events: bool) -> None:
        for line in stream:
            with self._lock:
                if not events:
                    self.stderr = (self.stderr + [line])[-100:]
                    continue
                try:
                    self.events.append(json.loads(line))
                except ValueError:
                    pass

    def seen(self, name: str) -> list[dict]:
        with self._lock:
            errors = [e for e in self.events if e.get("event") == "error"]
            if errors:
                raise AssertionError(f"{self.name}: {errors[0]}")
            return [e for e in self.events if e.get("event") == name]

    @property
    def assignment(self) -> list[int] | None:
        got = self.seen("assignment")
        return got[-1]["partitions"] if got else None

    def records(self) -> list[tuple]:
        """(topic, partition, offset, key, value) of each record processed so far, in order."""
        try:
            with open(self.out, "rb") as f:
                f.seek(self._pos)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1  # whole lines only
        for line in data[:end].splitlines():
            r = json.loads(line)
            self._records.append((TOPIC, r["p"], r["o"], None if r["k"] is None else r["k"].encode("latin-1"),
                                  None if r["v"] is None else r["v"].encode("latin-1")))
        self._pos += end
        return self._records

    def send(self, **cmd) -> None:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def tail(self) -> str:
        with self._lock:
            return f"{self.name}: events {self.events[-5:]}, stderr {''.join(self.stderr[-20:])}"

    def close(self) -> None:
        """Asks for a clean close (a LeaveGroup); ``closed()`` says when it is done."""
        if self.proc.poll() is None:
            self.send(cmd="close")

    def closed(self) -> bool:
        return self.proc.poll() is not None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


class Producer:
    """The client's idempotent producer, the same calls whichever the client: ``send(messages)``
    (does not wait), ``pump()`` (lets a poll-driven client deliver its reports), ``acked`` and
    ``errors`` (filled as the acknowledgements come), ``close()``; and ``bounds()``, the log's
    (start, end) per partition by the same client's ListOffsets."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.acked: list[tuple] = []
        self.errors: list[str] = []

    def on_ack(self, key, value, partition, offset) -> None:
        self.acked.append((TOPIC, partition, offset, key, value))

    def pump(self) -> None:
        pass


class KafkaPythonProducer(Producer):
    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaProducer

        super().__init__(bootstrap)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=5,
                                      reconnect_backoff_max_ms=200, retry_backoff_ms=50)

    def send(self, batch) -> None:
        for k, v in batch:
            future = self.producer.send(TOPIC, key=k, value=v)
            future.add_callback(lambda md, k=k, v=v: self.on_ack(k, v, md.partition, md.offset))
            future.add_errback(lambda e, k=k: self.errors.append(f"{k!r}: {e!r}"))

    def close(self) -> None:
        self.producer.close(10)

    def bounds(self) -> dict:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap)
        try:
            tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
            start, end = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
            return {(TOPIC, tp.partition): (start[tp], end[tp]) for tp in tps}
        finally:
            consumer.close()


class ConfluentProducer(Producer):
    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer as Confluent

        super().__init__(bootstrap)
        self.producer = Confluent({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                                   "reconnect.backoff.max.ms": 200, "log_level": 3})

    def send(self, batch) -> None:
        def report(error, message):
            if error is not None:
                self.errors.append(f"{message.key()!r}: {error}")
            else:
                self.on_ack(message.key(), message.value(), message.partition(), message.offset())

        for k, v in batch:
            self.producer.produce(TOPIC, key=k, value=v, on_delivery=report)
        self.producer.poll(0)

    def pump(self) -> None:
        self.producer.poll(0.01)

    def close(self) -> None:
        self.producer.flush(10)

    def bounds(self) -> dict:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "bounds"})
        try:
            return {(TOPIC, p): consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
                    for p in range(PARTITIONS)}
        finally:
            consumer.close()


class AiokafkaProducer(Producer):
    """aiokafka's producer on an event loop of its own thread."""

    def __init__(self, bootstrap: str) -> None:
        from aiokafka import AIOKafkaProducer

        super().__init__(bootstrap)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def start():
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5,
                                        retry_backoff_ms=50)
            await producer.start()
            return producer

        self.producer = self.run(start())

    def run(self, coro, timeout: float = DEADLINE_S):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def send(self, batch) -> None:
        async def send_all():
            for k, v in batch:
                future = await self.producer.send(TOPIC, key=k, value=v)
                future.add_done_callback(lambda f, k=k, v=v: self.errors.append(f"{k!r}: {f.exception()!r}")
                                         if f.exception() else self.on_ack(k, v, f.result().partition,
                                                                           f.result().offset))

        self.run(send_all())

    def close(self) -> None:
        try:
            self.run(self.producer.stop(), 30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)

    def bounds(self) -> dict:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def ask():
            consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap)
            await consumer.start()
            try:
                tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
                start, end = await consumer.beginning_offsets(tps), await consumer.end_offsets(tps)
                return {(TOPIC, tp.partition): (start[tp], end[tp]) for tp in tps}
            finally:
                await consumer.stop()

        return self.run(ask())


PRODUCERS = {"kafka-python": KafkaPythonProducer, "confluent": ConfluentProducer, "aiokafka": AiokafkaProducer}


@dataclass
class Run:
    """What a run gave: what the producer was told, what each member processed, the log's bounds,
    the check's result and how long each phase took."""

    acked: list[tuple]
    reads: dict[str, list[tuple]]
    bounds: dict
    result: object
    victim: str
    phases: dict[str, float] = field(default_factory=dict)


def serve(data_dir: Path, port: int) -> ServerProcess:
    return ServerProcess("--data-dir", str(data_dir), "--port", str(port), topics=(f"{TOPIC}={PARTITIONS}",),
                         settings={"group.initial.rebalance.delay.ms": 1500,
                                   "group.min.session.timeout.ms": 500})


def delivery_run(client: str, tmp: Path) -> Run:
    phases: dict[str, float] = {}
    t0 = last = time.monotonic()

    def phase(name: str) -> None:
        nonlocal last
        now = time.monotonic()
        phases[name] = round(now - last, 2)
        last = now

    data_dir, port = tmp / "data", free_port()
    server = serve(data_dir, port)
    members: list[Member] = []
    producer: Producer | None = None
    try:
        members = [Member(client, server.bootstrap, tmp / f"c{i}.jsonl", f"c{i}") for i in range(3)]
        producer = PRODUCERS[client](server.bootstrap)  # while they join
        batch = messages()

        def all_acked(n: int):
            def check() -> bool:
                producer.pump()
                assert not producer.errors, producer.errors[:5]
                return len(producer.acked) >= n
            return check

        def group_read_all() -> bool:
            got = {(r[1], r[2]) for m in members for r in m.records()}
            return got >= {(a[1], a[2]) for a in producer.acked}

        def balanced() -> bool:
            got = [m.assignment for m in members]
            return all(got) and sorted(p for a in got for p in a) == list(range(PARTITIONS))

        producer.send(batch[:5000])
        wait_until(all_acked(5000), DEADLINE_S, lambda: f"5000 acknowledgements, {len(producer.acked)} so far")
        phase("first half acknowledged")
        wait_until(balanced, DEADLINE_S, lambda: "three members sharing the partitions: "
                   + "; ".join(m.tail() for m in members))
        phase("joined")
        wait_until(group_read_all, DEADLINE_S, "the group to read the first 5000")
        phase("first half read")
        victim = members[1]
        victim.send(cmd="hold")
        wait_until(lambda: victim.seen("held"), DEADLINE_S, victim.tail)
        victim.kill()
        phase("member killed")
        producer.send(batch[5000:7500])
        wait_until(all_acked(5001), DEADLINE_S, "the first acknowledgement after 5000", interval=0.001)
        server.signal(signal.SIGKILL)
        phases["acknowledged when serve was killed"] = len(producer.acked)
        server.proc.wait(10)
        server.stop()
        server = serve(data_dir, port)
        phase("serve restarted")
        producer.send(batch[7500:])
        wait_until(all_acked(N), DEADLINE_S, lambda: f"{N} acknowledgements, {len(producer.acked)} so far")
        phase("second half acknowledged")
        survivors = [m for m in members if m is not victim]
        wait_until(group_read_all, DEADLINE_S, lambda: "the group to read everything: "
                   + "; ".join(m.tail() for m in survivors))
        phase("second half read")
        reasons = [e.get("reason") or "" for e in server.events("group", group=GROUP)]
        assert any(f"removing member {victim.name}-" in r and "heartbeat expiration" in r for r in reasons), \
            server.log_text()  # the killed member was fenced by its session timeout, on the restarted server
        for m in survivors:
            m.close()
        for m in survivors:
            wait_until(m.closed, DEADLINE_S, lambda: f"{m.name} to close: {m.tail()}")
        refused = sum(e.get("records", 0) for m in survivors for e in m.seen("commit_refused"))
        phases["records read again after a refused commit"] = refused
        bounds = producer.bounds()
        phase("closed")
        reads = {m.name: list(m.records()) for m in members}
        result = check_delivery(producer.acked, {GROUP: reads}, log=bounds)
        phases["total"] = round(time.monotonic() - t0, 2)
        if os.environ.get("DELIVERY_RUN_VERBOSE"):
            print(server.log_text())
        return Run(list(producer.acked), reads, bounds, result, victim.name, phases)
    finally:
        if producer is not None:
            try:
                producer.close()
            except Exception:  # the run's own failure says more
                pass
        for m in members:
            m.kill()
        server.stop()
        if os.environ.get("DELIVERY_RUN_VERBOSE"):
            print(client, phases)
