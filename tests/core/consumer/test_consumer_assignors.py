"""KIP-848's server-side assignors (core/consumer/assignors.py) against the cases of Kafka's own tests.

Each case restates one test method of Kafka's group-coordinator tests (named in its docstring):
UniformHomogeneousAssignmentBuilderTest, UniformHeterogeneousAssignmentBuilderTest and
RangeAssignorTest. The topic ids are the ones those tests use, so that results depending on
Kafka's topic order come out as there. Property tests follow.
"""

from __future__ import annotations

import base64
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from groupcoord.core.consumer.assignors import (
    ASSIGNORS,
    MemberSpec,
    TopicSpec,
    _TopicOrder,
    _uniform_heterogeneous,
    assign,
)

T1 = "T1-A4s3VTwiI5CTbEp6POw"
T2 = "T2-B4s3VTwiI5YHbPp6YUe"
T3 = "T3-CU8fVTLCz5YMkLoDQsa"
T4 = "T4-Tw9fVTLCz5HbPp6YQsa"


def member(subscribed, assigned=None, instance_id=None):
    return MemberSpec(
        frozenset(subscribed),
        {t: frozenset(p) for t, p in (assigned or {}).items()},
        instance_id=instance_id,
    )


def topics(**counts):
    ids = {"t1": T1, "t2": T2, "t3": T3, "t4": T4}
    return {ids[name]: TopicSpec(name, n) for name, n in counts.items()}


def expect(**by_member):
    return {m: {t: frozenset(p) for t, p in a.items()} for m, a in by_member.items()}


# -- the interface ---------------------------------------------------------------------------------


def test_assignors_in_kafkas_default_order_and_unknown_name_refused():
    """GroupCoordinatorConfig's default group.consumer.assignors: uniform first, then range."""
    assert ASSIGNORS == ("uniform", "range")
    with pytest.raises(ValueError):
        assign("sticky", {"A": member([T1])}, topics(t1=1))


def test_no_members_no_assignment():
    """UniformAssignor.assign / RangeAssignor.assign: an empty group gets an empty assignment."""
    assert assign("uniform", {}, topics(t1=3)) == {}
    assert assign("range", {}, topics(t1=3)) == {}


def test_partition_held_twice_refused():
    """A target assignment gives each partition to one member (the assignors' precondition)."""
    members = {"A": member([T1], {T1: [0]}), "B": member([T1], {T1: [0]})}
    with pytest.raises(ValueError):
        assign("uniform", members, topics(t1=2))


# -- uniform, homogeneous --------------------------------------------------------------------------


def test_homogeneous_one_member_no_subscription():
    """UniformHomogeneousAssignmentBuilderTest.testOneMemberNoTopicSubscription."""
    assert assign("uniform", {"A": member([])}, topics(t1=3)) == {"A": {}}


def test_homogeneous_subscription_to_missing_topic():
    """UniformHomogeneousAssignmentBuilderTest.testOneMemberSubscribedToNonexistentTopic."""
    with pytest.raises(ValueError):
        assign("uniform", {"A": member([T2])}, topics(t1=3))


def test_homogeneous_first_assignment_two_members_two_topics():
    """UniformHomogeneousAssignmentBuilderTest.testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks.

    Five partitions: the last member takes the extra one, and topic 3 comes first in Kafka's
    HashSet order of these ids.
    """
    members = {"A": member([T1, T3]), "B": member([T1, T3])}
    assert assign("uniform", members, topics(t1=3, t3=2)) == expect(A={T3: [0, 1]}, B={T1: [0, 1, 2]})


def test_homogeneous_more_members_than_partitions():
    """UniformHomogeneousAssignmentBuilderTest.testFirstAssignmentNumMembersGreaterThanTotalNumPartitions."""
    members = {"A": member([T3]), "B": member([T3]), "C": member([T3])}
    assert assign("uniform", members, topics(t3=2)) == expect(A={}, B={T3: [0]}, C={T3: [1]})


