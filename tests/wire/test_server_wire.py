"""The wire server, in process, through the Kafka protocol (kio on both sides): what it
advertises, the broker APIs around the coordinator, every group API version, ordering per
connection, shutdown, and trace recording. Where order or parking matters, the tests ask the
server what it did with a request (``track_requests``) instead of sleeping."""

from __future__ import annotations

import asyncio
import io
import json
import struct
import uuid

import pytest
from server_harness import InProcessServer

from groupcoord.adapters.client.kafka_client import KafkaClient
from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.protocol import schema
from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.core import trace as trace_format
from groupcoord.core.classic.subscription import decode_assignment, encode_assignment, encode_subscription
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator

CONFIG = CoordinatorConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=100,
                           offsets_topic_num_partitions=3)


@pytest.fixture
def server():
    s = InProcessServer(config=CONFIG, catalog=apis.TopicCatalog({"t6": 6, "t1": 1}), track_requests=True)
    yield s
    s.stop()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def connect(server, client_id="test", negotiate=True) -> KafkaClient:
    return await KafkaClient.connect("127.0.0.1", server.port, client_id=client_id, negotiate=negotiate)


def join_fields(member_id="", group="g", session_ms=5000, instance=None, topics=("t6",)):
    return {"group_id": group, "session_timeout_ms": session_ms, "rebalance_timeout_ms": session_ms,
            "member_id": member_id, "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": encode_subscription(list(topics), version=0)}]}


async def form_group(server, group="g", members=1, join_version=5):
    """Members join and sync as consumers do (rejoining when told to); returns (clients, member
    ids, generation) once every member has synced in one generation."""
    clients = [await connect(server, f"c{i}") for i in range(members)]
    assignment = encode_assignment([("t6", 0), ("t6", 1)], version=0)

    async def member(c):
        member_id = ""
        for _attempt in range(50):
            joined = await c.request(11, join_fields(member_id, group=group), join_version)
            if joined["error_code"] == 79:
                member_id = joined["member_id"]
                continue
            assert joined["error_code"] == 0, joined
            member_id, generation = joined["member_id"], joined["generation_id"]
            leader = joined["leader"] == member_id
            synced = await c.request(14, {
                "group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None,
                "assignments": [{"member_id": m["member_id"], "assignment": assignment}
                                for m in joined["members"]] if leader else []}, 3)
            if synced["error_code"] == 0:
                return member_id, generation
            assert synced["error_code"] in (22, 25, 27), synced  # a newer generation started: rejoin
        raise AssertionError("could not join")

    for _round in range(20):
        results = await asyncio.gather(*[member(c) for c in clients])
        if len({g for _m, g in results}) == 1:
            return clients, [m for m, _g in results], results[0][1]
    raise AssertionError("members never met in one generation")


async def park_a_join(server: InProcessServer, a: KafkaClient, b: KafkaClient, group: str, session_ms: int = 5000):
    """a forms a Stable group alone; b gets a pending member id; a (the leader) rejoins, which
    starts a rebalance that waits for b: the server has parked a's join when this returns
    (a's member id, a's parked join, b's id)."""
    member = (await a.request(11, join_fields(group=group, session_ms=session_ms), 5))["member_id"]
    joined = await a.request(11, join_fields(member, group=group, session_ms=session_ms), 5)
    assert joined["error_code"] == 0
    synced = await a.request(14, {"group_id": group, "generation_id": joined["generation_id"], "member_id": member,
                                  "assignments": [{"member_id": member, "assignment": b""}]}, 3)
    assert synced["error_code"] == 0
    pending = (await b.request(11, join_fields(group=group, session_ms=session_ms), 5))["member_id"]
    parked = a.send(11, join_fields(member, group=group, session_ms=session_ms), 5)
    assert await server.handled(a) == "pending"  # parked: the rebalance waits for b
    return member, parked, pending


# --- ApiVersions -------------------------------------------------------------------------------

