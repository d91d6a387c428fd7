"""The coordinator (core/coordinator.py): routing and the service's pre-checks, DeleteGroups,
and a snapshot restored to a coordinator that carries on alike."""

from __future__ import annotations

from drive import _commit, _coordinator, _driver, _join, _responses, _stable

from groupcoord.core import commands as c
from groupcoord.core import events as ev
from groupcoord.core.errors import Error


def test_a_snapshot_restores_to_a_coordinator_that_carries_on_alike():
    from groupcoord.core.coordinator import Coordinator

    d = _driver()
    generation, ids, leader = _stable(d, members=2)
    _commit(d, "s")
    d.hold_writes()
    _commit(d, "s", offsets=(("t", 0, 9),))
    held = d.send("DeleteGroups", {"groups_names": ["s"]}, version=2)
    heartbeat = d.send("Heartbeat", {"group_id": "g", "generation_id": generation, "member_id": ids[1]}, version=4)
    state = d.coordinator.snapshot()
    copy = Coordinator.restore(state, d.config)
    assert copy.snapshot() == state
    assert copy.groups() == d.coordinator.groups() and copy.offsets("s") == d.coordinator.offsets("s")
    assert copy.owned_partitions() == d.coordinator.owned_partitions()
    from groupcoord.core import events as ev

    # the same inputs give the same outputs: the held writes complete, a fetch follows
    def carry_on(coordinator):
        # a plain fetch reads the committed offset of a key whose write is in flight (5, not 9)
        out = coordinator.handle(ev.OffsetFetch(request_id="before", now_ms=d.now_ms, version=8,
                                                groups=(ev.FetchGroup("s"),)))
        for w in d.in_flight:
            out += coordinator.handle(ev.WriteCompleted(now_ms=d.now_ms, write_id=w.write_id))
        return out + coordinator.handle(ev.OffsetFetch(request_id="f", now_ms=d.now_ms, version=8,
                                                       groups=(ev.FetchGroup("s"), ev.FetchGroup("g"))))

    original, restored = carry_on(d.coordinator), carry_on(copy)
    assert restored == original
    assert restored[0].response.groups[0].topics[0].partitions[0].committed_offset == 5
    answered = {getattr(cmd, "request_id", None) for cmd in restored}
    assert {held, heartbeat, "f"} <= answered


def test_a_join_rejected_by_the_service_echoes_its_member_id_and_one_failed_at_runtime_does_not():
    from groupcoord.core.errors import Error

    d = _driver()
    bad_session = _join(d, member_id="m-1", session=1)
    assert (d.responses[bad_session].error_code, d.responses[bad_session].member_id) == (
        Error.INVALID_SESSION_TIMEOUT, "m-1")
    d.unload()
    not_here = _join(d, member_id="m-1")
    assert (d.responses[not_here].error_code, d.responses[not_here].member_id) == (Error.NOT_COORDINATOR, "")


def test_delete_groups_answers_every_group_in_order_and_tombstones_their_offsets():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error
    from groupcoord.core.partitioning import partition_for

    d = _driver(offsets_topic_num_partitions=3)
    on = {p: [g for g in map(str, range(200)) if partition_for(g, 3) == p] for p in range(3)}
    gone, loading, here = on[0][0], on[1][0], on[2][0]
    _commit(d, here, offsets=(("t", 0, 1), ("u", 2, 3)))
    d.dispatch(ev.UnloadPartition(now_ms=0, partition=0))
    d.dispatch(ev.UnloadPartition(now_ms=0, partition=1))
    d.dispatch(ev.LoadPartition(now_ms=0, partition=1, loading=True))
    fetch = ev.OffsetFetch(request_id="fetch", now_ms=0, version=8,
                           groups=tuple(ev.FetchGroup(g) for g in (gone, loading, here)))
    d.dispatch(fetch)
    assert d.responses["fetch"].groups[:2] == (c.FetchedGroup(gone, (), Error.NOT_COORDINATOR),
                                               c.FetchedGroup(loading, (), Error.COORDINATOR_LOAD_IN_PROGRESS))
    assert len(d.responses["fetch"].groups[2].topics) == 2
    d.dispatch(ev.DeleteGroups(request_id="del", now_ms=0, version=2, groups_names=(None, gone, loading, here)))
    assert d.responses["del"] == c.DeleteGroupsResponse((
        c.DeletableGroupResult(None, Error.INVALID_GROUP_ID), c.DeletableGroupResult(gone, Error.NOT_COORDINATOR),
        c.DeletableGroupResult(loading, Error.COORDINATOR_LOAD_IN_PROGRESS), c.DeletableGroupResult(here, Error.NONE)))
    # Kafka's records for a deletion: a tombstone per offset, then the group's
    assert d.storage.records(2)[-3:] == (c.OffsetTombstone(here, "t", 0), c.OffsetTombstone(here, "u", 2),
                                         c.GroupTombstone(here))
    d.reload()
    assert d.coordinator.group(here) is None and d.coordinator.offsets(here) == {}


def test_a_heartbeat_while_loading_is_answered_none_and_other_requests_load_in_progress():
    coordinator = _coordinator()
    coordinator.handle(ev.LoadPartition(now_ms=0, partition=0, loading=True))
    out = coordinator.handle(ev.Heartbeat(request_id="h", now_ms=0, version=4, group_id="g", generation_id=1,
                                          member_id="m"))
    assert out == [c.Respond("h", c.HeartbeatResponse(Error.NONE))]
    out = coordinator.handle(ev.SyncGroup(request_id="s", now_ms=0, version=5, group_id="g", generation_id=1,
                                          member_id="m"))
    assert _responses(out)["s"].error_code is Error.COORDINATOR_LOAD_IN_PROGRESS
