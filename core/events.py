"""Inputs of the coordinator. Every event carries the time it happens at (``now_ms``);
requests also carry the adapter's ``request_id``, the API version and the header's client id.

Field names follow Kafka's message schemas in snake_case. Version differences of the wire
format (LeaveGroup v0-2's single member, OffsetFetch v0-7's single group) are folded into one
shape here; ``version`` keeps what the coordinator's behaviour depends on.
"""

from __future__ import annotations

from typing import Any

from .errors import Error
from .frozen import frozen


@frozen(kw_only=True)
class Request:
    request_id: Any
    now_ms: int
    version: int
    client_id: str = "client"
    client_host: str = "/127.0.0.1"


@frozen(kw_only=True)
class JoinGroup(Request):
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int  # v0 has none: the adapter passes the session timeout, as Kafka does
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    reason: str | None = None
    # The random part of a member id the coordinator may hand out (Kafka: a UUID). An input, so
    # the core stays deterministic.
    new_member_uuid: str


@frozen(kw_only=True)
class SyncGroup(Request):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()


@frozen(kw_only=True)
class Heartbeat(Request):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@frozen
class MemberIdentity:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@frozen(kw_only=True)
class LeaveGroup(Request):
    group_id: str
    members: tuple[MemberIdentity, ...]


@frozen
class CommitPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = ""
    commit_timestamp: int = -1  # only in OffsetCommit v1, kept for completeness


@frozen(kw_only=True)
class OffsetCommit(Request):
    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    retention_time_ms: int = -1
    topics: tuple[tuple[str, tuple[CommitPartition, ...]], ...] = ()


@frozen
class FetchGroup:
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...] | None = None  # None: every committed offset
    member_id: str | None = None
    member_epoch: int = -1


@frozen(kw_only=True)
class OffsetFetch(Request):
    groups: tuple[FetchGroup, ...]
    require_stable: bool = False


@frozen(kw_only=True)
class DescribeGroups(Request):
    groups: tuple[str, ...]
    include_authorized_operations: bool = False


@frozen(kw_only=True)
class ListGroups(Request):
    states_filter: tuple[str, ...] = ()
    types_filter: tuple[str, ...] = ()


@frozen(kw_only=True)
class DeleteGroups(Request):
    groups_names: tuple[str, ...]


@frozen(kw_only=True)
class OffsetDelete(Request):
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...] = ()


@frozen(kw_only=True)
class FindCoordinator(Request):
    key_type: int = 0
    coordinator_keys: tuple[str, ...] = ()


@frozen(kw_only=True)
class ConsumerGroupHeartbeat(Request):
    """KIP-848's heartbeat (API 68). Lists the request leaves null are None (not sent: "no
    change"), so a full request is told from a partial one. Partitions are named by topic id."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: tuple[tuple[str, tuple[int, ...]], ...] | None = None
    # v0 lets the coordinator choose a joining member's id (Kafka: a random UUID); an input,
    # so the core stays deterministic. From v1 the client sends its own.
    new_member_uuid: str = ""


@frozen(kw_only=True)
class ConsumerGroupDescribe(Request):
    group_ids: tuple[str | None, ...]
    include_authorized_operations: bool = False


@frozen(kw_only=True)
class TopicsChanged:
    """The cluster's topics as the coordinator's metadata image: ``(name, topic id, partition
    count)`` for every topic. Consumer groups assign partitions of these; a group whose
    subscribed topics changed rebalances at its next heartbeat (a new group epoch)."""

    now_ms: int
    topics: tuple[tuple[str, str, int], ...]


@frozen(kw_only=True)
class TimerFired:
    """A timer the coordinator armed with SetTimer reached its deadline (and was not replaced
    or cancelled since). ``payload`` is the one given with SetTimer."""

    now_ms: int
    key: Any  # the key it was armed with (commands.HeartbeatTimer, JoinTimer, ...)
    payload: Any = None


@frozen(kw_only=True)
class WriteCompleted:
    now_ms: int
    write_id: int


@frozen(kw_only=True)
class WriteFailed:
    now_ms: int
    write_id: int
    error: Error


@frozen(kw_only=True)
class LoadPartition:
    """This coordinator becomes the owner of an offsets-topic partition and replays its records,
    oldest first. ``loading=True`` only marks it as loading (requests get
    COORDINATOR_LOAD_IN_PROGRESS) until a later LoadPartition without it brings the records."""

    now_ms: int
    partition: int
    records: tuple = ()
    loading: bool = False


@frozen(kw_only=True)
class UnloadPartition:
    now_ms: int
    partition: int


REQUEST_TYPES: dict[str, type[Request]] = {
    cls.__name__: cls
    for cls in (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
                DescribeGroups, ListGroups, DeleteGroups, OffsetDelete, FindCoordinator,
                ConsumerGroupHeartbeat, ConsumerGroupDescribe)
}
