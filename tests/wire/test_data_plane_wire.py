"""The data plane through the Kafka protocol (kio on both sides), on in-process servers: Produce
answers and refusals, Fetch long polls woken by data and moved by a manual clock, ListOffsets,
topics created and deleted, DeleteRecords, InitProducerId, the transactional APIs refused,
retention on the manual clock, and the fixtures' ``produce``/``records`` helpers."""

from __future__ import annotations

import asyncio

import pytest

from groupcoord.adapters.client.kafka_client import KafkaClient
from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.storage import batches as fmt
from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.testing.servers import start_server

K = kc.API_KEYS


@pytest.fixture(scope="module")
def server():
    s = start_server({"t": 2})
    yield s
    s.stop()


@pytest.fixture
def manual():
    s = start_server({"m": 1}, manual_clock=True)
    yield s
    s.stop()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


async def connect(server) -> KafkaClient:
    return await KafkaClient.connect("127.0.0.1", server.port, client_id="test")


def produce_fields(topic, partition, data, acks=-1):
    return {"acks": acks, "timeout_ms": 1000, "transactional_id": None,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": data}]}]}


def first_partition(answer):
    return answer["responses"][0]["partition_responses"][0]


def test_advertised_versions_are_the_served_ones(server):
    async def main():
        c = await connect(server)
        return await c.request(K["ApiVersions"], {"client_software_name": "t", "client_software_version": "1"}, 3)
    answer = run(main())
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}
    for name, (lo, hi) in [("Produce", (3, 11)), ("Fetch", (4, 17)), ("InitProducerId", (0, 5)),
                           ("CreateTopics", (2, 7)), ("DeleteRecords", (0, 2)), ("EndTxn", (0, 3))]:
        assert ranges[K[name]] == (lo, hi)
        assert all(kc.has_schema(K[name], v) for v in range(lo, hi + 1))


def test_produce_fetch_and_list_offsets(server):
    async def main():
        c = await connect(server)
        good = fmt.encode_batch([(b"k", b"a"), (b"k", b"b")], 1000)
        corrupt = good[:-1] + bytes([good[-1] ^ 0xFF])
        answers = [await c.request(K["Produce"], produce_fields("t", 1, data), v)
                   for v, data in ((3, good), (11, good), (9, corrupt))]
        unknown = await c.request(K["Produce"], produce_fields("nope", 0, good), 9)
        bad_acks = await c.request(K["Produce"], produce_fields("t", 1, good, acks=2), 9)
        fetched = await c.request(K["Fetch"], {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
            {"topic": "t", "partitions": [{"partition": 1, "fetch_offset": 1, "partition_max_bytes": 1 << 20,
                                           "current_leader_epoch": 0}]}]}, 11)
        by_id = await c.request(K["Fetch"], {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
            {"topic_id": apis.TopicCatalog.topic_id("t"), "partitions": [
                {"partition": 1, "fetch_offset": 9, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1}]}]}, 17)
        offsets = await c.request(K["ListOffsets"], {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "t", "partitions": [{"partition_index": 1, "timestamp": t} for t in (-1, -2, 1000, -3)]}]}, 9)
        return answers, unknown, bad_acks, fetched, by_id, offsets
    answers, unknown, bad_acks, fetched, by_id, offsets = run(main())
    assert [(first_partition(a)["error_code"], first_partition(a)["base_offset"]) for a in answers] == \
        [(0, 0), (0, 2), (2, -1)]  # the corrupt batch: CORRUPT_MESSAGE
    assert first_partition(unknown)["error_code"] == 3 and first_partition(bad_acks)["error_code"] == 21
    p = fetched["responses"][0]["partitions"][0]
    assert p["error_code"] == 0 and p["high_watermark"] == 4 and p["log_start_offset"] == 0
    batches, _used = fmt.decode_batches(p["records"])
    assert [r for b in batches for r in b.records] == [(0, b"k", b"a"), (1, b"k", b"b"), (2, b"k", b"a"),
                                                       (3, b"k", b"b")]
    assert by_id["responses"][0]["partitions"][0]["error_code"] == 1  # OFFSET_OUT_OF_RANGE
    assert [(p["offset"], p["timestamp"]) for p in offsets["topics"][0]["partitions"]] == \
        [(4, -1), (0, -1), (0, 1000), (0, 1000)]


