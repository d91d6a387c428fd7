"""``groupcoord probe`` against a broker that lacks APIs or goes away (librdkafka's mock
cluster, in a child process): the rules of the APIs it does not offer are left out and said so;
a broker that dies mid-example ends the run with a finding of the requests it left unanswered,
and the CLI says the broker went away."""

from __future__ import annotations

import pytest
from hypothesis.stateful import rule

pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (the test extra carries it)")

from groupcoord.adapters.cli.main import main
from groupcoord.core.config import CoordinatorConfig
from groupcoord.testing import requests as rq
from groupcoord.testing.librdkafka_mock import start_mock
from groupcoord.testing.machine import CoordinatorStateMachine
from groupcoord.testing.probe import offered_apis, probe_all

TOPIC = "groupcoord-probe"
MOCK = {"group.initial.rebalance.delay.ms": 3000, "group.min.session.timeout.ms": 500}


def test_the_apis_the_mock_lacks_are_left_out_and_said_so(capfd):
    with start_mock(topics=[TOPIC]) as mock:
        offered = offered_apis(mock.bootstrap)
        assert {"DescribeGroups", "ListGroups", "DeleteGroups"}.isdisjoint(offered), offered
        assert {"JoinGroup", "SyncGroup", "Heartbeat", "OffsetFetch"} <= offered
        run = probe_all(mock.bootstrap, CoordinatorConfig.from_kafka(MOCK), {TOPIC: 4}, examples=5, steps=3,
                        seed=1, machine=_OffsetFetchOnly, offered=offered)
        # librdkafka's mock serves KIP-848's ConsumerGroupHeartbeat but not ConsumerGroupDescribe
        assert run.left_out == ["DescribeGroups", "DeleteGroups", "ListGroups", "ConsumerGroupDescribe"], run.left_out
        assert _OffsetFetchOnly.asked, "the fetch rule never ran"
        assert all(api not in {"DescribeGroups", "ListGroups", "DeleteGroups"} for api in _OffsetFetchOnly.asked)
        code = main(["probe", "--bootstrap", mock.bootstrap, "--examples", "1", "--steps", "1", "--seed", "1",
                     "--group.initial.rebalance.delay.ms", "3000", "--group.min.session.timeout.ms", "500",
                     "--topic", TOPIC, "--stop-at-first"])
    captured = capfd.readouterr()
    out = captured.out + f"\n[exit {code}] " + captured.err
    assert "left out: DescribeGroups (not offered), DeleteGroups (not offered), ListGroups (not offered), " \
           "ConsumerGroupDescribe (not offered)" in out, out
    assert code in (0, 1), out


def test_a_broker_that_goes_away_ends_the_run_with_its_findings(tmp_path):
    """A JoinGroup v3 without a member id waits out the mock's 3 s first join phase; the mock is
    stopped meanwhile. The run ends at once (no shrinking against a closed port), with the
    JoinGroup left unanswered as its finding and why it ended."""
    with start_mock(topics=[TOPIC]) as mock:
        _StopsTheBroker.mock = mock
        run = probe_all(mock.bootstrap, CoordinatorConfig.from_kafka(MOCK), {TOPIC: 4}, examples=5, steps=2,
                        seed=1, machine=_StopsTheBroker)
    assert run.gone is not None and "takes no connection" in run.gone, run.gone
    assert [f.signature for f in run.findings] == ["JoinGroup v3 answer: an answer vs none (the broker went away)"]
    assert run.findings[0].exit_code == 1 and "the broker went away" in run.findings[0].report
    assert run.examples == 1


class _OffsetFetchOnly(CoordinatorStateMachine):
    """Every rule but fetch and the admin calls left out (those the mock lacks by their
    preconditions only), and what the machine sent noted."""

    asked: list = []

    def join(self, who, pick, how): pass
    def join_together(self, who, pick): pass
    def sync(self, who, pick, how, skew): pass
    def heartbeat(self, who, pick, how, skew): pass
    def leave(self, who, pick, how): pass
    def commit(self, who, pick, how, skew, offset, simple): pass
    def time_passes(self, ms): pass
    def pause(self, who): pass
    def crash(self, who): pass
    def replace_static(self, who, pick): pass
    def consumer_join(self, who, pick): pass
    def consumer_heartbeat(self, who, pick, full, stale): pass
    def consumer_leave(self, who, pick, static): pass

    def teardown(self) -> None:
        if self.sut is not None:
            type(self).asked.extend(s.api for s in self.sut.sent)
        super().teardown()


class _StopsTheBroker(CoordinatorStateMachine):
    """One rule: a JoinGroup v3 that waits in the first join phase, then the mock stopped."""

    mock = None

    @rule()
    def join_then_stop(self) -> None:
        lo, hi = self.sut.versions("JoinGroup")
        assert lo <= 3 <= hi
        c = self.consumers[0]
        self.send("JoinGroup", hi - 3, lambda v: rq.join(self.group_id, v, c.member, ""), 0, wait=False)
        type(self).mock.stop()
        self.settle()
