"""A second peer: librdkafka's mock cluster (``groupcoord.testing.librdkafka_mock``), with
confluent-kafka consumers recorded through ``groupcoord record``; ``verify`` finds where the
mock's consumer groups part from Kafka's (spec/peers.md lists each with Kafka's source).

``verify`` stops a group at its first divergence, so each later one (findings 1 to 6, a
dynamic group) is found in a copy of the recording with the earlier ones edited as Kafka
answers (the edits below, one per finding); with every edit made the recording conforms.
Finding 10 comes from a second recording (static members). Findings real consumers do not show
every time, or that end the mock, are made with requests sent by hand: a leader syncing first
(7), two protocol preferences (9), ApiVersions above the mock's (8).
"""

from __future__ import annotations

import json
import re
import struct

import pytest

pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (the test extra carries it)")

from observe_harness import RawMember, RecorderProcess, connect, read_frame, request
from server_harness import Worker, balanced, wait_until

from groupcoord.adapters.cli.main import main
from groupcoord.adapters.protocol import codec
from groupcoord.adapters.protocol.codec import FrameError
from groupcoord.testing.librdkafka_mock import start_mock

TOPIC = "t4"  # the mock gives every topic 4 partitions
# The mock's initial rebalance delay is 3000 ms (Kafka's default; not settable from a client);
# session timeouts of 3 s need Kafka's lower bound lowered, as for Tansu.
SETTINGS = ["--group.min.session.timeout.ms", "500"]
MOCK_DELAY = ["--group.initial.rebalance.delay.ms", "3000"]
# Kafka extends a new group's first join phase by another delay when members joined during the
# first one (finding 3); the mock does not. Kafka with half the delay ends it where the mock did.
HALF_DELAY = ["--group.initial.rebalance.delay.ms", "1500"]
ATTEMPTS = 6  # the race is the clients' own; on a busy machine it comes more often


class _Raced(Exception):
    """The leader's SyncGroup reached the mock before a follower's (finding 7: the follower's
    answer cannot be decoded, and the group goes otherwise): the recording is made again."""


def _leader_synced_first(records: list[dict]) -> bool:
    return any(r["api"] == "SyncGroup" and r["send_us"] is not None and r["response"] is None for r in records)


def _until(recorder: RecorderProcess, condition, what) -> None:
    wait_until(lambda: condition() or _leader_synced_first(recorder.records()), 60, what)
    if _leader_synced_first(recorder.records()):
        raise _Raced


def _dynamic_group(recorder: RecorderProcess, workers: list[Worker]) -> None:
    """Three consumers form a group, one commits, one leaves, the two left rebalance, commit and
    read the offsets back, then leave."""
    workers += [Worker("confluent", recorder.bootstrap, "peer", TOPIC, client_id=f"c{i}") for i in range(3)]
    _until(recorder, lambda: balanced(workers, 4), lambda: f"three consumers assigned: {[w.assignment for w in workers]}")
    first = next(w for w in workers if w.assignment)
    first.send(cmd="commit", offsets={str(p): 5 for p in first.assignment})
    first.wait_event("committed")
    workers[2].close()
    _until(recorder, lambda: balanced(workers[:2], 4),
           lambda: f"two consumers reassigned: {[w.assignment for w in workers[:2]]}")
    workers[0].send(cmd="commit", offsets={str(p): 7 for p in workers[0].assignment})
    workers[0].wait_event("committed")
    workers[1].send(cmd="committed", partitions=[0, 1, 2, 3])
    workers[1].wait_event("committed_offsets")
    for w in workers[:2]:
        w.close()