def test_a_held_fetch_is_woken_by_data(server):
    async def main():
        c, producer = await connect(server), await connect(server)
        created = await c.request(K["CreateTopics"], {"timeout_ms": 1000, "validate_only": False, "topics": [
            {"name": "woken", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]}, 7)
        assert created["topics"][0]["error_code"] == 0  # a topic of its own: the module's server is shared
        loop = asyncio.get_running_loop()
        start = loop.time()
        fetch = asyncio.ensure_future(c.request(K["Fetch"], {"max_wait_ms": 2000, "min_bytes": 1, "topics": [
            {"topic": "woken", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]},
            11))
        done, _ = await asyncio.wait({fetch}, timeout=0.2)
        held = not done  # no data yet: the Fetch waits
        await producer.request(K["Produce"], produce_fields("woken", 0, fmt.encode_batch([(None, b"x")], 5)), 9)
        answer = await fetch
        return held, answer, loop.time() - start
    held, answer, took = run(main())
    assert held
    assert fmt.decode_batches(answer["responses"][0]["partitions"][0]["records"])[0][0].records == [(0, None, b"x")]
    assert took < 1.8  # woken by the data, not by its 2 s wait


def test_manual_clock_moves_fetch_waits_and_retention(manual):
    async def main():
        c = await connect(manual)
        created = await c.request(K["CreateTopics"], {"timeout_ms": 1000, "validate_only": False, "topics": [
            {"name": "r", "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": [{"name": "retention.ms", "value": "1000"}]}]}, 7)
        assert created["topics"][0]["error_code"] == 0
        fetch = asyncio.ensure_future(c.request(K["Fetch"], {"max_wait_ms": 500, "min_bytes": 1, "topics": [
            {"topic": "m", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1000}]}]}, 11))
        await asyncio.sleep(0.3)
        held = not fetch.done()
        await asyncio.get_running_loop().run_in_executor(None, manual.advance, 500)
        answer = await asyncio.wait_for(fetch, 5)
        return held, answer
    held, answer = run(main())
    assert held and answer["responses"][0]["partitions"][0]["error_code"] == 0
    assert manual.produce("r", [b"old"]) == [0]  # stamped with the server's time, 0
    manual.advance(600)
    assert manual.produce("r", [b"new"]) == [1]
    manual.advance(401)  # "old" is now older than retention.ms
    assert [(r.offset, r.value) for r in manual.records("r")] == [(1, b"new")]


