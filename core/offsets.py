"""OffsetCommit, OffsetFetch, OffsetDelete and the periodic expiration of offsets and groups
(§3.8, §3.9, §5.3)."""

from __future__ import annotations

from . import events as ev
from .commands import (
    ExpirationTimer,
    FetchedGroup,
    FetchedPartition,
    FetchedTopic,
    GroupTombstone,
    HeartbeatTimer,
    OffsetCommitRecord,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    OffsetTombstone,
    PartitionResult,
    TopicResult,
)
from .continuations import DropSimpleGroup
from .error_responses import error_response
from .errors import Error
from .frozen import frozen
from .classic.model import MemberError, validate_member
from .partitioning import ACTIVE
from .classic.states import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE

NONE = Error.NONE


@frozen
class OffsetEntry:
    """A committed offset as stored (the value of Kafka's OffsetCommit record)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None


class Offsets:
    # ------------------------------------------------------------ offsets (§3.8, §3.9)

    def _on_offset_commit(self, req: ev.OffsetCommit) -> None:
        self._run_routed(req, self._commit)

    def _run_routed(self, req: ev.OffsetCommit | ev.OffsetDelete, operation) -> None:
        """Runs ``operation(req, partition)`` as one operation on the group's partition, once routed there."""
        gid = req.group_id
        # the common case skips the generic route: a named group on an active partition
        partition = self.partition_of(gid) if gid else None
        if partition is None or self._partitions.get(partition) is not ACTIVE:
            partition = self._route(req, gid)
        if partition is not None:
            self._run_op(partition, req, operation, req, partition)

    def _commit(self, req: ev.OffsetCommit, partition: int):
        gid = req.group_id
        group = self._groups.get(gid)
        try:
            if group is None:
                if req.generation_id >= 0:
                    raise MemberError(Error.GROUP_ID_NOT_FOUND if req.version >= 9 else Error.ILLEGAL_GENERATION)
            else:
                _validate_offset_commit(group, req)
        except MemberError as e:
            self._respond(req.request_id, error_response(req, e.error))
            return None
        if group is not None and group.state in (STABLE, PREPARING_REBALANCE):
            member = group.members[req.member_id]
            self._arm(HeartbeatTimer(partition, gid, req.member_id), member.session_timeout_ms)
        now = self._now
        expire = None if req.retention_time_ms == -1 else now + req.retention_time_ms
        limit = self.config.offset_metadata_max_bytes
        records = self._op.setdefault(partition, ([], []))[0]
        topics, entries = [], []
        for name, partitions in req.topics:
            results = []
            for p in partitions:
                index, metadata = p.partition_index, p.committed_metadata
                if metadata and _java_length(metadata) > limit:  # None and "" (stored as "") fit any limit
                    results.append(PartitionResult(index, Error.OFFSET_METADATA_TOO_LARGE))
                    continue
                results.append(PartitionResult(index, NONE))
                offset, epoch, metadata = p.committed_offset, p.committed_leader_epoch, metadata or ""
                entries.append((gid, (name, index), OffsetEntry(offset, epoch, metadata, now, expire)))
                records.append(OffsetCommitRecord(gid, name, index, offset, epoch, metadata, now, expire))
            topics.append(TopicResult(name, tuple(results)))
        if not records:  # no partition accepted: the operation writes nothing
            del self._op[partition]
        if entries:
            if group is None:  # a "simple" group, created by its first commit
                self._create_group(gid)
            self._set_offsets(partition, entries)
            if group is None:  # after the offsets' undo: a failed write takes both back, as in Kafka
                self._op[partition][1].append(DropSimpleGroup(gid))
        return OffsetCommitResponse(tuple(topics))

    def _on_offset_fetch(self, req: ev.OffsetFetch) -> None:
        results: list[FetchedGroup] = []
        waits = []
        for fetch in req.groups:
            if fetch.group_id is None:
                results.append(FetchedGroup(fetch.group_id, (), Error.INVALID_GROUP_ID))
                continue
            partition = self.partition_of(fetch.group_id)
            status = self._partitions.get(partition)
            if status is not ACTIVE:
                error = Error.NOT_COORDINATOR if status is None else Error.COORDINATOR_LOAD_IN_PROGRESS
                results.append(FetchedGroup(fetch.group_id, (), error))
                continue
            results.append(self._fetch_group(fetch, latest=req.require_stable))
            waits.append(partition)
        response = OffsetFetchResponse(tuple(results))
        if req.require_stable and len(set(waits)) == 1:
            self._result(waits[0], req.request_id, response)
        else:
            self._respond(req.request_id, response)

    def _fetch_group(self, fetch: ev.FetchGroup, latest: bool) -> FetchedGroup:
        """require_stable reads the latest offsets (and waits for their writes); a plain fetch
        reads the committed ones, as Kafka's read operations do."""
        gid = fetch.group_id
        if latest:
            stored = self._offsets.get(gid, {}) if gid in self._groups else {}
        else:
            stored = self._committed_offsets(gid) if gid in self._groups or gid in self._committed else {}
        if fetch.topics is None:
            by_topic: dict[str, list[FetchedPartition]] = {}
            for (topic, p), entry in sorted(stored.items()):
                by_topic.setdefault(topic, []).append(_fetched(p, entry))
            topics = tuple(FetchedTopic(t, tuple(ps)) for t, ps in by_topic.items())
        else:
            topics = tuple(FetchedTopic(topic, tuple(_fetched(p, stored.get((topic, p))) for p in partitions))
                           for topic, partitions in fetch.topics)
        return FetchedGroup(fetch.group_id, topics)

    def _on_offset_delete(self, req: ev.OffsetDelete) -> None:
        self._run_routed(req, self._offset_delete)

    def _offset_delete(self, req: ev.OffsetDelete, partition: int):
        group = self._groups.get(req.group_id)
        if group is None:
            self._respond(req.request_id, OffsetDeleteResponse(Error.GROUP_ID_NOT_FOUND))
            return None
        if group.state in (STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE) and group.protocol_type != "consumer":
            self._respond(req.request_id, OffsetDeleteResponse(Error.NON_EMPTY_GROUP))
            return None
        stored = self._offsets.get(req.group_id, {})
        topics, deleted = [], []
        for name, partitions in req.topics:
            if _is_subscribed(group, name):
                topics.append(TopicResult(name, tuple(
                    PartitionResult(p, Error.GROUP_SUBSCRIBED_TO_TOPIC) for p in partitions)))
                continue
            for p in partitions:
                if (name, p) in stored:
                    deleted.append((name, p))
                    self._append(partition, OffsetTombstone(req.group_id, name, p))
            topics.append(TopicResult(name, tuple(PartitionResult(p, Error.NONE) for p in partitions)))
        self._set_offsets(partition, [(req.group_id, key, None) for key in deleted])
        return OffsetDeleteResponse(Error.NONE, tuple(topics))

    def _expire(self, partition: int) -> None:
        """The periodic offset/group expiration (GroupCoordinatorShard.cleanupGroupMetadata)."""
        retention_ms = self.config.offsets_retention_ms
        for gid, group in list(self._groups.items()):
            if group.partition != partition:
                continue
            stored = self._offsets.get(gid, {})
            all_expired = True
            if stored:
                base = _expiration_base(group)
                if base is None:
                    all_expired = False
                else:
                    expired = []
                    for (topic, p), entry in sorted(stored.items()):
                        if _is_subscribed(group, topic):
                            all_expired = False
                            continue
                        if entry.expire_timestamp_ms is not None:
                            gone = self._now >= entry.expire_timestamp_ms
                        else:
                            gone = self._now - base(entry) >= retention_ms
                        if gone:
                            expired.append((topic, p))
                            self._append(partition, OffsetTombstone(gid, topic, p))
                        else:
                            all_expired = False
                    self._set_offsets(partition, [(gid, key, None) for key in expired])
            if all_expired and group.state is EMPTY:
                self._append(partition, GroupTombstone(gid), self._delete_group(gid, partition))
        self._arm(ExpirationTimer(partition), self.config.offsets_retention_check_interval_ms)