def _static_group(recorder: RecorderProcess, workers: list[Worker]) -> None:
    """Two static members (instance ids s0, s1) form a group; s1 closes (a static member sends
    no LeaveGroup) and comes back as a new consumer with the same instance id; both leave."""
    workers += [Worker("confluent", recorder.bootstrap, "static", TOPIC, client_id=f"s{i}", instance_id=f"s{i}",
                       session_ms=6000) for i in range(2)]
    _until(recorder, lambda: balanced(workers, 4), lambda: f"two static members assigned: {[w.assignment for w in workers]}")
    workers[1].close()
    workers.append(Worker("confluent", recorder.bootstrap, "static", TOPIC, client_id="s1-again", instance_id="s1",
                          session_ms=6000))
    _until(recorder, lambda: balanced([workers[0], workers[2]], 4),
           lambda: f"s0 and s1 again assigned: {[w.assignment for w in workers]}")
    for w in (workers[0], workers[2]):
        w.close()


def _record(tmp_path_factory, name: str, scenario):
    """``scenario`` recorded in front of a new mock; made again (at most ATTEMPTS times) when raced."""
    for attempt in range(ATTEMPTS):
        out = tmp_path_factory.mktemp(f"{name}-{attempt}") / "rec"
        mock = start_mock(topics=[TOPIC])
        recorder = RecorderProcess(mock.bootstrap, out)
        workers: list[Worker] = []
        try:
            assert mock.partitions == {TOPIC: 4}, mock.partitions
            scenario(recorder, workers)
        except _Raced:
            continue
        finally:
            for w in workers:
                w.stop()
            recorder.stop()
            stopped = mock.stop()
        assert stopped == 0, mock.stderr()
        if not _leader_synced_first(recorder.records()):
            return out
    pytest.fail(f"in {ATTEMPTS} recordings a leader's SyncGroup always reached the mock before a follower's")


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    return _record(tmp_path_factory, "librdkafka-mock", _dynamic_group)


@pytest.fixture(scope="module")
def static_recording(tmp_path_factory):
    return _record(tmp_path_factory, "librdkafka-mock-static", _static_group)


def _verify(path, tmp_path, capsys, *settings: str) -> tuple[int, str]:
    code = main(["verify", str(path), "--out", str(tmp_path / "report"), *SETTINGS, *settings])
    return code, capsys.readouterr().out


def _records(path) -> list[dict]:
    return [json.loads(line) for line in (path / "observed.jsonl").read_text().splitlines()]