def test_api_versions_advertises_exactly_what_is_served(server):
    async def main():
        c = await connect(server)
        for version in range(0, 5):
            r = await c.request(18, {"client_software_name": "t", "client_software_version": "1"}, version)
            assert r["error_code"] == 0
            keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in r["api_keys"]}
            assert keys == apis.served_versions()
        await c.close()
        return keys
    keys = run(main())
    assert keys[0][0] >= 3 and keys[0][0] <= 3 <= keys[0][1]  # Produce v3+ for librdkafka
    assert 71 not in keys and keys[68] == keys[69] == (0, 1)  # KIP-848's ConsumerGroupHeartbeat/Describe
    for api, (lo, hi) in schema.SUPPORTED_VERSIONS.items():
        assert keys[schema.API_KEYS[api]] == (lo, hi)
        for v in range(lo, hi + 1):
            assert kc.has_schema(schema.API_KEYS[api], v)


def test_api_versions_too_new_gets_unsupported_version_in_v0(server):
    async def main():
        c = await connect(server, negotiate=False)
        header = struct.pack(">hhih", 18, 99, 7, 1) + b"x"
        c.send_raw(struct.pack(">i", len(header) + 3) + header + b"\x00\x00\x00")
        reader = c._reader
        c._reader_task.cancel()
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        frame = await reader.readexactly(size)
        correlation, body = kc.decode_response(18, 0, frame)
        return correlation, kc.to_fields(body)
    correlation, body = run(main())
    assert correlation == 7 and body["error_code"] == 35
    assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 4}]


def test_api_versions_v3_with_a_bad_software_name_is_invalid_request(server):
    async def main():
        c = await connect(server, negotiate=False)
        return await c.request(18, {"client_software_name": "-bad name", "client_software_version": "1"}, 3)
    assert run(main())["error_code"] == 42


# --- Metadata, FindCoordinator -------------------------------------------------------------------

def test_metadata_serves_the_catalog_with_this_server_as_the_only_broker(server):
    async def main():
        c = await connect(server)
        out = {}
        for v in range(0, 13):
            topics = [{"name": n, "topic_id": None} for n in ("t6", "missing", "bad name!")]
            out[v] = await c.request(3, {"topics": topics, "allow_auto_topic_creation": True}, v)
        all_v1 = await c.request(3, {"topics": None}, 1)
        all_v0 = await c.request(3, {"topics": []}, 0)
        none_v12 = await c.request(3, {"topics": []}, 12)
        by_id = await c.request(3, {"topics": [{"name": None, "topic_id": apis.TopicCatalog.topic_id("t1")},
                                               {"name": None, "topic_id": uuid.uuid4()}]}, 12)
        return out, all_v1, all_v0, none_v12, by_id
    out, all_v1, all_v0, none_v12, by_id = run(main())
    for v, r in out.items():
        assert r["brokers"] == [{"node_id": 0, "host": "127.0.0.1", "port": server.port,
                                 **({"rack": None} if v >= 1 else {})}]
        by_name = {t["name"]: t for t in r["topics"]}
        assert by_name["t6"]["error_code"] == 0
        assert [p["partition_index"] for p in by_name["t6"]["partitions"]] == list(range(6))
        assert all(p["leader_id"] == 0 for p in by_name["t6"]["partitions"])
        assert by_name["missing"]["error_code"] == 3 and by_name["missing"]["partitions"] == []
        assert by_name["bad name!"]["error_code"] == 17
        if v >= 10:
            assert by_name["t6"]["topic_id"] == apis.TopicCatalog.topic_id("t6") != apis.ZERO_UUID
    assert {t["name"] for t in all_v1["topics"]} == {"t6", "t1"} == {t["name"] for t in all_v0["topics"]}
    assert none_v12["topics"] == []
    assert [t["error_code"] for t in by_id["topics"]] == [0, 100]
    assert by_id["topics"][0]["name"] == "t1"


def test_find_coordinator_every_version_and_batched_keys(server):
    async def main():
        c = await connect(server)
        single = [await c.request(10, {"key": "g", "key_type": 0}, v) for v in range(0, 4)]
        batched = [await c.request(10, {"key_type": 0, "coordinator_keys": ["a", "b", "c"]}, v) for v in (4, 5, 6)]
        return single, batched
    single, batched = run(main())
    for r in single:
        assert (r["error_code"], r["node_id"], r["host"], r["port"]) == (0, 0, "127.0.0.1", server.port)
    for r in batched:
        assert [(x["key"], x["error_code"], x["port"]) for x in r["coordinators"]] == [
            ("a", 0, server.port), ("b", 0, server.port), ("c", 0, server.port)]


