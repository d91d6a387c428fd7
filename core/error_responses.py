"""The response Kafka gives a request, or stands in for a held response, when it fails whole."""

from __future__ import annotations

from . import events as ev
from .commands import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    DeletableGroupResult,
    DeleteGroupsResponse,
    DescribedConsumerGroup,
    DescribedGroup,
    DescribeGroupsResponse,
    FetchedGroup,
    FindCoordinatorResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListGroupsResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    PartitionResult,
    SyncGroupResponse,
    TopicResult,
)
from .commands import Coordinator as CoordinatorEndpoint
from .errors import Error


def error_like(response, error: Error):
    if isinstance(response, HeartbeatResponse):
        return HeartbeatResponse(error)
    if isinstance(response, LeaveGroupResponse):
        return LeaveGroupResponse(error)
    if isinstance(response, OffsetFetchResponse):
        return OffsetFetchResponse(tuple(FetchedGroup(g.group_id, (), error) for g in response.groups))
    if isinstance(response, OffsetCommitResponse):
        return OffsetCommitResponse(tuple(
            TopicResult(t.name, tuple(PartitionResult(p.partition_index, error) for p in t.partitions))
            for t in response.topics))
    if isinstance(response, DeleteGroupsResponse):
        return DeleteGroupsResponse(tuple(DeletableGroupResult(r.group_id, error) for r in response.results))
    if isinstance(response, OffsetDeleteResponse):
        return OffsetDeleteResponse(error)
    if isinstance(response, ConsumerGroupHeartbeatResponse):
        return ConsumerGroupHeartbeatResponse(error_code=error)
    raise TypeError(f"no error form for {type(response).__name__}")


def error_response(request, error: Error, runtime: bool = False):
    """The response Kafka gives ``request`` when the whole request fails with ``error``."""
    if isinstance(request, ev.JoinGroup):
        # Service-level rejections echo the member id; runtime failures do not.
        return JoinGroupResponse(error_code=error, member_id="" if runtime else request.member_id)
    if isinstance(request, ev.SyncGroup):
        return SyncGroupResponse(error_code=error)
    if isinstance(request, ev.Heartbeat):
        return HeartbeatResponse(error)
    if isinstance(request, ev.LeaveGroup):
        return LeaveGroupResponse(error)
    if isinstance(request, ev.OffsetCommit):
        return OffsetCommitResponse(tuple(
            TopicResult(name, tuple(PartitionResult(p.partition_index, error) for p in partitions))
            for name, partitions in request.topics))
    if isinstance(request, ev.OffsetFetch):
        return OffsetFetchResponse(tuple(FetchedGroup(g.group_id, (), error) for g in request.groups))
    if isinstance(request, ev.DescribeGroups):
        return DescribeGroupsResponse(tuple(DescribedGroup(group_id=g, error_code=error) for g in request.groups))
    if isinstance(request, ev.ListGroups):
        return ListGroupsResponse(error)
    if isinstance(request, ev.DeleteGroups):
        return DeleteGroupsResponse(tuple(DeletableGroupResult(g, error) for g in request.groups_names))
    if isinstance(request, ev.OffsetDelete):
        return OffsetDeleteResponse(error)
    if isinstance(request, ev.ConsumerGroupHeartbeat):
        return ConsumerGroupHeartbeatResponse(error_code=error)
    if isinstance(request, ev.ConsumerGroupDescribe):
        return ConsumerGroupDescribeResponse(tuple(DescribedConsumerGroup(group_id=g, error_code=error)
                                                   for g in request.group_ids))
    if isinstance(request, ev.FindCoordinator):
        return FindCoordinatorResponse(tuple(
            CoordinatorEndpoint(k, -1, "", -1, error) for k in request.coordinator_keys))
    raise TypeError(f"not a request: {request!r}")
