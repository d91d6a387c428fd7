"""Every conformance scenario is its own test: the suite encoded from Kafka's tests, the
project's own, and any further ones beside the repository."""


import pytest
from paths import KAFKA_SCENARIOS, ROOT, SCENARIOS, SUITE

from groupcoord.adapters.conformance.suite import (
    CONSUMER_EXPECTED_FAILURES,
    consumer_suite_files,
    suite_files,
)
from groupcoord.adapters.scenarios.runner import run_file, run_scenario, scenario_files

FILES = SUITE
CONSUMER_FILES = consumer_suite_files(ROOT)


def consumer_params(files):
    """The consumer group scenarios as test parameters, Kafka's disagreements marked xfail (strict:
    a scenario that starts passing must leave the list)."""
    return [pytest.param(p, id=f"consumer/{p.name}",
                         marks=[pytest.mark.xfail(reason=CONSUMER_EXPECTED_FAILURES[p.name], strict=True)]
                         if p.name in CONSUMER_EXPECTED_FAILURES else [])
            for p in files]


def test_the_suite_and_its_format_are_in_the_repository():
    assert len(scenario_files([KAFKA_SCENARIOS])) >= 100 and len(scenario_files([SCENARIOS])) >= 100
    assert (ROOT / "spec" / "conformance" / "FORMAT.md").is_file()
    assert len(suite_files(ROOT, extra=[])) == len(scenario_files([KAFKA_SCENARIOS, SCENARIOS]))


def test_extra_scenarios_add_only_new_names(tmp_path, monkeypatch):
    known = scenario_files([KAFKA_SCENARIOS])[0]
    (tmp_path / known.name).write_text(known.read_text())
    (tmp_path / "zz-new.json").write_text(known.read_text())
    monkeypatch.setenv("GROUPCOORD_EXTRA_SCENARIOS", str(tmp_path))
    files = suite_files(ROOT)
    assert files[-1] == tmp_path / "zz-new.json"
    assert len(files) == len(suite_files(ROOT, extra=[])) + 1
    monkeypatch.setenv("GROUPCOORD_EXTRA_SCENARIOS", "")
    assert suite_files(ROOT) == suite_files(ROOT, extra=[])


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_scenario(path):
    result = run_file(path)
    assert result.passed, result.line()


def test_the_consumer_scenarios_are_there():
    assert len(CONSUMER_FILES) >= 60
    assert set(CONSUMER_EXPECTED_FAILURES) <= {p.name for p in CONSUMER_FILES}
    manifest = (ROOT / "spec" / "conformance" / "MANIFEST.md").read_text()
    assert all(p.name in manifest for p in CONSUMER_FILES)


@pytest.mark.parametrize("path", consumer_params(CONSUMER_FILES))
def test_consumer_scenario(path):
    result = run_file(path)
    assert result.passed, result.line()


def test_topics_image_and_records_steps():
    fid = "f0000000-0000-4000-8000-000000000001"
    steps = [{"topics_image": [{"name": "foo", "topic_id": fid, "partitions": 2}]},
             {"send": "ConsumerGroupHeartbeat", "as": "h", "version": 1, "request": {
                 "group_id": "g", "member_id": "m", "member_epoch": 0, "rebalance_timeout_ms": 5000,
                 "subscribed_topic_names": ["foo"], "topic_partitions": []}},
             {"expect": "h", "response": {"member_epoch": 1, "assignment": {
                 "topic_partitions": [{"topic_id": fid, "partitions": [0, 1]}]}}},
             {"expect_records": [{"type": "ConsumerGroupMetadata", "epoch": 1}, {"any": True}, {"any": True},
                                 {"any": True}, {"any": True}, {"type": "ConsumerGroupCurrentMemberAssignment",
                                                                "member_id": "m", "state": 0}]},
             {"expect_records": []},
             {"expect_group": {"group_id": "g", "state": "Stable", "group_epoch": 1, "members": ["m"]}}]
    result = run_scenario({"name": "image", "steps": steps})
    assert result.passed, result.line()


