"""groupcoord.testing.servers: the settings a test server is started with, its manual clock,
its start and stop; and auto-created topics, in the test server and in ``groupcoord serve``."""

from __future__ import annotations

import asyncio
import socket

import pytest
from server_harness import ServerProcess

from groupcoord.adapters.client.kafka_client import KafkaClient
from groupcoord.core.config import ConfigError
from groupcoord.core.errors import Error
from groupcoord.testing.servers import ExistingServer, start_server

METADATA = 3


def metadata(bootstrap: str, topics: list[str], version: int | None = None, allow: bool = True) -> dict:
    host, port = bootstrap.rsplit(":", 1)

    async def ask() -> dict:
        client = await KafkaClient.connect(host, int(port), timeout=10)
        try:
            v = version if version is not None else client.version(METADATA)
            fields = {"topics": [{"name": t, "topic_id": None} for t in topics], "allow_auto_topic_creation": allow}
            return await asyncio.wait_for(client.request(METADATA, fields, v), 10)
        finally:
            await client.close()

    answer = asyncio.run(ask())
    return {t["name"]: (t["error_code"], len(t["partitions"])) for t in answer["topics"]}


def test_settings_as_keywords_reach_the_coordinator_and_the_catalog():
    with start_server({"orders": 6}, group_min_session_timeout_ms=250, group_max_size=3, num_partitions=2,
                      socket_request_max_bytes="2048") as server:
        config = server.server.config
        assert (config.group_min_session_timeout_ms, config.group_max_size) == (250, 3)
        assert config.group_initial_rebalance_delay_ms == 0  # the test default
        assert server.server.options.max_request_bytes == 2048
        assert server.server.catalog.topics == {"orders": 6}
        assert server.server.catalog.auto_create_partitions == 2
        assert server.bootstrap == f"127.0.0.1:{server.port}" == str(server)
        assert server.host == "127.0.0.1" and server.server.storage.name == "memory"
        assert not server.manual_clock


def test_kafka_defaults_apply_unless_overridden():
    with start_server(group_initial_rebalance_delay_ms=3000) as server:
        assert server.server.config.group_initial_rebalance_delay_ms == 3000
        assert server.server.config.group_min_session_timeout_ms == 6000


@pytest.mark.parametrize("kwargs, message", [
    ({"session_timeout_ms": 10}, "unknown setting session_timeout_ms= (Kafka's 'session.timeout.ms'); known: "),
    ({"group_max_size": 0}, "group.max.size must be at least 1, got 0"),
    ({"auto_create_topics_enable": "maybe"}, "auto.create.topics.enable must be true or false, got 'maybe'"),
    ({"num_partitions": 0}, "num.partitions must be an integer of at least 1, got 0"),
])
def test_a_bad_setting_is_one_clear_line(kwargs, message):
    with pytest.raises(ConfigError) as e:
        start_server(**kwargs)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_a_bad_topic_is_one_clear_line():
    with pytest.raises(ConfigError, match=r"^topic 'orders': needs at least 1 partition, got 0$"):
        start_server({"orders": 0})


def test_stop_closes_the_port_and_twice_is_nothing():
    server = start_server()
    with socket.create_connection((server.host, server.port), timeout=5):
        pass
    server.stop()
    server.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((server.host, server.port), timeout=5).close()
    assert not server._thread.thread.is_alive()


def test_advance_needs_a_manual_clock():
    with start_server() as server, pytest.raises(RuntimeError, match="advance.ms. needs a server with a manual clock"):
        server.advance(10)
    with pytest.raises(RuntimeError, match="keeps its own time"):
        ExistingServer("127.0.0.1:9").advance(10)


def test_advance_fires_the_timers_then_due_and_returns_once_handled():
    with start_server(manual_clock=True) as server:
        assert server.manual_clock
        before = server.server.controls.events_handled
        server.advance(600_000)  # offsets.retention.check.interval.ms: each partition's expiration timer
        partitions = server.server.config.offsets_topic_num_partitions
        assert server.server.controls.events_handled - before == partitions
        assert server.call(lambda: server.server.clock.now_ms()) == 600_000
        with pytest.raises(ValueError, match="time cannot go backwards"):
            server.advance(-1)


