"""Writes in flight (core/writes.py) and what runs after one completes or fails
(core/continuations.py, core/after_write.py): results held behind writes, and a failed write
reverting its operation and what came after it, as Kafka's snapshot revert does."""

from __future__ import annotations

import pytest
from drive import _commit, _coordinator, _driver, _empty_group, _join, _settle, _stable, _sync

from groupcoord.core import commands as c
from groupcoord.core import events as ev
from groupcoord.core.errors import Error


def test_requests_held_behind_a_write_are_answered_not_coordinator_when_the_partition_unloads():
    """Kafka fails the operations still waiting on the partition's writes with NOT_COORDINATOR
    when it loses the partition (CoordinatorRuntime: the deferred events complete exceptionally)."""
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error

    d = _driver(offset_metadata_max_bytes=1)
    generation, [member], _ = _stable(d)
    d.hold_writes()
    first = _commit(d, "s")  # its write is held: what follows on the partition waits behind it
    too_large = _commit(d, "s", offsets=(("t", 1, 6), ("u", 0, 1)), metadata="xx")
    fetch = d.send("OffsetFetch", {"groups": [{"group_id": "s", "topics": None}], "require_stable": True}, version=8)
    delete = d.send("OffsetDelete", {"group_id": "s", "topics": [{"name": "x", "partitions": [{"partition_index": 0}]}]},
                    version=0)
    leave = d.send("LeaveGroup", {"group_id": "g", "members": [{"member_id": "nobody"}]}, version=3)
    heartbeat = d.send("Heartbeat", {"group_id": "g", "generation_id": generation, "member_id": member}, version=4)
    held = (first, too_large, fetch, delete, leave, heartbeat)
    assert not any(r in d.responses for r in held)
    d.dispatch(ev.UnloadPartition(now_ms=d.now_ms, partition=0))
    nc = Error.NOT_COORDINATOR
    assert d.responses[first] == c.OffsetCommitResponse((c.TopicResult("t", (c.PartitionResult(0, nc),)),))
    assert d.responses[too_large] == c.OffsetCommitResponse((c.TopicResult("t", (c.PartitionResult(1, nc),)),
                                                              c.TopicResult("u", (c.PartitionResult(0, nc),))))
    assert d.responses[fetch] == c.OffsetFetchResponse((c.FetchedGroup("s", (), nc),))
    assert d.responses[delete] == c.OffsetDeleteResponse(nc)
    assert d.responses[leave] == c.LeaveGroupResponse(nc)
    assert d.responses[heartbeat] == c.HeartbeatResponse(nc)
    assert all(d.answer_counts[r] == 1 for r in held)


