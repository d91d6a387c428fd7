"""The client-side assignors: Kafka's results (seed 001's examples, the StickyAssignor
javadoc's), the cooperative two-round flow and the delayed reassignment of seed 002."""

import pytest

from groupcoord.adapters.client import assignors as a
from groupcoord.adapters.client.java_order import java_order
from groupcoord.core import java_string_hash
from groupcoord.core.classic.subscription import subscription_topics


def tp(name: str) -> tuple[str, int]:
    topic, p = name.split("p")
    return topic, int(p)


def run(assignor, subs: dict, ppt: dict, owned=None, generation=-1, now=0, leader=None):
    members = [(mid, None, a.member_subscription(assignor, topics, (owned or {}).get(mid, ()), generation))
               for mid, topics in subs.items()]
    out = a.leader_assign(assignor, members, ppt, protocol=a.rebalance_protocol([assignor]), now_ms=now)
    return {m: a.decode_assignment(b) for m, b in out.items()}


def names(result) -> dict:
    return {m: sorted(f"{t}p{p}" for t, p in asg.partitions) for m, asg in result.items()}


FIVE_TOPICS = [f"t{i}" for i in range(5)]


def test_range_gives_the_first_consumers_one_more_per_topic():
    # seed 001: two consumers, five topics of three partitions: 10 and 5
    result = names(run(a.RangeAssignor(), {"C0": FIVE_TOPICS, "C1": FIVE_TOPICS}, {t: 3 for t in FIVE_TOPICS}))
    assert len(result["C0"]) == 10 and len(result["C1"]) == 5
    assert result["C1"] == [f"{t}p2" for t in FIVE_TOPICS]
    # n = 7 // 3, m = 7 % 3: the first m consumers (by name) get n + 1
    result = names(run(a.RangeAssignor(), {"b": ["t"], "a": ["t"], "c": ["t"]}, {"t": 7}))
    assert result == {"a": ["tp0", "tp1", "tp2"], "b": ["tp3", "tp4"], "c": ["tp5", "tp6"]}


def test_roundrobin_balances_and_its_uneven_subscription_case():
    result = names(run(a.RoundRobinAssignor(), {"C0": FIVE_TOPICS, "C1": FIVE_TOPICS}, {t: 3 for t in FIVE_TOPICS}))
    assert (len(result["C0"]), len(result["C1"])) == (8, 7)
    # seed 001: C0 {t0}, C1 {t0, t1}, C2 {t1, t2}; partitions 1, 2, 3
    uneven = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t1", "t2"]}
    result = names(run(a.RoundRobinAssignor(), uneven, {"t0": 1, "t1": 2, "t2": 3}))
    assert result == {"C0": ["t0p0"], "C1": ["t1p0"], "C2": ["t1p1", "t2p0", "t2p1", "t2p2"]}


@pytest.mark.parametrize("cls", [a.StickyAssignor, a.CooperativeStickyAssignor])
def test_sticky_balances_uneven_subscriptions(cls):
    uneven = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t1", "t2"]}
    result = names(run(cls(), uneven, {"t0": 1, "t1": 2, "t2": 3}))
    assert result == {"C0": ["t0p0"], "C1": ["t1p0", "t1p1"], "C2": ["t2p0", "t2p1", "t2p2"]}


def test_sticky_examples_of_kafkas_javadoc():
    four = ["t0", "t1", "t2", "t3"]
    result = names(run(a.StickyAssignor(), {c: four for c in ("C0", "C1", "C2")}, {t: 2 for t in four}))
    assert result == {"C0": ["t0p0", "t1p1", "t3p0"], "C1": ["t0p1", "t2p0", "t3p1"], "C2": ["t1p0", "t2p1"]}

    # Example 2: C0 {t0}, C1 {t0, t1}, C2 {t0, t1, t2}; then C0 leaves: 5 assignments kept
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    ppt = {"t0": 1, "t1": 2, "t2": 3}
    members = {m: a.StickyAssignor() for m in subs}
    first = run(members["C0"], subs, ppt)
    assert names(first) == {"C0": ["t0p0"], "C1": ["t1p0", "t1p1"], "C2": ["t2p0", "t2p1", "t2p2"]}
    for m, asg in first.items():
        members[m].on_assignment(asg, 1)
    rest = [(m, None, a.member_subscription(members[m], subs[m])) for m in ("C1", "C2")]
    second = a.leader_assign(members["C1"], rest, ppt)
    assert names({m: a.decode_assignment(b) for m, b in second.items()}) == {
        "C1": ["t0p0", "t1p0", "t1p1"], "C2": ["t2p0", "t2p1", "t2p2"]}


def test_sticky_keeps_previous_assignments_when_a_member_leaves():
    four = ["t0", "t1", "t2", "t3"]
    members = {c: a.StickyAssignor() for c in ("C0", "C1", "C2")}
    first = run(members["C0"], {c: four for c in members}, {t: 2 for t in four})
    for m, asg in first.items():
        members[m].on_assignment(asg, 1)
    rest = [(m, None, a.member_subscription(members[m], four)) for m in ("C0", "C2")]
    second = {m: set(a.decode_assignment(b).partitions) for m, b in a.leader_assign(
        members["C0"], rest, {t: 2 for t in four}).items()}
    assert set(first["C0"].partitions) <= second["C0"] and set(first["C2"].partitions) <= second["C2"]
    assert len(second["C0"]) == len(second["C2"]) == 4