def test_homogeneous_large_sample_valid_and_balanced():
    """UniformHomogeneousAssignmentBuilderTest.testValidityAndBalanceForLargeSampleSet (100 topics, 49 members)."""
    ids = [base64.urlsafe_b64encode(bytes([i]) * 16).rstrip(b"=").decode() for i in range(1, 101)]
    all_topics = {t: TopicSpec(f"topic-{i}", 3) for i, t in enumerate(ids, 1)}
    members = {f"member{i}": member(ids) for i in range(1, 50)}
    result = assign("uniform", members, all_topics)
    check_valid(members, all_topics, result)
    sizes = [sum(map(len, a.values())) for a in result.values()]
    assert max(sizes) - min(sizes) <= 1


def test_homogeneous_unbalanced_previous_assignment():
    """UniformHomogeneousAssignmentBuilderTest.testReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment."""
    members = {
        "A": member([T1, T2], {T1: [0, 1], T2: [0, 1]}),
        "B": member([T1, T2], {T1: [2], T2: [2]}),
    }
    assert assign("uniform", members, topics(t1=3, t2=3)) == expect(
        A={T1: [0, 1], T2: [0]}, B={T1: [2], T2: [1, 2]}
    )


def test_homogeneous_partitions_added():
    """UniformHomogeneousAssignmentBuilderTest.testReassignmentWhenPartitionsAreAddedForTwoMembersTwoTopics."""
    members = {
        "A": member([T1, T2], {T1: [0, 2], T2: [0]}),
        "B": member([T1, T2], {T1: [1], T2: [1, 2]}),
    }
    assert assign("uniform", members, topics(t1=6, t2=5)) == expect(
        A={T1: [0, 2], T2: [0, 3, 4]}, B={T1: [1, 3, 4, 5], T2: [1, 2]}
    )


def test_homogeneous_member_added():
    """UniformHomogeneousAssignmentBuilderTest.testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics."""
    members = {
        "A": member([T1, T2], {T1: [0, 2], T2: [0]}),
        "B": member([T1, T2], {T1: [1], T2: [1, 2]}),
        "C": member([T1, T2]),
    }
    assert assign("uniform", members, topics(t1=3, t2=3)) == expect(
        A={T1: [0, 2]}, B={T1: [1], T2: [1]}, C={T2: [0, 2]}
    )


def test_homogeneous_member_removed():
    """UniformHomogeneousAssignmentBuilderTest.testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics."""
    members = {
        "A": member([T1, T2], {T1: [0], T2: [0]}),
        "B": member([T1, T2], {T1: [1], T2: [1]}),
    }
    assert assign("uniform", members, topics(t1=3, t2=3)) == expect(
        A={T1: [0], T2: [0, 2]}, B={T1: [1, 2], T2: [1]}
    )


def test_homogeneous_subscription_removed():
    """UniformHomogeneousAssignmentBuilderTest.testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics."""
    members = {
        "A": member([T2], {T1: [0], T2: [0]}),
        "B": member([T2], {T1: [1], T2: [1]}),
    }
    assert assign("uniform", members, topics(t1=2, t2=2)) == expect(A={T2: [0]}, B={T2: [1]})


# -- uniform, heterogeneous ------------------------------------------------------------------------


def test_heterogeneous_no_subscriptions():
    """UniformHeterogeneousAssignmentBuilderTest.testTwoMembersNoTopicSubscription."""
    assert assign("uniform", {"A": member([]), "B": member([])}, topics(t1=3)) == {"A": {}, "B": {}}


def test_heterogeneous_subscriptions_to_missing_topics():
    """UniformHeterogeneousAssignmentBuilderTest.testTwoMembersSubscribedToNonexistentTopics."""
    with pytest.raises(ValueError):
        assign("uniform", {"A": member([T3]), "B": member([T2])}, topics(t1=3))


def test_heterogeneous_first_assignment_two_members_two_topics():
    """UniformHeterogeneousAssignmentBuilderTest.testFirstAssignmentTwoMembersTwoTopics."""
    members = {"A": member([T1, T3]), "B": member([T3])}
    assert assign("uniform", members, topics(t1=3, t3=6)) == expect(
        A={T1: [0, 1, 2], T3: [4]}, B={T3: [0, 1, 2, 3, 5]}
    )


