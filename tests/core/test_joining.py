"""The join phase (core/classic/joining.py): JoinGroup, the initial delay, parked requests,
state times, join completion, and static-member replacement (§6)."""

from __future__ import annotations

import pytest
from drive import _commands, _driver, _join, _settle, _stable, _sync

from groupcoord.core import commands as c


def test_a_failed_static_replacement_brings_the_old_member_back_with_its_session():
    """§6: on write failure the old id comes back with its old protocols and timeouts, its
    heartbeat re-armed: it stays valid and still expires when it stops heartbeating."""
    from groupcoord.core import commands as c
    from groupcoord.core.errors import Error

    d = _driver()
    generation, [old], _ = _stable(d, instance="i")
    d.advance(9_000)
    d.fail_next_write(Error.NOT_LEADER_OR_FOLLOWER)
    rejoin = _join(d, instance="i", session=30_000, protocols=(("range", b"new"),))
    assert d.responses[rejoin] == c.JoinGroupResponse(
        error_code=Error.NOT_COORDINATOR, generation_id=generation, protocol_type="consumer",
        protocol_name="range", leader=old, member_id="")
    group = d.coordinator.group("g")
    assert dict(group.static_members) == {"i": old} and list(group.members) == [old]
    member = group.members[old]
    assert (member.session_timeout_ms, member.rebalance_timeout_ms, member.protocols) == (
        10_000, 20_000, (("range", b"m"),))
    d.advance(9_999)  # past the session the old member had before the replacement
    assert old in d.coordinator.group("g").members
    d.advance(1)  # its session timeout from the failure on
    assert d.coordinator.group("g").members == {} and d.coordinator.group("g").state.value == "Empty"


@pytest.mark.parametrize("error", [None, "NOT_LEADER_OR_FOLLOWER"])
def test_a_static_replacement_whose_member_left_and_group_went_meanwhile_ends_quietly(error):
    """The replaced-in member leaves (by instance id) while the replacement's write is in flight
    and the now Empty group is deleted: the write's outcome finds no member to answer."""
    from groupcoord.core.errors import Error

    d = _driver()
    _stable(d, instance="i")
    d.hold_writes()
    rejoin = _join(d, instance="i")
    [replace] = d.in_flight
    leave = d.send("LeaveGroup", {"group_id": "g", "members": [{"member_id": "", "group_instance_id": "i"}]},
                   version=3)
    assert d.responses[rejoin].error_code is Error.UNKNOWN_MEMBER_ID
    if error is None:
        _settle(d, replace)
        assert d.coordinator.group("g").members == {}
    d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    assert d.coordinator.group("g") is None
    if error is not None:
        _settle(d, replace, error)
    assert d.coordinator.group("g") is None
    d.release_writes()
    assert d.answer_counts[rejoin] == 1 and d.answer_counts[leave] == 1


def test_a_static_member_that_rejoins_before_its_replacement_is_written_is_answered_by_the_new_join():
    """The new member id rejoins while the replacement's write is in flight (a leader's rejoin
    rebalances); the write's success then finds the member no longer parked on it."""
    d = _driver()
    _stable(d, instance="i")
    d.hold_writes()
    _join(d, instance="i")
    [replace] = d.in_flight
    new = d.coordinator.group("g").static_members["i"]
    again = _join(d, member_id=new, instance="i")
    assert d.responses[again].member_id == new and d.responses[again].generation_id == 2
    _settle(d, replace)
    group = d.coordinator.group("g")
    assert group.state.value == "CompletingRebalance" and dict(group.static_members) == {"i": new}
    assert d.answer_counts[again] == 1 and group.members[new].awaiting_join is None


def test_a_replaced_static_member_is_no_new_member_and_keeps_its_parked_join():
    """§6: the member replacing a static member has isNew = false: a parked JoinGroup counts as
    its heartbeat, so it outlives its session while the join phase lasts."""
    from groupcoord.core.errors import Error

    d = _driver(group_initial_rebalance_delay_ms=20_000)
    first = _join(d, instance="i", session=6_000, rebalance=60_000)
    d.advance(1_000)
    second = _join(d, instance="i", session=6_000, rebalance=60_000)
    assert d.responses[first].error_code is Error.FENCED_INSTANCE_ID
    d.advance(10_000)  # past its session, before the join phase ends
    assert len(d.coordinator.group("g").members) == 1
    d.advance(10_000)
    assert d.responses[second].error_code is Error.NONE and d.responses[second].generation_id == 1


