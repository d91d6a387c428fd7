"""What happens when a write completes or fails: one small frozen value per kind, carried by
the write (``PendingWrite.continuations``) and run through one dispatch, ``coordinator._AFTER_WRITE``."""

from __future__ import annotations

from typing import Any

from .frozen import frozen


@frozen
class AfterSync:
    """The leader's assignment for ``generation_id`` is being written: on success the group
    becomes Stable with it, on failure it rebalances."""

    group_id: str
    generation_id: int
    assignments: tuple  # (member id, assignment bytes), in the leader's order


@frozen
class AfterStaticReplace:
    """A static member's new id is being written (Stable, no rebalance): on success its parked
    JoinGroup is answered, on failure the old member comes back."""

    group_id: str
    instance_id: str
    old_member_id: str
    new_member_id: str
    old_protocols: tuple
    old_rebalance_timeout_ms: int
    old_session_timeout_ms: int
    previous_leader_id: str | None
    request_id: Any
    version: int


@frozen
class AfterNewGroup:
    """A new group's creation record: if it fails, the group never existed (its parked
    requests are answered with the error) and ``displaced``, a group whose deletion failed
    meanwhile, comes back."""

    group_id: str
    request_id: Any
    displaced: Any = None  # a Group, or None


@frozen
class UndoOffsets:
    """Offsets changed at once by the operation: ``changes`` are (group, key, before, after);
    success makes them what readers see, failure reverts them."""

    changes: tuple


@frozen
class RestoreGroup:
    """A group tombstone: if it fails, ``group`` comes back (or waits on the creation write
    of a new group that took its id)."""

    group_id: str
    group: Any  # the Group as it was before the deletion


@frozen
class DropSimpleGroup:
    """A "simple" group created by its first OffsetCommit: if the commit fails, the group goes."""

    group_id: str


@frozen
class AfterEmptyGroup:
    """A join phase ended with no members (an empty GroupMetadata record): nothing to do either
    way (Kafka only logs a failure)."""


@frozen
class DeleteResult:
    """DeleteGroups' write on one partition: the request is answered when all its writes are
    done, a failure marking that partition's groups."""

    request_id: Any
    group_ids: tuple


@frozen
class RevertConsumerGroup:
    """A consumer group's step: if its write fails, the group is as it was before (``before``,
    None: it did not exist), unless a later step changed it since (``after`` is no longer the
    group held; ``after`` None: the group gave way to another, and comes back if none is held).
    Kafka reverts its in-memory state to the last committed offset."""

    group_id: str
    before: Any
    after: Any