def _coop_round(assignors, owned, generation, leader, now=0, ppt=None):
    ppt = ppt or {"t": 6}
    members = [(m, None, a.member_subscription(assignors[m], ["t"], owned[m], generation)) for m in owned]
    out = a.leader_assign(assignors[leader], members, ppt, protocol=a.COOPERATIVE, now_ms=now)
    outcomes = {}
    for m, raw in out.items():
        outcomes[m] = a.on_assignment(owned[m], raw, a.COOPERATIVE)
        assignors[m].on_assignment(a.decode_assignment(raw), generation + 1)
    return outcomes


def P(*ns):
    return [("t", n) for n in ns]


def test_cooperative_new_consumer_takes_two_rounds():
    # seed 002: c1 owns P1-P3, c2 P4-P6 (partitions 0-5 here); c3 joins
    assignors = {m: a.CooperativeStickyAssignor() for m in ("c1", "c2", "c3")}
    owned = {"c1": P(0, 1, 2), "c2": P(3, 4, 5), "c3": []}
    first = _coop_round(assignors, owned, 1, "c1")
    assert (first["c1"].assigned, first["c1"].revoked) == (tuple(P(0, 1)), tuple(P(2)))
    assert (first["c2"].assigned, first["c2"].revoked) == (tuple(P(3, 4)), tuple(P(5)))
    assert first["c3"].assigned == () and first["c1"].rejoin and first["c2"].rejoin and not first["c3"].rejoin
    owned = {m: list(o.assigned) for m, o in first.items()}
    second = _coop_round(assignors, owned, 2, "c1")
    assert second["c3"].assigned == tuple(P(2, 5)) and second["c3"].added == tuple(P(2, 5))
    assert not any(o.revoked or o.rejoin for o in second.values())


def test_cooperative_delayed_reassignment_of_a_bounced_member():
    # seed 002 "an existing consumer bounces": c1 P1,P2, c2 P4,P5, c3 P3,P6; c2 leaves
    delay = 300_000
    assignors = {m: a.CooperativeStickyAssignor(scheduled_rebalance_max_delay_ms=delay) for m in ("c1", "c2", "c3")}
    owned = {"c1": P(0, 1), "c2": P(3, 4), "c3": P(2, 5)}
    _coop_round(assignors, owned, 3, "c1")  # the leader learns the current assignment
    without = {"c1": P(0, 1), "c3": P(2, 5)}
    r1 = _coop_round(assignors, without, 4, "c1", now=1_000)
    assert r1["c1"].assigned == tuple(P(0, 1)) and r1["c3"].assigned == tuple(P(2, 5))
    assert r1["c1"].rejoin_after_ms == delay and r1["c3"].rejoin_after_ms == delay
    back = {"c1": P(0, 1), "c3": P(2, 5), "c2b": []}
    assignors["c2b"] = a.CooperativeStickyAssignor(scheduled_rebalance_max_delay_ms=delay)
    r2 = _coop_round(assignors, back, 5, "c1", now=61_000)
    assert r2["c2b"].assigned == () and r2["c2b"].rejoin_after_ms == delay - 60_000
    r3 = _coop_round(assignors, back, 6, "c1", now=1_000 + delay)
    assert r3["c2b"].assigned == tuple(P(3, 4))
    assert r3["c1"].assigned == tuple(P(0, 1)) and r3["c3"].assigned == tuple(P(2, 5))
    assert all(o.rejoin_after_ms == 0 for o in r3.values())


def test_without_delay_lost_partitions_are_assigned_at_once():
    assignors = {m: a.CooperativeStickyAssignor() for m in ("c1", "c3")}
    r = _coop_round(assignors, {"c1": P(0, 1), "c3": P(2, 5)}, 4, "c1")
    assert sorted(r["c1"].assigned + r["c3"].assigned) == P(0, 1, 2, 3, 4, 5)


def test_consumer_protocol_round_trips_and_the_core_reads_it():
    sub = a.Subscription(("b", "a"), b"\x00\x01", (("a", 0), ("b", 3)), 7, "rack-1")
    for version in (0, 1, 2, 3):
        raw = a.encode_subscription(sub, version)
        back = a.decode_subscription(raw)
        assert back.topics == ("b", "a") and back.user_data == b"\x00\x01"
        assert subscription_topics(raw) == frozenset({"a", "b"})
    assert a.decode_subscription(a.encode_subscription(sub)) == sub
    asg = a.Assignment((("t", 1), ("t", 0), ("u", 2)), None)
    assert sorted(a.decode_assignment(a.encode_assignment(asg)).partitions) == sorted(asg.partitions)
    with pytest.raises(a.AssignorError, match="truncated"):
        a.decode_assignment(b"\x00\x03\x00\x00\x00\x05")


def test_java_hash_order_matches_java():
    # java.util.HashMap key order, printed by a JDK 17 for these keys put in this order
    keys = ["consumer-1-3f2a9c1e-aa", "consumer-2-77b1", "C0", "C1", "C2", "topic-b", "topic-a", "x", "member-zz-0",
            "member-aa-9", "c3", "consumer-group-000029-2-5539", "k11", "k12", "k13", "k14", "k15", "k16", "k17"]
    java = ("member-aa-9,k11,consumer-2-77b1,k13,C0,k12,C1,k15,C2,consumer-group-000029-2-5539,k14,c3,k17,k16,"
            "member-zz-0,x,consumer-1-3f2a9c1e-aa,topic-a,topic-b")
    assert ",".join(java_order(keys)) == java
    assert java_string_hash("C0") == 2125


def test_static_members_sort_first_by_instance_id():
    subs = {"m-b": a.Subscription(("t",), group_instance_id="i-2"), "m-a": a.Subscription(("t",)),
            "m-c": a.Subscription(("t",), group_instance_id="i-1")}
    result = a.RangeAssignor().assign({"t": 3}, subs)
    assert result == {"m-b": [("t", 1)], "m-a": [("t", 2)], "m-c": [("t", 0)]}
