"""The read-only answers (core/admin.py): DescribeGroups, ListGroups and FindCoordinator, for
partitions owned, loading or not here."""

from __future__ import annotations

from drive import _commit, _driver, _stable

from groupcoord.core import events as ev


def test_describe_answers_per_group_for_partitions_not_owned_or_loading():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error

    d = _driver(offsets_topic_num_partitions=2)
    d.unload()
    d.dispatch(ev.LoadPartition(now_ms=0, partition=1, loading=True))
    from groupcoord.core.partitioning import partition_for

    on = {partition_for(g, 2): g for g in ("a", "b", "c", "d")}
    request = d.send("DescribeGroups", {"groups": [on[0], on[1]]}, version=5)
    assert d.responses[request] == c.DescribeGroupsResponse((
        c.DescribedGroup(group_id=on[0], error_code=Error.NOT_COORDINATOR),
        c.DescribedGroup(group_id=on[1], error_code=Error.COORDINATOR_LOAD_IN_PROGRESS)))


def test_list_groups_while_a_partition_loads_and_find_coordinator_for_keys_not_here():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error
    from groupcoord.core.partitioning import partition_for

    d = _driver(offsets_topic_num_partitions=2, node_id=3, advertised_host="h", advertised_port=9)
    d.dispatch(ev.UnloadPartition(now_ms=0, partition=1))
    here, there = (next(g for g in map(str, range(100)) if partition_for(g, 2) == p) for p in (0, 1))
    find = d.send("FindCoordinator", {"key_type": 0, "coordinator_keys": [here, there]}, version=4)
    assert d.responses[find] == c.FindCoordinatorResponse((
        c.Coordinator(here, 3, "h", 9, Error.NONE),
        c.Coordinator(there, -1, "", -1, Error.COORDINATOR_NOT_AVAILABLE)))
    transaction = d.send("FindCoordinator", {"key_type": 1, "coordinator_keys": [here]}, version=4)
    assert d.responses[transaction] == c.FindCoordinatorResponse((c.Coordinator(here, -1, "", -1, Error.INVALID_REQUEST),))
    d.dispatch(ev.LoadPartition(now_ms=0, partition=1, loading=True))
    listing = d.send("ListGroups", {}, version=4)
    assert d.responses[listing] == c.ListGroupsResponse(Error.COORDINATOR_LOAD_IN_PROGRESS)
    d.dispatch(ev.LoadPartition(now_ms=0, partition=1))
    listing = d.send("ListGroups", {}, version=4)
    assert d.responses[listing] == c.ListGroupsResponse(Error.NONE)


def test_describe_answers_each_group_in_order_with_what_it_is():
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.errors import Error

    d = _driver()
    generation, [member], _ = _stable(d, instance="i")
    _commit(d, "s")  # a simple group: no protocol type
    d.dispatch(ev.DescribeGroups(request_id="dg", now_ms=d.now_ms, version=5, groups=(None, "s", "g", "none")))
    invalid, simple, stable, missing = d.responses["dg"].groups
    assert invalid == c.DescribedGroup(group_id=None, error_code=Error.INVALID_GROUP_ID)
    assert simple == c.DescribedGroup(group_id="s", group_state="Empty", protocol_type="", protocol_data="")
    assert (stable.group_state, stable.protocol_type, stable.protocol_data) == ("Stable", "consumer", "range")
    assert stable.members == (c.DescribedMember(member, "i", "client", "/127.0.0.1", b"m", b"a-" + member.encode()),)
    assert missing == c.DescribedGroup(group_id="none", group_state="Dead")


def test_list_groups_trims_a_state_filter_as_javas_trim_does():
    d = _driver()
    _stable(d)
    for request_id, states, listed in (("l1", ("\x00 sTable\x1f",), 1), ("l2", ("\u2003stable",), 0),
                                       ("l3", ("\u00a0Stable",), 0)):
        d.dispatch(ev.ListGroups(request_id=request_id, now_ms=d.now_ms, version=4, states_filter=states))
        assert len(d.responses[request_id].groups) == listed
