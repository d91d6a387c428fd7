"""Reading a partition of the offsets topic back into groups and offsets (§3.11): what Kafka's
``GroupMetadataManager`` replays on load, as values the coordinator then takes in."""

from __future__ import annotations

from typing import Iterable

from .classic.draft import assemble_group
from .classic.model import Group, Member
from .classic.states import EMPTY, STABLE
from .commands import GroupMetadataRecord, GroupTombstone, OffsetCommitRecord, OffsetTombstone
from .consumer import records as consumer_records
from .offsets import OffsetEntry


def read_partition(records: Iterable, partition: int) -> tuple[list[tuple[Group, bool]], dict]:
    """The partition's records, replayed in order: its groups as (group, written) — ``written``:
    from a GroupMetadata record, not a "simple" group made by commits alone — and its offsets
    by group id."""
    groups: dict[str, GroupMetadataRecord | str | None] = {}
    consumer: dict = {}  # group id -> ConsumerGroup, or None once deleted
    offsets: dict[str, dict[tuple[str, int], OffsetEntry]] = {}
    # a classic group's tombstone written as its id became a consumer group's (the conversion's
    # first record): its offsets stay when the group's next record is a consumer group's
    converted: dict[str | None, dict] = {}
    for record in records:
        kept = converted.pop(getattr(record, "group_id", None), None)
        if type(record) in consumer_records.RECORD_TYPES:
            if kept:
                offsets[record.group_id] = {**kept, **offsets.get(record.group_id, {})}
            consumer_records.replay(consumer, record, partition)
            if consumer.get(record.group_id) is not None:
                groups.pop(record.group_id, None)
        elif isinstance(record, GroupMetadataRecord):
            groups[record.group_id] = record
        elif isinstance(record, GroupTombstone):
            groups[record.group_id] = None
            gone = offsets.pop(record.group_id, None)
            if gone:
                converted[record.group_id] = gone
        elif isinstance(record, OffsetCommitRecord):
            offsets.setdefault(record.group_id, {})[(record.topic, record.partition)] = OffsetEntry(
                record.offset, record.leader_epoch, record.metadata, record.commit_timestamp_ms,
                record.expire_timestamp_ms)
            if groups.get(record.group_id) is None and consumer.get(record.group_id) is None:  # also after a tombstone
                groups[record.group_id] = "simple"
        elif isinstance(record, OffsetTombstone):
            offsets.get(record.group_id, {}).pop((record.topic, record.partition), None)
        else:
            raise TypeError(f"not a coordinator record: {record!r}")
    loaded: list = [(group, True) for group in consumer.values() if group is not None]
    for gid, record in groups.items():
        if record is None:
            continue
        if isinstance(record, GroupMetadataRecord):
            loaded.append((_group_from_record(record, partition), True))
        else:
            loaded.append((Group(group_id=gid, partition=partition), False))
    return loaded, {gid: entries for gid, entries in offsets.items()
                    if entries and (groups.get(gid) is not None or consumer.get(gid) is not None)}


def _group_from_record(record: GroupMetadataRecord, partition: int) -> Group:
    group = Group(
        group_id=record.group_id, partition=partition, state=STABLE if record.members else EMPTY,
        generation_id=record.generation_id, protocol_type=record.protocol_type or None,
        protocol_name=record.protocol_name, leader_id=record.leader_id,
        state_timestamp_ms=None if record.current_state_timestamp_ms == -1 else record.current_state_timestamp_ms)
    return assemble_group(group, (Member(
        member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
        client_host=m.client_host,
        rebalance_timeout_ms=m.session_timeout_ms if m.rebalance_timeout_ms == -1 else m.rebalance_timeout_ms,
        session_timeout_ms=m.session_timeout_ms, protocol_type=record.protocol_type,
        protocols=((record.protocol_name or "", m.subscription),), assignment=m.assignment)
        for m in record.members))
