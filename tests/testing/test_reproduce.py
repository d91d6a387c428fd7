"""``groupcoord.testing.reproduce``: a request sequence written as a scenario whose expectations
are the spec's answers, so that it fails where the broker answered otherwise."""

from __future__ import annotations

import pytest

from groupcoord.adapters.scenarios.runner import run_scenario
from groupcoord.adapters.tla.mutants import MUTANTS, applied
from groupcoord.core.config import CoordinatorConfig
from groupcoord.testing.reproduce import scenario
from groupcoord.testing.systems import Sent

_JOIN = {"group_id": "g", "session_timeout_ms": 500, "rebalance_timeout_ms": 500, "member_id": "",
         "group_instance_id": "i1", "protocol_type": "consumer",
         "protocols": [{"name": "range", "metadata": b"\x00\x03\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00"}],
         "reason": None}
_ANSWER = {"error_code": 0, "generation_id": 0, "protocol_type": "consumer", "protocol_name": "range",
           "leader": "i1-x", "skip_assignment": False, "member_id": "i1-x",
           "members": [{"member_id": "i1-x", "group_instance_id": "i1", "metadata": _JOIN["protocols"][0]["metadata"]}]}


@pytest.mark.parametrize("recv_us, send_us", [(5_000_200, 5_000_700), (5_000_700, 5_001_200)],
                         ids=["answered in the millisecond it came", "answered in the next millisecond"])
def test_a_join_answered_within_its_millisecond_is_expected(recv_us, send_us):
    # With no initial delay the first join completes on the timer due at the same millisecond: the
    # scenario must let it fire (advance 0 ms) or it would hold no expectation and pass anything.
    config = CoordinatorConfig.from_kafka({"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 500})
    sent = [Sent(index=1, conn=1, api="JoinGroup", version=9, client_id="c1", request=_JOIN, recv_us=recv_us,
                 response=_ANSWER, send_us=send_us)]
    written = scenario(sent, "g", config, {"t": 1}, "boundary", "test")
    expects = [s for s in written["steps"] if "expect" in s]
    assert len(expects) == 1 and expects[0]["response"]["generation_id"] == 1, written["steps"]
    assert run_scenario(written).passed
    with applied(next(m for m in MUTANTS if m.name == "first-generation-zero")):
        result = run_scenario(written)
    assert not result.passed and "generation_id: expected 1, got 0" in result.reason, result.line()