def test_heterogeneous_more_members_than_partitions():
    """UniformHeterogeneousAssignmentBuilderTest.testFirstAssignmentNumMembersGreaterThanTotalNumPartitions."""
    members = {"A": member([T3]), "B": member([T3]), "C": member([T1])}
    assert assign("uniform", members, topics(t3=1, t1=2)) == expect(A={T3: [0]}, B={}, C={T1: [0, 1]})


def test_heterogeneous_unbalanced_previous_assignment():
    """UniformHeterogeneousAssignmentBuilderTest.testReassignmentForTwoMembersThreeTopicsGivenUnbalancedPrevAssignment."""
    members = {
        "A": member([T1], {T1: [0, 1, 2]}),
        "B": member([T1, T2], {T1: [3], T2: [0]}),
        "C": member([T1, T2, T3], {T1: [4, 5], T2: [1, 2, 3], T3: [0, 1, 2, 3]}),
    }
    assert assign("uniform", members, topics(t1=6, t2=4, t3=4)) == expect(
        A={T1: [0, 1, 2, 5]}, B={T1: [3], T2: [0, 1, 2, 3]}, C={T1: [4], T3: [0, 1, 2, 3]}
    )


def test_heterogeneous_partitions_added():
    """UniformHeterogeneousAssignmentBuilderTest.testReassignmentWhenPartitionsAreAddedForTwoMembers."""
    members = {
        "A": member([T1, T3], {T1: [0, 1, 2, 3], T3: [0, 1]}),
        "B": member([T1, T2, T3, T4], {T2: [0, 1, 2], T4: [0, 1, 2]}),
    }
    assert assign("uniform", members, topics(t1=6, t2=5, t3=3, t4=3)) == expect(
        A={T1: [0, 1, 2, 3, 4, 5], T3: [0, 1, 2]}, B={T2: [0, 1, 2, 3, 4], T4: [0, 1, 2]}
    )


def test_heterogeneous_member_and_partitions_added():
    """UniformHeterogeneousAssignmentBuilderTest.testReassignmentWhenOneMemberAddedAndPartitionsAddedTwoMembersTwoTopics."""
    members = {
        "A": member([T1], {T1: [0, 2], T2: [0]}),
        "B": member([T1, T2], {T1: [1], T2: [1, 2]}),
        "C": member([T1, T2]),
    }
    assert assign("uniform", members, topics(t1=6, t2=7)) == expect(
        A={T1: [0, 2, 3, 4, 5]}, B={T1: [1], T2: [1, 2, 6]}, C={T2: [0, 3, 4, 5]}
    )


def test_heterogeneous_member_removed():
    """UniformHeterogeneousAssignmentBuilderTest.testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersThreeTopics."""
    members = {
        "A": member([T1, T3], {T1: [0, 1, 2], T3: [0, 1]}),
        "B": member([T2], {T2: [3, 4, 5, 6]}),
    }
    assert assign("uniform", members, topics(t1=3, t2=8, t3=3)) == expect(
        A={T1: [0, 1, 2], T3: [0, 1, 2]}, B={T2: list(range(8))}
    )


def test_heterogeneous_subscription_removed():
    """UniformHeterogeneousAssignmentBuilderTest.testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics."""
    members = {
        "A": member([T1], {T1: [0, 2], T2: [1, 3]}),
        "B": member([T1, T2], {T1: [1], T2: [0, 2, 4]}),
    }
    assert assign("uniform", members, topics(t1=3, t2=5)) == expect(A={T1: [0, 1, 2]}, B={T2: [0, 1, 2, 3, 4]})


def test_heterogeneous_partitions_run_out_before_balance():
    """UniformHeterogeneousAssignmentBuilderTest.testReassignmentWhenTopicPartitionsRunOutAndMembersHaveNoPartitions.

    Kafka's test forces the heterogeneous builder on identical subscriptions (``assign`` would
    pick the homogeneous one), so the builder is called directly.
    """
    members = {
        "A": member([T1, T2, T3], {T1: [0, 1], T2: [0, 1], T3: [0, 1]}),
        "B": member([T1, T2, T3]),
    }
    all_topics = topics(t1=2, t2=2, t3=2)
    result = _uniform_heterogeneous(members, all_topics, _TopicOrder(all_topics))
    assert {m: {t: p for t, p in a.items() if p} for m, a in result.items()} == {
        "A": {T2: {0}, T3: {0, 1}},
        "B": {T1: {0, 1}, T2: {1}},
    }


