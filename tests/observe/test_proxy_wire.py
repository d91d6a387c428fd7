"""``groupcoord record`` (a subprocess) in front of fake brokers, on raw sockets: what is not
recorded passes through byte for byte both ways, each broker node gets its own listener, a
request without a response is still written, and a malformed frame closes only its own
connection."""

from __future__ import annotations

import os
import signal
import struct

import pytest
from observe_harness import (
    HOLD_GROUP,
    FakeBroker,
    RecorderProcess,
    closed_by_peer,
    connect,
    read_frame,
    request,
    response_fields,
)
from server_harness import wait_until


def header(api_key: int, version: int, correlation_id: int, client_id: bytes = b"raw") -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_what_is_not_recorded_passes_through_byte_for_byte(started, tmp_path):
    broker = started(FakeBroker)
    broker.brokers = [(1, broker.port)]
    recorder = started(RecorderProcess, f"127.0.0.1:{broker.port}", tmp_path / "rec")
    frames = [
        request(18, 3, 1, {"client_software_name": "raw", "client_software_version": "1"}),  # ApiVersions
        framed(header(0, 9, 2) + os.urandom(200)),  # Produce: a body no codec looks at
        framed(header(999, 0, 3) + b"an api key no one knows"),
        framed(header(11, 99, 4) + b"JoinGroup in a version kio does not know"),
    ]
    with connect(recorder.port) as s:
        answers = []
        for frame in frames:
            s.sendall(frame)
            answers.append(read_frame(s))
    assert broker.got() == b"".join(frames)  # what the broker got is what the client sent
    assert answers == [FakeBroker.canned(f) for f in frames]  # and the other way round
    assert recorder.stop() == 143
    assert recorder.records() == []
    meta = recorder.meta()
    assert meta["passed_through"] == {"ApiVersions": 1, "Produce": 1, "api key 999": 1}
    assert meta["undecoded"] == {"JoinGroup v99": 1}
    assert meta["brokers"] == {} and meta["stopped_us"] >= meta["started_us"]