def test_the_member_replacing_a_static_member_expires_with_its_session():
    from groupcoord.core.errors import Error

    d = _driver()
    _stable(d, instance="i")
    rejoin = _join(d, instance="i", session=10_000)
    assert d.responses[rejoin].error_code is Error.NONE
    new = d.responses[rejoin].member_id
    d.advance(9_999)
    assert new in d.coordinator.group("g").members
    d.advance(1)
    assert d.coordinator.group("g").members == {}


def test_a_pending_member_refused_for_the_group_size_is_no_longer_pending():
    """acceptJoiningMember: the refused id is removed as a member and as a pending id (ref §3.1
    step 2), so the next join phase does not wait for it."""
    from groupcoord.core.errors import Error

    d = _driver(group_max_size=1)
    pending = d.responses[_join(d, version=4)].member_id  # while the group is Empty
    first = _join(d, version=3)
    refused = _join(d, member_id=pending, version=4)
    assert d.responses[refused].error_code is Error.GROUP_MAX_SIZE_REACHED
    assert d.coordinator.group("g").pending_members == frozenset()
    d.advance(3_000)
    assert d.responses[first].error_code is Error.NONE


def test_a_rejoin_updates_the_members_rebalance_timeout():
    """updateMember: the rejoining member's timeouts replace its old ones; the join phase then
    lasts the group's (largest) rebalance timeout."""
    from groupcoord.core.errors import Error

    d = _driver()
    joins = [_join(d, version=3, session=100_000, rebalance=20_000) for _ in range(2)]
    while not all(j in d.responses for j in joins):
        d.advance(3_000)
    leader, follower = (d.responses[j] for j in joins)
    _sync(d, follower.member_id, 1)
    _sync(d, leader.member_id, 1, assignments=[(leader.member_id, b"x"), (follower.member_id, b"y")])
    rejoin = _join(d, member_id=leader.member_id, version=3, session=100_000, rebalance=40_000)
    d.advance(30_000)  # past the old rebalance timeout: the follower has not rejoined, the phase goes on
    assert rejoin not in d.responses
    d.advance(10_000)
    assert d.responses[rejoin].error_code is Error.NONE and d.responses[rejoin].generation_id == 2


def test_the_leader_gets_every_members_metadata_for_the_chosen_protocol():
    from groupcoord.core import commands as c

    d = _driver()
    first = _join(d, version=3, protocols=(("range", b"r1"), ("rr", b"x1")))
    second = _join(d, version=5, instance="i", protocols=(("range", b"r2"),))
    while first not in d.responses or second not in d.responses:
        d.advance(3_000)
    leader = d.responses[first]
    assert leader.protocol_name == "range"
    assert leader.members == (c.JoinGroupResponseMember(leader.member_id, None, b"r1"),
                              c.JoinGroupResponseMember(d.responses[second].member_id, "i", b"r2"))
    assert d.responses[second].members == ()


def test_the_initial_delay_extends_while_any_rebalance_time_remains():
    """InitialDelayedJoin: a member added during the delay extends it by min(delay, remaining),
    even when only 1 ms of the rebalance timeout remains."""
    d = _driver()
    first = _join(d, version=3, rebalance=3_001)
    second = _join(d, version=3, rebalance=3_001)
    d.advance(3_000)
    assert first not in d.responses and second not in d.responses
    d.advance(1)
    assert d.responses[first].generation_id == 1 and d.responses[second].generation_id == 1


def test_the_initial_delay_extends_again_for_a_member_added_during_an_extension():
    d = _driver()
    joins = [_join(d, version=3)]
    d.advance(1_000)
    joins.append(_join(d, version=3))
    d.advance(2_000)  # 3 s: the delay is extended (to 6 s) for the member added at 1 s
    d.advance(1_000)
    joins.append(_join(d, version=3))
    d.advance(2_000)  # 6 s: extended again, for the member added at 4 s
    assert not any(j in d.responses for j in joins)
    d.advance(3_000)
    assert all(d.responses[j].generation_id == 1 for j in joins)


