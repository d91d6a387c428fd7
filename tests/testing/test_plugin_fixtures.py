"""The pytest plugin as a user meets it: a user's test file (USER_TESTS) using the fixtures
with kafka-python and aiokafka consumers, run by pytest (pytester, in a subprocess) in both
modes: servers started in the test process, and ``--groupcoord-bootstrap`` pointing at a
``groupcoord serve`` this test starts and stops."""

from __future__ import annotations

import pytest
from plugin_runner import plugin_args
from server_harness import ServerProcess

pytest_plugins = ["pytester"]

USER_TESTS = '''
import asyncio
import select
import socket
import subprocess
import sys
import time

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

ORDERS = {"orders": 4}
ALL_ORDERS = {TopicPartition("orders", p) for p in range(4)}
SEEN = []  # every server address handed out, for the last test


def assigned(consumer, deadline_s=30):
    # Polls of a second: kafka-python 3.0.12 drops an assignment whose rebalance (started by
    # new topic metadata) outlasts one poll, so a short poll can leave it unassigned.
    deadline = time.monotonic() + deadline_s
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=1000)
    return consumer.assignment()


def test_server_attributes(groupcoord_server):
    SEEN.append((groupcoord_server.host, groupcoord_server.port))
    assert groupcoord_server.bootstrap == f"{groupcoord_server.host}:{groupcoord_server.port}"
    assert str(groupcoord_server) == groupcoord_server.bootstrap


def test_kafka_python_joins_commits_and_reads_back(groupcoord_server_factory):
    server = groupcoord_server_factory(ORDERS, group_initial_rebalance_delay_ms=0)
    SEEN.append((server.host, server.port))
    consumer = KafkaConsumer("orders", bootstrap_servers=server.bootstrap, group_id="kp", enable_auto_commit=False)
    try:
        assert assigned(consumer) == ALL_ORDERS
        consumer.commit({TopicPartition("orders", 1): OffsetAndMetadata(42, "m", -1)})
    finally:
        consumer.close()
    reader = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="kp", enable_auto_commit=False)
    try:
        assert reader.committed(TopicPartition("orders", 1)) == 42
        assert reader.committed(TopicPartition("orders", 0)) is None
    finally:
        reader.close()


def test_kafka_python_on_an_auto_created_topic(groupcoord_server):
    fresh = TopicPartition("fresh-topic", 0)
    looker = KafkaConsumer(bootstrap_servers=str(groupcoord_server), group_id="looker", enable_auto_commit=False)
    try:
        assert looker.partitions_for_topic("fresh-topic") == set()  # asks for all topics: creates none
        looker.assign([fresh])  # asks for this one: created
        looker.commit({fresh: OffsetAndMetadata(5, "", -1)})
        assert looker.committed(fresh) == 5
        assert looker.partitions_for_topic("fresh-topic") == {0}  # num.partitions: 1
    finally:
        looker.close()
    consumer = KafkaConsumer("fresh-topic", bootstrap_servers=str(groupcoord_server), group_id="auto")
    try:
        assert assigned(consumer) == {fresh}
    finally:
        consumer.close()


def test_aiokafka_joins_commits_and_reads_back(groupcoord_server_factory):
    server = groupcoord_server_factory(ORDERS)

    async def main():
        consumer = AIOKafkaConsumer("orders", bootstrap_servers=server.bootstrap, group_id="ak",
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            deadline = time.monotonic() + 30
            while not consumer.assignment() and time.monotonic() < deadline:
                await consumer.getmany(timeout_ms=100)
            assert consumer.assignment() == ALL_ORDERS
            await consumer.commit({AioTopicPartition("orders", 2): 7})
            assert await consumer.committed(AioTopicPartition("orders", 2)) == 7
        finally:
            await consumer.stop()

    asyncio.run(main())


CRASHING_CONSUMER = """
import sys, time
from kafka import KafkaConsumer
consumer = KafkaConsumer("orders", bootstrap_servers=sys.argv[1], group_id="crash", session_timeout_ms=10000)
deadline = time.monotonic() + 30
while not consumer.assignment() and time.monotonic() < deadline:
    consumer.poll(timeout_ms=1000)
print(len(consumer.assignment()), flush=True)
time.sleep(120)
"""


def test_time_moves_only_by_advance(groupcoord_manual_server):
    server = groupcoord_manual_server
    SEEN.append((server.host, server.port))
    orders = TopicPartition("orders", 0)
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="simple", enable_auto_commit=False)
    try:
        consumer.assign([orders])
        consumer.commit({orders: OffsetAndMetadata(9, "", -1)})
        server.advance(7 * 24 * 3600 * 1000 - 1)  # 1 ms short of offsets.retention.minutes
        assert consumer.committed(orders) == 9
        server.advance(600_000)  # offsets.retention.check.interval.ms later: expired
        assert consumer.committed(orders) is None
    finally:
        consumer.close()


def test_a_consumer_that_stops_heartbeating_is_removed(groupcoord_server_factory):
    server = groupcoord_server_factory(ORDERS, manual_clock=True)
    SEEN.append((server.host, server.port))
    child = subprocess.Popen([sys.executable, "-c", CRASHING_CONSUMER, server.bootstrap],
                             stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([child.stdout], [], [], 30)
        assert ready and child.stdout.readline().strip() == "4"
    finally:
        child.kill()  # no LeaveGroup, no more heartbeats
        child.wait(10)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        server.advance(9_999)
        before = admin.describe_groups(["crash"])["crash"]
        server.advance(1)  # its session.timeout.ms has passed since its last heartbeat
        after = admin.describe_groups(["crash"])["crash"]
    finally:
        admin.close()
    assert (before["group_state"], len(before["members"])) == ("Stable", 1)
    assert (after["group_state"], after["members"]) == ("Empty", [])


def test_zz_the_servers_started_are_stopped(request):
    if request.config.getoption("groupcoord_bootstrap"):
        pytest.skip("the broker is not ours")
    assert len(SEEN) == 4
    for host, port in SEEN:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, port), timeout=5).close()
'''