def test_each_broker_gets_a_listener_and_clients_are_sent_to_it(started, tmp_path):
    one, two = started(FakeBroker), started(FakeBroker)
    for b in (one, two):
        b.brokers, b.coordinator = [(1, one.port), (2, two.port)], 2
    recorder = started(RecorderProcess, f"127.0.0.1:{one.port}", tmp_path / "rec")
    with connect(recorder.port) as s:
        s.sendall(request(3, 12, 1, {"topics": None}))
        metadata = response_fields(3, 12, read_frame(s))
        s.sendall(request(10, 4, 2, {"key_type": 0, "coordinator_keys": ["g"]}))
        found = response_fields(10, 4, read_frame(s))
        s.sendall(request(10, 2, 3, {"key": "g", "key_type": 0}))
        found_v2 = response_fields(10, 2, read_frame(s))
    listeners = {b["node_id"]: (b["host"], b["port"]) for b in metadata["brokers"]}
    assert set(listeners) == {1, 2} and {h for h, _ in listeners.values()} == {"127.0.0.1"}
    ports = {p for _, p in listeners.values()}
    assert len(ports) == 2 and not ports & {recorder.port, one.port, two.port}
    [coordinator] = found["coordinators"]
    assert (coordinator["node_id"], coordinator["host"], coordinator["port"]) == (2, *listeners[2])
    assert (found_v2["node_id"], found_v2["host"], found_v2["port"]) == (2, *listeners[2])

    heartbeat = request(12, 4, 9, {"group_id": "g", "generation_id": 1, "member_id": "m"})
    with connect(listeners[2][1]) as s:
        s.sendall(heartbeat)
        assert response_fields(12, 4, read_frame(s))["error_code"] == 0
    assert two.got() == heartbeat  # node 2's listener forwards to node 2
    assert recorder.stop() == 143
    meta = recorder.meta()
    assert meta["brokers"] == {"1": f"127.0.0.1:{listeners[1][1]}", "2": f"127.0.0.1:{listeners[2][1]}"}
    assert meta["passed_through"] == {"Metadata": 1}
    records = recorder.records()
    assert [(r["conn"], r["broker"], r["api"], r["version"], r["correlation_id"]) for r in records] == [
        (1, -1, "FindCoordinator", 4, 2), (1, -1, "FindCoordinator", 2, 3), (2, 2, "Heartbeat", 4, 9)]
    # the recorded FindCoordinator responses are the broker's own, before the rewrite
    assert records[0]["response"]["coordinators"][0]["port"] == two.port
    assert records[1]["response"]["port"] == two.port
    assert records[2]["request"] == {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    assert records[2]["response"] == {"throttle_time_ms": 0, "error_code": 0}
    assert all(r["client_id"] == "raw" and r["recv_us"] <= r["send_us"] for r in records)


def test_a_request_left_without_a_response_is_written_with_none(started, tmp_path):
    broker = started(FakeBroker)
    recorder = started(RecorderProcess, f"127.0.0.1:{broker.port}", tmp_path / "rec")
    held = {"group_id": HOLD_GROUP, "generation_id": 1, "member_id": "m"}
    with connect(recorder.port) as s:
        s.sendall(request(12, 4, 1, held))
        wait_until(lambda: len(broker.got()) > 0, 10, "the held heartbeat to reach the broker")
    wait_until(lambda: recorder.records(), 10, "the closed connection's request to be written")
    [closed] = recorder.records()
    assert (closed["correlation_id"], closed["send_us"], closed["response"]) == (1, None, None)
    assert closed["request"]["group_id"] == HOLD_GROUP

    s = connect(recorder.port)  # still waiting when the proxy stops
    try:
        s.sendall(request(12, 3, 2, held))
        wait_until(lambda: broker.got().count(HOLD_GROUP.encode()) == 2, 10, "the second held heartbeat")
        assert recorder.stop(signal.SIGINT) == 130
    finally:
        s.close()
    records = recorder.records()
    assert [(r["conn"], r["version"], r["send_us"], r["response"]) for r in records] == [
        (1, 4, None, None), (2, 3, None, None)]


@pytest.mark.parametrize("bad", [
    struct.pack(">i", -1),  # a negative size
    framed(b"\x00\x0c\x00"),  # shorter than a request header
    framed(header(11, 5, 8) + b"\xff" * 10),  # a JoinGroup v5 whose body does not parse
], ids=["negative-size", "short-header", "bad-join-body"])
def test_a_malformed_frame_closes_only_its_connection(started, tmp_path, bad):
    broker = started(FakeBroker)
    recorder = started(RecorderProcess, f"127.0.0.1:{broker.port}", tmp_path / "rec")
    api_versions = request(18, 3, 1, {"client_software_name": "raw", "client_software_version": "1"})
    with connect(recorder.port) as bad_one, connect(recorder.port) as good_one:
        good_one.sendall(api_versions)
        assert read_frame(good_one) == FakeBroker.canned(api_versions)
        bad_one.sendall(request(12, 4, 7, {"group_id": HOLD_GROUP, "generation_id": 1, "member_id": "m"}))
        wait_until(lambda: HOLD_GROUP.encode() in broker.got(), 10, "the held heartbeat to reach the broker")
        bad_one.sendall(bad)
        assert closed_by_peer(bad_one)
        good_one.sendall(api_versions)  # the other connection goes on
        assert read_frame(good_one) == FakeBroker.canned(api_versions)
    with connect(recorder.port) as again:  # and the proxy accepts new ones
        again.sendall(api_versions)
        assert read_frame(again) == FakeBroker.canned(api_versions)
    assert bad not in broker.got()  # a malformed frame is not forwarded
    said = [line for line in recorder.log() if line.startswith("connection 1 ")]
    assert len(said) == 1 and said[0].endswith("; closed") and "malformed" in said[0], recorder.log()
    assert recorder.stop() == 143
    [held] = recorder.records()  # the closed connection's waiting request, without a response
    assert (held["conn"], held["api"], held["send_us"], held["response"]) == (1, "Heartbeat", None, None)
    assert recorder.meta()["passed_through"] == {"ApiVersions": 3}



@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_each_record_is_on_disk_once_answered_and_a_killed_recorder_leaves_them(started, tmp_path, fmt):
    broker = started(FakeBroker)
    recorder = started(RecorderProcess, f"127.0.0.1:{broker.port}", tmp_path / "rec", fmt=fmt)
    with connect(recorder.port) as s:
        for n in range(1, 6):
            s.sendall(request(12, 4, n, {"group_id": "g", "generation_id": n, "member_id": "m"}))
            assert response_fields(12, 4, read_frame(s))["error_code"] == 0
            wait_until(lambda: len(recorder.records()) == n, 10, f"record {n} on disk")
    recorder.stop(signal.SIGKILL)
    records = recorder.records()  # Parquet: the journal, never turned into observed.parquet
    assert [r["request"]["generation_id"] for r in records] == [1, 2, 3, 4, 5]
    assert sorted(p.name for p in (tmp_path / "rec").iterdir()) == [
        "meta.json", "observed.jsonl" if fmt == "jsonl" else "observed.partial.jsonl"]
