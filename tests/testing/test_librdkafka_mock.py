"""``groupcoord.testing.librdkafka_mock``: librdkafka's mock cluster in a child process, its
address handed back, up until stopped, and then gone."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys

import pytest

pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (the test extra carries it)")

from groupcoord.testing.librdkafka_mock import MODULE, MockError, start_mock


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_the_mock_is_up_until_stopped_and_then_gone():
    with start_mock(brokers=3, topics=["a", "b"]) as mock:
        assert mock.alive() and str(mock) == mock.bootstrap
        assert sorted(mock.brokers) == [1, 2, 3] and mock.bootstrap == ",".join(mock.brokers[i] for i in (1, 2, 3))
        assert mock.host == "127.0.0.1" and mock.brokers[1] == f"127.0.0.1:{mock.port}"
        assert mock.partitions == {"a": 4, "b": 4}
        assert set(mock.versions) == {"confluent-kafka", "librdkafka"}
        socket.create_connection(("127.0.0.1", mock.port), timeout=5).close()
    assert mock.proc.returncode == 0 and mock.stop() == 0  # stopped once; again: the same
    assert all(_refused(int(address.rsplit(":", 1)[1])) for address in mock.brokers.values())


def test_a_consumer_library_reaches_it():
    from confluent_kafka.admin import AdminClient

    with start_mock(topics=["t"]) as mock:
        metadata = AdminClient({"bootstrap.servers": mock.bootstrap}).list_topics(timeout=10)
    assert {b.port for b in metadata.brokers.values()} == {mock.port}
    assert len(metadata.topics["t"].partitions) == 4


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_from_a_shell_it_prints_the_address_and_ends_on_a_signal(sig):
    proc = subprocess.Popen([sys.executable, "-m", MODULE, "--topic", "t"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        assert ready["partitions"] == {"t": 4} and ready["bootstrap"].startswith("127.0.0.1:")
        proc.send_signal(sig)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        proc.stdin.close()
        proc.stdout.close()


def test_a_cluster_that_cannot_start_says_why():
    with pytest.raises(MockError, match="Failed to get metadata"):
        start_mock(brokers=0, timeout=1)  # no mock: a client with nowhere to connect