def run_user_tests(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_user=USER_TESTS)
    return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:randomly", "-p", "no:cacheprovider",
                                         "-W", "ignore::DeprecationWarning", "-v", *args, timeout=300)


def test_fixtures_in_process(pytester: pytest.Pytester) -> None:
    result = run_user_tests(pytester)
    result.assert_outcomes(passed=7)


def test_fixtures_against_a_running_broker(pytester: pytest.Pytester) -> None:
    server = ServerProcess("--storage", "memory", topics=("orders=4",))
    try:
        result = run_user_tests(pytester, "--groupcoord-bootstrap", server.bootstrap)
        # The manual-clock tests are skipped (the broker keeps its own time), as is the check of
        # servers the plugin started (it started none).
        result.assert_outcomes(passed=4, skipped=3)
        result.stdout.fnmatch_lines(["*test_time_moves_only_by_advance SKIPPED*",
                                     "*test_a_consumer_that_stops_heartbeating_is_removed SKIPPED*"])
        assert server.find("group", group="kp") is not None  # the consumers did reach this broker
    finally:
        assert server.stop() == 143


def test_a_topic_the_running_broker_lacks_is_a_clear_error(pytester: pytest.Pytester) -> None:
    server = ServerProcess("--storage", "memory", topics=("orders=4",))
    try:
        pytester.makepyfile(test_topics='''
def test_needs_six(groupcoord_server_factory):
    groupcoord_server_factory({"orders": 6})
''')
        result = pytester.runpytest_subprocess(*plugin_args(), "--groupcoord-bootstrap", server.bootstrap,
                                               timeout=120)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines([f"*ConfigError: --groupcoord-bootstrap {server.bootstrap}: the test needs "
                                     f"topic 'orders' with 6 partitions; the broker has 4 partitions"])
    finally:
        server.stop()


def test_a_bad_bootstrap_option_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_nothing="def test_nothing(): pass\n")
    result = pytester.runpytest_subprocess(*plugin_args(), "--groupcoord-bootstrap", "nohost", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--groupcoord-bootstrap: expected HOST:PORT, got 'nohost'"])


def test_an_unknown_setting_fails_the_test_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_typo='''
def test_typo(groupcoord_server_factory):
    groupcoord_server_factory(session_timeout_ms=1000)
''')
    result = pytester.runpytest_subprocess(*plugin_args(), timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ConfigError: unknown setting session_timeout_ms= (Kafka's 'session.timeout.ms'); "
                                 "known: advertised_host, *group_min_session_timeout_ms*"])


def test_the_fixtures_are_listed(pytester: pytest.Pytester) -> None:
    listed = pytester.runpytest_subprocess(*plugin_args(), "--fixtures", timeout=120).stdout.lines
    for name in ("groupcoord_server", "groupcoord_server_factory", "groupcoord_manual_server"):
        assert any(line.split(" ")[0] == name for line in listed), name
    pytester.runpytest_subprocess(*plugin_args(), "--help", timeout=120).stdout.fnmatch_lines(
        ["*--groupcoord-bootstrap=HOST:PORT*"])