def _edited(recording, tmp_path, *edits) -> object:
    """A copy of the recording with each edit applied, in order."""
    records = _records(recording)
    for edit in edits:
        edit(records)
    out = tmp_path / "edited"
    out.mkdir()
    (out / "observed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return out


# --- the edits: what Kafka answers instead, one per finding ----------------------------------------------------

def join_v3(records: list[dict]) -> None:
    """Finding 1: as if the consumers had joined with JoinGroup v3, which has no
    MEMBER_ID_REQUIRED (the mock's answers are the same at v3, less the instance ids)."""
    for r in records:
        if r["api"] == "JoinGroup" and r["version"] >= 4:
            r["version"] = 3
            r["request"].pop("group_instance_id", None)
            for m in (r["response"] or {}).get("members", []):
                m.pop("group_instance_id", None)


def generations_from_1(records: list[dict]) -> None:
    """Finding 2: every generation one lower (the first is 1), in answers and requests alike."""
    for r in records:
        for body in (r["request"], r["response"]):
            for key in ("generation_id", "generation_id_or_member_epoch"):
                if body and (body.get(key) or 0) > 0:
                    body[key] -= 1


def fetch_no_offset_as_kafka(records: list[dict]) -> None:
    """Finding 4: a partition without a committed offset: leader epoch -1, metadata ""."""
    for r in records:
        if r["api"] == "OffsetFetch" and r["response"]:
            for p in (p for t in r["response"]["topics"] for p in t["partitions"] if p["committed_offset"] < 0):
                p["committed_leader_epoch"] = -1
                p["metadata"] = ""


def fetch_committed_epoch(records: list[dict]) -> None:
    """Finding 6: a committed offset's leader epoch is the one committed with it."""
    committed = {}
    for r in sorted(records, key=lambda r: r["recv_us"]):
        if r["api"] == "OffsetCommit" and r["response"]:
            for t in r["request"]["topics"]:
                for p in t["partitions"]:
                    committed[(t["name"], p["partition_index"])] = p["committed_leader_epoch"]
        elif r["api"] == "OffsetFetch" and r["response"]:
            for t in r["response"]["topics"]:
                for p in t["partitions"]:
                    if p["committed_offset"] >= 0:
                        p["committed_leader_epoch"] = committed[(t["name"], p["partition_index"])]


def joins_end_on_rejoin(records: list[dict]) -> None:
    """Finding 5: a rebalance of a group with members ends when the last of them rejoined (1 ms
    on), not session.timeout.ms - 1000 after it began; an answer held behind such a JoinGroup
    answer on its connection (a LeaveGroup) comes 1 ms after it, as Kafka would give it."""
    joins = [r for r in records if r["api"] == "JoinGroup" and r["response"] and r["response"]["error_code"] == 0]
    generations = sorted({r["response"]["generation_id"] for r in joins})
    moved = {}
    for generation in generations[1:]:
        batch = [r for r in joins if r["response"]["generation_id"] == generation]
        at = max(r["recv_us"] for r in batch) + 1000
        for r in batch:
            moved[r["conn"]] = (r["send_us"], at)
            r["send_us"] = at
    for r in records:
        if r["api"] != "JoinGroup" and r["conn"] in moved and r["send_us"] is not None:
            old, new = moved[r["conn"]]
            if r["recv_us"] < old <= r["send_us"] <= old + 5000:
                r["send_us"] = max(r["recv_us"], new) + 1000


ALL = (join_v3, generations_from_1, fetch_no_offset_as_kafka, joins_end_on_rejoin, fetch_committed_epoch)


# --- the findings -----------------------------------------------------------------------------------------------

def _divergence(out: str, edited) -> tuple[str, dict]:
    """The first divergence the report names: its API, and its record in ``edited``."""
    found = re.search(r"^DIVERGES \w+: (\w+) v\d+ \(line (\d+)\)", out, re.M)
    assert found, out
    return found[1], _records(edited)[int(found[2]) - 1]


def _generation(record: dict) -> int | None:
    return (record["response"] or {}).get("generation_id", record["request"].get("generation_id"))


def test_1_the_mock_admits_a_member_without_an_id_at_join_group_v5(recording, tmp_path, capsys):
    code, out = _verify(recording, tmp_path, capsys, *MOCK_DELAY)
    assert code == 1, out
    head = out.split("DIVERGES", 1)[1].split("inputs leading there")[0]
    assert head.startswith(" peer: JoinGroup v5"), out
    assert '"error_code": "NONE (0)"' in head and '"error_code": "MEMBER_ID_REQUIRED (79)"' in head, out
    assert "finding: JoinGroup v5 error_code: MEMBER_ID_REQUIRED (79) vs NONE (0)" in head, out


def test_2_the_mocks_first_generation_is_2(recording, tmp_path, capsys):
    """The first generation diverges; with generations one lower it conforms (test 4 goes on
    past it). The judge names either a JoinGroup answer ("generation_id: spec 1, broker 2") or
    the first SyncGroup, whose member id the spec has not handed out in the execution that got
    furthest (it held the join answers back within the timer tolerance: a judge issue)."""
    edited = _edited(recording, tmp_path, join_v3)
    code, out = _verify(edited, tmp_path, capsys, *HALF_DELAY)
    api, record = _divergence(out, edited)
    assert code == 1 and _generation(record) == 2, out
    assert (api == "JoinGroup" and "generation_id: spec 1, broker 2" in out or
            api == "SyncGroup" and "spec UNKNOWN_MEMBER_ID (25), broker NONE (0)" in out), out


def test_3_the_mock_does_not_extend_the_first_join_phase(recording, tmp_path, capsys):
    """With Kafka's delay (the mock's) the first generation diverges: the mock answered the
    joins 3 s after the first, Kafka waits another 3 s for the members that joined meanwhile
    (named at a JoinGroup answer or at the first SyncGroup, as in test 2). With half the delay,
    the first generation conforms: the next divergence is later (test 4)."""
    edited = _edited(recording, tmp_path, join_v3, generations_from_1)
    code, out = _verify(edited, tmp_path, capsys, *MOCK_DELAY)
    api, record = _divergence(out, edited)
    assert code == 1 and api in ("JoinGroup", "SyncGroup") and _generation(record) == 1, out
    assert ("the spec answers at" in out and "after the broker did" in out or
            "spec UNKNOWN_MEMBER_ID (25), broker NONE (0)" in out), out


def test_4_no_offset_is_fetched_with_leader_epoch_0_and_null_metadata(recording, tmp_path, capsys):
    code, out = _verify(_edited(recording, tmp_path, join_v3, generations_from_1), tmp_path, capsys, *HALF_DELAY)
    assert code == 1 and "DIVERGES peer: OffsetFetch v6" in out, out
    assert "committed_leader_epoch: spec -1, broker 0; topics[].partitions[].metadata: spec '', broker None" in out, out


def test_6_a_committed_offset_is_fetched_with_the_partitions_leader_epoch(recording, tmp_path, capsys):
    edited = _edited(recording, tmp_path, join_v3, generations_from_1, fetch_no_offset_as_kafka, joins_end_on_rejoin)
    code, out = _verify(edited, tmp_path, capsys, *HALF_DELAY)
    assert code == 1 and "DIVERGES peer: OffsetFetch v6" in out, out
    head = next(line for line in out.splitlines() if line.startswith("DIVERGES"))
    assert head.endswith("committed_leader_epoch: spec -1, broker 0"), out


def test_5_a_rebalance_ends_only_session_timeout_less_1_s_after_it_began(recording, tmp_path, capsys):
    edited = _edited(recording, tmp_path, join_v3, generations_from_1, fetch_no_offset_as_kafka, fetch_committed_epoch)
    code, out = _verify(edited, tmp_path, capsys, *HALF_DELAY)
    assert code == 1 and "DIVERGES peer: JoinGroup v3" in out and "the broker only at" in out, out
    assert "finding: JoinGroup v3 answer: sooner vs later" in out, out


def test_keep_going_goes_on_in_the_mocks_numbering_of_generations(recording, tmp_path, capsys):
    """With finding 1 edited and --keep-going: the mock's first generation is 2 (finding 2);
    the search adopts its numbering from that answer on, so the members' SyncGroups and
    heartbeats of that generation are judged as they are (they conform), neither findings of
    their own nor consequences of finding 2."""
    edited = _edited(recording, tmp_path, join_v3)
    code, out = _verify(edited, tmp_path, capsys, *HALF_DELAY, "--keep-going")
    listed = out.split("distinct divergence")[1].split("report:")[0].splitlines()[1:]
    assert code == 1 and any(line.strip().startswith("JoinGroup v") and "generation_id: 1 vs 2" in line
                             for line in listed), out
    assert not any(line.strip().startswith(("SyncGroup", "Heartbeat")) for line in listed), out
    assert "FOLLOWS peer: SyncGroup" not in out and "FOLLOWS peer: Heartbeat" not in out, out


def test_with_every_finding_edited_the_recording_conforms(recording, tmp_path, capsys):
    code, out = _verify(_edited(recording, tmp_path, *ALL), tmp_path, capsys, *HALF_DELAY)
    assert code == 0 and "1 conform" in out, out


def test_10_a_static_member_coming_back_is_added_beside_its_old_self(static_recording, tmp_path, capsys):
    """s1 comes back with an unknown member id: the mock adds it as another member (the leader's
    answers list instance s1 twice) and answers it only when a rebalance ends; Kafka replaces
    the member of that instance id and, Stable with the protocol unchanged, answers at once.
    verify blames the first answer after s1 came back that the mock's rebalance changed (the
    execution explaining the most answers in order: spec/verify.md, Verdicts)."""
    records = _records(static_recording)
    again = next(r for r in records if r["api"] == "JoinGroup" and r["client_id"] == "s1-again")
    listed = [sorted(m["group_instance_id"] for m in r["response"]["members"])
              for r in records if r["api"] == "JoinGroup" and r["response"] and r["response"]["members"]]
    assert ["s0", "s1", "s1"] in listed, listed
    assert again["send_us"] - again["recv_us"] > 1_000_000, again  # held until a rebalance ended
    edited = _edited(static_recording, tmp_path, generations_from_1, fetch_no_offset_as_kafka)
    code, out = _verify(edited, tmp_path, capsys, *HALF_DELAY)
    api, record = _divergence(out, edited)
    # the first answer the mock's extra rebalance changes: a member's heartbeat answered
    # REBALANCE_IN_PROGRESS (the spec replaced s1 with no rebalance), or a JoinGroup after it
    assert code == 1 and record["recv_us"] >= again["recv_us"], out
    assert api == "JoinGroup" or (api == "Heartbeat" and "broker REBALANCE_IN_PROGRESS (27)" in out), out


# --- by hand ----------------------------------------------------------------------------------------------------

def test_7_a_follower_syncing_after_the_leader_is_answered_invalid_request(tmp_path, capsys):
    """Once the leader's SyncGroup brought every member's assignment, the mock ends the sync
    phase; a follower's SyncGroup after it is answered INVALID_REQUEST with a null assignment,
    which SyncGroup v3 cannot carry (Kafka: NONE and the follower's assignment, from Stable).
    ``record`` cannot decode that answer and keeps its size and first bytes; ``verify`` holds an
    undecodable answer to diverge (every answer the spec gives decodes): with findings 2 and 3
    set aside, that is the group's one finding."""
    member_meta = bytes.fromhex("0000000000010002743400000000")  # consumer protocol v0: topic t4
    out = tmp_path / "rec"
    with start_mock(topics=[TOPIC]) as mock:
        recorder = RecorderProcess(mock.bootstrap, out)
        leader = follower = None
        try:
            a, b = RawMember(recorder.port, "a"), RawMember(recorder.port, "b")
            join = {"group_id": "sync", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
                    "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": member_meta}]}
            a.send("JoinGroup", 3, join)
            b.send("JoinGroup", 3, join)
            answers = {m: m.answer(15) for m in (a, b)}  # the mock's first join phase: 3 s
            assert all(answers.values()), answers
            leader, follower = (a, b) if answers[a]["members"] else (b, a)
            generation = answers[a]["generation_id"]
            ids = {m: answers[m]["member_id"] for m in (a, b)}
            got = leader.call("SyncGroup", 3, {"group_id": "sync", "generation_id": generation, "member_id": ids[leader],
                                               "assignments": [{"member_id": ids[leader], "assignment": b"\x00\x01"},
                                                               {"member_id": ids[follower], "assignment": b"\x00\x02"}]})
            assert got["error_code"] == 0 and got["assignment"] == b"\x00\x01", got
            follower.sock.sendall(request(codec.API_KEYS["SyncGroup"], 3, 99, {
                "group_id": "sync", "generation_id": generation, "member_id": ids[follower], "assignments": []}, "b"))
            frame = read_frame(follower.sock)
            # size, correlation id, throttle time, error code, assignment length (-1: null)
            assert struct.unpack(">iiihi", frame) == (len(frame) - 4, 99, 0, 42, -1), frame.hex()
            with pytest.raises(FrameError):
                codec.decode_response(codec.API_KEYS["SyncGroup"], 3, frame[4:])
        finally:
            for m in (leader, follower):
                if m is not None:
                    m.close()
            recorder.stop()
    records = _records(out)
    assert [r["response"] is None for r in records if r["api"] == "SyncGroup"] == [False, True], records
    assert [r["undecodable"] for r in records if r["api"] == "SyncGroup"][1] == f"14 bytes: {frame[4:].hex()}"
    edited = _edited(out, tmp_path, generations_from_1)
    code, text = _verify(edited, tmp_path, capsys, *HALF_DELAY)
    assert code == 1 and "finding: SyncGroup v3 answer: decodable vs undecodable (14 bytes)" in text, text
    assert text.count("DIVERGES") == 1, text