# --- the data plane on empty logs (tests/wire/test_data_plane_wire.py has the rest) ------------------

def test_list_offsets_fetch_and_produce_on_empty_logs(server):
    async def main():
        c = await connect(server)
        lo = await c.request(2, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "t6", "partitions": [{"partition_index": 0, "timestamp": -2}, {"partition_index": 9, "timestamp": -1}]},
            {"name": "nope", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}, 7)
        loop = asyncio.get_running_loop()
        start = loop.time()
        fetched = await c.request(1, {"max_wait_ms": 300, "min_bytes": 1, "topics": [
            {"topic": "t6", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1000}]}]}, 12)
        waited = loop.time() - start
        fetched_by_id = await c.request(1, {"max_wait_ms": 0, "min_bytes": 1, "topics": [
            {"topic_id": apis.TopicCatalog.topic_id("t6"), "partitions": [{"partition": 1, "fetch_offset": 0}]},
            {"topic_id": uuid.uuid4(), "partitions": [{"partition": 0, "fetch_offset": 0}]}]}, 16)
        produced = await c.request(0, {"acks": -1, "timeout_ms": 1000, "topic_data": [
            {"name": "t6", "partition_data": [{"index": 0, "records": b""}]}]}, 9)
        # acks=0: no answer; the next request on the connection is answered normally
        c.send(0, {"acks": 0, "timeout_ms": 1000, "topic_data": []}, 9)
        c._waiting.pop()  # no response will come for it
        after = await c.request(18, {}, 0)
        return lo, fetched, waited, fetched_by_id, produced, after
    lo, fetched, waited, fetched_by_id, produced, after = run(main())
    parts = {(t["name"], p["partition_index"]): p for t in lo["topics"] for p in t["partitions"]}
    assert parts[("t6", 0)]["error_code"] == 0 and parts[("t6", 0)]["offset"] == 0
    assert parts[("t6", 9)]["error_code"] == 3 and parts[("nope", 0)]["error_code"] == 3
    p = fetched["responses"][0]["partitions"][0]
    assert fetched["error_code"] == 0 and fetched["session_id"] == 0 and p["error_code"] == 0 and p["records"] in (b"", None)
    assert waited >= 0.25  # held like a long poll
    assert [t["partitions"][0]["error_code"] for t in fetched_by_id["responses"]] == [0, 100]
    assert produced["responses"][0]["partition_responses"][0]["error_code"] == 87  # INVALID_RECORD: no batch
    assert after["error_code"] == 0


# --- the group APIs at every version ---------------------------------------------------------------

def test_every_group_api_version_is_answered(server):
    """Minimal requests at every served version of every group API decode and answer."""
    async def main():
        c = await connect(server)
        seen = {}
        for api, (lo, hi) in schema.SUPPORTED_VERSIONS.items():
            key = schema.API_KEYS[api]
            for v in range(lo, hi + 1):
                body = schema.request_with_defaults(api, v, {})
                if "group_id" in body:
                    body["group_id"] = f"every-{api}-{v}"
                if api == "JoinGroup":
                    body.update(session_timeout_ms=5000, protocol_type="consumer",
                                protocols=[{"name": "range", "metadata": b""}])
                if api == "OffsetFetch" and v >= 8:
                    body["groups"] = [{"group_id": "x", "topics": None}]
                if api == "DescribeGroups":
                    body["groups"] = ["x"]
                if api == "DeleteGroups":
                    body["groups_names"] = ["x"]
                response = await c.request(key, body, v)
                seen[(api, v)] = response
        return seen
    seen = run(main())
    assert len(seen) == sum(hi - lo + 1 for lo, hi in schema.SUPPORTED_VERSIONS.values())
    for (api, v), response in seen.items():
        assert set(response) == set(schema.response_fields(api, v)) | ({"throttle_time_ms"} & set(response)), (api, v)
    assert seen[("JoinGroup", 4)]["error_code"] == 79  # v4+: known member id required
    assert seen[("JoinGroup", 3)]["error_code"] == 0 or seen[("JoinGroup", 3)]["member_id"]


