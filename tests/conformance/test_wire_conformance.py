"""Every conformance scenario again, this time through the Kafka wire protocol: each request is
encoded by kio, sent over TCP to a ``GroupServer`` with a manual clock, and its response read
back, decoded and matched (adapters/conformance/wire.py)."""


import pytest
from paths import ROOT, SUITE

from groupcoord.adapters.conformance.suite import CONSUMER_EXPECTED_FAILURES, consumer_suite_files
from groupcoord.adapters.conformance.wire import WireScenarioRunner

FILES = SUITE
CONSUMER_FILES = consumer_suite_files(ROOT)


@pytest.fixture(scope="module")
def runner():
    r = WireScenarioRunner()
    yield r
    r.close()


def test_the_scenarios_are_there():
    assert len(FILES) >= 100


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_scenario_through_the_wire(runner, path):
    result = runner.run_file(path)
    assert result.passed, result.line()


@pytest.mark.parametrize("path", [
    pytest.param(p, id=f"consumer/{p.name}",
                 marks=[pytest.mark.xfail(reason=CONSUMER_EXPECTED_FAILURES[p.name], strict=True)]
                 if p.name in CONSUMER_EXPECTED_FAILURES else [])
    for p in CONSUMER_FILES])
def test_consumer_scenario_through_the_wire(runner, path):
    result = runner.run_file(path)
    assert result.passed, result.line()


def test_scenario_topic_ids_are_translated_to_the_servers(runner):
    # The server derives a topic's id from its name; the scenario's own id is seen in the answers.
    fid = "0ddba11f-0000-4000-8000-000000000001"
    steps = [{"topics_image": [{"name": "foo", "topic_id": fid, "partitions": 2}]},
             {"send": "ConsumerGroupHeartbeat", "as": "h", "version": 1, "request": {
                 "group_id": "g", "member_id": "m", "member_epoch": 0, "rebalance_timeout_ms": 5000,
                 "subscribed_topic_names": ["foo"], "topic_partitions": []}},
             {"expect": "h", "response": {"member_epoch": 1, "assignment": {
                 "topic_partitions": [{"topic_id": fid, "partitions": [0, 1]}]}}},
             {"send": "ConsumerGroupHeartbeat", "as": "h2", "version": 1, "request": {
                 "group_id": "g", "member_id": "m", "member_epoch": 1, "rebalance_timeout_ms": 5000,
                 "subscribed_topic_names": ["foo"], "topic_partitions": [{"topic_id": fid, "partitions": [0, 1]}]}},
             {"expect": "h2", "response": {"error_code": "NONE", "member_epoch": 1}},
             {"expect_records": [{"type": "ConsumerGroupTargetAssignmentMember", "topic_partitions": [
                 {"topic_id": fid, "partitions": [0, 1]}]}, {"any": True}, {"any": True}, {"any": True},
                 {"any": True}, {"any": True}]}]
    result = runner.run_scenario({"name": "ids", "steps": steps})
    assert result.passed, result.line()


def _join(name, member_id="", version=4):
    return {"send": "JoinGroup", "as": name, "version": version,
            "request": {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                        "member_id": member_id, "protocol_type": "consumer",
                        "protocols": [{"name": "range", "metadata": ""}]}}


def test_a_wrong_expectation_fails_with_the_wire_response(runner):
    steps = [_join("j1"), {"expect": "j1", "response": {"error_code": "NONE"}}]
    result = runner.run_scenario({"name": "wrong", "steps": steps})
    assert not result.passed and result.step == 2 and "MEMBER_ID_REQUIRED" not in result.reason
    assert "79" in result.reason  # the actual error code read off the wire


def test_pending_and_answered_are_seen_through_the_wire(runner):
    steps = [_join("j1"), {"expect": "j1", "response": {"error_code": "MEMBER_ID_REQUIRED",
                                                         "member_id": {"bind": "m"}}},
             _join("j2", "$m"), {"expect_pending": ["j2"]}, {"advance_ms": 2999}, {"expect_pending": ["j2"]},
             {"advance_ms": 1}, {"expect": "j2", "response": {"error_code": "NONE", "generation_id": 1,
                                                              "leader": "$m", "member_id": "$m"}}]
    result = runner.run_scenario({"name": "pending", "steps": steps})
    assert result.passed, result.line()


def test_unknown_topics_are_refused_before_the_coordinator(runner):
    steps = [{"send": "OffsetCommit", "as": "c", "version": 9, "request": {
        "group_id": "g", "topics": [{"name": "nope", "partitions": [{"partition_index": 0, "committed_offset": 1}]},
                                    {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1},
                                                                 {"partition_index": 5, "committed_offset": 1}]}]}},
             {"expect": "c", "response": {"topics": [
                 {"name": "nope", "partitions": [{"partition_index": 0, "error_code": "UNKNOWN_TOPIC_OR_PARTITION"}]},
                 {"name": "t", "partitions": [{"partition_index": 5, "error_code": "UNKNOWN_TOPIC_OR_PARTITION"},
                                              {"partition_index": 0, "error_code": "NONE"}]}]}}]
    result = runner.run_scenario({"name": "topics", "topics": {"t": 2}, "steps": steps})
    assert result.passed, result.line()