def test_8_an_api_versions_request_above_v2_is_answered_in_a_layout_no_version_has(tmp_path):
    """ApiVersions v4 (kafka-python 3.0's first request): the mock answers UNSUPPORTED_VERSION
    with a one-byte key count after the error code, neither v0's layout (Kafka answers an
    unsupported ApiVersions at v0) nor v4's: kafka-python cannot decode it and never connects."""
    with start_mock() as mock:
        s = connect(mock.port)
        try:
            s.sendall(request(codec.API_KEYS["ApiVersions"], 4, 7, {"client_software_name": "groupcoord-test",
                                                                   "client_software_version": "1"}))
            frame = read_frame(s)
            assert frame[4:8] == struct.pack(">i", 7) and frame[8:10] == struct.pack(">h", 35), frame.hex()
            assert frame[10] == 1, frame.hex()  # one key (ApiVersions 0..2) counted in one byte
            with pytest.raises(FrameError):  # not v0
                codec.decode_response(codec.API_KEYS["ApiVersions"], 0, frame[4:])
            # and read as v4 (a compact count is the count + 1), no keys, and the key that is
            # there (18, 0..2) read as a throttle time of 0x00120000 ms
            as_v4 = codec.to_fields(codec.decode_response(codec.API_KEYS["ApiVersions"], 4, frame[4:])[1])
            assert as_v4["api_keys"] == [] and as_v4["throttle_time_ms"] == 0x00120000, as_v4
        finally:
            s.close()


