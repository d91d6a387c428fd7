"""Outputs of the coordinator: responses, storage writes and timers, plus the response bodies
and the stored records they carry.

Response bodies are logical, version-independent values with Kafka's field names; ``wire``
turns one into the exact fields of a given API version.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .errors import Error
from .frozen import frozen

# --- commands ---------------------------------------------------------------------------


@frozen
class Respond:
    """Answer the request ``request_id`` (every request is answered exactly once)."""

    request_id: Any
    response: Any


@frozen
class Write:
    """Append ``records`` to the offsets-topic ``partition``; report the outcome with
    WriteCompleted / WriteFailed carrying ``write_id``. Responses that depend on it wait."""

    write_id: int
    partition: int
    records: tuple


@frozen
class SetTimer:
    """Arm (or re-arm: a key has at most one timer) ``key`` to fire at ``deadline_ms``.
    Timers with the same deadline fire in the order they were armed."""

    key: Any  # HeartbeatTimer | JoinTimer | SyncTimer | ExpirationTimer
    deadline_ms: int
    payload: Any = None


@frozen
class CancelTimer:
    key: Any


@frozen
class CancelPartitionTimers:
    """Cancel every timer of the groups on ``partition`` (every key has a ``partition``)."""

    partition: int


# --- timer keys: what a timer is for; every key names its offsets partition ----------------
#
# Keys are named tuples: the runner hashes one on every heartbeat, and tuples hash and
# compare in C (an attrs key made the heartbeat step ~25 % slower). Tuples compare by value
# alone, so each key ends with its ``kind``: a JoinTimer never equals a SyncTimer of the
# same group. The trace writes a key as a typed record of its other fields.


class HeartbeatTimer(NamedTuple):
    """A member's session timeout (for a new member, the join timeout); fires as expiry."""

    partition: int
    group_id: str
    member_id: str
    kind: str = "heartbeat"


class JoinTimer(NamedTuple):
    """The group's join phase: the initial rebalance delay (payload ``InitialDelay``) or the
    rebalance timeout (no payload)."""

    partition: int
    group_id: str
    kind: str = "join"


class SyncTimer(NamedTuple):
    """The wait for the leader's assignment; its payload is the generation it waits in."""

    partition: int
    group_id: str
    kind: str = "sync"


class ExpirationTimer(NamedTuple):
    """The periodic expiration of a partition's offsets and empty groups."""

    partition: int
    kind: str = "expire"


class SessionTimer(NamedTuple):
    """A consumer group member's session timeout (KIP-848); fires as the member's fencing."""

    partition: int
    group_id: str
    member_id: str
    kind: str = "session"


class RebalanceTimer(NamedTuple):
    """A consumer group member's rebalance timeout: armed when it must revoke partitions, its
    payload the member epoch it must leave in time; fires as the member's fencing."""

    partition: int
    group_id: str
    member_id: str
    kind: str = "rebalance"


class MemberJoinTimer(NamedTuple):
    """A classic member of a consumer group told to rejoin: it must within its rebalance
    timeout; fires as its fencing."""

    partition: int
    group_id: str
    member_id: str
    kind: str = "member-join"


class MemberSyncTimer(NamedTuple):
    """A classic member of a consumer group that joined: it must sync within its rebalance
    timeout; fires as its fencing."""

    partition: int
    group_id: str
    member_id: str
    kind: str = "member-sync"


TIMER_KEYS = (HeartbeatTimer, JoinTimer, SyncTimer, ExpirationTimer, SessionTimer, RebalanceTimer, MemberJoinTimer,
              MemberSyncTimer)
_KEY_BY_KIND = {key_type._field_defaults["kind"]: key_type for key_type in TIMER_KEYS}


def timer_key(values: tuple):
    """The typed key whose fields are ``values`` (a plain tuple of one, ``kind`` last)."""
    return tuple.__new__(_KEY_BY_KIND[values[-1]], values)


def key_fields(key_type) -> tuple[str, ...]:
    """The fields a timer key is written with (all but its ``kind``)."""
    return key_type._fields[:-1]


@frozen
class InitialDelay:
    """A join timer in the initial rebalance delay: the delay armed, and the rebalance time
    left after it (Kafka's InitialDelayedJoin)."""

    delay_ms: int
    remaining_ms: int