def test_heterogeneous_one_member_without_subscriptions():
    """UniformHeterogeneousAssignmentBuilderTest.testFirstAssignmentWithTwoMembersIncludingOneWithoutSubscriptions."""
    members = {"A": member([T1]), "B": member([])}
    assert assign("uniform", members, topics(t1=3)) == expect(A={T1: [0, 1, 2]}, B={})


# -- range -----------------------------------------------------------------------------------------


def test_range_one_member_no_topic():
    """RangeAssignorTest.testOneMemberNoTopic."""
    assert assign("range", {"A": member([])}, topics(t1=3)) == {"A": {}}


def test_range_subscription_to_missing_topic():
    """RangeAssignorTest.testOneMemberSubscribedToNonExistentTopic."""
    with pytest.raises(ValueError):
        assign("range", {"A": member([T2])}, topics(t1=3))


def test_range_two_members_same_subscriptions():
    """RangeAssignorTest.testFirstAssignmentTwoMembersTwoTopicsSameSubscriptions (co-partitioned ranges)."""
    members = {"A": member([T1, T3]), "B": member([T1, T3])}
    assert assign("range", members, topics(t1=3, t3=2)) == expect(
        A={T1: [0, 1], T3: [0]}, B={T1: [2], T3: [1]}
    )


def test_range_three_members_different_subscriptions():
    """RangeAssignorTest.testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions."""
    members = {"A": member([T1, T2]), "B": member([T3]), "C": member([T2, T3])}
    assert assign("range", members, topics(t1=3, t2=3, t3=2)) == expect(
        A={T1: [0, 1, 2], T2: [0, 1]}, B={T3: [0]}, C={T2: [2], T3: [1]}
    )


def test_range_more_members_than_partitions():
    """RangeAssignorTest.testFirstAssignmentNumMembersGreaterThanNumPartitions."""
    members = {"A": member([T1, T3]), "B": member([T1, T3]), "C": member([T1, T3])}
    assert assign("range", members, topics(t1=3, t3=2)) == expect(
        A={T1: [0], T3: [0]}, B={T1: [1], T3: [1]}, C={T1: [2]}
    )


def test_range_static_membership():
    """RangeAssignorTest.testStaticMembership: a static member back under a new member id keeps its ranges."""
    before = assign(
        "range",
        {"A": member([T1], instance_id="instanceA"), "B": member([T1], instance_id="instanceB")},
        topics(t1=3),
    )
    after = assign(
        "range",
        {"memberA1": member([T1], instance_id="instanceA"), "B": member([T1], instance_id="instanceB")},
        topics(t1=3),
    )
    assert after["memberA1"] == before["A"] and after["B"] == before["B"]


def test_range_mixed_static_membership():
    """RangeAssignorTest.testMixedStaticMembership: static members first, by instance id; then the others."""
    before = assign(
        "range",
        {
            "A": member([T1], instance_id="instanceA"),
            "C": member([T1], instance_id="instanceC"),
            "B": member([T1]),
        },
        topics(t1=5),
    )
    assert before == expect(A={T1: [0, 1]}, C={T1: [2, 3]}, B={T1: [4]})
    after = assign(
        "range",
        {
            "C": member([T1], instance_id="instanceC"),
            "B": member([T1]),
            "memberA1": member([T1], instance_id="instanceA"),
        },
        topics(t1=5),
    )
    assert after["memberA1"] == before["A"] and after["B"] == before["B"] and after["C"] == before["C"]