def test_describe_groups_reports_members_and_authorized_operations(server):
    async def main():
        clients, ids, generation = await form_group(server, "desc", members=2)
        c = clients[0]
        plain = await c.request(15, {"groups": ["desc", "none"], "include_authorized_operations": False}, 5)
        with_ops = await c.request(15, {"groups": ["desc"], "include_authorized_operations": True}, 5)
        return ids, plain, with_ops
    ids, plain, with_ops = run(main())
    g = plain["groups"][0]
    assert g["group_state"] == "Stable" and g["protocol_type"] == "consumer" and g["protocol_data"] == "range"
    assert sorted(m["member_id"] for m in g["members"]) == sorted(ids)
    assert {m["client_id"] for m in g["members"]} == {"c0", "c1"}
    assert {m["client_host"] for m in g["members"]} == {"/127.0.0.1"}
    assert all(decode_assignment(m["member_assignment"]).partitions == (("t6", 0), ("t6", 1)) for m in g["members"])
    assert g["authorized_operations"] == -2147483648
    assert plain["groups"][1]["group_state"] == "Dead"
    assert with_ops["groups"][0]["authorized_operations"] == apis.GROUP_OPERATIONS == 328


def test_offset_commit_checks_topics_like_kafka_apis(server):
    async def main():
        c = await connect(server)
        r = await c.request(8, {"group_id": "simple", "generation_id_or_member_epoch": -1, "member_id": "",
                                "topics": [{"name": "t1", "partitions": [{"partition_index": 0, "committed_offset": 4},
                                                                         {"partition_index": 1, "committed_offset": 4}]},
                                           {"name": "zzz", "partitions": [{"partition_index": 0, "committed_offset": 4}]}]}, 8)
        fetched = await c.request(9, {"groups": [{"group_id": "simple", "topics": None}]}, 8)
        deleted = await c.request(47, {"group_id": "simple", "topics": [
            {"name": "t1", "partitions": [{"partition_index": 0}, {"partition_index": 3}]}]}, 0)
        after = await c.request(9, {"groups": [{"group_id": "simple", "topics": None}]}, 8)
        return r, fetched, deleted, after
    r, fetched, deleted, after = run(main())
    errors = {(t["name"], p["partition_index"]): p["error_code"] for t in r["topics"] for p in t["partitions"]}
    assert errors == {("t1", 0): 0, ("t1", 1): 3, ("zzz", 0): 3}
    offsets = {(t["name"], p["partition_index"]): p["committed_offset"]
               for t in fetched["groups"][0]["topics"] for p in t["partitions"]}
    assert offsets == {("t1", 0): 4}
    assert deleted["error_code"] == 0
    assert {(t["name"], p["partition_index"]): p["error_code"] for t in deleted["topics"] for p in t["partitions"]} == {
        ("t1", 0): 0, ("t1", 3): 3}
    assert after["groups"][0]["topics"] == []


# --- ordering and parking ------------------------------------------------------------------------------

def test_responses_come_in_request_order_and_a_parked_join_holds_only_its_connection(server):
    async def main():
        a = await connect(server, "a")
        b = await connect(server, "b")
        first = await a.request(11, join_fields(group="order", session_ms=5000), 5)
        member = first["member_id"]
        joined = await a.request(11, join_fields(member, group="order"), 5)
        assert joined["error_code"] == 0
        synced = await a.request(14, {"group_id": "order", "generation_id": 1, "member_id": member,
                                      "assignments": [{"member_id": member, "assignment": b""}]}, 3)
        assert synced["error_code"] == 0
        b_first = await b.request(11, join_fields(group="order"), 5)  # b is now a pending member
        # The leader rejoins: a rebalance that waits for b; an ApiVersions queued behind it
        parked = a.send(11, join_fields(member, group="order"), 5)
        join_id = a.last_correlation_id
        behind = a.send(18, {}, 0)
        behind_id = a.last_correlation_id
        controls, peer = server.server.controls, a.local_address
        status = server.server.listener.request_status
        assert await server.handled(a, join_id) == "pending"  # parked
        # the ApiVersions has arrived whole and waits unread behind the parked join
        await server.on_loop(controls.until(lambda: status(peer, behind_id) == "queued", what="the queued request"))
        # another connection is served meanwhile, and a's requests still wait
        other = await b.request(3, {"topics": []}, 1)
        assert other["brokers"]
        assert server.call(lambda: (status(peer, join_id), status(peer, behind_id))) == ("pending", "queued")
        order = []
        parked.add_done_callback(lambda f: order.append("join"))
        behind.add_done_callback(lambda f: order.append("api_versions"))
        b_joined = await b.request(11, join_fields(b_first["member_id"], group="order"), 5)
        await asyncio.wait_for(asyncio.gather(parked, behind), 10)
        return order, parked.result(), b_joined
    order, a_joined, b_joined = run(main())
    assert order == ["join", "api_versions"]
    assert a_joined["error_code"] == 0 and b_joined["error_code"] == 0
    assert a_joined["generation_id"] == b_joined["generation_id"] == 2


