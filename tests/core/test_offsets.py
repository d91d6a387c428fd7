"""The offset store and its operations (core/offsets.py): commits validated and refused, fetches
of the committed or the latest offsets, deletions, expiry, simple groups, and several writes of
one key in flight settling one by one."""

from __future__ import annotations

import pytest
from drive import (
    _commit,
    _coordinator,
    _delete_offset,
    _driver,
    _join,
    _latest,
    _offsets_seen,
    _record,
    _responses,
    _settle,
    _stable,
    _sync,
)

from groupcoord.core import commands as c
from groupcoord.core import events as ev
from groupcoord.core.classic import subscription as cp
from groupcoord.core.errors import Error


def test_a_groups_subscribed_topics_are_every_members_topics():
    """ClassicGroup.computeSubscribedTopics: the union of the members' subscriptions; an offset
    of a topic any member subscribes to cannot be deleted (GROUP_SUBSCRIBED_TO_TOPIC)."""
    from groupcoord.core import commands as c
    from groupcoord.core.errors import Error

    d = _driver()
    requests = [_join(d, version=3, protocols=(("range", cp.encode_subscription(topics)),))
                for topics in (["a"], ["b", "c"])]
    while not all(r in d.responses for r in requests):
        d.advance(3_000)
    joined = [d.responses[r] for r in requests]
    for j in joined:
        _sync(d, j.member_id, j.generation_id, assignments=[(m.member_id, b"") for m in j.members])
    assert d.coordinator.group("g").subscribed_topics == frozenset({"a", "b", "c"})
    _commit(d, offsets=(("a", 0, 1), ("c", 0, 1), ("z", 0, 1)), generation=joined[0].generation_id,
            member_id=joined[0].member_id)
    request = d.send("OffsetDelete", {"group_id": "g", "topics": [
        {"name": t, "partitions": [{"partition_index": 0}]} for t in ("a", "c", "z")]}, version=0)
    subscribed = Error.GROUP_SUBSCRIBED_TO_TOPIC
    assert d.responses[request] == c.OffsetDeleteResponse(Error.NONE, (
        c.TopicResult("a", (c.PartitionResult(0, subscribed),)), c.TopicResult("c", (c.PartitionResult(0, subscribed),)),
        c.TopicResult("z", (c.PartitionResult(0, Error.NONE),))))


def test_deleted_offsets_are_tombstoned_in_storage():
    """OffsetDelete writes an offset tombstone per deleted offset: a reload does not bring them back."""
    from groupcoord.core.errors import Error

    d = _driver(offsets_topic_num_partitions=3)
    _commit(d, "s", offsets=(("a", 0, 1), ("a", 1, 2), ("b", 0, 3)))
    request = d.send("OffsetDelete", {"group_id": "s", "topics": [
        {"name": "a", "partitions": [{"partition_index": 1}, {"partition_index": 7}]}]}, version=0)
    assert d.responses[request].error_code is Error.NONE
    assert set(d.coordinator.offsets("s")) == {("a", 0), ("b", 0)}
    d.reload()
    assert set(d.coordinator.offsets("s")) == {("a", 0), ("b", 0)}


def test_expiry_removes_unsubscribed_offsets_of_a_stable_group_and_whole_empty_groups_on_every_partition():
    """§5.3: a Stable consumer group's offsets of topics no member subscribes to expire by their
    commit time; a simple group's all do, and the group goes with them (tombstones, kept on reload)."""
    from groupcoord.core.partitioning import partition_for

    d = _driver(offsets_topic_num_partitions=2, offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000)
    on = {p: [g for g in map(str, range(100)) if partition_for(g, 2) == p] for p in (0, 1)}
    stable = on[0][0]
    request = _join(d, stable, version=3, session=200_000, protocols=(("range", cp.encode_subscription(["a"])),))
    d.advance(3_000)
    joined = d.responses[request]
    _sync(d, joined.member_id, joined.generation_id, stable, [(joined.member_id, b"")])
    _commit(d, stable, offsets=(("a", 0, 1), ("z", 0, 2)), generation=joined.generation_id, member_id=joined.member_id)
    simple = [on[1][0], on[0][1], on[1][1]]  # groups of both partitions, one of partition 1 first
    for gid in simple:
        _commit(d, gid)
    d.advance(70_000)
    assert set(d.coordinator.offsets(stable)) == {("a", 0)}
    assert all(d.coordinator.group(gid) is None and d.coordinator.offsets(gid) == {} for gid in simple)
    d.reload()
    assert set(d.coordinator.offsets(stable)) == {("a", 0)}
    assert all(d.coordinator.group(gid) is None for gid in simple)