def test_range_member_added_more_members_than_partitions():
    """RangeAssignorTest.testReassignmentNumMembersGreaterThanNumPartitionsWhenOneMemberAdded."""
    members = {
        "A": member([T1, T2], {T1: [0], T2: [0]}),
        "B": member([T1, T2], {T1: [1], T2: [1]}),
        "C": member([T1, T2]),
    }
    assert assign("range", members, topics(t1=2, t2=2)) == expect(
        A={T1: [0], T2: [0]}, B={T1: [1], T2: [1]}, C={}
    )


def test_range_partition_added():
    """RangeAssignorTest.testReassignmentWhenOnePartitionAddedForTwoMembersTwoTopics."""
    members = {
        "A": member([T1, T2], {T1: [0, 1], T2: [0, 1]}),
        "B": member([T1, T2], {T1: [2], T2: [2]}),
    }
    assert assign("range", members, topics(t1=4, t2=4)) == expect(
        A={T1: [0, 1], T2: [0, 1]}, B={T1: [2, 3], T2: [2, 3]}
    )


def test_range_member_added():
    """RangeAssignorTest.testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics."""
    members = {
        "A": member([T1, T2], {T1: [0, 1], T2: [0, 1]}),
        "B": member([T1, T2], {T1: [2], T2: [2]}),
        "C": member([T1, T2]),
    }
    assert assign("range", members, topics(t1=3, t2=3)) == expect(
        A={T1: [0], T2: [0]}, B={T1: [1], T2: [1]}, C={T1: [2], T2: [2]}
    )


def test_range_member_and_partition_added():
    """RangeAssignorTest.testReassignmentWhenOneMemberAddedAndOnePartitionAfterInitialAssignmentWithTwoMembersTwoTopics."""
    members = {
        "A": member([T1, T2], {T1: [0, 1], T2: [0, 1]}),
        "B": member([T1, T2], {T1: [2], T2: [2]}),
        "C": member([T1]),
    }
    assert assign("range", members, topics(t1=4, t2=3)) == expect(
        A={T1: [0, 1], T2: [0, 1]}, B={T1: [2], T2: [2]}, C={T1: [3]}
    )


def test_range_member_removed():
    """RangeAssignorTest.testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithTwoMembersTwoTopics."""
    members = {"B": member([T1, T2], {T1: [2], T2: [2]})}
    assert assign("range", members, topics(t1=3, t2=3)) == expect(B={T1: [0, 1, 2], T2: [0, 1, 2]})


def test_range_subscriptions_removed():
    """RangeAssignorTest.testReassignmentWhenMultipleSubscriptionsRemovedAfterInitialAssignmentWithThreeMembersTwoTopics."""
    members = {
        "A": member([T1], {T1: [0, 1, 2], T2: [0]}),
        "B": member([T1, T2, T3], {T2: [1]}),
        "C": member([T2], {T2: [2], T3: [0, 1]}),
    }
    assert assign("range", members, topics(t1=3, t2=3, t3=2)) == expect(
        A={T1: [0, 1]}, B={T1: [2], T2: [0, 1], T3: [0, 1]}, C={T2: [2]}
    )


# -- choices of this module (spec/consumer.md, "Assignors") ----------------------------------------


def test_ids_that_are_not_uuids_are_ordered_as_strings():
    """Not from Kafka (its topic ids are Uuids): plain ids fall back to Java string order."""
    members = {"A": member(["b", "a"]), "B": member(["a", "b"])}
    all_topics = {"a": TopicSpec("a", 3), "b": TopicSpec("b", 2)}
    assert assign("uniform", members, all_topics) == expect(A={"a": [0, 1]}, B={"a": [2], "b": [0, 1]})


def test_partitions_beyond_the_count_and_unknown_topics_are_dropped():
    """Not from Kafka (partition counts only grow there): stale holdings do not survive."""
    members = {"A": member([T1], {T1: [0, 7], T4: [0]}), "B": member([T1])}
    assert assign("uniform", members, topics(t1=2)) == expect(A={T1: [0]}, B={T1: [1]})


# -- properties ------------------------------------------------------------------------------------


