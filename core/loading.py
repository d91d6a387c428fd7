"""Loading a partition of the offsets topic from its records, and unloading it (§3.11)."""

from __future__ import annotations

from . import events as ev
from .commands import (
    CancelPartitionTimers,
    ExpirationTimer,
    GroupMetadataRecord,
    GroupTombstone,
    HeartbeatTimer,
    OffsetCommitRecord,
    OffsetTombstone,
)
from .classic.draft import assemble_group
from .error_responses import error_like
from .errors import Error
from .classic.machine import Rebalance, Unload
from .classic.model import Group, Member
from .offsets import OffsetEntry
from .partitioning import ACTIVE, LOADING
from .classic.states import EMPTY, STABLE


class Loading:
    # ------------------------------------------------------------ load and unload (§3.11)

    def _on_load(self, event: ev.LoadPartition) -> None:
        partition = event.partition
        if self._partitions.get(partition) is ACTIVE:
            return  # already loaded; a new owner instance starts from a new Coordinator
        if event.loading:
            self._partitions[partition] = LOADING
            return
        groups: dict[str, GroupMetadataRecord | None] = {}
        offsets: dict[str, dict[tuple[str, int], OffsetEntry]] = {}
        for record in event.records:
            if isinstance(record, GroupMetadataRecord):
                groups[record.group_id] = record
            elif isinstance(record, GroupTombstone):
                groups[record.group_id] = None
                offsets.pop(record.group_id, None)
            elif isinstance(record, OffsetCommitRecord):
                offsets.setdefault(record.group_id, {})[(record.topic, record.partition)] = OffsetEntry(
                    record.offset, record.leader_epoch, record.metadata, record.commit_timestamp_ms,
                    record.expire_timestamp_ms)
                if groups.get(record.group_id) is None:  # also after a tombstone
                    groups[record.group_id] = "simple"
            elif isinstance(record, OffsetTombstone):
                offsets.get(record.group_id, {}).pop((record.topic, record.partition), None)
            else:
                raise TypeError(f"not a coordinator record: {record!r}")
        self._partitions[partition] = ACTIVE
        for gid, record in groups.items():
            if record is None:
                continue
            group = Group(group_id=gid, partition=partition) if record == "simple" else _group_from_record(record, partition)
            self._groups[gid] = group
            if offsets.get(gid):
                self._offsets[gid] = offsets[gid]
        self._op = {}
        for gid, record in groups.items():
            group = self._groups.get(gid)
            if group is None or group.partition != partition or record in (None, "simple"):
                continue
            for mid, member in group.members.items():
                self._arm(HeartbeatTimer(partition, gid, mid), member.session_timeout_ms)
            if len(group.members) > self.config.group_max_size:
                self._step(gid, Rebalance())
        self._op = {}
        self._arm(ExpirationTimer(partition), self.config.offsets_retention_check_interval_ms)

    def _on_unload(self, event: ev.UnloadPartition) -> None:
        partition = event.partition
        if partition not in self._partitions:
            return
        for write in [self._writes[i] for i in self._writes_on.get(partition, ())]:
            self._take_write(write.write_id)
            self._finish_write(write, Error.NOT_COORDINATOR)
        self._deferred_unordered.discard(partition)
        for _wait_for, respond in self._deferred.pop(partition, ()):
            self._respond(respond.request_id, _unload_error(respond.response))
        for gid, group in list(self._groups.items()):
            if group.partition == partition:
                self._step(gid, Unload())  # Kafka's onUnloaded: parked requests answered, the group Dead
        # Every offset of the partition goes, also a group's left without it (its creation
        # rolled back while a commit was in flight): a later load reads them from storage.
        # (No committed value is left: the writes were finished above.)
        for gid in [g for g in self._offsets if self.partition_of(g) == partition]:
            del self._offsets[gid]
        del self._partitions[partition]
        # Last, so that timers armed by the failed writes' follow-ups are cancelled too.
        self._out.append(CancelPartitionTimers(partition))


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


def _unload_error(response):
    return error_like(response, Error.NOT_COORDINATOR)


