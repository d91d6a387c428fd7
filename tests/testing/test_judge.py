"""``groupcoord.testing.machine.judge``, what probe reports of each check: a known finding is set
aside, and a new one that only stems from a known one is not reported. Met against Tansu 0.6.0
(spec/peers.md): two static JoinGroup v9 it never answers (row 11, known), then a DeleteGroups
it answers NONE. The search keeps the spec silent on the joins, as the broker was, in the
executions where their join phase never ends, and there the group is not empty: NON_EMPTY_GROUP
at the delete. With the joins' silence taken as the known finding it is, the members' sessions
end (500 ms) and the group is Empty by then, as in Kafka: NONE conforms."""

from __future__ import annotations

from groupcoord.adapters.verify.observed import Obs
from groupcoord.adapters.verify.run import signature_of
from groupcoord.adapters.verify.search import DIVERGES, Settings
from groupcoord.core.config import CoordinatorConfig
from groupcoord.testing.machine import judge

SILENT_JOIN = "JoinGroup v9 answer: given vs none (waits)"
META = bytes.fromhex("000300000001001067726f7570636f6f72642d70726f6265ffffffff00000000ffffffffffff")
SETTINGS = Settings(config=CoordinatorConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0,
                                             group_min_session_timeout_ms=500),
                    timer_tolerance_ms=300, budget=200_000, from_birth=True)


def _join(instance: str) -> dict:
    return {"group_id": "g", "session_timeout_ms": 500, "rebalance_timeout_ms": 500, "member_id": "",
            "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": META}], "reason": None}


def _pairs(delete_error: int) -> list[Obs]:
    return [Obs(1, 1, 1_000, None, "JoinGroup", 9, "c1", _join("i1"), None, open_until_us=1_066_000),
            Obs(2, 2, 18_000, None, "JoinGroup", 9, "c3", _join("i3"), None, open_until_us=1_066_000),
            Obs(3, 3, 1_057_000, 1_058_000, "DeleteGroups", 2, "admin", {"groups_names": ["g"]},
                {"throttle_time_ms": 0, "results": [{"group_id": "g", "error_code": delete_error}]})]


def test_a_finding_that_stems_from_a_known_silence_is_not_new():
    given, timing, aside = set(), set(), []
    assert judge("g", _pairs(0), SETTINGS, frozenset({SILENT_JOIN}), given, timing, aside.append) is None
    assert timing == {1, 2} and given == set() and aside == [SILENT_JOIN]


def test_without_the_silence_known_the_delete_is_the_finding():
    verdict = judge("g", _pairs(0), SETTINGS, frozenset({"OffsetFetch v7 answer: given vs none (waits)"}), set(),
                    set())
    assert verdict is not None and verdict.verdict == DIVERGES
    assert signature_of(verdict) == "DeleteGroups v2 results[].error_code: NON_EMPTY_GROUP (68) vs NONE (0)"


def test_a_wrong_answer_after_a_known_silence_is_still_new():
    """Whether the joins were read or not, whenever the sessions end, the delete is answered
    NONE, NON_EMPTY_GROUP or GROUP_ID_NOT_FOUND: INVALID_GROUP_ID is a finding."""
    verdict = judge("g", _pairs(24), SETTINGS, frozenset({SILENT_JOIN}), set(), set())
    assert verdict is not None and verdict.verdict == DIVERGES and verdict.line == 3, verdict
    assert signature_of(verdict).startswith("DeleteGroups v2 results[].error_code:"), signature_of(verdict)