def test_join_completion_cancels_the_join_timer_and_the_heartbeats_of_members_it_drops():
    """completeClassicGroupJoin: the join timer is cancelled, and each dynamic member that did
    not rejoin is removed with its heartbeat cancelled."""
    from groupcoord.core import commands as c

    d = _driver()
    joins = [_join(d, version=3, session=100_000) for _ in range(2)]
    while not all(j in d.responses for j in joins):
        d.advance(3_000)
    leader, follower = (d.responses[j].member_id for j in joins)
    _sync(d, follower, 1)
    _sync(d, leader, 1, assignments=[(leader, b""), (follower, b"")])
    rejoin = _join(d, member_id=leader, version=3, session=100_000)
    out = _commands(d, lambda: d.advance(20_000))  # the rebalance timeout: the follower did not rejoin
    assert d.responses[rejoin].generation_id == 2
    assert c.CancelTimer(c.JoinTimer(0, "g")) in out
    assert c.CancelTimer(c.HeartbeatTimer(0, "g", follower)) in out
    assert list(d.coordinator.group("g").members) == [leader]


def test_a_group_emptied_by_its_join_phase_keeps_its_state_time_on_reload():
    """The empty GroupMetadata record written when a join phase ends with no members carries the
    time the group became Empty; offsets then expire from that time (§5.3)."""
    d = _driver()
    _, [member], _ = _stable(d)
    d.advance(5_000)
    d.send("LeaveGroup", {"group_id": "g", "members": [{"member_id": member}]}, version=3)
    emptied = d.now_ms
    group = d.coordinator.group("g")
    assert group.state.value == "Empty" and group.state_timestamp_ms == emptied
    d.advance(1_000)
    d.reload()
    assert d.coordinator.group("g").state_timestamp_ms == emptied


def test_a_static_member_replaced_before_it_synced_leaves_the_sync_timer_to_rebalance():
    """Kafka's ClassicGroup.replaceStaticMember leaves the old member id in pendingSyncMembers:
    a static member replaced in Stable before its SyncGroup keeps the sync phase open, and the
    sync timer rebalances the group although the new member synced."""
    d = _driver(group_initial_rebalance_delay_ms=0)
    first = _join(d, version=4, session=60_000)
    leader = d.responses[first].member_id
    _join(d, member_id=leader, version=4, session=60_000)
    static = _join(d, instance="i", session=60_000)
    d.advance(1)
    static_id = d.responses[static].member_id
    assert d.coordinator.group("g").state.value == "CompletingRebalance"
    _sync(d, leader, 1, assignments=((leader, b"a"), (static_id, b"b")))
    assert d.coordinator.group("g").state.value == "Stable"
    again = _join(d, instance="i", session=60_000)
    new_id = d.responses[again].member_id
    assert d.responses[again].error_code.name == "NONE" and new_id != static_id
    synced = _sync(d, new_id, 1, instance="i")
    assert d.responses[synced].error_code.name == "NONE" and d.responses[synced].assignment == b"b"
    assert static_id in d.coordinator.group("g").pending_sync
    d.advance(20_000)  # the sync timer: the rebalance timeout from the join phase's end (sessions: 60 s)
    assert d.coordinator.group("g").state.value == "PreparingRebalance"


def test_a_group_created_by_a_join_is_committed_with_kafkas_empty_record():
    """newEmptyGroupMetadataRecord: protocol type "" when none is known yet, generation 0, no
    protocol or leader, the group's state time."""
    d = _driver()
    d.advance(1_234)
    d.hold_writes()
    _join(d, version=4)  # MEMBER_ID_REQUIRED: the group is created without members
    [write] = d.in_flight
    assert write.records == (c.GroupMetadataRecord(group_id="g", protocol_type="", generation_id=0,
                                                   protocol_name=None, leader_id=None,
                                                   current_state_timestamp_ms=1_234),)