def test_a_deletion_and_a_new_groups_creation_that_both_fail_bring_the_deleted_group_back():
    """Kafka reverts a failed write's operation and everything after it: the tombstone failing
    while a new group of the same id is being created, then that creation failing, leaves the
    deleted group as it was (writes.py: RestoreGroup onto the creation's AfterNewGroup)."""
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "g", offsets=(("t", 0, 1),))
    deleted = d.coordinator.group("g")
    d.hold_writes()
    _commit(d, "x")  # an unrelated write in flight first (offsets, a simple group)
    _join(d, "h", version=4)  # and another group's creation
    tombstone = d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    _join(d, "g", version=4)
    commit_x, create_h, delete_g, create_g = d.in_flight
    assert d.coordinator.group("g") is not deleted and d.coordinator.offsets("g") == {}
    _settle(d, delete_g, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.responses[tombstone].results[0].error_code is Error.NOT_COORDINATOR
    assert d.coordinator.group("g") is not deleted  # the new group holds the id while its creation is in flight
    _settle(d, create_g, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g") == deleted
    _settle(d, create_h, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("h") is None
    _settle(d, commit_x)
    assert d.coordinator.group("g") == deleted and d.coordinator.offsets("g") != {}


def test_a_failed_creation_of_a_group_deleted_meanwhile_does_not_bring_it_back():
    """A new group, deleted while its creation is in flight: when the creation fails the group
    never existed, so the failure of its tombstone must not restore it; a later incarnation's
    tombstone still restores that one."""
    from groupcoord.core.errors import Error

    d = _driver()
    d.hold_writes()
    _empty_group(d, "g")
    _join(d, "h", version=4)  # another group's creation in flight between them
    first_delete = d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    create_g, create_h, delete_g = d.in_flight
    _empty_group(d, "g")  # a new incarnation
    third = d.coordinator.group("g")
    d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    create_g2, delete_g2 = d.in_flight[3:]
    assert d.coordinator.group("g") is None
    _settle(d, create_g, Error.NOT_LEADER_OR_FOLLOWER)
    _settle(d, delete_g, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g") is None  # the first incarnation never existed
    assert d.responses[first_delete].results[0].error_code is Error.NOT_COORDINATOR
    _settle(d, create_h)
    _settle(d, create_g2)
    _settle(d, delete_g2, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g") == third  # the second one did, and its deletion failed


def test_a_pending_member_expires_from_a_deleted_group_held_by_a_new_groups_creation():
    """D15, with the deleted group waiting on the creation write of a new group of its id (its
    tombstone failed first): the pending member's expiry reaches that copy too."""
    from groupcoord.core.errors import Error

    d = _driver()
    _empty_group(d, "g")  # one pending member (MEMBER_ID_REQUIRED), session 10 s
    [pending] = d.coordinator.group("g").pending_members
    d.hold_writes()
    d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    _join(d, "g", version=4, session=30_000)  # a new group of the id (Empty, generation 0)
    delete_g, create_g = d.in_flight
    _settle(d, delete_g, Error.NOT_LEADER_OR_FOLLOWER)  # the old group now waits on create_g
    d.advance(10_000)  # the pending member's session
    _settle(d, create_g, Error.NOT_LEADER_OR_FOLLOWER)  # the old group comes back
    group = d.coordinator.group("g")
    assert group is not None and group.state.value == "Empty" and pending not in group.pending_members
    assert group.pending_members == frozenset()


def test_a_deleted_group_comes_back_when_the_creation_it_waits_on_fails_after_that_group_went_too():
    """The old group's tombstone fails while a new group of its id is being created; the new
    group is deleted in turn; then its creation fails: it never existed, and the old one is back."""
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "g", offsets=(("t", 0, 1),))
    old = d.coordinator.group("g")
    d.hold_writes()
    d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    _empty_group(d, "g")
    delete_old, create_new = d.in_flight
    _settle(d, delete_old, Error.NOT_LEADER_OR_FOLLOWER)
    d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    [delete_new] = d.in_flight[1:]
    assert d.coordinator.group("g") is None
    _settle(d, create_new, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g") == old
    _settle(d, delete_new)
    assert d.coordinator.group("g") == old


def test_a_failed_tombstone_brings_the_group_back_over_a_simple_group_holding_its_id():
    """A simple group (OffsetCommits alone) writes no group record, so after the deleted group's
    tombstone fails the log holds that group, with the simple group's offsets: memory follows
    the log, as a reload of it shows."""
    from groupcoord.core.errors import Error

    d = _driver()
    _, (member,), _ = _stable(d, "g")
    d.send("LeaveGroup", {"group_id": "g", "members": [{"member_id": member}]}, version=3)
    deleted = d.coordinator.group("g")  # Empty, with a record of generation 1
    assert deleted.state.value == "Empty" and deleted.protocol_type == "consumer"
    d.hold_writes()
    d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    _commit(d, "g", offsets=(("t", 0, 7),))  # a simple group takes the id
    delete_g, commit_g = d.in_flight
    assert d.coordinator.group("g").protocol_type is None
    _settle(d, delete_g, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g") == deleted
    _settle(d, commit_g)
    in_memory = (d.coordinator.group("g"), d.coordinator.offsets("g"))
    d.reload()
    reloaded = (d.coordinator.group("g"), d.coordinator.offsets("g"))
    assert in_memory[0].protocol_type == reloaded[0].protocol_type == "consumer"
    assert in_memory[0].generation_id == reloaded[0].generation_id
    assert {k: e.offset for k, e in in_memory[1].items()} == {k: e.offset for k, e in reloaded[1].items()} != {}


def test_a_failed_tombstone_leaves_a_simple_group_someone_is_joining():
    """With a member id handed out on the simple group (MEMBER_ID_REQUIRED), the holder stays:
    its pending member is not the log's to drop."""
    from groupcoord.core.errors import Error

    d = _driver()
    _empty_group(d, "g")
    d.advance(5 * 60_000 + 1)
    d.hold_writes()
    d.send("DeleteGroups", {"groups_names": ["g"]}, version=2)
    _commit(d, "g", offsets=(("t", 0, 7),))
    holder = d.coordinator.group("g")
    delete_g, _ = d.in_flight
    d.send("JoinGroup", {"group_id": "g", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 20_000,
                         "member_id": "", "protocol_type": "consumer",
                         "protocols": [{"name": "range", "metadata": b"m"}]}, version=4)
    joining = d.coordinator.group("g")
    if joining.protocol_type is not None:  # the join made it a group of its own: nothing to test
        pytest.skip("a JoinGroup sets the protocol type of a simple group")
    assert joining.pending_members and joining is not holder
    _settle(d, delete_g, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g").pending_members == joining.pending_members


def _completed_join_with_creation_in_flight(d):
    """A new group whose join phase completed (generation 1) while its creation write waits."""
    d.hold_writes()
    join = _join(d, "g", version=3)
    d.advance(3_000)  # group.initial.rebalance.delay.ms
    assert d.responses[join].generation_id == 1 and d.coordinator.group("g").state.value == "CompletingRebalance"
    (create,) = d.in_flight
    return create, d.responses[join].member_id


def test_a_failed_creation_removes_the_group_even_after_its_join_completed():
    """Kafka's revert removes a new group whose creation write failed, whatever its generation
    (GroupMetadataManager.classicGroupJoin: "This will revert the snapshot, removing the newly
    created group"); its sync timer goes with it."""
    from groupcoord.core.commands import CancelTimer, SyncTimer
    from groupcoord.core.errors import Error

    d = _driver()
    create, _ = _completed_join_with_creation_in_flight(d)
    emitted = _settle(d, create, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g") is None
    assert CancelTimer(SyncTimer(0, "g")) in emitted


def test_a_failed_creation_keeps_the_group_when_a_later_write_may_record_it():
    """Outcomes in order (D6): a later write of the partition, here the leader's assignment,
    may still record the group, so the failed creation leaves it."""
    from groupcoord.core.errors import Error

    d = _driver()
    create, member = _completed_join_with_creation_in_flight(d)
    sync = _sync(d, member, 1, assignments=((member, b"a"),))
    assert len(d.in_flight) == 2
    _settle(d, create, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("g") is not None and d.coordinator.group("g").generation_id == 1
    _settle(d, d.in_flight[0])
    assert d.responses[sync].error_code is Error.NONE


def test_a_held_result_waits_for_every_write_in_flight_before_it_on_its_partition():
    """A write operation without records (here a heartbeat) is answered only once the writes
    in flight when it ran are committed: not when the first of two completes."""
    d = _driver()
    generation, [member], _ = _stable(d)
    d.hold_writes()
    _commit(d, "s", offsets=(("t", 0, 1),))
    _commit(d, "s", offsets=(("t", 1, 2),))
    heartbeat = d.send("Heartbeat", {"group_id": "g", "generation_id": generation, "member_id": member}, version=4)
    first, second = d.in_flight
    _settle(d, first)
    assert heartbeat not in d.responses
    _settle(d, second)
    assert d.responses[heartbeat] == c.HeartbeatResponse(Error.NONE)


def test_a_write_completing_on_one_partition_does_not_release_results_held_on_another():
    from groupcoord.core.partitioning import partition_for

    d = _driver(offsets_topic_num_partitions=2)
    on = {p: [g for g in map(str, range(100)) if partition_for(g, 2) == p][0] for p in (0, 1)}
    _commit(d, on[1])
    d.hold_writes()
    _commit(d, on[0])
    _commit(d, on[1], offsets=(("t", 1, 2),))
    held = d.send("OffsetDelete", {"group_id": on[1], "topics": [{"name": "x", "partitions": [
        {"partition_index": 0}]}]}, version=0)  # nothing to delete: a result without records
    w0, w1 = sorted(d.in_flight, key=lambda w: w.partition)
    _settle(d, w0)
    assert held not in d.responses
    _settle(d, w1)
    assert d.responses[held].error_code is Error.NONE


def test_a_pending_members_expiry_leaves_a_held_copy_of_another_group_alone():
    """The pending member that expires is removed from the held copies of its own group only,
    even when another group has a pending member of the same id (the ids come from the
    adapter's UUIDs)."""
    coordinator = _coordinator()
    coordinator.handle(ev.LoadPartition(now_ms=0, partition=0))

    def join(group, request_id):
        return coordinator.handle(ev.JoinGroup(
            request_id=request_id, now_ms=0, version=4, group_id=group, session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000, member_id="", protocol_type="consumer", protocols=(("range", b""),),
            new_member_uuid="u"))

    for out in (join("a", "ja"), join("b", "jb")):
        for write in (cmd for cmd in out if isinstance(cmd, c.Write)):
            coordinator.handle(ev.WriteCompleted(now_ms=0, write_id=write.write_id))
    assert coordinator.group("a").pending_members == frozenset({"client-u"})
    out = coordinator.handle(ev.DeleteGroups(request_id="d", now_ms=0, version=2, groups_names=("a",)))
    [deletion] = [cmd for cmd in out if isinstance(cmd, c.Write)]
    coordinator.handle(ev.TimerFired(now_ms=10_000, key=c.HeartbeatTimer(0, "b", "client-u")))
    assert coordinator.group("b").pending_members == frozenset()
    coordinator.handle(ev.WriteFailed(now_ms=10_000, write_id=deletion.write_id,
                                      error=Error.NOT_LEADER_OR_FOLLOWER))
    assert coordinator.group("a").pending_members == frozenset({"client-u"})
