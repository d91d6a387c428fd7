"""The coordinator's read-only answers: DescribeGroups, ListGroups and FindCoordinator, each a
function of the request and what it reads (the partitions' status, the groups), and the routing
of a request's group ids to the partitions that hold them."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from . import events as ev
from .classic.states import DEAD
from .commands import Coordinator as CoordinatorEndpoint
from .commands import DescribedGroup, DescribeGroupsResponse, FindCoordinatorResponse, ListGroupsResponse
from .config import CoordinatorConfig
from .errors import Error
from .partitioning import ACTIVE, LOADING

_JAVA_TRIMMED = "".join(map(chr, range(0x21)))  # String.trim(): every char up to U+0020


def describe(req: ev.DescribeGroups, status_of: Callable[[str], str | None],
             groups: Mapping[str, Any]) -> DescribeGroupsResponse:
    """``status_of``: the status of the partition holding a group id (None: not owned)."""
    described = []
    for gid in req.groups:
        if gid is None:
            described.append(DescribedGroup(group_id=gid, error_code=Error.INVALID_GROUP_ID))
            continue
        status = status_of(gid)
        if status is not ACTIVE:
            error = Error.NOT_COORDINATOR if status is None else Error.COORDINATOR_LOAD_IN_PROGRESS
            described.append(DescribedGroup(group_id=gid, error_code=error))
            continue
        group = groups.get(gid)
        described.append(DescribedGroup(group_id=gid, group_state=DEAD.value) if group is None
                         else group.described())
    return DescribeGroupsResponse(tuple(described))


def list_groups(req: ev.ListGroups, partitions: Mapping[int, str], groups: Mapping[str, Any]) -> ListGroupsResponse:
    if any(status is LOADING for status in partitions.values()):
        return ListGroupsResponse(Error.COORDINATOR_LOAD_IN_PROGRESS)
    # Kafka: states lower-cased and trimmed as Java's trim() does; types lower-cased only
    states = {s.lower().strip(_JAVA_TRIMMED) for s in req.states_filter}
    types = {t.lower() for t in req.types_filter}
    listed = tuple(g.listed() for g in groups.values()
                   if (not states or g.state.value.lower() in states) and (not types or g.KIND in types))
    return ListGroupsResponse(Error.NONE, listed)


def find_coordinator(req: ev.FindCoordinator, owned: Callable[[str], bool],
                     config: CoordinatorConfig) -> FindCoordinatorResponse:
    """``owned``: this coordinator owns the partition of a key (loaded or loading)."""
    coordinators = []
    for key in req.coordinator_keys:
        if req.key_type != 0:
            error = Error.INVALID_REQUEST
        else:
            error = Error.NONE if owned(key) else Error.COORDINATOR_NOT_AVAILABLE
        if error is Error.NONE:
            coordinators.append(CoordinatorEndpoint(key, config.node_id, config.advertised_host,
                                                    config.advertised_port, error))
        else:
            coordinators.append(CoordinatorEndpoint(key, -1, "", -1, error))
    return FindCoordinatorResponse(tuple(coordinators))


def routed(group_ids, partitions: Mapping[int, str], partition_of: Callable[[str], int]
           ) -> tuple[dict[int, list[str]], dict[Any, Error]]:
    """The group ids of a request this coordinator can act on, by owned active partition, and
    the errors of the others (INVALID_GROUP_ID, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)."""
    by_partition: dict[int, list[str]] = {}
    results: dict[Any, Error] = {}  # a group id may be None
    for gid in group_ids:
        if gid is None:
            results[gid] = Error.INVALID_GROUP_ID
            continue
        partition = partition_of(gid)
        status = partitions.get(partition)
        if status is not ACTIVE:
            results[gid] = Error.NOT_COORDINATOR if status is None else Error.COORDINATOR_LOAD_IN_PROGRESS
            continue
        by_partition.setdefault(partition, []).append(gid)
    return by_partition, results