def test_shutdown_answers_parked_requests_not_coordinator():
    s = InProcessServer(config=CONFIG, catalog=apis.TopicCatalog({"t6": 6}), track_requests=True)
    try:
        async def main():
            a = await connect(s, "a")
            b = await connect(s, "b")
            _m, parked, _pending = await park_a_join(s, a, b, "bye")
            asyncio.run_coroutine_threadsafe(s.server.shutdown("test"), s.loop)
            return await asyncio.wait_for(parked, 10)
        answer = run(main())
        assert answer["error_code"] == 16  # NOT_COORDINATOR: the client looks for the new coordinator
    finally:
        s.stop()


# --- trace --------------------------------------------------------------------------------------------

def test_trace_records_every_event_and_replays_to_the_same_commands(tmp_path):
    path = tmp_path / "trace.jsonl"
    s = InProcessServer(config=CONFIG, catalog=apis.TopicCatalog({"t6": 6}), trace=str(path))
    try:
        async def main():
            clients, ids, generation = await form_group(s, "traced", members=3)
            for c, m in zip(clients, ids):
                assert (await c.request(12, {"group_id": "traced", "generation_id": generation, "member_id": m}, 3))[
                    "error_code"] == 0
            await clients[0].request(8, {"group_id": "traced", "generation_id_or_member_epoch": generation,
                                         "member_id": ids[0], "topics": [{"name": "t6", "partitions": [
                                             {"partition_index": 0, "committed_offset": 3}]}]}, 8)
            await clients[1].request(13, {"group_id": "traced", "members": [{"member_id": ids[1]}]}, 5)
        run(main())
    finally:
        s.stop()
    records = list(trace_format.read_lines(path.read_text().splitlines(), str(path)))
    types = {r["type"] for r in records}
    assert {"LoadPartition", "JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "LeaveGroup", "Write",
            "WriteCompleted", "Respond", "SetTimer", "UnloadPartition"} <= types
    by_group = {}
    for r in records:
        if r["group_id"] is not None:
            by_group.setdefault(r["group_id"], []).append(r["seq"])
    assert by_group["traced"] == list(range(len(by_group["traced"])))
    # Replaying the recorded inputs through a fresh coordinator gives exactly the recorded outputs.
    coordinator = Coordinator(CONFIG)
    expected, i = [], 0
    while i < len(records):
        record = records[i]
        assert record["dir"] == "in", record
        event = trace_format.value_of(record)
        outs = []
        i += 1
        while i < len(records) and records[i]["dir"] == "out":
            outs.append({"type": records[i]["type"], "data": records[i]["data"]})
            i += 1
        got = [trace_format.encode(c) for c in coordinator.handle(event)]
        assert got == outs, f"replay differs at {record['type']} (record {i})"
        expected.append(record)
    assert any(json.dumps(r["data"]).count("traced") for r in expected)


