"""Loading and unloading a partition (core/loading.py, §3.11): groups and offsets as their
records say, timers armed, unusual records served, and a reload giving back what the records
keep."""

from __future__ import annotations

import pytest
from drive import _commit, _coordinator, _driver, _join, _latest, _record, _responses, _settle, _sync

from groupcoord.core import commands as c
from groupcoord.core import events as ev
from groupcoord.core.classic import subscription as cp
from groupcoord.core.coordinator import CoordinatorFailed
from groupcoord.core.errors import Error


def test_a_group_loads_as_its_record_says():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.coordinator import Coordinator
    from groupcoord.core.partitioning import partition_for

    member = c.MemberRecord("m", None, "client", "/10.0.0.1", -1, 7000, cp.encode_subscription(["a", "b"]), b"x")
    other = c.MemberRecord("n", "i", "other", "/10.0.0.2", 9000, 8000, cp.encode_subscription(["c"]), b"y")
    coordinator = Coordinator()
    for gid, record in (("g", _record(members=(member, other))), ("e", _record("e", "", timestamp=-1)),
                        ("k", _record("k", "consumer", timestamp=5))):
        coordinator.handle(ev.LoadPartition(now_ms=0, partition=partition_for(gid, 50), records=(record,)))
    g = coordinator.group("g")
    assert (g.state.value, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id, g.state_timestamp_ms) == (
        "Stable", 3, "consumer", "range", "m", 1234)
    assert g.subscribed_topics == frozenset({"a", "b", "c"}) and dict(g.static_members) == {"i": "n"}
    m, n = g.members["m"], g.members["n"]
    # a rebalance timeout of -1 (records of old versions) is the session timeout
    assert (m.rebalance_timeout_ms, m.session_timeout_ms, m.assignment, m.client_id, m.client_host) == (
        7000, 7000, b"x", "client", "/10.0.0.1")
    assert (n.rebalance_timeout_ms, n.session_timeout_ms, n.assignment, n.client_id, n.group_instance_id) == (
        9000, 8000, b"y", "other", "i")
    assert m.protocols == (("range", cp.encode_subscription(["a", "b"])),)
    e = coordinator.group("e")
    assert (e.state.value, e.protocol_type, e.state_timestamp_ms, e.subscribed_topics) == ("Empty", None, None, None)
    k = coordinator.group("k")  # Empty, but a consumer group: its offsets expire by the state's time
    assert (k.state.value, k.protocol_type, k.state_timestamp_ms, k.subscribed_topics) == (
        "Empty", "consumer", 5, frozenset())


def test_unloading_one_partition_leaves_the_others_alone():
    """onUnloaded for one partition: its writes fail, its held responses get NOT_COORDINATOR,
    its groups and offsets are forgotten and its timers cancelled; another partition's writes,
    held responses, groups and offsets carry on."""
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error
    from groupcoord.core.partitioning import partition_for

    d = _driver(offsets_topic_num_partitions=2)
    names = {p: [g for g in map(str, range(200)) if partition_for(g, 2) == p][:2] for p in (0, 1)}
    # groups in the map alternate between the partitions, one of partition 1 first
    for gid in (names[1][0], names[0][0], names[1][1], names[0][1]):
        _commit(d, gid)
    d.hold_writes()
    stay, go = names[1][0], names[0][0]
    commits = {gid: _commit(d, gid, offsets=(("t", 0, 9),)) for gid in (stay, go)}
    behind = {gid: _commit(d, gid, offsets=(("t", 1, 1),), metadata="x" * 5000) for gid in (stay, go)}
    assert not any(r in d.responses for r in (*commits.values(), *behind.values()))
    out = d.dispatch(ev.UnloadPartition(now_ms=d.now_ms, partition=0))
    assert out[-1] == c.CancelPartitionTimers(0)
    nc = Error.NOT_COORDINATOR
    assert d.responses[commits[go]].topics[0].partitions[0].error_code is nc
    assert d.responses[behind[go]].topics[0].partitions[0].error_code is nc
    assert commits[stay] not in d.responses and behind[stay] not in d.responses
    assert d.coordinator.group(go) is None and d.coordinator.group(names[0][1]) is None
    assert d.coordinator.offsets(go) == {} and d.coordinator.offsets(names[0][1]) == {}
    state = d.coordinator.snapshot()
    assert go not in state.offsets and go not in state.committed_offsets
    assert d.coordinator.group(stay) is not None and d.coordinator.group(names[1][1]) is not None
    assert d.coordinator.offsets(stay)[("t", 0)].offset == 9
    d.release_writes()
    assert d.responses[commits[stay]].topics[0].partitions[0].error_code is Error.NONE
    assert d.responses[behind[stay]].topics[0].partitions[0].error_code is Error.OFFSET_METADATA_TOO_LARGE
    assert all(d.answer_counts[r] == 1 for r in (*commits.values(), *behind.values()))