def test_the_mock_advertises_these_group_apis():
    """What the mock offers consumers (ApiVersions v0): the classic group APIs at these
    versions, and none of DescribeGroups, ListGroups, DeleteGroups, OffsetDelete."""
    with start_mock() as mock:
        s = connect(mock.port)
        try:
            s.sendall(request(codec.API_KEYS["ApiVersions"], 0, 1, {}))
            answer = codec.to_fields(codec.decode_response(codec.API_KEYS["ApiVersions"], 0, read_frame(s)[4:])[1])
        finally:
            s.close()
        assert mock.alive()
    assert mock.proc.returncode == 0
    offered = {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}
    group = {name: offered.get(codec.API_KEYS[name]) for name in (
        "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch", "FindCoordinator",
        "DescribeGroups", "ListGroups", "DeleteGroups", "OffsetDelete")}
    assert group == {"JoinGroup": (0, 6), "SyncGroup": (0, 4), "Heartbeat": (0, 5), "LeaveGroup": (0, 4),
                     "OffsetCommit": (0, 9), "OffsetFetch": (0, 6), "FindCoordinator": (0, 3),
                     "DescribeGroups": None, "ListGroups": None, "DeleteGroups": None, "OffsetDelete": None}, group


def test_9_members_preferring_different_protocols_abort_the_mock():
    """One member prefers range, two roundrobin (each supports both): Kafka's vote picks
    roundrobin; the mock asserts that every member's first protocol is the leader's, and the
    process that hosts it aborts when the join phase ends (the members get no answer)."""
    member_meta = bytes.fromhex("0000000000010002743400000000")
    mock = start_mock(topics=[TOPIC])
    members = []
    try:
        for name, protocols in (("a", ["range", "roundrobin"]), ("b", ["roundrobin", "range"]),
                                ("c", ["roundrobin", "range"])):
            m = RawMember(mock.port, name)
            members.append(m)
            m.send("JoinGroup", 3, {"group_id": "vote", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                    "member_id": "", "protocol_type": "consumer",
                                    "protocols": [{"name": p, "metadata": member_meta} for p in protocols]})
        with pytest.raises(ConnectionError):
            members[0].answer(15)  # the mock's first join phase ends 3 s after the first join
        wait_until(lambda: not mock.alive(), 10, "the mock's process to end")
    finally:
        for m in members:
            m.close()
        code = mock.stop()
    assert code == -6, (code, mock.stderr())  # SIGABRT
    assert "rd_kafka_mock_cgrp_classic_elect_leader: Assertion" in mock.stderr(), mock.stderr()
