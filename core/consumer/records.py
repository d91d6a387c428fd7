"""The records a consumer group writes to its offsets partition, one kind per Kafka record type
(``GroupCoordinatorRecordHelpers``), each keyed as Kafka keys it so compaction keeps the latest;
a value of None is the key's tombstone. ``replay`` reads them back into groups, as Kafka's
``GroupMetadataManager.replay`` methods do on load."""

from __future__ import annotations

from typing import Mapping

import attrs

from ..frozen import frozen
from .model import Assignment, ConsumerGroup, ConsumerMember


@frozen
class ConsumerGroupEpochRecord:
    """ConsumerGroupMetadata: the group epoch (None: the group is deleted)."""

    group_id: str
    epoch: int | None

    @property
    def key(self) -> tuple:
        return ("consumer-metadata", self.group_id)


@frozen
class ConsumerSubscriptionRecord:
    """ConsumerGroupPartitionMetadata: the subscribed topics the epoch was computed with,
    ``((name, topic id, partitions), ...)``."""

    group_id: str
    topics: tuple | None

    @property
    def key(self) -> tuple:
        return ("consumer-partition-metadata", self.group_id)


@frozen
class ConsumerMemberRecord:
    """ConsumerGroupMemberMetadata: a member's subscription and identity (its epochs and
    partitions are in ``ConsumerAssignmentRecord``)."""

    group_id: str
    member_id: str
    member: ConsumerMember | None

    @property
    def key(self) -> tuple:
        return ("consumer-member", self.group_id, self.member_id)


@frozen
class ConsumerTargetEpochRecord:
    """ConsumerGroupTargetAssignmentMetadata: the epoch of the target assignment."""

    group_id: str
    epoch: int | None

    @property
    def key(self) -> tuple:
        return ("consumer-target-metadata", self.group_id)


@frozen
class ConsumerTargetRecord:
    """ConsumerGroupTargetAssignmentMember: one member's target partitions."""

    group_id: str
    member_id: str
    assignment: Assignment | None

    @property
    def key(self) -> tuple:
        return ("consumer-target", self.group_id, self.member_id)


@frozen
class ConsumerAssignmentRecord:
    """ConsumerGroupCurrentMemberAssignment: a member's epochs, state and partitions."""

    group_id: str
    member_id: str
    member: ConsumerMember | None

    @property
    def key(self) -> tuple:
        return ("consumer-assignment", self.group_id, self.member_id)


@frozen
class ConsumerRegexRecord:
    """ConsumerGroupRegularExpression: a subscribed regular expression's matching topics."""

    group_id: str
    regex: str
    topics: frozenset | None

    @property
    def key(self) -> tuple:
        return ("consumer-regex", self.group_id, self.regex)


RECORD_TYPES = (ConsumerGroupEpochRecord, ConsumerSubscriptionRecord, ConsumerMemberRecord,
                ConsumerTargetEpochRecord, ConsumerTargetRecord, ConsumerAssignmentRecord, ConsumerRegexRecord)

_IDENTITY = ("instance_id", "rack_id", "client_id", "client_host", "rebalance_timeout_ms", "server_assignor", "classic",
             "subscribed_topic_names", "subscribed_topic_regex")
_PROGRESS = ("member_epoch", "previous_member_epoch", "state", "assigned", "pending_revocation")


def replay(groups: dict, record, partition: int) -> None:
    """Apply one record to ``groups`` (group id -> ConsumerGroup; a deleted group is None)."""
    gid = record.group_id
    group: ConsumerGroup | None = groups.get(gid)
    kind = type(record)
    if kind is ConsumerGroupEpochRecord:
        if record.epoch is None:
            groups[gid] = None
            return
        group = group or ConsumerGroup(group_id=gid, partition=partition)
        groups[gid] = attrs.evolve(group, group_epoch=record.epoch)
        return
    if group is None:
        group = ConsumerGroup(group_id=gid, partition=partition)
    if kind is ConsumerSubscriptionRecord:
        group = attrs.evolve(group, subscribed={} if record.topics is None else
                             {name: (tid, n) for name, tid, n in record.topics})
    elif kind is ConsumerMemberRecord:
        group = _member(group, record.member_id, record.member, _IDENTITY)
    elif kind is ConsumerAssignmentRecord:
        group = _member(group, record.member_id, record.member, _PROGRESS)
    elif kind is ConsumerTargetEpochRecord:
        group = attrs.evolve(group, assignment_epoch=record.epoch or 0)
    elif kind is ConsumerTargetRecord:
        target = dict(group.target)
        if record.assignment is None:
            target.pop(record.member_id, None)
        else:
            target[record.member_id] = record.assignment
        group = attrs.evolve(group, target=target)
    elif kind is ConsumerRegexRecord:
        resolved = dict(group.resolved)
        if record.topics is None:
            resolved.pop(record.regex, None)
        else:
            resolved[record.regex] = record.topics
        group = attrs.evolve(group, resolved=resolved)
    else:
        raise TypeError(f"not a consumer group record: {record!r}")
    groups[gid] = group


def _member(group: ConsumerGroup, member_id: str, value: ConsumerMember | None, fields: tuple) -> ConsumerGroup:
    members: Mapping[str, ConsumerMember] = dict(group.members)
    if value is None:
        members.pop(member_id, None)  # type: ignore[attr-defined]
    else:
        current = members.get(member_id) or ConsumerMember(member_id=member_id)
        members[member_id] = attrs.evolve(current, **{f: getattr(value, f) for f in fields})  # type: ignore[index]
    return attrs.evolve(group, members=members)


def tombstones(group: ConsumerGroup) -> list:
    """``ConsumerGroup.createGroupTombstoneRecords``, in Kafka's order: the members' current
    and target assignments, the target's epoch, the members' subscriptions, the regular
    expressions, the subscribed topics, the group's epoch last."""
    gid = group.group_id
    out: list = [ConsumerAssignmentRecord(gid, mid, None) for mid in group.members]
    out += [ConsumerTargetRecord(gid, mid, None) for mid in group.members]
    out.append(ConsumerTargetEpochRecord(gid, None))
    out += [ConsumerMemberRecord(gid, mid, None) for mid in group.members]
    out += [ConsumerRegexRecord(gid, regex, None) for regex in sorted(group.resolved)]
    out += [ConsumerSubscriptionRecord(gid, None), ConsumerGroupEpochRecord(gid, None)]
    return out
