"""Kafka's errors (core/errors.py) and the error forms of responses (core/error_responses.py)."""

from __future__ import annotations

import pytest


def test_each_kind_of_held_response_has_its_error_form():
    """error_like: the answer to a held response's request when its partition goes (the
    coordinator holds only some kinds; the others are answered at once, never held)."""
    from groupcoord.core import commands as c
    from groupcoord.core.error_responses import error_like
    from groupcoord.core.errors import Error

    nc = Error.NOT_COORDINATOR
    held = c.DeleteGroupsResponse((c.DeletableGroupResult("a", Error.NONE), c.DeletableGroupResult("b", Error.NONE)))
    assert error_like(held, nc) == c.DeleteGroupsResponse((c.DeletableGroupResult("a", nc), c.DeletableGroupResult("b", nc)))
    assert error_like(c.OffsetDeleteResponse(Error.NONE, (c.TopicResult("t", ()),)), nc) == c.OffsetDeleteResponse(nc)
    with pytest.raises(TypeError, match="^no error form for SyncGroupResponse$"):
        error_like(c.SyncGroupResponse(error_code=Error.NONE), nc)


def test_each_request_kind_has_its_whole_failure_form():
    """error_response: what Kafka answers a request that fails whole (GroupCoordinatorService);
    the coordinator uses some kinds, the others answer per group, but the forms are Kafka's."""
    from groupcoord.core import commands as c
    from groupcoord.core import events as ev
    from groupcoord.core.error_responses import error_response
    from groupcoord.core.errors import Error

    e = Error.COORDINATOR_LOAD_IN_PROGRESS
    common = dict(request_id="r", now_ms=0, version=8)
    fetch = ev.OffsetFetch(**common, groups=(ev.FetchGroup("a"), ev.FetchGroup("b", (("t", (0,)),))))
    assert error_response(fetch, e) == c.OffsetFetchResponse((c.FetchedGroup("a", (), e), c.FetchedGroup("b", (), e)))
    describe = ev.DescribeGroups(**common, groups=("a", "b"))
    assert error_response(describe, e) == c.DescribeGroupsResponse((c.DescribedGroup(group_id="a", error_code=e),
                                                                     c.DescribedGroup(group_id="b", error_code=e)))
    assert error_response(ev.ListGroups(**common), e) == c.ListGroupsResponse(e)
    delete = ev.DeleteGroups(**common, groups_names=("a", "b"))
    assert error_response(delete, e) == c.DeleteGroupsResponse((c.DeletableGroupResult("a", e),
                                                                 c.DeletableGroupResult("b", e)))
    find = ev.FindCoordinator(**common, coordinator_keys=("a",))
    assert error_response(find, e) == c.FindCoordinatorResponse((c.Coordinator("a", -1, "", -1, e),))
    with pytest.raises(TypeError, match="^not a request: "):
        error_response(ev.WriteCompleted(now_ms=0, write_id=1), e)


def test_errors_parse_from_their_kafka_name_or_number_only():
    from groupcoord.core.errors import Error

    assert Error.parse(16) is Error.NOT_COORDINATOR and Error.parse(-1) is Error.UNKNOWN_SERVER_ERROR
    assert Error.parse("NOT_COORDINATOR") is Error.NOT_COORDINATOR and Error.parse(Error.NONE) is Error.NONE
    for bad, message in ((True, "not a Kafka error: True"), ("nope", "not a Kafka error: 'nope'"),
                         (2.0, "not a Kafka error: 2.0")):
        with pytest.raises(ValueError) as e:
            Error.parse(bad)
        assert str(e.value) == message
    with pytest.raises(ValueError):
        Error.parse(999)