def _java_length(text: str) -> int:
    """Java's String.length(): UTF-16 code units (one per character for ASCII)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def _validate_offset_commit(group, req: ev.OffsetCommit) -> None:
    """ClassicGroup.validateOffsetCommit (non-transactional)."""
    if req.generation_id < 0 and group.state is EMPTY:
        return
    if req.generation_id >= 0 or req.member_id != "" or req.group_instance_id is not None:
        validate_member(group, req.member_id, req.group_instance_id)
        if req.generation_id != group.generation_id:
            raise MemberError(Error.ILLEGAL_GENERATION)
    elif group.state is not EMPTY:
        raise MemberError(Error.UNKNOWN_MEMBER_ID)
    if group.state is COMPLETING_REBALANCE:
        raise MemberError(Error.REBALANCE_IN_PROGRESS)


def _is_subscribed(group, topic: str) -> bool:
    if group.subscribed_topics is not None:
        return topic in group.subscribed_topics
    return group.protocol_type == "consumer"


def _expiration_base(group):
    """Which timestamp an offset's retention counts from, or None if it cannot expire (§5.3)."""
    if group.protocol_type is not None:
        if group.state is EMPTY:
            return lambda entry: group.state_timestamp_ms if group.state_timestamp_ms is not None \
                else entry.commit_timestamp_ms
        if group.protocol_type == "consumer" and group.subscribed_topics is not None and group.state is STABLE:
            return lambda entry: entry.commit_timestamp_ms
        return None
    return lambda entry: entry.commit_timestamp_ms


def _fetched(partition: int, entry: OffsetEntry | None) -> FetchedPartition:
    if entry is None:
        return FetchedPartition(partition)
    return FetchedPartition(partition, entry.offset, entry.leader_epoch, entry.metadata)