def test_recording_a_trace_does_not_change_answers(tmp_path):
    async def scenario(s):
        a = await connect(s, "a")
        out = [await a.request(11, join_fields(group="same"), 5)]
        member = out[0]["member_id"]
        out.append(await a.request(11, join_fields(member, group="same"), 5))
        out.append(await a.request(14, {"group_id": "same", "generation_id": 1, "member_id": member,
                                        "assignments": [{"member_id": member, "assignment": b"x"}]}, 3))
        out.append(await a.request(12, {"group_id": "same", "generation_id": 1, "member_id": member}, 3))
        out.append(await a.request(8, {"group_id": "same", "generation_id_or_member_epoch": 1, "member_id": member,
                                       "topics": [{"name": "t6", "partitions": [{"partition_index": 1,
                                                                                 "committed_offset": 9}]}]}, 8))
        out.append(await a.request(15, {"groups": ["same"]}, 5))
        out.append(await a.request(9, {"groups": [{"group_id": "same", "topics": None}]}, 8))
        out.append(await a.request(13, {"group_id": "same", "members": [{"member_id": member}]}, 5))
        return out

    results = []
    for trace in (None, str(tmp_path / "t.jsonl")):
        s = InProcessServer(config=CONFIG, catalog=apis.TopicCatalog({"t6": 6}), trace=trace,
                            new_uuid=iter([f"u{i}" for i in range(100)]).__next__)
        try:
            results.append(run(scenario(s)))
        finally:
            s.stop()
    assert results[0] == results[1]
    assert (tmp_path / "t.jsonl").stat().st_size > 0


def test_a_client_vanishing_with_a_parked_join_does_not_stop_the_group(server):
    """A client that vanishes with a parked join: the others carry on and the server is fine."""
    async def main():
        a = await connect(server, "a")
        b = await connect(server, "b")
        ma, _parked, mb = await park_a_join(server, a, b, "vanish", session_ms=500)
        await a.close()  # gone, with its join parked
        joined = await b.request(11, join_fields(mb, group="vanish", session_ms=500), 5)
        return ma, joined
    ma, joined = run(main())
    assert joined["error_code"] == 0 and joined["generation_id"] == 2
    # the vanished member's session expires; the group rebalances without it
    server.until(lambda: ma not in server.server.core.coordinator.group("vanish").members, 10,
                 "the vanished member to expire")


@pytest.mark.parametrize("version", range(0, 5))
def test_the_heartbeat_fast_path_builds_what_request_event_builds(version):
    from groupcoord.adapters.protocol.translate import request_event
    from groupcoord.adapters.wire.handlers import heartbeat_event

    body = {"group_id": "g", "generation_id": 3, "member_id": "m", "group_instance_id": "i" if version >= 3 else None}
    if version < 3:
        del body["group_instance_id"]
    decoded = kc.decode_request(kc.encode_request(12, version, 5, "c", kc.request_body(12, version, body))[4:])
    fields = kc.to_fields(decoded.body)
    assert heartbeat_event(fields, version, ("x", 5), 77, "c", "/h") == request_event(
        "Heartbeat", version, fields, request_id=("x", 5), now_ms=77, client_id="c", client_host="/h")


class _BrokenStorage:
    """Every write fails with a storage bug."""

    name, durable = "broken", False

    async def load(self, partition):
        return ()

    def append(self, partition, records):
        raise RuntimeError("disk on fire")

    async def close(self):
        pass


def test_a_write_in_flight_holds_the_commit_and_the_results_behind_it():
    s = InProcessServer(config=CONFIG, catalog=apis.TopicCatalog({"t6": 6}), track_requests=True)
    controls = s.server.controls
    try:
        async def main():
            clients, ids, generation = await form_group(s, "slow", members=1)
            member = clients[0]
            other = await connect(s, "other")
            s.call(controls.hold_writes)  # writes stay in flight until released
            commit = member.send(8, {"group_id": "slow", "generation_id_or_member_epoch": generation,
                                     "member_id": ids[0], "topics": [{"name": "t6", "partitions": [
                                         {"partition_index": 0, "committed_offset": 5}]}]}, 8)
            assert await s.handled(member) == "pending"  # its write is in flight
            beat = other.send(12, {"group_id": "slow", "generation_id": generation, "member_id": ids[0]}, 3)
            assert await s.handled(other) == "pending"  # a result without records waits for earlier writes
            keys = [(member.local_address, member.last_correlation_id), (other.local_address, other.last_correlation_id)]
            s.call(controls.release_writes)
            results = await asyncio.gather(commit, beat)
            answered = s.call(lambda: [a for a in s.server.listener.answers if a in keys])
            return answered, keys, results
        answered, keys, (commit, beat) = run(main())
        assert answered == keys  # the commit first, then the heartbeat held behind its write
        assert commit["topics"][0]["partitions"][0]["error_code"] == 0 and beat["error_code"] == 0
    finally:
        s.stop()


