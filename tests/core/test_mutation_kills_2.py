"""More tests written against mutants of core/ that the fast suite let live (tests/mutation.py,
spec/mutation.md), after the first full run. Each asserts Kafka's behaviour
(spec/kafka-classic-semantics.md) or the core's documented contract, on a path nothing else
pinned down: records' keys, the loading of unusual records, held results behind several writes,
a new group's first record, state times, parked requests' versions, the HashMap order of votes."""

from __future__ import annotations

import pytest

from groupcoord.core import commands as c
from groupcoord.core.classic import subscription as cp
from groupcoord.core import events as ev
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator, CoordinatorFailed
from groupcoord.core.errors import Error
from test_mutation_kills import _commit, _delete_offset, _driver, _join, _latest, _record, _settle, _stable, _sync


def _coordinator(**config) -> Coordinator:
    return Coordinator(CoordinatorConfig(**{"offsets_topic_num_partitions": 1, **config}))


def _responses(out) -> dict:
    return {cmd.request_id: cmd.response for cmd in out if isinstance(cmd, c.Respond)}


# ------------------------------------------------------------------ records, configuration, small values

def test_a_records_key_in_the_offsets_topic_is_shared_by_its_tombstone():
    assert _record("g").key == c.GroupTombstone("g").key == ("group", "g")
    assert c.OffsetCommitRecord("g", "t", 1, 5, -1, "", 0).key == c.OffsetTombstone("g", "t", 1).key == (
        "offset", "g", "t", 1)


def test_the_session_timeout_bounds_may_be_equal_but_not_crossed():
    from groupcoord.core.config import ConfigError

    CoordinatorConfig(group_min_session_timeout_ms=6000, group_max_session_timeout_ms=6000).validate()
    with pytest.raises(ConfigError) as e:
        CoordinatorConfig(group_min_session_timeout_ms=6001, group_max_session_timeout_ms=6000).validate()
    assert str(e.value) == ("group.max.session.timeout.ms must be at least group.min.session.timeout.ms, "
                            "got 6000 < 6001")


def test_broken_invariants_and_member_errors_say_what_they_are():
    from groupcoord.core.classic.draft import GroupDraft
    from groupcoord.core.classic.model import Group, Member, MemberError
    from groupcoord.core.classic.states import STABLE, IllegalTransition

    assert str(MemberError(Error.FENCED_INSTANCE_ID)) == "FENCED_INSTANCE_ID"
    member = Member("m", "i", "c", "/h", 10, 10, "consumer", (("range", b"r"),))
    assert member.metadata("range") == b"r" and member.metadata("other") == b"" and member.metadata(None) == b""
    with pytest.raises(AssertionError, match=r"^member m supports none of \['a', 'b'\]$"):
        member.vote({"b", "a"})
    draft = GroupDraft(Group("g", 0))
    with pytest.raises(AssertionError, match="^cannot select a protocol for empty group g$"):
        draft.select_protocol()
    with pytest.raises(IllegalTransition, match="^group g: .* is not legal$"):
        draft.transition(STABLE, 0)
    draft.add(member)
    with pytest.raises(AssertionError, match="^static member i already in g$"):
        draft.add(Member("n", "i", "c", "/h", 10, 10, "consumer", (("range", b"r"),)))


def test_the_draft_keeps_its_awaiting_join_count_and_pending_sync_on_removal():
    from groupcoord.core.classic.draft import GroupDraft
    from groupcoord.core.classic.model import Group, Member, Parked

    draft = GroupDraft(Group("g", 0))
    for n in range(3):
        draft.add(Member(f"m{n}", None, "c", "/h", 10, 10, "consumer", (("range", b""),),
                         awaiting_join=Parked(f"r{n}", 5)))
    draft.pending_sync.update({"m0", "m1", "m2"})
    assert draft.num_awaiting_join == 3
    draft.remove("m1")
    assert draft.num_awaiting_join == 2 and draft.pending_sync == {"m0", "m2"}
    draft.remove("nobody")
    assert draft.num_awaiting_join == 2 and draft.pending_sync == {"m0", "m2"}