def test_topics_delete_records_and_producer_ids(server):
    async def main():
        c = await connect(server)
        create = await c.request(K["CreateTopics"], {"timeout_ms": 1000, "validate_only": False, "topics": [
            {"name": "made", "num_partitions": 3, "replication_factor": -1, "assignments": [], "configs": []},
            {"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []},
            {"name": "bad name!", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []},
            {"name": "x3", "num_partitions": 1, "replication_factor": 3, "assignments": [], "configs": []},
            {"name": "x0", "num_partitions": 0, "replication_factor": 1, "assignments": [], "configs": []},
            {"name": "xc", "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": [{"name": "no.such", "value": "1"}]}]}, 7)
        meta = await c.request(K["Metadata"], {"topics": [{"name": "made", "topic_id": None}]}, 12)
        for _ in range(3):
            await c.request(K["Produce"], produce_fields("made", 2, fmt.encode_batch([(b"k", b"v")], 1)), 9)
        deleted = await c.request(K["DeleteRecords"], {"timeout_ms": 1000, "topics": [
            {"name": "made", "partitions": [{"partition_index": 2, "offset": 2}, {"partition_index": 9, "offset": 0}]},
        ]}, 2)
        pid = [await c.request(K["InitProducerId"], {"transactional_id": None, "transaction_timeout_ms": 60000,
                                                     "producer_id": -1, "producer_epoch": -1}, v) for v in (0, 5)]
        txn = await c.request(K["InitProducerId"], {"transactional_id": "tx", "transaction_timeout_ms": 60000}, 4)
        end = await c.request(K["EndTxn"], {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                                            "committed": True}, 3)
        add = await c.request(K["AddPartitionsToTxn"], {"v3_and_below_transactional_id": "tx",
                                                        "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
                                                        "v3_and_below_topics": [{"name": "t", "partitions": [0]}]}, 3)
        gone = await c.request(K["DeleteTopics"], {"topic_names": ["made", "never"], "timeout_ms": 1000}, 5)
        after = await c.request(K["Metadata"], {"topics": [{"name": "made", "topic_id": None}],
                                                "allow_auto_topic_creation": False}, 12)
        return create, meta, deleted, pid, txn, end, add, gone, after
    create, meta, deleted, pid, txn, end, add, gone, after = run(main())
    assert [t["error_code"] for t in create["topics"]] == [0, 36, 17, 38, 37, 40]
    assert len(meta["topics"][0]["partitions"]) == 3
    assert [(p["error_code"], p["low_watermark"]) for p in deleted["topics"][0]["partitions"]] == [(0, 2), (3, -1)]
    assert [(p["error_code"], p["producer_epoch"]) for p in pid] == [(0, 0), (0, 0)]
    assert pid[1]["producer_id"] == pid[0]["producer_id"] + 1
    assert txn["error_code"] == 35 and end["error_code"] == 35
    assert add["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"] == 35
    assert [r["error_code"] for r in gone["responses"]] == [0, 3]
    assert after["topics"][0]["error_code"] == 3


def test_fixture_helpers_produce_and_read_back(server):
    assert server.produce("helper", [b"a", "b"], key="k", headers=[("h", b"1")]) == [0, 1]
    records = server.records("helper")
    assert [(r.offset, r.key, r.value, r.headers) for r in records] == [(0, b"k", b"a", (("h", b"1"),)),
                                                                        (1, b"k", b"b", (("h", b"1"),))]
    # Kafka's default partitioner: murmur2(b"foobar") = -790332482, positive part mod 2 = 0
    offset, = server.produce("t", [b"p"], key=b"foobar")
    assert server.records("t", 0)[-1][:3] == (offset, b"foobar", b"p")
    with pytest.raises(ValueError):
        server.produce("t", [b"x"], partition=5)


def test_every_served_version_of_the_data_apis_is_answered(server):
    """Each version ApiVersions advertises decodes and gets its answer, error-free where the
    request is good."""
    batch = fmt.encode_batch([(b"k", b"v")], 1)

    def request(name, v):
        if name == "Produce":
            return produce_fields("t", 0, batch)
        if name == "Fetch":
            topic = {"topic_id": apis.TopicCatalog.topic_id("t")} if v >= 13 else {"topic": "t"}
            return {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "session_epoch": -1, "topics": [
                {**topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                          "current_leader_epoch": -1}]}]}
        if name == "ListOffsets":
            return {"replica_id": -1, "topics": [{"name": "t", "partitions": [{"partition_index": 0,
                                                                               "timestamp": -1}]}]}
        if name == "InitProducerId":
            return {"transactional_id": None, "transaction_timeout_ms": 1000, "producer_id": -1, "producer_epoch": -1}
        if name == "CreateTopics":
            return {"timeout_ms": 1000, "topics": [{"name": f"v{v}", "num_partitions": 1, "replication_factor": 1}]}
        if name == "DeleteTopics":
            return {"timeout_ms": 1000, "topic_names": [f"v{v + 1}"], "topics": [{"name": f"v{v + 1}"}]}
        if name == "DeleteRecords":
            return {"timeout_ms": 1000, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 0}]}]}
        if name == "AddPartitionsToTxn":
            return {"v3_and_below_transactional_id": "x", "v3_and_below_topics": [{"name": "t", "partitions": [0]}]}
        if name == "TxnOffsetCommit":
            return {"transactional_id": "x", "group_id": "g", "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]}
        return {"transactional_id": "x", "group_id": "g"}

    def errors(answer):
        found = []

        def walk(value):
            if isinstance(value, dict):
                for key, item in value.items():
                    if key.endswith("error_code"):
                        found.append(item)
                    walk(item)
            elif isinstance(value, list):
                for item in value:
                    walk(item)
        walk(answer)
        return set(found)

    async def main():
        c = await connect(server)
        out = {}
        for name in ("Produce", "Fetch", "ListOffsets", "InitProducerId", "CreateTopics", "DeleteTopics",
                     "DeleteRecords", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit"):
            lo, hi = apis.served_versions()[K[name]]
            for v in range(lo, hi + 1):
                out[(name, v)] = await c.request(K[name], request(name, v), v)
        return out
    answers = run(main())
    for (name, v), answer in answers.items():
        expected = {35} if "Txn" in name else {0}
        assert errors(answer) and errors(answer) <= expected, (name, v, answer)
