"""librdkafka's mock cluster as a broker to check (spec/peers.md): started in a child process
of its own, so that its lifetime is the caller's to control, its address handed back, kept
alive until stopped.

Any confluent-kafka client configured with ``test.mock.num.brokers`` and no bootstrap starts
an in-process mock cluster (librdkafka's ``rdkafka_mock.c``) and talks to it; the cluster's
address is not returned by any call, only logged ("Mock cluster enabled: original
bootstrap.servers and security.protocol ignored and replaced with 127.0.0.1:PORT") and listed
as the brokers of a Metadata answer. The child here is a Producer so configured: it reads the
broker list with ``list_topics()``, prints it as one JSON line and waits. The cluster lives
while the Producer does (a thread of librdkafka's), and ends with it.

* ``start_mock(brokers=1, topics=(), timeout=30.0)``: a ``LibrdkafkaMock`` (also a context
  manager); ``.bootstrap`` (``"127.0.0.1:PORT"``, every broker, comma-separated), ``.host``,
  ``.port`` (the first broker), ``.brokers`` (node id -> ``HOST:PORT``), ``.partitions``
  (topic -> partition count), ``.versions`` (confluent-kafka's and librdkafka's), ``stop()``.
* From a shell: ``python -m groupcoord.testing.librdkafka_mock [--brokers N] [--topic T]...``
  prints that JSON line and serves until stdin closes (Ctrl-D), SIGTERM or Ctrl-C.

What the mock is, as librdkafka builds it (``rd_kafka_mock_cluster_new``; none of it can be
set through a client's configuration): a topic is created on first sight, with 4 partitions,
by a Metadata request that allows creating topics (a Producer's do; a confluent-kafka
Consumer's do not unless ``allow.auto.create.topics`` is true): ``topics`` are made so at the
start; a new group's first join phase waits ``group.initial.rebalance.delay.ms`` 3000 (Kafka's
default). Needs confluent-kafka (the ``test`` extra); importing this module does not.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from typing import Any, Iterable, Sequence

MODULE = "groupcoord.testing.librdkafka_mock"


class MockError(RuntimeError):
    """The mock cluster did not start (the child's stderr says why), or did not stop."""


class LibrdkafkaMock:
    """librdkafka's mock cluster of ``brokers`` brokers in a child process, ``topics`` created
    in it (4 partitions each), up when the constructor returns; ``stop()`` ends it."""

    def __init__(self, brokers: int = 1, topics: Iterable[str] = (), timeout: float = 30.0) -> None:
        cmd = [sys.executable, "-m", MODULE, "--brokers", str(brokers), "--timeout", str(timeout)]
        for topic in topics:
            cmd += ["--topic", topic]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self._stderr: list[str] = []
        self._err_reader = threading.Thread(target=self._read_err, daemon=True)
        self._err_reader.start()
        first: list[str] = []
        reader = threading.Thread(target=lambda: first.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout + 10)  # the child's first line, or nothing by then (it waits `timeout` itself)
        if not first or not first[0]:
            self.stop(timeout=5)
            why = "did not start" if not first else "exited"
            raise MockError(f"librdkafka's mock cluster {why} within {timeout + 10}s: {self.stderr()[-2000:]}")
        ready = json.loads(first[0])
        self.brokers: dict[int, str] = {int(k): v for k, v in ready["brokers"].items()}
        self.bootstrap: str = ready["bootstrap"]
        self.host, _, port = self.brokers[min(self.brokers)].rpartition(":")
        self.port = int(port)
        self.partitions: dict[str, int] = ready["partitions"]
        self.versions: dict[str, str] = ready["versions"]

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            self._stderr.append(line)
            del self._stderr[:-200]

    def stderr(self) -> str:
        """The child's last lines on stderr (librdkafka's log lines at level 5 and above)."""
        return "".join(self._stderr)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def __str__(self) -> str:
        return self.bootstrap

    def __repr__(self) -> str:
        return f"<LibrdkafkaMock {getattr(self, 'bootstrap', '(starting)')} pid {self.proc.pid}>"

    def stop(self, timeout: float = 10.0) -> int:
        """Close the child's stdin (it destroys its client, and with it the cluster, and exits);
        killed if it has not within ``timeout``. Its exit status; again: the same."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        self._err_reader.join(5)
        return self.proc.returncode

    def __enter__(self) -> "LibrdkafkaMock":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_mock(brokers: int = 1, topics: Iterable[str] = (), timeout: float = 30.0) -> LibrdkafkaMock:
    """librdkafka's mock cluster, up: see ``LibrdkafkaMock``."""
    return LibrdkafkaMock(brokers, topics, timeout)


# --- the child ------------------------------------------------------------------------------------------------

def _serve(brokers: int, topics: Sequence[str], timeout: float) -> int:
    import confluent_kafka

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def wait_for_stdin() -> None:
        try:
            for line in sys.stdin:
                if line.strip() == "stop":
                    break
        finally:
            stop.set()

    producer = confluent_kafka.Producer({"test.mock.num.brokers": brokers, "client.id": "groupcoord-mock-keeper"})
    try:
        metadata = producer.list_topics(timeout=timeout)
        partitions = {}
        for topic in topics:  # a Producer's Metadata request may create topics: the mock creates it
            found = producer.list_topics(topic=topic, timeout=timeout).topics[topic]
            if found.error is not None:
                raise MockError(f"topic {topic!r}: {found.error}")
            partitions[topic] = len(found.partitions)
        addresses = {str(b.id): f"{b.host}:{b.port}" for b in sorted(metadata.brokers.values(), key=lambda b: b.id)}
        client = confluent_kafka.version()  # a string in 2.16, (string, int) before
        ready = {"bootstrap": ",".join(addresses.values()), "brokers": addresses, "partitions": partitions,
                 "versions": {"confluent-kafka": client if isinstance(client, str) else client[0],
                              "librdkafka": confluent_kafka.libversion()[0]}}
        sys.stdout.write(json.dumps(ready) + "\n")
        sys.stdout.flush()
        threading.Thread(target=wait_for_stdin, daemon=True).start()
        while not stop.wait(0.5):  # (a wait the signal handlers can end)
            pass
    finally:
        del producer  # rd_kafka_destroy (it produced nothing): the mock cluster ends with its client
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}",
                                     description="Run librdkafka's mock cluster until stdin closes or SIGTERM; "
                                                 "print its address (one JSON line) once it is up.")
    parser.add_argument("--brokers", type=int, default=1, help="how many mock brokers (default 1)")
    parser.add_argument("--topic", action="append", default=[],
                        help="a topic to create at the start (the mock gives it 4 partitions); repeatable")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the cluster's metadata")
    args = parser.parse_args(argv)
    return _serve(args.brokers, args.topic, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