def test_a_value_without_a_group_or_partition_of_the_right_type_has_none():
    from types import SimpleNamespace

    from groupcoord.core.trace import group_of, partition_of

    assert group_of(SimpleNamespace(group_id=5)) is None
    assert group_of(SimpleNamespace(group_id=None, key=SimpleNamespace(group_id=b"g"))) is None
    assert partition_of(SimpleNamespace(partition="0", key=SimpleNamespace(partition=1))) == 1
    assert partition_of(SimpleNamespace(partition="0")) is None


# ------------------------------------------------------------------ Java's HashMap order of the votes

def _java_hashmap_iteration(keys: list[str]) -> list[str]:
    """A java.util.HashMap<String, _> filled with ``keys`` in order, iterated: puts append to
    their bin, a resize (past 3/4 full) splits each bin keeping its order, iteration goes bin by bin."""
    from groupcoord.core.partitioning import java_string_hash

    def spread(key):
        h = java_string_hash(key)
        return h ^ (h >> 16)

    table: list[list[str]] = [[] for _ in range(16)]
    size = 0
    for key in keys:
        table[spread(key) & (len(table) - 1)].append(key)
        size += 1
        if size > len(table) * 3 // 4:
            old = len(table)
            bigger: list[list[str]] = [[] for _ in range(2 * old)]
            for index, bin_ in enumerate(table):
                for k in bin_:
                    bigger[index + (old if spread(k) & old else 0)].append(k)
            table = bigger
    return [k for bin_ in table for k in bin_]


@pytest.mark.parametrize("keys", [
    ["q", "b", "a"],  # 'q' and 'a' share a bin of 16 (and not of 32)
    [chr(c) for c in range(ord("z"), ord("m"), -1)],  # 13 keys: one resize, to 32 bins
    [chr(c) for c in range(ord("~"), ord("!"), -1)],  # 93 keys: several resizes
    ["range", "roundrobin", "sticky", "cooperative-sticky", "a", "b"],
    [f"protocol-{n}" for n in range(12)],  # exactly 3/4 of 16: no resize
    list("abcdefghijk") + ["p"],  # 12 keys: no resize, so 'p' (bin 0 of 16, 16 of 32) comes first
    [f"protocol-{n}" for n in range(13)],
    [f"p{n}" for n in range(25)],
])
def test_votes_are_iterated_as_javas_hashmap_does(keys):
    from groupcoord.core.classic.draft import java_hashmap_order

    assert java_hashmap_order(list(keys)) == _java_hashmap_iteration(keys)


def test_the_hashmap_model_of_this_test_is_javas():
    # orders a JDK 17 HashMap<String, Integer> iterates, filled in the order given
    assert _java_hashmap_iteration(["q", "b", "a"]) == ["q", "a", "b"]
    assert _java_hashmap_iteration(list("abcdefghijk") + ["p"]) == ["p"] + list("abcdefghijk")
    assert _java_hashmap_iteration(["range", "roundrobin", "sticky", "cooperative-sticky", "a", "b"]) == [
        "a", "b", "sticky", "range", "roundrobin", "cooperative-sticky"]
    assert _java_hashmap_iteration([f"protocol-{n}" for n in range(13)]) == [
        f"protocol-{n}" for n in (6, 5, 8, 7, 9, 0, 2, 10, 1, 11, 4, 12, 3)]
    assert _java_hashmap_iteration([f"p{n}" for n in range(25)]) == [
        f"p{n}" for n in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 11, 14, 13, 16, 15, 18, 17, 19, 21, 20, 23, 22, 24)]
    assert _java_hashmap_iteration([chr(c) for c in range(ord("~"), ord("!"), -1)]) == [
        chr(c) for c in range(ord('"'), ord("~") + 1)]


# ------------------------------------------------------------------ routing and listing