def _persisted(group):
    """What a GroupMetadata record keeps of a group (§4.5): a reload must give it back."""
    members = tuple((m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                     m.session_timeout_ms, m.protocol_type, m.metadata(group.protocol_name), m.assignment)
                    for m in group.members.values())
    return (group.state, group.generation_id, group.protocol_type, group.protocol_name, group.leader_id,
            dict(group.static_members), group.subscribed_topics, members)


def test_a_reload_gives_back_the_groups_and_offsets_the_records_hold():
    from groupcoord.core import events as ev
    from groupcoord.core.offsets import OffsetEntry

    d = _driver()
    subscription = cp.encode_subscription(["t"])
    static = d.send("JoinGroup", {"group_id": "g", "session_timeout_ms": 11_000, "rebalance_timeout_ms": 21_000,
                                  "member_id": "", "group_instance_id": "i", "protocol_type": "consumer",
                                  "protocols": [{"name": "range", "metadata": subscription}]},
                    version=5, client_id="static-client")
    dynamic = d.send("JoinGroup", {"group_id": "g", "session_timeout_ms": 12_000, "rebalance_timeout_ms": 22_000,
                                   "member_id": "", "protocol_type": "consumer",
                                   "protocols": [{"name": "range", "metadata": subscription},
                                                 {"name": "rr", "metadata": b"other"}]},
                     version=3, client_id="dynamic-client")
    while static not in d.responses or dynamic not in d.responses:
        d.advance(3_000)
    leader, follower = d.responses[static], d.responses[dynamic]
    _sync(d, follower.member_id, follower.generation_id)
    _sync(d, leader.member_id, leader.generation_id, assignments=[(leader.member_id, b"A"), (follower.member_id, b"B")],
          instance="i")
    replaced = _join(d, instance="i", session=11_000, rebalance=21_000, protocols=(("range", subscription),))
    assert d.responses[replaced].error_code == 0  # a static replacement in Stable, written
    d.dispatch(ev.OffsetCommit(request_id="oc", now_ms=d.now_ms, version=4, group_id="g",
                               generation_id=leader.generation_id, member_id=follower.member_id,
                               retention_time_ms=90_000,
                               topics=(("t", (ev.CommitPartition(3, 42, 7, "meta"),)),)))
    _commit(d, "s", offsets=(("u", 1, 5),), metadata="simple")
    before = {gid: _persisted(d.coordinator.group(gid)) for gid in ("g", "s")}
    offsets = {gid: d.coordinator.offsets(gid) for gid in ("g", "s")}
    assert offsets["g"][("t", 3)] == OffsetEntry(42, 7, "meta", d.now_ms, d.now_ms + 90_000)
    d.reload()
    assert {gid: _persisted(d.coordinator.group(gid)) for gid in ("g", "s")} == before
    assert {gid: d.coordinator.offsets(gid) for gid in ("g", "s")} == offsets
    assert isinstance(d.coordinator.group("g").state_timestamp_ms, int)


def test_unloading_a_partition_drops_the_offsets_of_a_group_no_longer_held():
    """A new group's creation fails while a commit to it is in flight: the group is gone but
    the commit's offset is held; unloading the partition drops it with everything else."""
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error

    d = _driver()
    d.hold_writes()
    _join(d, "s", version=4)  # s created Empty (MEMBER_ID_REQUIRED), its record in flight
    _commit(d, "s", offsets=(("t", 0, 5),))
    creation, commit = d.in_flight
    _settle(d, creation, Error.NOT_LEADER_OR_FOLLOWER)
    _settle(d, commit)
    assert d.coordinator.group("s") is None and _latest(d) == {("t", 0): 5}
    d.dispatch(ev.UnloadPartition(now_ms=d.now_ms, partition=0))
    assert "s" not in d.coordinator.snapshot().offsets and "s" not in d.coordinator.snapshot().committed_offsets


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