def check_valid(members, all_topics, result):
    assert set(result) == set(members)
    seen = set()
    for member_id, assignment in result.items():
        for topic_id, partitions in assignment.items():
            assert partitions, "no empty partition set"
            assert topic_id in members[member_id].subscribed
            for p in partitions:
                assert 0 <= p < all_topics[topic_id].partitions
                assert (topic_id, p) not in seen
                seen.add((topic_id, p))
    wanted = {
        (t, p) for m in members.values() for t in m.subscribed for p in range(all_topics[t].partitions)
    }
    assert seen == wanted


def uuid_text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@st.composite
def groups(draw, homogeneous=None):
    id_kind = draw(st.sampled_from(["base64", "hex", "plain"]))
    raws = draw(st.lists(st.binary(min_size=16, max_size=16), min_size=1, max_size=6, unique=True))
    if id_kind == "base64":
        ids = [uuid_text(r) for r in raws]
    elif id_kind == "hex":
        ids = [str(uuid.UUID(bytes=r)) for r in raws]
    else:
        ids = [f"topic-{i}" for i in range(len(raws))]
    all_topics = {t: TopicSpec(t, draw(st.integers(1, 12))) for t in ids}
    member_ids = draw(st.lists(st.text("abcXYZ-0", min_size=1, max_size=4), min_size=1, max_size=7, unique=True))
    if homogeneous is None:
        homogeneous = draw(st.booleans())
    if homogeneous:
        common = frozenset(draw(st.lists(st.sampled_from(ids), unique=True)))
        subscriptions = {m: common for m in member_ids}
    else:
        subscriptions = {m: frozenset(draw(st.lists(st.sampled_from(ids), unique=True))) for m in member_ids}
    # a previous target assignment: each partition held by at most one member, perhaps stale
    held: dict[str, dict[str, set[int]]] = {m: {} for m in member_ids}
    for t in ids:
        for p in range(all_topics[t].partitions):
            owner = draw(st.sampled_from([None, *member_ids]))
            if owner is not None:
                held[owner].setdefault(t, set()).add(p)
    instance = {m: draw(st.sampled_from([None, f"i-{m}"])) for m in member_ids}
    members = {
        m: MemberSpec(subscriptions[m], {t: frozenset(p) for t, p in held[m].items()}, instance_id=instance[m])
        for m in member_ids
    }
    return members, all_topics


def relabel(members, result):
    return {m: MemberSpec(members[m].subscribed, result[m], members[m].instance_id) for m in members}


@given(groups(), st.sampled_from(ASSIGNORS))
def test_every_subscribed_partition_assigned_once_to_a_subscriber(group, assignor):
    members, all_topics = group
    check_valid(members, all_topics, assign(assignor, members, all_topics))


@given(groups(homogeneous=True))
def test_uniform_balances_homogeneous_groups(group):
    members, all_topics = group
    result = assign("uniform", members, all_topics)
    sizes = [sum(map(len, a.values())) for a in result.values()]
    assert max(sizes) - min(sizes) <= 1


@given(groups())
def test_range_gives_each_subscriber_its_share_of_each_topic(group):
    members, all_topics = group
    result = assign("range", members, all_topics)
    for t, spec in all_topics.items():
        subscribers = [m for m in members if t in members[m].subscribed]
        if subscribers:
            share = {len(result[m].get(t, ())) for m in subscribers}
            assert share <= {spec.partitions // len(subscribers), -(-spec.partitions // len(subscribers))}


@given(groups(), st.sampled_from(ASSIGNORS))
def test_rerunning_on_the_result_changes_nothing(group, assignor):
    members, all_topics = group
    first = assign(assignor, members, all_topics)
    assert assign(assignor, relabel(members, first), all_topics) == first


@given(groups(), st.sampled_from(ASSIGNORS), st.randoms(use_true_random=False))
def test_deterministic_whatever_the_order_of_members_and_topics(group, assignor, rnd):
    members, all_topics = group
    first = assign(assignor, members, all_topics)
    assert assign(assignor, members, all_topics) == first
    member_items, topic_items = list(members.items()), list(all_topics.items())
    rnd.shuffle(member_items)
    rnd.shuffle(topic_items)
    assert assign(assignor, dict(member_items), dict(topic_items)) == first