def test_an_empty_group_without_a_state_time_expires_its_offsets_by_their_commit_time():
    """§5.3: base = the time the group became Empty, or the commit timestamp when absent (a record
    written with -1)."""
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.config import CoordinatorConfig
    from groupcoord.core.coordinator import Coordinator

    coordinator = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=1, offsets_retention_minutes=1))
    records = (_record("k", "consumer", timestamp=-1),
               c.OffsetCommitRecord("k", "t", 0, 5, -1, "", 1_000), c.OffsetCommitRecord("k", "t", 1, 6, -1, "", 50_000))
    coordinator.handle(ev.LoadPartition(now_ms=0, partition=0, records=records))
    out = coordinator.handle(ev.TimerFired(now_ms=61_000, key=c.ExpirationTimer(0)))
    [write] = [cmd for cmd in out if isinstance(cmd, c.Write)]
    assert write.records == (c.OffsetTombstone("k", "t", 0),)
    assert set(coordinator.offsets("k")) == {("t", 1)} and coordinator.group("k") is not None


def test_offset_fetch_answers_an_invalid_group_id_and_goes_on():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "s")
    d.dispatch(ev.OffsetFetch(request_id="f", now_ms=0, version=8, groups=(ev.FetchGroup(None), ev.FetchGroup("s"))))
    assert d.responses["f"] == c.OffsetFetchResponse((
        c.FetchedGroup(None, (), Error.INVALID_GROUP_ID),
        c.FetchedGroup("s", (c.FetchedTopic("t", (c.FetchedPartition(0, 5, -1, ""),)),))))


@pytest.mark.parametrize("generation, member, instance, error", [
    (-1, "", "i", "FENCED_INSTANCE_ID"),  # an instance id alone is validated (it maps to another member)
    (-1, "", "nobody", "UNKNOWN_MEMBER_ID"),
    (-1, "<member>", None, "ILLEGAL_GENERATION"),  # a member id alone is validated, then the generation
    (-1, "", None, "UNKNOWN_MEMBER_ID"),  # neither: only an Empty group takes it
    (0, "<member>", None, "ILLEGAL_GENERATION"),
])
def test_offset_commit_validation_in_a_stable_group(generation, member, instance, error):
    """ClassicGroup.validateOffsetCommit: a generation >= 0, a member id or an instance id each
    make the commit a member's, validated as such."""
    from groupcoord.core.errors import Error

    d = _driver()
    _, [mid], _ = _stable(d, instance="i")
    request = d.send("OffsetCommit", {"group_id": "g", "generation_id_or_member_epoch": generation,
                                      "member_id": mid if member == "<member>" else member,
                                      "group_instance_id": instance,
                                      "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]},
                     version=8)
    assert d.responses[request].topics[0].partitions[0].error_code is Error[error]


def test_an_empty_group_takes_a_commit_of_generation_minus_one_only():
    """validateOffsetCommit: generation -1 commits to an Empty group; generation 0 with no member
    id is a member's commit, and there is no such member."""
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "s")
    assert d.responses[_commit(d, "s", generation=-1)].topics[0].partitions[0].error_code is Error.NONE
    assert d.responses[_commit(d, "s", generation=0)].topics[0].partitions[0].error_code is Error.UNKNOWN_MEMBER_ID


def test_a_plain_fetch_does_not_see_a_new_offset_whose_commit_and_deletion_are_both_in_flight():
    """Reads see committed offsets (D3): a key committed and then deleted, both writes in flight,
    was never committed."""
    from groupcoord.core import events as ev

    d = _driver()
    _commit(d, "s", offsets=(("t", 0, 1),))
    d.hold_writes()
    _commit(d, "s", offsets=(("x", 0, 9),))
    d.send("OffsetDelete", {"group_id": "s", "topics": [{"name": "x", "partitions": [{"partition_index": 0}]}]},
           version=0)
    d.dispatch(ev.OffsetFetch(request_id="f", now_ms=0, version=8, groups=(ev.FetchGroup("s"),)))
    assert [t.name for t in d.responses["f"].groups[0].topics] == ["t"]


