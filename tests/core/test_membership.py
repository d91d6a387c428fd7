"""SyncGroup, LeaveGroup and the join and sync timers (core/classic/membership.py)."""

from __future__ import annotations

from drive import _commands, _coordinator, _driver, _join, _record, _stable, _sync

from groupcoord.core import commands as c
from groupcoord.core import events as ev


def test_leaving_cancels_the_heartbeat_of_each_member_and_pending_member_that_leaves():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev

    d = _driver()
    _, [member], _ = _stable(d)
    pending = d.responses[_join(d, version=4)].member_id
    out = d.dispatch(ev.LeaveGroup(request_id="leave", now_ms=d.now_ms, version=3, group_id="g",
                                   members=(ev.MemberIdentity(pending), ev.MemberIdentity(member))))
    cancelled = [cmd.key for cmd in out if isinstance(cmd, c.CancelTimer) and isinstance(cmd.key, c.HeartbeatTimer)]
    assert cancelled == [c.HeartbeatTimer(0, "g", pending), c.HeartbeatTimer(0, "g", member)]


def test_a_member_the_leader_leaves_out_gets_an_empty_assignment():
    """The leader's assignment covers members it lists; the others get empty bytes (Kafka:
    assignment.getOrDefault(memberId, new byte[0]))."""
    from groupcoord.core import commands as c
    from groupcoord.core.errors import Error

    d = _driver()
    joins = [_join(d, version=3) for _ in range(2)]
    while not all(j in d.responses for j in joins):
        d.advance(3_000)
    leader, follower = (d.responses[j] for j in joins)
    parked = _sync(d, follower.member_id, 1)
    _sync(d, leader.member_id, 1, assignments=[(leader.member_id, b"x")])
    assert d.responses[parked] == c.SyncGroupResponse(error_code=Error.NONE, protocol_type="consumer",
                                                      protocol_name="range", assignment=b"")
    assert d.coordinator.group("g").members[follower.member_id].assignment == b""
    # the record holds the time of the generation (here the join phase ended when the leader synced)
    record = d.storage.records(0)[-1]
    assert isinstance(record, c.GroupMetadataRecord) and record.current_state_timestamp_ms == d.now_ms > 0


def test_a_failed_assignment_write_answers_with_no_assignment_and_rebalances():
    """resetAndPropagateAssignmentWithError: every member's assignment is cleared and each parked
    SyncGroup gets the error with empty bytes, even members that held the last generation's."""
    from groupcoord.core import commands as c
    from groupcoord.core.errors import Error

    d = _driver()
    _, [leader, follower], _ = _stable(d, members=2)
    again = [_join(d, member_id=m, version=3) for m in (leader, follower)]
    assert all(d.responses[j].generation_id == 2 for j in again)
    parked = _sync(d, follower, 2)
    d.fail_next_write(Error.NOT_LEADER_OR_FOLLOWER)
    failed = _sync(d, leader, 2, assignments=[(leader, b"new"), (follower, b"new")])
    expected = c.SyncGroupResponse(error_code=Error.NOT_COORDINATOR, assignment=b"")
    assert d.responses[parked] == expected and d.responses[failed] == expected
    group = d.coordinator.group("g")
    assert group.state.value == "PreparingRebalance"
    assert all(m.assignment == b"" for m in group.members.values())


def test_the_last_sync_cancels_the_sync_timer_and_its_expiry_cancels_the_heartbeats_of_those_it_removes():
    from groupcoord.core import commands as c

    d = _driver()
    joins = [_join(d, version=3, session=100_000) for _ in range(3)]
    while not all(j in d.responses for j in joins):
        d.advance(3_000)
    a, b, late = (d.responses[j] for j in joins)
    out = _commands(d, lambda: _sync(d, b.member_id, 1))
    assert c.CancelTimer(c.SyncTimer(0, "g")) not in out  # two members have not synced
    _sync(d, a.member_id, 1, assignments=[(a.member_id, b""), (b.member_id, b"")])
    out = _commands(d, lambda: d.advance(20_000))  # the sync timeout (the rebalance timeout)
    assert c.CancelTimer(c.HeartbeatTimer(0, "g", late.member_id)) in out
    assert late.member_id not in d.coordinator.group("g").members

    d = _driver()
    joins = [_join(d, version=3) for _ in range(2)]
    while not all(j in d.responses for j in joins):
        d.advance(3_000)
    leader, follower = (d.responses[j] for j in joins)
    _sync(d, follower.member_id, 1)
    out = _commands(d, lambda: _sync(d, leader.member_id, 1))
    assert c.CancelTimer(c.SyncTimer(0, "g")) in out


def test_with_nobody_rejoined_the_join_timer_is_rearmed_for_at_least_a_millisecond():
    """D14: only static members that did not rejoin, with a 0 ms rebalance timeout: the join
    timer is re-armed for 1 ms, not 0 (a group loaded over group.max.size rebalances at once)."""
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.config import CoordinatorConfig
    from groupcoord.core.coordinator import Coordinator

    members = tuple(c.MemberRecord(f"{i}-m", i, "c", "/h", 0, 30_000, b"", b"") for i in ("a", "b"))
    coordinator = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=1, group_max_size=1))
    out = coordinator.handle(ev.LoadPartition(now_ms=100, partition=0, records=(_record(members=members),)))
    assert c.SetTimer(c.JoinTimer(0, "g"), 100) in out  # the rebalance timeout is 0 ms
    out = coordinator.handle(ev.TimerFired(now_ms=100, key=c.JoinTimer(0, "g")))
    assert out == [c.CancelTimer(c.JoinTimer(0, "g")), c.SetTimer(c.JoinTimer(0, "g"), 101)]


def test_a_join_phase_without_a_leader_waits_another_rebalance_timeout():
    """completeClassicGroupJoin: no leader can be elected (maybeElectNewJoinedLeader is false
    without a leader) while members remain: the join timer is re-armed with the rebalance timeout."""
    members = tuple(c.MemberRecord(f"{i}-m", i, "c", "/h", 5_000, 30_000, b"", b"") for i in ("a", "b"))
    record = c.GroupMetadataRecord(group_id="g", protocol_type="consumer", generation_id=3, protocol_name="range",
                                   leader_id=None, current_state_timestamp_ms=0, members=members)
    coordinator = _coordinator(group_max_size=1)
    out = coordinator.handle(ev.LoadPartition(now_ms=100, partition=0, records=(record,)))
    assert c.SetTimer(c.JoinTimer(0, "g"), 5_100) in out
    out = coordinator.handle(ev.TimerFired(now_ms=5_100, key=c.JoinTimer(0, "g")))
    assert out == [c.CancelTimer(c.JoinTimer(0, "g")), c.SetTimer(c.JoinTimer(0, "g"), 10_100)]


def test_a_sync_timer_of_the_current_generation_does_nothing_once_everybody_synced():
    d = _driver()
    generation, _, _ = _stable(d, members=2)
    coordinator = d.coordinator
    out = coordinator.handle(ev.TimerFired(now_ms=d.now_ms, key=c.SyncTimer(0, "g"), payload=generation))
    assert out == [] and coordinator.group("g").state.value == "Stable"