def test_a_heartbeat_while_loading_is_answered_none_and_other_requests_load_in_progress():
    coordinator = _coordinator()
    coordinator.handle(ev.LoadPartition(now_ms=0, partition=0, loading=True))
    out = coordinator.handle(ev.Heartbeat(request_id="h", now_ms=0, version=4, group_id="g", generation_id=1,
                                          member_id="m"))
    assert out == [c.Respond("h", c.HeartbeatResponse(Error.NONE))]
    out = coordinator.handle(ev.SyncGroup(request_id="s", now_ms=0, version=5, group_id="g", generation_id=1,
                                          member_id="m"))
    assert _responses(out)["s"].error_code is Error.COORDINATOR_LOAD_IN_PROGRESS


def test_list_groups_trims_a_state_filter_as_javas_trim_does():
    d = _driver()
    _stable(d)
    for request_id, states, listed in (("l1", ("\x00 sTable\x1f",), 1), ("l2", ("\u2003stable",), 0),
                                       ("l3", ("\u00a0Stable",), 0)):
        d.dispatch(ev.ListGroups(request_id=request_id, now_ms=d.now_ms, version=4, states_filter=states))
        assert len(d.responses[request_id].groups) == listed


# ------------------------------------------------------------------ held results behind several writes

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


# ------------------------------------------------------------------ offsets in flight

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


# ------------------------------------------------------------------ loading

def test_loading_a_partition_already_loaded_changes_nothing():
    coordinator = _coordinator()
    coordinator.handle(ev.LoadPartition(now_ms=0, partition=0, records=(_record("g"),)))
    out = coordinator.handle(ev.LoadPartition(now_ms=5, partition=0, records=(_record("h"),)))
    assert out == [] and set(coordinator.groups()) == {"g"}


def test_loading_replays_tombstones_and_refuses_what_is_not_a_record():
    coordinator = _coordinator()
    records = (c.OffsetCommitRecord("g", "t", 0, 5, -1, "", 0), c.GroupTombstone("g"),
               c.OffsetCommitRecord("g", "t", 1, 6, -1, "", 0),
               c.OffsetTombstone("none", "t", 0))  # a tombstone of a group without offsets
    coordinator.handle(ev.LoadPartition(now_ms=0, partition=0, records=records))
    assert set(coordinator.offsets("g")) == {("t", 1)} and coordinator.group("none") is None
    with pytest.raises(CoordinatorFailed, match=r"^TypeError: not a coordinator record: 'junk' \(handling LoadPartition\)$") as e:
        _coordinator().handle(ev.LoadPartition(now_ms=0, partition=0, records=("junk",)))
    assert type(e.value.__cause__) is TypeError and str(e.value.__cause__) == "not a coordinator record: 'junk'"


def test_loading_arms_the_heartbeats_of_groups_recorded_after_a_simple_group():
    member = c.MemberRecord("m", None, "c", "/h", 10_000, 7_000, b"", b"")
    coordinator = _coordinator()
    out = coordinator.handle(ev.LoadPartition(now_ms=100, partition=0, records=(
        c.OffsetCommitRecord("s", "t", 0, 5, -1, "", 0), c.GroupTombstone("x"), _record("g", members=(member,)))))
    assert c.SetTimer(c.HeartbeatTimer(0, "g", "m"), 7_100) in out


def test_a_group_loaded_at_exactly_its_maximum_size_does_not_rebalance():
    members = tuple(c.MemberRecord(f"m{i}", None, "c", "/h", 10_000, 7_000, b"", b"") for i in range(2))
    coordinator = _coordinator(group_max_size=2)
    coordinator.handle(ev.LoadPartition(now_ms=0, partition=0, records=(_record(members=members),)))
    assert coordinator.group("g").state.value == "Stable"


def _leaderless(instance=None, protocol_name=None):
    """A Stable group loaded from a record with a member but no leader (and, by default, no
    protocol name): records Kafka would not write, but the core must load and serve."""
    member = c.MemberRecord("m", instance, "c", "/h", 5_000, 7_000, b"sub", b"asg")
    return c.GroupMetadataRecord(group_id="g", protocol_type="consumer", generation_id=3,
                                 protocol_name=protocol_name, leader_id=None, current_state_timestamp_ms=0,
                                 members=(member,))