def test_a_require_stable_fetch_reads_the_latest_offsets_and_waits_for_their_write():
    """D11 (Kafka: a write operation reading the latest state): require_stable during an
    in-flight commit answers with that commit's offset once it is written; a plain fetch reads
    the committed one at once."""
    from groupcoord.core import events as ev

    d = _driver()
    _commit(d, "s", offsets=(("t", 0, 5),))
    d.hold_writes()
    _commit(d, "s", offsets=(("t", 0, 9),))
    d.dispatch(ev.OffsetFetch(request_id="plain", now_ms=0, version=8, groups=(ev.FetchGroup("s"),)))
    d.dispatch(ev.OffsetFetch(request_id="stable", now_ms=0, version=8, groups=(ev.FetchGroup("s"),),
                              require_stable=True))
    assert d.responses["plain"].groups[0].topics[0].partitions[0].committed_offset == 5
    assert "stable" not in d.responses
    d.release_writes()
    assert d.responses["stable"].groups[0].topics[0].partitions[0].committed_offset == 9


@pytest.mark.parametrize("first, second, committed, latest", [
    # committed view (a plain fetch) after each outcome; latest offsets (what operations see) after each
    (None, None, ({("t", 0): 6, ("t", 1): 1}, {("t", 0): 7, ("t", 1): 1, ("t", 2): 2}),
     ({("t", 0): 7, ("t", 1): 1, ("t", 2): 2},) * 2),
    (None, "fail", ({("t", 0): 6, ("t", 1): 1},) * 2,
     ({("t", 0): 7, ("t", 1): 1, ("t", 2): 2}, {("t", 0): 6, ("t", 1): 1})),
    ("fail", None, ({("t", 0): 5}, {("t", 0): 7, ("t", 2): 2}), ({("t", 0): 7, ("t", 2): 2},) * 2),
    ("fail", "fail", ({("t", 0): 5},) * 2, ({("t", 0): 7, ("t", 2): 2}, {("t", 0): 5})),
])
def test_two_commits_in_flight_on_one_key_settle_one_by_one(first, second, committed, latest):
    """D3/D6: commits change the offsets operations see at once and readers see the committed
    ones; each write's outcome stands alone: a failed write reverts its offsets to the committed
    value when no other write of the key is in flight, and otherwise only where it is still the
    latest."""
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "s", offsets=(("t", 0, 5),))
    d.hold_writes()
    _commit(d, "s", offsets=(("t", 0, 6), ("t", 1, 1)))
    _commit(d, "s", offsets=(("t", 0, 7), ("t", 2, 2)))
    w1, w2 = d.in_flight
    assert _offsets_seen(d, "before") == {("t", 0): 5}
    for n, (write, outcome) in enumerate(((w1, first), (w2, second))):
        _settle(d, write, Error.NOT_LEADER_OR_FOLLOWER if outcome else None)
        assert (_offsets_seen(d, n), _latest(d)) == (committed[n], latest[n])
    assert d.coordinator.snapshot().committed_offsets == {}  # nothing left in flight


def test_a_failed_commit_of_one_key_twice_reverts_to_the_committed_value():
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "s", offsets=(("t", 0, 5),))
    d.fail_next_write(Error.NOT_LEADER_OR_FOLLOWER)
    _commit(d, "s", offsets=(("t", 0, 6), ("t", 0, 7)))
    assert _latest(d) == {("t", 0): 5} and _offsets_seen(d, "f") == {("t", 0): 5}


def test_a_failed_deletion_keeps_a_later_commit_of_its_key():
    """An offset deleted, then committed again, both in flight; the deletion fails: the later
    commit's offset stays (it is still in flight and is the latest change of the key)."""
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "s", offsets=(("t", 0, 5),))
    d.hold_writes()
    _delete_offset(d)
    _commit(d, "s", offsets=(("t", 0, 8),))
    deletion, commit = d.in_flight
    _settle(d, deletion, Error.NOT_LEADER_OR_FOLLOWER)
    assert _latest(d) == {("t", 0): 8} and _offsets_seen(d, "f1") == {("t", 0): 5}
    _settle(d, commit)
    assert _latest(d) == {("t", 0): 8} and _offsets_seen(d, "f2") == {("t", 0): 8}