def test_a_failing_storage_fails_the_commit_not_the_server():
    import io as _io

    from groupcoord.adapters.wire.log import Log

    stream = _io.StringIO()
    s = InProcessServer(config=CONFIG, catalog=apis.TopicCatalog({"t6": 6}), storage=_BrokenStorage(),
                        log=Log(stream, fmt="json"))
    try:
        async def main():
            c = await connect(s)
            return await c.request(8, {"group_id": "simple", "topics": [{"name": "t6", "partitions": [
                {"partition_index": 0, "committed_offset": 5}]}]}, 8)
        response = run(main())
        assert response["topics"][0]["partitions"][0]["error_code"] == 16  # KAFKA_STORAGE_ERROR -> NOT_COORDINATOR
        assert '"storage_error"' in stream.getvalue()
    finally:
        s.stop()


# --- answers written together ---------------------------------------------------------------------

def _read_frames(sock, count: int) -> list[bytes]:
    data = b""
    frames = []
    while len(frames) < count:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
        while len(data) >= 4 and len(data) >= 4 + int.from_bytes(data[:4], "big"):
            size = int.from_bytes(data[:4], "big")
            frames.append(data[4:4 + size])
            data = data[4 + size:]
    return frames


def test_the_answers_to_frames_read_together_are_written_together_in_order(server):
    import socket
    frames = b"".join(kc.encode_request(18, 0, cid, "c", kc.request_body(18, 0, {})) for cid in (7, 8, 9))
    before = server.call(lambda: dict(server.server.listener.stats))
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(frames)  # one segment on loopback: one read on the server
        answers = _read_frames(sock, 3)
    after = server.call(lambda: dict(server.server.listener.stats))
    assert [int.from_bytes(a[:4], "big") for a in answers] == [7, 8, 9]
    assert after["requests"] - before["requests"] == 3
    assert after["writes"] - before["writes"] == 1


def test_the_answers_of_one_loop_turn_go_out_together_at_the_next_turns_start():
    """Each connection's answers wait for the end of the turn that read their requests: on
    loopback a send also wakes the client, cheaper for answers sent back to back."""
    from groupcoord.adapters.bench.frames import CountingTransport
    from groupcoord.adapters.storage.memory import MemoryStorage
    from groupcoord.adapters.wire.listener import Connection
    from groupcoord.adapters.wire.log import Log
    from groupcoord.adapters.wire.options import ServerOptions
    from groupcoord.adapters.wire.server import GroupServer

    async def main():
        s = GroupServer(CONFIG, apis.TopicCatalog({"t6": 6}), options=ServerOptions(host="127.0.0.1", port=0),
                        storage=MemoryStorage(), log=Log(io.StringIO(), level="warning"))
        await s.start()
        try:
            transports = []
            for cid in range(2):
                conn = Connection(s.listener)
                transports.append(CountingTransport(conn))
                conn.connection_made(transports[-1])
                conn.data_received(kc.encode_request(18, 0, cid, "c", kc.request_body(18, 0, {})))
            written_in_turn = [bytes(t.written) for t in transports]
            await asyncio.sleep(0)  # the next turn
            return written_in_turn, [bytes(t.written) for t in transports]
        finally:
            await s.shutdown("test finished")

    written_in_turn, written_next = run(main())
    assert written_in_turn == [b"", b""]
    # one whole answer on each connection, to its own request
    assert [len(w) == 4 + int.from_bytes(w[:4], "big") for w in written_next] == [True, True]
    assert [int.from_bytes(w[4:8], "big") for w in written_next] == [0, 1]


def test_answers_before_a_frame_that_closes_the_connection_are_still_written(server):
    import socket
    answered = kc.encode_request(18, 0, 5, "c", kc.request_body(18, 0, {}))
    unknown_api = struct.pack(">ihhih", 10, 9999, 0, 6, -1)  # no such API: Kafka closes the connection
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(answered + unknown_api)
        answers = _read_frames(sock, 2)
    assert [int.from_bytes(a[:4], "big") for a in answers] == [5]  # then the connection closed
