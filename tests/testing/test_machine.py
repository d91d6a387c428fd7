"""``groupcoord.testing``'s state machine and strategies: the machine against the core (manual
time) and against an in-process server (real sockets, manual clock), bounded examples; a
subclass adds a rule and an invariant; the strategies draw what Kafka's clients send."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RULE_MARKER, invariant, rule, run_state_machine_as_test

from groupcoord.adapters.client.assignors import ASSIGNORS
from groupcoord.adapters.verify.from_core import observe
from groupcoord.adapters.verify.observed import split
from groupcoord.adapters.verify.search import CONFORMS, Settings, verify_group
from groupcoord.core.classic.subscription import decode_subscription
from groupcoord.core.config import CoordinatorConfig
from groupcoord.testing import strategies as gs
from groupcoord.testing.machine import CoordinatorStateMachine, Divergence, Inconclusive
from groupcoord.testing.systems import CoreSystem, Sent

BOUNDED = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))


class OnCore(CoordinatorStateMachine):
    pass


class OnServer(CoordinatorStateMachine):
    system = "server"


def test_the_machine_finds_nothing_on_the_core():
    run_state_machine_as_test(OnCore, settings=settings(max_examples=100, stateful_step_count=30, **BOUNDED))


def test_the_machine_finds_nothing_on_the_in_process_server():
    run_state_machine_as_test(OnServer, settings=settings(max_examples=40, stateful_step_count=25, **BOUNDED))


class Counting(CoordinatorStateMachine):
    """A user's subclass: one more rule (a consumer commits twice in a row) and one more
    invariant (every answer came to a request this example sent)."""

    @rule(who=st.integers(0, 2))
    def commit_twice(self, who):
        for _ in range(2):
            self.commit(who=who, pick=0, how="own", skew=0, offset=7, simple=False)

    @invariant()
    def every_answer_has_its_request(self):
        if self.sut is not None:
            assert all(s.response is None or s.index <= len(self.sut.sent) for s in self.sut.sent)


def test_a_subclass_adds_rules_and_invariants():
    run_state_machine_as_test(Counting, settings=settings(max_examples=10, stateful_step_count=15, **BOUNDED))
    rules = {name for name, f in inspect.getmembers(Counting) if hasattr(f, RULE_MARKER)}
    assert {"commit_twice", "join", "join_together", "pause", "replace_static", "delete"} <= rules


def test_a_wrong_answer_fails_the_step_with_the_verifiers_diagnosis():
    """A system that answers one JoinGroup with another generation: the machine's check says
    which answer and what the spec allows there."""

    class Lying(CoreSystem):
        def _answer(self, sent: Sent, fields: dict) -> None:
            super()._answer(sent, fields)
            if sent.api == "JoinGroup" and sent.response.get("generation_id", -1) >= 1:
                sent.response["generation_id"] += 1

    class OnLiar(CoordinatorStateMachine):
        def system(config, group_id, topics):
            return Lying(config)

        @invariant()
        def answers_are_allowed(self) -> None:
            try:
                super().answers_are_allowed()
            except Inconclusive:  # the search's budget spent proving the lie: an example that
                assume(False)     # shows nothing either way (not a pass); hypothesis draws another

    with pytest.raises(Divergence) as caught:
        run_state_machine_as_test(OnLiar, settings=settings(max_examples=200, stateful_step_count=30,
                                                            phases=[Phase.generate], **BOUNDED))
    text, verdict = str(caught.value), caught.value.verdict
    assert text.startswith("DIVERGES ") and "broker answered:" in text, text
    assert verdict is not None and verdict.verdict == "diverges"
    lied = [s for s in caught.value.sent if s.api == "JoinGroup" and s.response and s.response["generation_id"] >= 2]
    assert lied, "the divergence comes after a JoinGroup answer the system changed"


@given(gs.members(CoordinatorConfig(), gs.DEFAULT_TOPICS))
def test_members_send_the_java_clients_subscriptions(member):
    assert 1 <= len(member.protocols) <= 2
    for name, metadata in member.protocols:
        assert name in ASSIGNORS
        assert set(decode_subscription(metadata).topics) <= set(gs.DEFAULT_TOPICS)
    assert member.session_timeout_ms >= CoordinatorConfig().group_min_session_timeout_ms


@given(gs.kafka_settings())
def test_configurations_use_kafkas_settings(kafka):
    config = CoordinatorConfig.from_kafka(kafka)  # unknown names would raise
    assert all(config.to_kafka()[name] == value for name, value in kafka.items())


@settings(max_examples=30, **BOUNDED)
@given(gs.request_sequences("g"))
def test_request_sequences_through_the_core_conform(requests):
    config = CoordinatorConfig(offsets_topic_num_partitions=1)
    units = split(observe(requests, config)).units
    for group, unit in units.items():
        verdict = verify_group(group, unit, Settings(config=config, timer_tolerance_ms=0, from_birth=True))
        assert verdict.verdict == CONFORMS, verdict.detail