def test_each_transition_stamps_the_groups_state_time():
    d = _driver()
    join = _join(d, version=3)
    d.advance(100)
    assert d.coordinator.group("g").state_timestamp_ms == 0  # PreparingRebalance since the join
    d.advance(2_900)
    group = d.coordinator.group("g")
    assert (group.state.value, group.state_timestamp_ms) == ("CompletingRebalance", 3_000)
    d.advance(500)
    member = d.responses[join].member_id
    _sync(d, member, 1, assignments=[(member, b"x")])
    group = d.coordinator.group("g")
    assert (group.state.value, group.state_timestamp_ms) == ("Stable", 3_500)
    d.advance(500)
    _join(d, member_id=member, version=3)  # the leader rejoins: a new rebalance
    group = d.coordinator.group("g")
    assert group.state_timestamp_ms == 4_000 and group.state.value in ("PreparingRebalance", "CompletingRebalance")


def test_parked_requests_keep_their_version_and_members_are_no_longer_new_once_joined():
    from groupcoord.core.classic.model import Parked

    d = _driver()
    first = _join(d, version=3)
    member = d.coordinator.group("g").members[next(iter(d.coordinator.group("g").members))]
    assert member.awaiting_join == Parked(first, 3) and member.is_new is True
    d.advance(3_000)
    mid = d.responses[first].member_id
    assert d.coordinator.group("g").members[mid].is_new is False
    second = _join(d, version=2)
    joined = [m for m in d.coordinator.group("g").members.values() if m.member_id != mid]
    assert joined[0].awaiting_join == Parked(second, 2)
    other = joined[0].member_id
    rejoin = _join(d, member_id=other, version=4)  # again, while the first member has not rejoined
    assert d.coordinator.group("g").members[other].awaiting_join == Parked(rejoin, 4)
    d.advance(20_000)
    generation = d.responses[rejoin].generation_id
    assert list(d.coordinator.group("g").members) == [other]
    d.hold_writes()  # the leader's sync waits for its assignment's write
    sync = _sync(d, other, generation, version=3)
    assert d.coordinator.group("g").members[other].awaiting_sync == Parked(sync, 3)


def test_a_replaced_static_member_keeps_its_parked_join_version_and_is_not_new():
    from groupcoord.core.classic.model import Parked

    d = _driver()
    _stable(d, instance="i")
    d.hold_writes()
    rejoin = _join(d, instance="i", version=7)
    [member] = d.coordinator.group("g").members.values()
    assert member.awaiting_join == Parked(rejoin, 7) and member.is_new is False


def test_a_member_joining_a_rebalance_that_did_not_start_empty_is_no_new_member_of_an_initial_delay():
    d = _driver()
    _, ids, leader = _stable(d, members=2)
    _join(d, member_id=leader, version=3)  # Stable -> PreparingRebalance, waiting for the other member
    assert d.coordinator.group("g").state.value == "PreparingRebalance"
    _join(d, version=3)
    assert d.coordinator.group("g").new_member_added is False


def test_the_initial_delay_flag_is_cleared_when_the_delay_is_extended():
    d = _driver()
    _join(d, version=3)
    d.advance(1_000)
    _join(d, version=3)
    assert d.coordinator.group("g").new_member_added is True
    d.advance(2_000)
    assert d.coordinator.group("g").new_member_added is False


def test_a_rebalance_from_completing_rebalance_clears_every_assignment():
    """prepareRebalance in CompletingRebalance: resetAndPropagateAssignmentWithError."""
    d = _driver()
    generation, ids, leader = _stable(d, members=2)
    joins = [_join(d, member_id=m, version=3) for m in ids]
    assert all(d.responses[j].generation_id == generation + 1 for j in joins)
    assert d.coordinator.group("g").state.value == "CompletingRebalance"
    assert all(m.assignment for m in d.coordinator.group("g").members.values())  # the last generation's
    _join(d, version=3)  # a new member: back to PreparingRebalance
    group = d.coordinator.group("g")
    assert group.state.value == "PreparingRebalance" and all(m.assignment == b"" for m in group.members.values())