def test_a_failed_first_commit_of_a_key_deleted_meanwhile_leaves_it_absent():
    from groupcoord.core.errors import Error

    d = _driver()
    _commit(d, "s", offsets=(("t", 0, 5),))
    d.hold_writes()
    _commit(d, "s", offsets=(("x", 0, 1),))
    _delete_offset(d, "x")
    commit, deletion = d.in_flight
    _settle(d, commit, Error.NOT_LEADER_OR_FOLLOWER)
    assert _latest(d) == {("t", 0): 5}
    _settle(d, deletion)
    assert _latest(d) == {("t", 0): 5} and _offsets_seen(d, "f") == {("t", 0): 5}


def test_an_offset_refused_for_its_metadata_does_not_stop_the_rest_of_its_topic():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error

    d = _driver(offset_metadata_max_bytes=2)
    d.dispatch(ev.OffsetCommit(request_id="oc", now_ms=0, version=8, group_id="s", topics=(
        ("t", (ev.CommitPartition(0, 1, -1, "long"), ev.CommitPartition(1, 2, -1, "ok"))),)))
    assert d.responses["oc"] == c.OffsetCommitResponse((c.TopicResult("t", (
        c.PartitionResult(0, Error.OFFSET_METADATA_TOO_LARGE), c.PartitionResult(1, Error.NONE))),))
    assert set(d.coordinator.offsets("s")) == {("t", 1)}


def test_a_simple_group_whose_first_commit_fails_is_gone():
    """A group created by its first commit (generation -1) exists only if that commit is
    written: when the write fails, Kafka reverts the group's creation with the offsets."""
    from groupcoord.adapters.runtime.driver import Driver
    from groupcoord.core.config import CoordinatorConfig
    from groupcoord.core.errors import Error

    driver = Driver(CoordinatorConfig(offsets_topic_num_partitions=1))
    driver.fail_next_write(Error.NOT_LEADER_OR_FOLLOWER)
    commit = driver.send("OffsetCommit", {"group_id": "simple", "generation_id_or_member_epoch": -1, "member_id": "",
                                          "topics": [{"name": "t", "partitions": [{"partition_index": 0,
                                                                                   "committed_offset": 5}]}]},
                         version=9)
    assert driver.responses[commit].topics[0].partitions[0].error_code is Error.NOT_COORDINATOR
    assert driver.coordinator.group("simple") is None and driver.coordinator.offsets("simple") == {}


