"""Values the spec leaves open are matched by rule: a broker that makes the second member the
leader, or picks the other protocol of a tied vote, conforms; one that names a leader outside
the generation, two leaders in one generation, the member list in a follower's answer, or a
protocol that did not win (or that a member does not support) diverges."""

from __future__ import annotations

import attrs
import pytest
from verify_scripts import CONFIG, heartbeat, join, sync

from groupcoord.adapters.verify.from_core import observe
from groupcoord.adapters.verify.observed import split
from groupcoord.adapters.verify.search import CONFORMS, DIVERGES, Settings, verify_group

RANGE_FIRST = [{"name": "range", "metadata": b"r"}, {"name": "roundrobin", "metadata": b"o"}]
ROUNDROBIN_FIRST = [{"name": "roundrobin", "metadata": b"O"}, {"name": "range", "metadata": b"R"}]


def _life(protocols=(RANGE_FIRST, ROUNDROBIN_FIRST)) -> list:
    """c1 forms the group alone (generation 1) and syncs; c2 joins, c1 learns of the rebalance
    from a heartbeat and rejoins: generation 2, whose leader the core keeps (c1-u1, the member
    that rejoined; the order of arrival cannot make it c2) and whose protocol is voted; the
    leader syncs the assignments; both heartbeat."""
    j1, j2 = ({**join(), "protocols": list(p)} for p in protocols)
    return observe([
        (1000, 1, "JoinGroup", 3, j1, "c1"),
        (5000, 1, "SyncGroup", 5, sync("c1-u1", 1, [("c1-u1", b"a")]), "c1"),
        (6000, 2, "JoinGroup", 3, j2, "c2"),
        (6500, 1, "Heartbeat", 4, heartbeat("c1-u1", 1), "c1"),
        (6600, 1, "JoinGroup", 3, {**j1, "member_id": "c1-u1"}, "c1"),
        (7000, 1, "SyncGroup", 5, sync("c1-u1", 2, [("c1-u1", b"a1"), ("c2-u3", b"a2")]), "c1"),
        (7000, 2, "SyncGroup", 5, sync("c2-u3", 2), "c2"),
        (8000, 1, "Heartbeat", 4, heartbeat("c1-u1", 2), "c1"), (8000, 2, "Heartbeat", 4, heartbeat("c2-u3", 2), "c2")],
        CONFIG)


def _verdict(pairs) -> object:
    (gid, unit), = split(pairs).units.items()
    return verify_group(gid, unit, Settings(CONFIG))


def _edit(pairs, api: str, change) -> list:
    """``change(o)``'s fields replaced in the pairs of ``api`` of generation 2."""
    def gen2(o):
        return (o.response or {}).get("generation_id", o.request.get("generation_id")) == 2
    return [attrs.evolve(o, **change(o)) if o.api == api and gen2(o) else o for o in pairs]


def _members(pairs) -> list:
    return next(o.response["members"] for o in pairs
                if o.api == "JoinGroup" and o.response["generation_id"] == 2 and o.response["members"])


def _lead(pairs, leaders: dict) -> list:
    """Generation 2's JoinGroup answers name ``leaders[member]`` as leader, the member list in
    the leader's own answer only; the leader's SyncGroup carries the assignments."""
    members = _members(pairs)
    assignments = next(o.request["assignments"] for o in pairs if o.api == "SyncGroup"
                       and o.request["generation_id"] == 2 and o.request["assignments"])

    def answer(o):
        me, leader = o.response["member_id"], leaders[o.response["member_id"]]
        return {"response": {**o.response, "leader": leader, "members": members if me == leader else []}}

    def request(o):
        return {"request": {**o.request, "assignments": assignments if o.request["member_id"] == "c2-u3" else []}}
    return _edit(_edit(pairs, "JoinGroup", answer), "SyncGroup", request)


def test_the_core_s_own_choice_conforms():
    pairs = _life()
    assert {o.response["leader"] for o in pairs if o.api == "JoinGroup" and o.response["generation_id"] == 2} \
        == {"c1-u1"}
    assert _verdict(pairs).verdict == CONFORMS


def test_the_second_member_leading_conforms():
    pairs = _lead(_life(), {"c1-u1": "c2-u3", "c2-u3": "c2-u3"})
    v = _verdict(pairs)
    assert v.verdict == CONFORMS, v.detail


@pytest.mark.parametrize("leaders,words", [
    ({"c1-u1": "c9-u9", "c2-u3": "c9-u9"}, "leader"),  # not a member of the generation
    ({"c1-u1": "c1-u1", "c2-u3": "c2-u3"}, "leader"),  # two leaders in one generation
])
def test_another_leader_against_the_rule_diverges(leaders, words):
    v = _verdict(_lead(_life(), leaders))
    assert v.verdict == DIVERGES and words in v.detail and v.line in (3, 5), v.detail


def test_the_member_list_in_a_follower_s_answer_diverges():
    pairs = _lead(_life(), {"c1-u1": "c2-u3", "c2-u3": "c2-u3"})
    members = _members(pairs)
    pairs = _edit(pairs, "JoinGroup", lambda o: {"response": {**o.response, "members": members}})
    v = _verdict(pairs)
    assert v.verdict == DIVERGES and "members" in v.detail, v.detail


def _protocol(pairs, name: str) -> list:
    """The broker picked ``name``: every answer says so, the leader's member list carries each
    member's metadata for it."""
    by_member = {"c1-u1": {p["name"]: p["metadata"].hex() for p in RANGE_FIRST},
                 "c2-u3": {p["name"]: p["metadata"].hex() for p in ROUNDROBIN_FIRST}}

    def join_answer(o):
        members = [{**m, "metadata": by_member[m["member_id"]].get(name, "")} for m in o.response["members"]]
        return {"response": {**o.response, "protocol_name": name, "members": members}}
    pairs = _edit(pairs, "JoinGroup", join_answer)
    return _edit(pairs, "SyncGroup", lambda o: {"response": {**o.response, "protocol_name": name}})


def test_the_other_protocol_of_a_tied_vote_conforms():
    pairs = _life()
    core_pick = next(o.response["protocol_name"] for o in pairs if o.api == "JoinGroup"
                     and o.response["generation_id"] == 2)
    other = ({"range", "roundrobin"} - {core_pick}).pop()
    v = _verdict(_protocol(pairs, other))
    assert v.verdict == CONFORMS, v.detail


@pytest.mark.parametrize("protocols,name", [
    ((RANGE_FIRST, [ROUNDROBIN_FIRST[1], ROUNDROBIN_FIRST[0]]), "roundrobin"),  # range won both votes
    ((RANGE_FIRST, [ROUNDROBIN_FIRST[1]]), "roundrobin"),  # c2 does not support it
])
def test_a_protocol_that_did_not_win_diverges(protocols, name):
    pairs = _life(protocols)
    assert {o.response["protocol_name"] for o in pairs if o.api == "JoinGroup" and o.response["generation_id"] == 2} \
        == {"range"}
    v = _verdict(_protocol(pairs, name))
    assert v.verdict == DIVERGES and "protocol_name" in v.detail, v.detail