def test_existing_server_address():
    existing = ExistingServer("localhost:9092")
    assert (existing.host, existing.port, existing.bootstrap, str(existing)) == (
        "localhost", 9092, "localhost:9092", "localhost:9092")
    for bad in ("localhost", "localhost:0", ":9092", "a b:1", "host:x"):
        with pytest.raises(ConfigError, match="expected HOST:PORT"):
            ExistingServer(bad)


# --- auto-created topics ----------------------------------------------------------------------

def test_a_topic_asked_for_is_created_with_num_partitions():
    with start_server(num_partitions=3) as server:
        # First answer as a KRaft broker's: UNKNOWN_TOPIC_OR_PARTITION while it is created.
        assert metadata(server.bootstrap, ["new"]) == {"new": (Error.UNKNOWN_TOPIC_OR_PARTITION, 0)}
        assert metadata(server.bootstrap, ["new"]) == {"new": (0, 3)}
        assert metadata(server.bootstrap, ["new"], version=1) == {"new": (0, 3)}  # before the flag: allowed


def test_no_creation_when_the_request_or_the_broker_says_no():
    with start_server() as server:
        assert metadata(server.bootstrap, ["quiet"], allow=False) == {"quiet": (Error.UNKNOWN_TOPIC_OR_PARTITION, 0)}
        assert metadata(server.bootstrap, ["quiet"], allow=False) == {"quiet": (Error.UNKNOWN_TOPIC_OR_PARTITION, 0)}
        bad = "bad/name"
        assert metadata(server.bootstrap, [bad]) == {bad: (Error.INVALID_TOPIC_EXCEPTION, 0)}
        assert server.server.catalog.topics == {}
    with start_server(auto_create_topics_enable=False) as server:
        for _ in range(2):
            assert metadata(server.bootstrap, ["t"]) == {"t": (Error.UNKNOWN_TOPIC_OR_PARTITION, 0)}


@pytest.mark.parametrize("flags, created", [((), True), (("--auto.create.topics.enable", "false"), False)])
def test_serve_auto_creates_by_default(flags, created):
    server = ServerProcess("--storage", "memory", *flags, settings={"num.partitions": 2})
    try:
        metadata(server.bootstrap, ["asked"])
        second = metadata(server.bootstrap, ["asked"])
        assert second == ({"asked": (0, 2)} if created else {"asked": (Error.UNKNOWN_TOPIC_OR_PARTITION, 0)})
    finally:
        server.stop()


def test_advance_fires_a_rebalance_timeout():
    """A Stable member that does not rejoin within the rebalance timeout is removed when time
    reaches it, and the member waiting in JoinGroup gets the next generation."""
    join = {"group_id": "g", "session_timeout_ms": 30_000, "rebalance_timeout_ms": 20_000, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]}

    def state() -> str:
        return server.call(lambda: server.server.core.coordinator.group("g").state.value)

    async def scenario() -> None:
        a = await KafkaClient.connect(server.host, server.port, "a")
        b = await KafkaClient.connect(server.host, server.port, "b")
        try:
            first = await a.request(11, {**join, "member_id": ""}, version=3)  # v3: the id comes at once
            assert (first["error_code"], first["generation_id"], first["leader"]) == (0, 1, first["member_id"])
            synced = await a.request(14, {"group_id": "g", "generation_id": 1, "member_id": first["member_id"],
                                          "assignments": [{"member_id": first["member_id"], "assignment": b"x"}]},
                                     version=3)
            assert synced["error_code"] == 0 and state() == "Stable"
            waiting = b.send(11, {**join, "member_id": ""}, version=3)
            server.until(lambda: server.server.core.coordinator.group("g").state.value == "PreparingRebalance",
                         what="b's join to start a rebalance")
            server.advance(19_999)
            assert state() == "PreparingRebalance" and not waiting.done()
            server.advance(1)  # the rebalance timeout: "a" never rejoined
            second = await asyncio.wait_for(waiting, 10)
            assert (second["error_code"], second["generation_id"]) == (0, 2)
            assert [m["member_id"] for m in second["members"]] == [second["member_id"]] == [second["leader"]]
        finally:
            await a.close()
            await b.close()

    with start_server(manual_clock=True) as server:
        asyncio.run(scenario())