def test_a_group_loaded_without_a_protocol_name_serves_what_it_has():
    coordinator = _coordinator()
    coordinator.handle(ev.LoadPartition(now_ms=0, partition=0, records=(_leaderless(),)))
    group = coordinator.group("g")
    assert group.members["m"].protocols == (("", b"sub"),) and group.leader_id is None
    out = coordinator.handle(ev.DescribeGroups(request_id="d", now_ms=0, version=5, groups=("g",)))
    [described] = _responses(out)["d"].groups
    assert (described.group_state, described.protocol_data) == ("Stable", "")
    assert described.members[0].member_metadata == b""
    # a rejoin with the same protocols in Stable, not the leader: answered at once, no leader
    out = coordinator.handle(ev.JoinGroup(
        request_id="j", now_ms=0, version=5, group_id="g", session_timeout_ms=7_000, rebalance_timeout_ms=5_000,
        member_id="m", protocol_type="consumer", protocols=(("", b"sub"),), new_member_uuid="u"))
    assert _responses(out)["j"] == c.JoinGroupResponse(error_code=Error.NONE, generation_id=3, protocol_type="consumer",
                                                        protocol_name=None, leader="", member_id="m")


def test_a_static_member_replaced_in_a_group_without_protocol_name_or_leader_is_persisted_not_rebalanced():
    coordinator = _coordinator()
    coordinator.handle(ev.LoadPartition(now_ms=0, partition=0, records=(_leaderless(instance="i"),)))

    def rejoin(request_id):
        return coordinator.handle(ev.JoinGroup(
            request_id=request_id, now_ms=0, version=5, group_id="g", session_timeout_ms=7_000,
            rebalance_timeout_ms=5_000, member_id="", group_instance_id="i", protocol_type="consumer",
            protocols=(("", b"sub"),), new_member_uuid=request_id))

    out = rejoin("ok")
    [write] = [cmd for cmd in out if isinstance(cmd, c.Write)]
    assert coordinator.group("g").state.value == "Stable"
    out = coordinator.handle(ev.WriteCompleted(now_ms=0, write_id=write.write_id))
    assert _responses(out)["ok"] == c.JoinGroupResponse(error_code=Error.NONE, generation_id=3,
                                                         protocol_type="consumer", protocol_name=None,
                                                         leader="", member_id="i-ok")
    out = rejoin("bad")
    [write] = [cmd for cmd in out if isinstance(cmd, c.Write)]
    out = coordinator.handle(ev.WriteFailed(now_ms=0, write_id=write.write_id, error=Error.NOT_LEADER_OR_FOLLOWER))
    assert _responses(out)["bad"] == c.JoinGroupResponse(error_code=Error.NOT_COORDINATOR, generation_id=3,
                                                          protocol_type="consumer", protocol_name=None,
                                                          leader="", member_id="")


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


# ------------------------------------------------------------------ joining: records, times, parked requests

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


def test_a_sync_timer_of_the_current_generation_does_nothing_once_everybody_synced():
    d = _driver()
    generation, _, _ = _stable(d, members=2)
    coordinator = d.coordinator
    out = coordinator.handle(ev.TimerFired(now_ms=d.now_ms, key=c.SyncTimer(0, "g"), payload=generation))
    assert out == [] and coordinator.group("g").state.value == "Stable"


# ------------------------------------------------------------------ offset commit validation

def test_a_commit_naming_a_member_is_validated_even_with_generation_minus_one():
    """validateOffsetCommit: a member id given (generation -1, not Empty) is checked as a member:
    a known member then fails on its generation, not as an unknown member."""
    member = c.MemberRecord("XXXX", None, "c", "/h", 5_000, 7_000, b"", b"")
    coordinator = _coordinator()
    coordinator.handle(ev.LoadPartition(now_ms=0, partition=0, records=(_record(members=(member,)),)))
    out = coordinator.handle(ev.OffsetCommit(request_id="c", now_ms=0, version=8, group_id="g", generation_id=-1,
                                             member_id="XXXX", topics=(("t", (ev.CommitPartition(0, 5),)),)))
    assert _responses(out)["c"].topics[0].partitions[0].error_code is Error.ILLEGAL_GENERATION