# --- stored records (the values of Kafka's __consumer_offsets records) ------------------


def _group_key(record) -> tuple:
    """A group's key in the offsets topic: its metadata record and its tombstone share it."""
    return ("group", record.group_id)


def _offset_key(record) -> tuple:
    """An offset's key in the offsets topic: its commit record and its tombstone share it."""
    return ("offset", record.group_id, record.topic, record.partition)


@frozen
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@frozen
class GroupMetadataRecord:
    group_id: str
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberRecord, ...] = ()

    key = property(_group_key)


@frozen
class GroupTombstone:
    group_id: str

    key = property(_group_key)


@frozen
class OffsetCommitRecord:
    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None

    key = property(_offset_key)


@frozen
class OffsetTombstone:
    group_id: str
    topic: str
    partition: int

    key = property(_offset_key)


# --- response bodies ----------------------------------------------------------------------


@frozen
class JoinGroupResponseMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@frozen(kw_only=True)
class JoinGroupResponse:
    error_code: Error
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: tuple[JoinGroupResponseMember, ...] = ()


@frozen(kw_only=True)
class SyncGroupResponse:
    error_code: Error
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@frozen
class HeartbeatResponse:
    error_code: Error


@frozen
class LeaveGroupMemberResponse:
    member_id: str
    group_instance_id: str | None
    error_code: Error


@frozen
class LeaveGroupResponse:
    error_code: Error
    members: tuple[LeaveGroupMemberResponse, ...] = ()


@frozen
class PartitionResult:
    partition_index: int
    error_code: Error


@frozen
class TopicResult:
    name: str
    partitions: tuple[PartitionResult, ...]


@frozen
class OffsetCommitResponse:
    topics: tuple[TopicResult, ...]


@frozen
class FetchedPartition:
    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str | None = ""
    error_code: Error = Error.NONE


@frozen
class FetchedTopic:
    name: str
    partitions: tuple[FetchedPartition, ...]


@frozen
class FetchedGroup:
    group_id: str
    topics: tuple[FetchedTopic, ...] = ()
    error_code: Error = Error.NONE


@frozen
class OffsetFetchResponse:
    groups: tuple[FetchedGroup, ...]


@frozen
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@frozen(kw_only=True)
class DescribedGroup:
    error_code: Error = Error.NONE
    group_id: str
    group_state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()
    authorized_operations: int = -2147483648


@frozen
class DescribeGroupsResponse:
    groups: tuple[DescribedGroup, ...]


@frozen
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str = "classic"


@frozen
class ListGroupsResponse:
    error_code: Error
    groups: tuple[ListedGroup, ...] = ()


@frozen
class DeletableGroupResult:
    group_id: str
    error_code: Error


@frozen
class DeleteGroupsResponse:
    results: tuple[DeletableGroupResult, ...]


@frozen
class OffsetDeleteResponse:
    error_code: Error
    topics: tuple[TopicResult, ...] = ()


@frozen
class Coordinator:
    key: str
    node_id: int
    host: str
    port: int
    error_code: Error
    error_message: str | None = None


@frozen
class FindCoordinatorResponse:
    coordinators: tuple[Coordinator, ...]


# --- KIP-848: ConsumerGroupHeartbeat and ConsumerGroupDescribe ------------------------------

TopicPartitions = tuple  # ((topic id, (partition, ...)), ...), topic ids and partitions sorted


@frozen(kw_only=True)
class ConsumerGroupHeartbeatResponse:
    error_code: Error = Error.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None  # None: not sent (unchanged, partial request)


@frozen
class DescribedTopicPartitions:
    topic_id: str
    topic_name: str
    partitions: tuple[int, ...]


@frozen(kw_only=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    member_type: int = 1  # v1: 1 consumer protocol, 0 classic protocol (-1 unknown)


@frozen(kw_only=True)
class DescribedConsumerGroup:
    error_code: Error = Error.NONE
    error_message: str | None = None
    group_id: str | None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()
    authorized_operations: int = -2147483648


@frozen
class ConsumerGroupDescribeResponse:
    groups: tuple[DescribedConsumerGroup, ...]
