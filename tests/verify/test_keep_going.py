"""``groupcoord verify --keep-going`` and ``--known``: every distinct divergence of a recording
(two planted in one group, one in another), each printed once with its signature, error names
beside codes and a pointer to Kafka's source; a known-findings file sets findings aside."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from verify_scripts import CONFIG, TWO_MEMBERS, planted

from groupcoord.adapters.cli.main import main
from groupcoord.adapters.verify.findings import read_known, signature
from groupcoord.adapters.verify.from_core import observe
from groupcoord.adapters.verify.observed import dump

HEARTBEAT = "Heartbeat v4 error_code: NONE (0) vs REBALANCE_IN_PROGRESS (27)"
FETCH = "OffsetFetch v7 topics[].partitions[].committed_offset: 42 vs 7"


@pytest.fixture(scope="module")
def two():
    return observe(TWO_MEMBERS, CONFIG)


def _recording(two, tmp_path):
    """Group g: a heartbeat answered REBALANCE_IN_PROGRESS (line 7) and a fetch answered a
    wrong offset (line 10); group h: the same heartbeat fault."""
    g = planted(two, 7, error_code=27)
    fetch = next(o for o in g if o.index == 10)
    wrong = json.loads(json.dumps(fetch.response))
    wrong["topics"][0]["partitions"][0]["committed_offset"] = 7
    g = planted(g, 10, topics=wrong["topics"])
    h = observe([(t, c, a, v, {**b, "group_id": "h"}, cl) for t, c, a, v, b, cl in TWO_MEMBERS], CONFIG)
    h = planted(h, 7, error_code=27)
    return dump(g + h, tmp_path / "t")


def test_the_signature_names_the_api_version_field_and_both_values():
    assert signature("DeleteGroups", 2, "results[].error_code", 69, 0) == \
        "DeleteGroups v2 results[].error_code: GROUP_ID_NOT_FOUND (69) vs NONE (0)"
    assert signature("JoinGroup", 9, "member_id", "m-1", "") == 'JoinGroup v9 member_id: <id> vs ""'


def test_without_keep_going_a_group_stops_at_its_first_divergence(two, tmp_path, capsys):
    _recording(two, tmp_path)
    assert main(["verify", str(tmp_path / "t"), "--out", str(tmp_path / "r")]) == 1
    out = capsys.readouterr().out
    assert HEARTBEAT in out and FETCH not in out, out


def test_keep_going_reports_every_distinct_divergence_once(two, tmp_path, capsys):
    _recording(two, tmp_path)
    assert main(["verify", str(tmp_path / "t"), "--out", str(tmp_path / "r"), "--keep-going"]) == 1
    out = capsys.readouterr().out
    assert "2 distinct divergences in 2 groups:" in out, out
    tail = out.split("2 distinct divergences in 2 groups:")[1].splitlines()[1:]
    assert tail[0].strip().startswith(HEARTBEAT) and "# 2 groups" in tail[0], out
    assert tail[1].strip() == FETCH, out
    # each finding printed once per group it is in, with names beside codes and Kafka's source
    assert out.count(f"finding: {HEARTBEAT}") == 2 and out.count(f"finding: {FETCH}") == 1, out
    assert out.count("broker answered:") == 3, out
    assert '"error_code": "REBALANCE_IN_PROGRESS (27)"' in out
    assert "Kafka's answer: Kafka 1eb7644 GroupMetadataManager.java classicGroupHeartbeat" in out
    assert "Kafka's answer: Kafka 1eb7644 OffsetMetadataManager.java fetchOffsets" in out
    # times from the first request
    assert "line 1: JoinGroup received at +0 ms" in out
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["findings"] == {HEARTBEAT: 2, FETCH: 1} and summary["known_set_aside"] == 0


def test_known_findings_are_set_aside_and_only_known_ones_exit_0(two, tmp_path, capsys):
    _recording(two, tmp_path)
    known = tmp_path / "known.txt"
    # pasted from the output above: its indentation and the count comment are fine
    known.write_text(f"# Tansu-like heartbeat\n  {HEARTBEAT}   # 2 groups\n\n")
    assert read_known(str(known)) == {HEARTBEAT}
    assert main(["verify", str(tmp_path / "t"), "--out", str(tmp_path / "r"), "--keep-going",
                 "--known", str(known)]) == 1
    out = capsys.readouterr().out
    assert "1 distinct divergence in 2 groups:" in out and "2 known findings set aside" in out, out
    assert f"finding: {HEARTBEAT}" not in out and f"finding: {FETCH}" in out, out
    known.write_text(f"{HEARTBEAT}\n{FETCH}\n")
    assert main(["verify", str(tmp_path / "t"), "--out", str(tmp_path / "r"), "--keep-going",
                 "--known", str(known)]) == 0
    out = capsys.readouterr().out
    assert "0 distinct divergences in 2 groups" in out and "3 known findings set aside" in out, out
    assert "DIVERGES" not in out, out


def test_an_unreadable_known_file_is_one_line_and_exit_2(two, tmp_path, capsys):
    dump(two, tmp_path / "t")
    assert main(["verify", str(tmp_path / "t"), "--known", str(tmp_path / "missing.txt")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("groupcoord verify: error: --known"), err


def test_kafka_sources_and_peers_rows_name_what_they_point_at():
    from groupcoord.adapters.verify import findings

    assert findings.kafka_source("DeleteGroups", "results[].error_code", 69) == \
        "Kafka 1eb7644 GroupMetadataManager.java validateDeleteGroup, line 5977, through group(), line 585"
    assert findings.kafka_source("Heartbeat", "error_code", 22).endswith("validateClassicGroupHeartbeat, line 5599")
    assert findings.kafka_source("Heartbeat", "error_code", 0).endswith("classicGroupHeartbeat, line 5501")
    assert findings.kafka_source("FindCoordinator", "error_code", 0) is None
    peers = (Path(__file__).resolve().parents[2] / "spec" / "peers.md").read_text()
    for sig, where in findings.PEERS.items():
        row = where.rsplit(" row ", 1)[1]
        assert f"\n| {row} |" in peers, (sig, where)
        assert f"`{sig}`" in peers, f"spec/peers.md does not list the signature {sig}"


def test_a_late_answer_set_aside_for_its_timing_is_still_compared(two):
    """A finding of timing alone (the broker had not answered when the spec did) set aside
    leaves what the answer says, once it comes, to be compared: a late answer with a wrong error
    diverges on that error; the same answer right, only late, conforms; taken as given whole,
    nothing of it is compared."""
    from groupcoord.adapters.verify.search import CONFORMS, DIVERGES, Settings, timing_only, verify_group

    settings = Settings(config=CONFIG, timer_tolerance_ms=100, budget=50_000, from_birth=True)
    hb = next(o for o in two if o.index == 7)
    waiting = [attrs.evolve(o, response=None, send_us=None, open_until_us=o.recv_us + 3_000_000)
               if o.index == 7 else o for o in two if o.index <= 7]
    first = verify_group("g", waiting, settings)
    assert first.verdict == DIVERGES and first.line == 7 and timing_only(first), first
    late = [attrs.evolve(o, send_us=hb.recv_us + 3_000_000) if o.index == 7 else o for o in two if o.index <= 7]
    wrong = planted(late, 7, error_code=27)
    found = verify_group("g", wrong, settings, given_timing=frozenset({7}))
    assert found.verdict == DIVERGES and found.line == 7 and found.mismatch[2:] == ("error_code", 0, 27), found
    assert verify_group("g", late, settings, given_timing=frozenset({7})).verdict == CONFORMS
    assert verify_group("g", wrong, settings, given=frozenset({7})).verdict == CONFORMS


def _generations_from_zero(pairs: list) -> list:
    """The recording as a broker numbering generations from 0 (Tansu 0.6) would make it: one
    less in every answer and every request that names one."""
    def less(body):
        if body is None:
            return None
        out = dict(body)
        for field in ("generation_id", "generation_id_or_member_epoch"):
            if isinstance(out.get(field), int) and out[field] > 0:
                out[field] -= 1
        return out
    return [attrs.evolve(o, request=less(o.request), response=less(o.response)) for o in pairs]


def test_keep_going_goes_on_in_the_brokers_numbering_of_generations(two):
    """A broker whose first generation is 0 diverges once there; the search then goes on with
    the broker's numbering, so a heartbeat of that generation answered wrongly is a finding of
    its own, not a consequence of the first, and the right answers after it conform."""
    from groupcoord.adapters.verify.run import signature_of
    from groupcoord.adapters.verify.search import DIVERGES, Settings, verify_group

    settings = Settings(config=CONFIG, timer_tolerance_ms=100, budget=50_000, from_birth=True)
    zero = _generations_from_zero(two)
    first = verify_group("g", zero, settings, keep_going=True)
    assert first.verdict == DIVERGES and signature_of(first) == "JoinGroup v5 generation_id: 1 vs 0", first
    assert all(signature_of(f) == signature_of(first) for f in first.more), [signature_of(f) for f in first.more]
    found = verify_group("g", planted(zero, 7, error_code=27), settings, keep_going=True)
    heartbeat = [f for f in (found, *found.more) if f.line == 7]
    assert len(heartbeat) == 1 and signature_of(heartbeat[0]) == HEARTBEAT and heartbeat[0].follows is None, \
        [(f.line, signature_of(f), f.follows) for f in (found, *found.more)]


def test_keep_going_takes_a_refused_join_as_the_refusal_left_the_group():
    """A broker that asks a v3 join for a member id (Tansu, spec/peers.md row 9) has, by its
    answer, a group with that member pending and none admitted: a DeleteGroups then succeeds, as
    in Kafka after a v4 join's MEMBER_ID_REQUIRED, and only the refusal is a finding. A broker
    that refuses the delete still diverges there."""
    from verify_scripts import join

    from groupcoord.adapters.verify.run import signature_of
    from groupcoord.adapters.verify.search import DIVERGES, Settings, verify_group
    from groupcoord.core.config import CoordinatorConfig

    config = CoordinatorConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0)
    pairs = observe([(1000, 1, "JoinGroup", 3, join(), "c1"),
                     (1003, 2, "DeleteGroups", 2, {"groups_names": ["g"]}, "admin")], config)
    refused = planted(pairs, 1, error_code=79, member_id="tansu-1", generation_id=-1, leader="", members=[],
                      protocol_name="")
    settings = Settings(config=config, timer_tolerance_ms=300, budget=50_000, from_birth=True)
    deleted = planted(refused, 2, results=[{"group_id": "g", "error_code": 0}])
    v = verify_group("g", deleted, settings, keep_going=True)
    assert v.verdict == DIVERGES and signature_of(v) == "JoinGroup v3 error_code: NONE (0) vs MEMBER_ID_REQUIRED (79)"
    assert v.more == (), [signature_of(f) for f in v.more]
    kept = planted(refused, 2, results=[{"group_id": "g", "error_code": 68}])
    v = verify_group("g", kept, settings, keep_going=True)
    assert [signature_of(f) for f in v.more] == \
        ["DeleteGroups v2 results[].error_code: NONE (0) vs NON_EMPTY_GROUP (68)"], [signature_of(f) for f in v.more]


def test_a_divergence_is_named_by_an_allowed_answer_with_the_brokers_error_code():
    """Tansu's first generation (spec/peers.md row 2), as a 120-example probe met it: the execution
    that explained the most answered the rejoin UNKNOWN_MEMBER_ID, another the same join NONE with
    generation 1. The broker said NONE: the finding is generation 1 vs 0, so every run reaching that
    fault names it alike. When the best execution has the broker's error code, it names the finding
    (a DescribeGroups state, row 18, is not renamed after another execution's answer); when no
    execution has it, it does too (row 9: a v3 join answered MEMBER_ID_REQUIRED)."""
    from groupcoord.adapters.verify.findings import closest_mismatch

    member = {"member_id": "c1", "group_instance_id": None, "metadata": "0001"}
    broker = {"error_code": 0, "generation_id": 0, "leader": "c1", "member_id": "c1", "members": [member],
              "protocol_name": "range", "protocol_type": "consumer", "skip_assignment": False}
    refused = {**broker, "error_code": 25, "generation_id": -1, "leader": "", "members": [], "protocol_name": None,
               "protocol_type": None}
    first = {**broker, "generation_id": 1}
    with_two = {**first, "members": [member, {**member, "member_id": "c2"}]}
    assert closest_mismatch([refused, with_two, first], broker, refused) == ("generation_id", 1, 0)
    assert closest_mismatch([refused, with_two], broker, refused) == ("generation_id", 1, 0)
    assert closest_mismatch([refused], broker, refused) == ("error_code", 25, 0)
    required = {**refused, "error_code": 79}
    assert closest_mismatch([first, {**refused, "error_code": 23}], required, first) == ("error_code", 0, 79)
    described = {"groups": [{"error_code": 0, "group_state": "Unknown", "members": [member]}]}
    completing = {"groups": [{"error_code": 0, "group_state": "CompletingRebalance", "members": [member]}]}
    empty = {"groups": [{"error_code": 0, "group_state": "Empty", "members": []}]}
    assert closest_mismatch([completing, empty], described, completing) == ("groups[].group_state",
                                                                             "CompletingRebalance", "Unknown")
    assert closest_mismatch([], broker) is None
