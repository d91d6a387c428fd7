"""The records a coordinator wrote, as the conformance format names them (FORMAT.md,
"expect_records"): one object per record, ``type`` Kafka's record name (the ``*Key.json`` /
``*Value.json`` message of ``__consumer_offsets`` without its suffix), ``tombstone`` whether
the value is null, then the key's and the value's fields in snake_case, topic ids as strings
and partition lists sorted."""

from __future__ import annotations

from typing import Any

from groupcoord.core.commands import GroupMetadataRecord, GroupTombstone, OffsetCommitRecord, OffsetTombstone
from groupcoord.core.consumer import records as cr
from groupcoord.core.consumer.model import MemberState

# Kafka's MemberState bytes (modern/MemberState.java)
_STATE_BYTES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1,
                MemberState.UNRELEASED_PARTITIONS: 2, MemberState.UNKNOWN: 127}


def _partitions(assignment) -> list[dict]:
    return [{"topic_id": str(t), "partitions": sorted(ps)} for t, ps in sorted(assignment.items()) if ps]


def kafka_record(record: Any) -> dict:
    """``record`` (one of the core's stored records) in the format's shape; a record kind the
    format does not know is ``{"type": "<its class name>"}``."""
    kind = type(record)
    if kind is cr.ConsumerGroupEpochRecord:
        out = {"type": "ConsumerGroupMetadata", "group_id": record.group_id, "tombstone": record.epoch is None}
        if record.epoch is not None:
            out["epoch"] = record.epoch
        return out
    if kind is cr.ConsumerSubscriptionRecord:
        out = {"type": "ConsumerGroupPartitionMetadata", "group_id": record.group_id,
               "tombstone": record.topics is None}
        if record.topics is not None:
            out["topics"] = [{"topic_name": n, "topic_id": str(t), "num_partitions": c} for n, t, c in record.topics]
        return out
    if kind is cr.ConsumerMemberRecord:
        out = {"type": "ConsumerGroupMemberMetadata", "group_id": record.group_id, "member_id": record.member_id,
               "tombstone": record.member is None}
        m = record.member
        if m is not None:
            out.update(instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
                       client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
                       subscribed_topic_regex=m.subscribed_topic_regex, server_assignor=m.server_assignor,
                       rebalance_timeout_ms=m.rebalance_timeout_ms)
        return out
    if kind is cr.ConsumerTargetEpochRecord:
        out = {"type": "ConsumerGroupTargetAssignmentMetadata", "group_id": record.group_id,
               "tombstone": record.epoch is None}
        if record.epoch is not None:
            out["assignment_epoch"] = record.epoch
        return out
    if kind is cr.ConsumerTargetRecord:
        out = {"type": "ConsumerGroupTargetAssignmentMember", "group_id": record.group_id,
               "member_id": record.member_id, "tombstone": record.assignment is None}
        if record.assignment is not None:
            out["topic_partitions"] = _partitions(record.assignment)
        return out
    if kind is cr.ConsumerAssignmentRecord:
        out = {"type": "ConsumerGroupCurrentMemberAssignment", "group_id": record.group_id,
               "member_id": record.member_id, "tombstone": record.member is None}
        m = record.member
        if m is not None:
            out.update(member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
                       state=_STATE_BYTES[m.state], assigned_partitions=_partitions(m.assigned),
                       partitions_pending_revocation=_partitions(m.pending_revocation))
        return out
    if kind is cr.ConsumerRegexRecord:
        out = {"type": "ConsumerGroupRegularExpression", "group_id": record.group_id,
               "regular_expression": record.regex, "tombstone": record.topics is None}
        if record.topics is not None:
            out["topics"] = sorted(record.topics)
        return out
    if kind is GroupMetadataRecord:
        return {"type": "GroupMetadata", "group": record.group_id, "tombstone": False,
                "protocol_type": record.protocol_type, "generation": record.generation_id,
                "protocol": record.protocol_name, "leader": record.leader_id,
                "members": [m.member_id for m in record.members]}
    if kind is GroupTombstone:
        return {"type": "GroupMetadata", "group": record.group_id, "tombstone": True}
    if kind is OffsetCommitRecord:
        return {"type": "OffsetCommit", "group": record.group_id, "topic": record.topic,
                "partition": record.partition, "tombstone": False, "offset": record.offset,
                "leader_epoch": record.leader_epoch, "metadata": record.metadata,
                "commit_timestamp": record.commit_timestamp_ms,
                "expire_timestamp": -1 if record.expire_timestamp_ms is None else record.expire_timestamp_ms}
    if kind is OffsetTombstone:
        return {"type": "OffsetCommit", "group": record.group_id, "topic": record.topic,
                "partition": record.partition, "tombstone": True}
    return {"type": kind.__name__}
