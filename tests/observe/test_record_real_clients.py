"""Real Kafka clients (kafka-python, confluent-kafka, aiokafka consumers in their own processes,
tests/support/client_worker.py) form groups on ``groupcoord serve`` through ``groupcoord record``:
the recording holds the group's request/response pairs; the clients reach the group only
through the proxy's listeners; Parquet holds what JSON Lines holds."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from observe_harness import RecorderProcess, connect, read_frame, request, response_fields
from server_harness import ServerProcess, Worker, balanced, wait_until

from groupcoord.adapters.observe.trace import COLUMNS, FORMAT, PARQUET, ObservedWriter, read_observed
from groupcoord.adapters.protocol.codec import API_KEYS

PHASE_S = 60
GROUP_APIS = {"JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "OffsetFetch", "LeaveGroup", "FindCoordinator"}


@pytest.fixture(scope="module")
def server():
    s = ServerProcess(topics=("t6=6",))
    yield s
    assert s.stop() == 143, s.log_text()


def beating(recorder: RecorderProcess, group: str) -> bool:
    """A Heartbeat of ``group`` answered NONE is in the file already (it is flushed as it goes)."""
    return any(r["api"] == "Heartbeat" and r["request"]["group_id"] == group and r["response"]
               and r["response"]["error_code"] == 0 for r in recorder.records())


def run_group(started, client: str, bootstrap: str, group: str, recorder: RecorderProcess) -> None:
    """Two consumers join, heartbeat, commit and read their offsets, then leave."""
    ws = [started(Worker, client, bootstrap, group, client_id=f"{client}-{i}") for i in range(2)]
    wait_until(lambda: balanced(ws), PHASE_S, lambda: f"3/3 in {group}: {[w.assignment for w in ws]}")
    wait_until(lambda: beating(recorder, group), PHASE_S, "a heartbeat answered NONE in the recording")
    ws[0].send(cmd="commit", offsets={str(p): 10 + p for p in ws[0].assignment})
    ws[0].wait_event("committed", 30)
    ws[0].send(cmd="committed", partitions=ws[0].assignment)
    ws[0].wait_event("committed_offsets", 30)
    for w in ws:
        w.close()
        assert w.proc.returncode == 0, w.stderr[-10:]


def errors_of(record: dict) -> list[int]:
    """Every error code in a response, top level and nested (OffsetCommit's per partition)."""
    found: list[int] = []

    def walk(value) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k == "error_code":
                    found.append(v)
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(record["response"])
    return found


@pytest.mark.parametrize("client", ["kafka-python", "confluent", "aiokafka"])
def test_a_real_group_through_the_proxy_is_recorded(server, started, tmp_path, client):
    group = f"observed-{client}"
    recorder = started(RecorderProcess, server.bootstrap, tmp_path / "rec")
    run_group(started, client, recorder.bootstrap, group, recorder)
    wait_until(lambda: server.last_group_state(group)["state"] == "Empty", 20, "the group to be Empty")
    assert recorder.stop() == 143, recorder.log()

    records = recorder.records()  # this test's recorder saw only this group
    assert GROUP_APIS <= {r["api"] for r in records}, {r["api"] for r in records}
    for api in GROUP_APIS:  # each API has pairs answered without an error
        assert any(r["response"] is not None and set(errors_of(r)) == {0} for r in records if r["api"] == api), api
    for r in records:
        assert list(r) == list(COLUMNS)
        assert (r["send_us"] is None) == (r["response"] is None), r
        assert r["send_us"] is None or r["recv_us"] <= r["send_us"], r
        assert r["api_key"] == API_KEYS[r["api"]] and r["client_id"], r
    by_conn: dict[int, list[dict]] = {}
    for r in records:
        by_conn.setdefault(r["conn"], []).append(r)
    for pairs in by_conn.values():  # one connection's requests and answers go in order
        pairs.sort(key=lambda r: r["recv_us"])
        answered = [r for r in pairs if r["send_us"] is not None]
        assert [r["send_us"] for r in answered] == sorted(r["send_us"] for r in answered)
        # only what was in flight when a consumer closed its connection (a heartbeat, librdkafka's
        # coordinator query) is unanswered: the connection's last requests
        assert answered == pairs[:len(answered)], [(r["api"], r["send_us"]) for r in pairs]
        assert len({r["broker"] for r in pairs}) == 1
    assert {r["api"] for r in records if r["response"] is None} <= {"Heartbeat", "FindCoordinator"}
    # The clients reached the group only through the proxy's listener for the server's node 0,
    # which the rewritten Metadata/FindCoordinator answers named; the recorded FindCoordinator
    # answers are the server's own.
    assert {r["broker"] for r in records if r["api"] != "FindCoordinator"} == {0}
    found = [r["response"] for r in records if r["api"] == "FindCoordinator" and r["response"]]
    assert {c["port"] for f in found for c in f.get("coordinators") or [f]} == {server.port}
    meta = recorder.meta()
    assert meta["format"] == FORMAT and meta["upstream"] == server.bootstrap and meta["listen"] == recorder.bootstrap
    assert list(meta["brokers"]) == ["0"] and meta["stopped_us"] >= meta["started_us"] > 0
    assert {"ApiVersions", "Metadata"} <= set(meta["passed_through"]) and meta["undecoded"] == {}


def test_clients_are_told_the_proxys_addresses_and_get_the_servers_bytes_otherwise(server, started, tmp_path):
    recorder = started(RecorderProcess, server.bootstrap, tmp_path / "rec")
    api_versions = request(18, 3, 1, {"client_software_name": "raw", "client_software_version": "1"})
    answers = {}
    for way, port in (("direct", server.port), ("proxy", recorder.port)):
        with connect(port) as s:
            s.sendall(api_versions)
            answers[way, "ApiVersions"] = read_frame(s)
            s.sendall(request(3, 12, 2, {"topics": None}))
            answers[way, "Metadata"] = response_fields(3, 12, read_frame(s))
            s.sendall(request(10, 4, 3, {"key_type": 0, "coordinator_keys": ["g"]}))
            answers[way, "FindCoordinator"] = response_fields(10, 4, read_frame(s))
    assert answers["proxy", "ApiVersions"] == answers["direct", "ApiVersions"]  # byte for byte
    listener = recorder.meta()["brokers"]["0"]
    for way, address in (("direct", server.bootstrap), ("proxy", listener)):
        assert [f"{b['host']}:{b['port']}" for b in answers[way, "Metadata"]["brokers"]] == [address]
        assert [f"{c['host']}:{c['port']}" for c in answers[way, "FindCoordinator"]["coordinators"]] == [address]
    direct, proxied = answers["direct", "Metadata"], answers["proxy", "Metadata"]
    assert {**proxied, "brokers": None} == {**direct, "brokers": None}  # nothing else changed
    assert recorder.stop() == 143


def test_parquet_holds_what_json_lines_holds(server, started, tmp_path):
    """kafka-python through two recorders in a row: Parquet in front of JSON Lines in front of
    the server. Both saw the same pairs (the same requests and responses, but for the address
    the inner one's FindCoordinator answers carry); then the JSON Lines records written again
    as Parquet read back equal."""
    group = "observed-parquet"
    inner = started(RecorderProcess, server.bootstrap, tmp_path / "inner")
    outer = started(RecorderProcess, inner.bootstrap, tmp_path / "outer", fmt="parquet")
    run_group(started, "kafka-python", outer.bootstrap, group, outer)
    wait_until(lambda: server.last_group_state(group)["state"] == "Empty", 20, "the group to be Empty")
    assert outer.stop() == 143 and inner.stop() == 143
    assert sorted(p.name for p in (tmp_path / "outer").iterdir()) == ["meta.json", PARQUET]
    table = pq.read_table(tmp_path / "outer" / PARQUET)
    assert table.column_names == list(COLUMNS) and table.num_rows > 0

    def asked(records: list[dict]) -> list[tuple]:
        return sorted((r["api"], r["version"], r["correlation_id"], r["client_id"], json.dumps(r["request"]))
                      for r in records)

    def answered(records: list[dict]) -> set[tuple]:
        return {(r["api"], r["version"], r["correlation_id"], json.dumps(r["request"]), json.dumps(r["response"]))
                for r in records if r["response"] is not None and r["api"] != "FindCoordinator"}

    assert asked(outer.records()) == asked(inner.records())
    # (a heartbeat in flight at a consumer's close may be answered to the inner one only)
    assert answered(outer.records()) <= answered(inner.records())
    assert len(answered(inner.records()) - answered(outer.records())) <= 2

    records = inner.records()
    writer = ObservedWriter(tmp_path / "again", "parquet")
    for r in records:
        writer.write(r)
    writer.close()
    assert read_observed(tmp_path / "again") == records