def test_a_removed_simple_group_keeps_the_committed_value_of_a_key_still_being_written():
    """Found by the spec's committed_counts_writes (tla/README.md, Findings): a simple group's
    first commit fails while a deletion of its key is in flight, so the group goes; a new
    commit of the key must stay unread by a plain fetch until its own write is done, also after
    the deletion's write completes."""
    from groupcoord.core.errors import Error

    d = _driver()
    d.hold_writes()
    _commit(d, "s", offsets=(("t", 0, 5),))  # creates the simple group s
    _delete_offset(d)
    first, deletion = d.in_flight
    _settle(d, first, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("s") is None
    _commit(d, "s", offsets=(("t", 0, 9),))  # s again
    (again,) = [w for w in d.in_flight if w is not deletion]
    _settle(d, deletion)
    assert _offsets_seen(d, "f1") == {} and _latest(d) == {("t", 0): 9}
    _settle(d, again)
    assert _offsets_seen(d, "f2") == {("t", 0): 9}


@pytest.mark.parametrize("deletion_fails", [True, False])
def test_a_new_commit_after_a_removed_simple_group_survives_the_old_deletion(deletion_fails):
    """A simple group's first commit fails while a deletion of its offsets is in flight; a new
    commit recreates it. Whatever the old deletion's outcome, the new commit's offset stays, in
    memory and (once written) in storage."""
    from groupcoord.core.errors import Error

    d = _driver()
    d.hold_writes()
    _commit(d, "s", offsets=(("t", 0, 5), ("t", 1, 6)))
    d.send("OffsetDelete", {"group_id": "s", "topics": [{"name": "t", "partitions": [
        {"partition_index": 0}, {"partition_index": 1}]}]}, version=0)
    first, deletion = d.in_flight
    _settle(d, first, Error.NOT_LEADER_OR_FOLLOWER)
    _commit(d, "s", offsets=(("t", 1, 9),))
    again = d.in_flight[-1]
    _settle(d, deletion, Error.NOT_LEADER_OR_FOLLOWER if deletion_fails else None)
    assert _latest(d) == {("t", 1): 9}
    _settle(d, again)
    assert _latest(d) == {("t", 1): 9}
    d.reload()
    assert _latest(d) == {("t", 1): 9}


def test_a_failed_latest_commit_of_a_key_gives_back_the_earlier_commit_still_in_flight():
    """The newest write failing first (contract rule 4's exception, Kafka's failed batch): its
    undo brings back the older commit still in flight, which then completes, and a reload of
    the log agrees."""
    d = _driver()
    _commit(d, "s", offsets=(("t", 0, 5),))
    d.hold_writes()
    _commit(d, "s", offsets=(("t", 0, 6),))
    _commit(d, "s", offsets=(("t", 0, 7),))
    earlier, later = d.in_flight
    _settle(d, later, Error.NOT_LEADER_OR_FOLLOWER)
    assert _latest(d) == {("t", 0): 6}
    _settle(d, earlier)
    assert _latest(d) == {("t", 0): 6}
    d.reload()
    assert _latest(d) == {("t", 0): 6}


def test_a_simple_group_dropped_with_a_deletion_of_its_offsets_in_flight_leaves_nothing_behind():
    """The first commit of a group fails while a deletion of its offset is in flight: the group
    is gone with its offsets; the deletion then completes without bringing anything back."""
    d = _driver()
    d.hold_writes()
    _commit(d, "s", offsets=(("t", 0, 5),))
    _delete_offset(d)
    commit, deletion = d.in_flight
    _settle(d, commit, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("s") is None
    assert "s" not in d.coordinator.snapshot().offsets
    _settle(d, deletion)
    assert d.coordinator.group("s") is None and d.coordinator.offsets("s") == {}
    assert "s" not in d.coordinator.snapshot().committed_offsets


def test_a_simple_group_stays_when_its_first_commit_succeeds_even_with_its_offsets_deleted():
    d = _driver()
    d.hold_writes()
    _commit(d, "s", offsets=(("t", 0, 5),))
    _delete_offset(d)
    commit, deletion = d.in_flight
    _settle(d, commit)
    _settle(d, deletion)
    assert d.coordinator.group("s") is not None and d.coordinator.offsets("s") == {}


def test_a_simple_group_whose_first_commit_fails_stays_with_a_later_commit_in_flight():
    d = _driver()
    d.hold_writes()
    _commit(d, "s", offsets=(("t", 0, 5),))
    _commit(d, "s", offsets=(("t", 1, 6),))
    first, second = d.in_flight
    _settle(d, first, Error.NOT_LEADER_OR_FOLLOWER)
    assert d.coordinator.group("s") is not None and _latest(d) == {("t", 1): 6}
    _settle(d, second)
    assert d.coordinator.group("s") is not None and _latest(d) == {("t", 1): 6}


def test_a_commit_naming_a_member_is_validated_even_with_generation_minus_one():
    """validateOffsetCommit: a member id given (generation -1, not Empty) is checked as a member:
    a known member then fails on its generation, not as an unknown member."""
    member = c.MemberRecord("XXXX", None, "c", "/h", 5_000, 7_000, b"", b"")
    coordinator = _coordinator()
    coordinator.handle(ev.LoadPartition(now_ms=0, partition=0, records=(_record(members=(member,)),)))
    out = coordinator.handle(ev.OffsetCommit(request_id="c", now_ms=0, version=8, group_id="g", generation_id=-1,
                                             member_id="XXXX", topics=(("t", (ev.CommitPartition(0, 5),)),)))
    assert _responses(out)["c"].topics[0].partitions[0].error_code is Error.ILLEGAL_GENERATION