@pytest.mark.parametrize("step, reason", [
    ({"topics_image": [{"name": "foo", "topic_id": "nope", "partitions": 1}]}, "bad topics_image entry"),
    ({"topics_image": [{"name": "foo", "topic_id": "00000000-0000-0000-0000-000000000000", "partitions": 1}]},
     "bad topics_image entry"),
    ({"expect_records": {"bogus": 1}}, "expect_records takes"),
    ({"send": "ConsumerGroupHeartbeat", "as": "x", "request": {
        "group_id": "g", "member_id": "m", "member_epoch": 1, "topic_partitions": [{"topic_id": "x", "partitions": []}]}},
     "is not a uuid"),
])
def test_runner_refuses_bad_consumer_steps(step, reason):
    result = run_scenario({"name": "bad", "steps": [step]})
    assert not result.passed and reason in result.reason, result.line()


def _join(name, member_id="", version=3, instance=None):
    request = {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
               "member_id": member_id, "protocol_type": "consumer",
               "protocols": [{"name": "range", "metadata": ""}]}
    if instance is not None:
        request["group_instance_id"] = instance
    return {"send": "JoinGroup", "as": name, "version": version, "request": request}


@pytest.mark.parametrize("step, reason", [
    ({"bogus": 1}, "unknown step"),
    ({"send": "Produce", "as": "x", "request": {}}, "unknown API"),
    ({"send": "JoinGroup", "as": "x", "version": 42, "request": {}}, "bad request"),
    ({"send": "JoinGroup", "as": "x", "version": 3, "request": {"group_instance_id": "i"}}, "bad request"),
    ({"advance_ms": -1}, "non-negative"),
    ({"storage": "explode"}, "unknown storage action"),
    ({"expect": "nobody", "response": {}}, "never sent"),
])
def test_runner_refuses_what_the_format_does_not_define(step, reason):
    result = run_scenario({"name": "bad", "steps": [step]})
    assert not result.passed and reason in result.reason, result.line()


def test_runner_reports_the_first_mismatching_step():
    steps = [_join("j1"), {"advance_ms": 3000},
             {"expect": "j1", "response": {"error_code": "NONE", "generation_id": 1}},
             {"expect": "j1", "response": {"error_code": "NONE", "generation_id": 2}}]
    result = run_scenario({"name": "gen", "steps": steps})
    assert not result.passed and result.step == 4 and "generation_id" in result.reason


def test_matchers_bind_one_of_not_and_ordered():
    # The second member extends the initial delay once (timers armed while firing count
    # from the new time, so the extension needs a second advance).
    steps = [_join("j1"), _join("j2"), {"advance_ms": 3000}, {"advance_ms": 3000},
             {"expect": "j1", "response": {"member_id": {"bind": "a", "prefix": "client-"},
                                           "leader": {"one_of": ["$a", "nobody"]},
                                           "members": [{"member_id": {"bind": "m1"}}, {"member_id": {"bind": "m2"}}]}},
             {"expect": "j2", "response": {"member_id": {"not": "$a"}, "members": {"ordered": []}}}]
    assert run_scenario({"name": "m", "steps": steps}).passed
    steps[-1] = {"expect": "j2", "response": {"member_id": {"not": {"prefix": "client-"}}}}
    assert not run_scenario({"name": "m", "steps": steps}).passed


def test_a_request_answered_twice_fails_the_scenario(monkeypatch):
    from groupcoord.adapters.runtime.driver import Driver

    original = Driver.dispatch

    def twice(self, event):
        out = original(self, event)
        for rid in list(self.answer_counts):
            self.answer_counts[rid] += 1
        return out

    monkeypatch.setattr(Driver, "dispatch", twice)
    result = run_scenario({"name": "dup", "steps": [_join("j1", version=4)]})
    assert not result.passed and "answered 2 times" in result.reason
