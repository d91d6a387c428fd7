"""Committed offsets: the store (``OffsetStore``) and the operations on it, OffsetCommit,
OffsetFetch, OffsetDelete and the periodic expiration of offsets and groups (§3.8, §3.9, §5.3).

The operations are functions of what they read and write, passed explicitly: the input's
``Context`` (its time and output), the operation's ``Records``, the store, the group."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from . import events as ev
from .classic.model import MemberError, validate_member
from .classic.states import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE
from .commands import (
    ExpirationTimer,
    FetchedGroup,
    FetchedPartition,
    FetchedTopic,
    HeartbeatTimer,
    OffsetCommitRecord,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    OffsetTombstone,
    PartitionResult,
    TopicResult,
)
from .config import CoordinatorConfig
from .context import Context, Records
from .continuations import UndoOffsets
from .error_responses import error_response
from .errors import Error
from .frozen import frozen
from .partitioning import ACTIVE

NONE = Error.NONE


@frozen
class OffsetEntry:
    """A committed offset as stored (the value of Kafka's OffsetCommit record)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None


class OffsetStore:
    """Offsets as write operations see them: a commit or a deletion changes them at once, as
    Kafka replays its records on append (``latest``). Readers see the committed value of a key
    whose write is still in flight: ``_committed[group][key] = [value, writes in flight]``."""

    def __init__(self) -> None:
        self.latest: dict[str, dict[tuple[str, int], OffsetEntry]] = {}
        self._committed: dict[str, dict[tuple[str, int], list]] = {}

    def of(self, group_id: str) -> dict[tuple[str, int], OffsetEntry]:
        """The group's latest offsets (do not change the mapping returned)."""
        return self.latest.get(group_id, _NO_OFFSETS)

    def in_flight(self, group_id: str) -> bool:
        """A write of one of the group's offsets is in flight."""
        return group_id in self._committed

    def committed(self, group_id: str) -> dict[tuple[str, int], OffsetEntry]:
        """The offsets readers see: the latest ones, except keys whose write is in flight."""
        latest = self.latest.get(group_id, _NO_OFFSETS)
        shadow = self._committed.get(group_id)
        if not shadow:
            return latest
        view = dict(latest)
        for key, (committed, _) in shadow.items():
            if committed is None:
                view.pop(key, None)
            else:
                view[key] = committed
        return view

    def set(self, changes: list) -> UndoOffsets | None:
        """Apply (group, key, entry-or-None) changes now; returns their undo for the operation's
        write: on success they become what readers see, on failure they are reverted (where
        nothing changed them since)."""
        undo = []
        offsets, committed = self.latest, self._committed
        for gid, key, entry in changes:
            stored = offsets.get(gid)
            if stored is None:
                stored = offsets[gid] = {}
            previous = stored.get(key)
            shadow = committed.get(gid)
            if shadow is None:
                shadow = committed[gid] = {}
            slot = shadow.get(key)
            if slot is None:
                shadow[key] = [previous, 1]
            else:
                slot[1] += 1
            if entry is None:
                stored.pop(key, None)
            else:
                stored[key] = entry
            undo.append((gid, key, previous, entry))
        return UndoOffsets(tuple(undo)) if undo else None

    def written(self, undo: tuple, error: Error | None) -> None:
        """The outcome of the write that carried ``undo`` (UndoOffsets.changes)."""
        # A key's committed value stays while writes of it are in flight (an unload finishes
        # them before dropping the partition's offsets), so its slot is there.
        for gid, key, previous, written in undo:
            shadow = self._committed[gid]
            slot = shadow[key]
            slot[1] -= 1
            if error is None:
                slot[0] = written
            else:
                # Kafka reverts to the last committed state: with no other write of this key in
                # flight that is the committed value; otherwise undo this write where it is
                # still the latest.
                stored = self.latest.setdefault(gid, {})
                value = slot[0] if slot[1] == 0 else (previous if stored.get(key) is written else stored.get(key))
                if value is None:
                    stored.pop(key, None)
                else:
                    stored[key] = value
            if slot[1] == 0:
                del shadow[key]
                if not shadow:
                    del self._committed[gid]

    def remove(self, group_id: str) -> None:
        """The group's offsets go; the committed values of keys whose writes are still in
        flight stay, for those writes to settle (readers see them until then)."""
        self.latest.pop(group_id, None)

    def snapshot(self) -> tuple[dict, dict]:
        return ({g: dict(o) for g, o in self.latest.items()},
                {g: {k: tuple(v) for k, v in o.items()} for g, o in self._committed.items()})

    @classmethod
    def restore(cls, latest: Any, committed: Any) -> "OffsetStore":
        store = cls()
        store.latest = {g: dict(o) for g, o in latest.items()}
        store._committed = {g: {k: list(v) for k, v in o.items()} for g, o in committed.items()}
        return store


_NO_OFFSETS: dict = {}


def then_undo(records: Records, partition: int, undo: UndoOffsets | None) -> None:
    """The operation's write on ``partition`` carries the undo of the offsets it changed."""
    if undo is not None:
        records.then(partition, undo)


# ---------------------------------------------------------------- the operations (§3.8, §3.9)

def commit(ctx: Context, records: Records, store: OffsetStore, config: CoordinatorConfig, group: Any,
           req: ev.OffsetCommit, partition: int) -> OffsetCommitResponse | None:
    """OffsetCommit on the group (None: there is none; its records then make a "simple" group,
    which the caller creates). None: answered already (a member's validation failed)."""
    gid = req.group_id
    try:
        if group is None:
            if req.generation_id >= 0:
                raise MemberError(Error.GROUP_ID_NOT_FOUND if req.version >= 9 else Error.ILLEGAL_GENERATION)
        else:
            _validate_offset_commit(group, req)
    except MemberError as e:
        ctx.respond(req.request_id, error_response(req, e.error))
        return None
    if group is not None and group.state in (STABLE, PREPARING_REBALANCE):
        member = group.members[req.member_id]
        ctx.arm(HeartbeatTimer(partition, gid, req.member_id), member.session_timeout_ms)
    now = ctx.now
    expire = None if req.retention_time_ms == -1 else now + req.retention_time_ms
    limit = config.offset_metadata_max_bytes
    written = records.setdefault(partition, ([], []))[0]
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
            written.append(OffsetCommitRecord(gid, name, index, offset, epoch, metadata, now, expire))
        topics.append(TopicResult(name, tuple(results)))
    if not written:  # no partition accepted: the operation writes nothing
        del records[partition]
    then_undo(records, partition, store.set(entries))
    return OffsetCommitResponse(tuple(topics))


def fetch(req: ev.OffsetFetch, store: OffsetStore, groups: Mapping[str, Any], partitions: Mapping[int, str],
          partition_of: Callable[[str], int]) -> tuple[OffsetFetchResponse, list[int]]:
    """OffsetFetch of each group named: its answer, and the partitions whose writes in flight a
    require_stable fetch waits for (``partitions``: the owned ones' status)."""
    results, waits = [], []
    for fetch in req.groups:
        gid = fetch.group_id
        if gid is None:
            results.append(FetchedGroup(gid, (), Error.INVALID_GROUP_ID))
            continue
        partition = partition_of(gid)
        status = partitions.get(partition)
        if status is not ACTIVE:
            results.append(FetchedGroup(gid, (), Error.NOT_COORDINATOR if status is None
                                        else Error.COORDINATOR_LOAD_IN_PROGRESS))
            continue
        group = groups.get(gid)
        if group is not None and group.KIND == "consumer":
            try:
                validate_consumer_member(group, fetch.member_id, fetch.member_epoch, req.version, commit=False)
            except MemberError as e:
                results.append(FetchedGroup(gid, (), e.error))
                continue
        results.append(fetch_group(store, fetch, req.require_stable, gid in groups))
        waits.append(partition)
    return OffsetFetchResponse(tuple(results)), waits


def fetch_group(store: OffsetStore, fetch: ev.FetchGroup, latest: bool, known: bool) -> FetchedGroup:
    """require_stable reads the latest offsets (and waits for their writes); a plain fetch
    reads the committed ones, as Kafka's read operations do. ``known``: the group exists."""
    gid = fetch.group_id
    if latest:
        stored = store.of(gid) if known else _NO_OFFSETS
    else:
        stored = store.committed(gid) if known or store.in_flight(gid) else _NO_OFFSETS
    if fetch.topics is None:
        by_topic: dict[str, list[FetchedPartition]] = {}
        for (topic, p), entry in sorted(stored.items()):
            by_topic.setdefault(topic, []).append(_fetched(p, entry))
        topics = tuple(FetchedTopic(t, tuple(ps)) for t, ps in by_topic.items())
    else:
        topics = tuple(FetchedTopic(topic, tuple(_fetched(p, stored.get((topic, p))) for p in partitions))
                       for topic, partitions in fetch.topics)
    return FetchedGroup(fetch.group_id, topics)


def delete(ctx: Context, records: Records, store: OffsetStore, group: Any, req: ev.OffsetDelete,
           partition: int) -> OffsetDeleteResponse | None:
    """OffsetDelete. None: answered already (an error of the whole request)."""
    if group is None:
        ctx.respond(req.request_id, OffsetDeleteResponse(Error.GROUP_ID_NOT_FOUND))
        return None
    if group.state in (STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE) and group.protocol_type != "consumer":
        ctx.respond(req.request_id, OffsetDeleteResponse(Error.NON_EMPTY_GROUP))
        return None
    stored = store.of(req.group_id)
    topics, deleted = [], []
    for name, partitions in req.topics:
        if _is_subscribed(group, name):
            topics.append(TopicResult(name, tuple(
                PartitionResult(p, Error.GROUP_SUBSCRIBED_TO_TOPIC) for p in partitions)))
            continue
        for p in partitions:
            if (name, p) in stored:
                deleted.append((name, p))
                records.append(partition, OffsetTombstone(req.group_id, name, p))
        topics.append(TopicResult(name, tuple(PartitionResult(p, Error.NONE) for p in partitions)))
    then_undo(records, partition, store.set([(req.group_id, key, None) for key in deleted]))
    return OffsetDeleteResponse(Error.NONE, tuple(topics))


def expire(ctx: Context, records: Records, store: OffsetStore, config: CoordinatorConfig, groups: list,
           partition: int, delete_group: Callable[[str], None]) -> None:
    """The periodic offset/group expiration of the partition's ``groups``
    (GroupCoordinatorShard.cleanupGroupMetadata); ``delete_group`` deletes an Empty group whose
    offsets all expired, writing its tombstones."""
    retention_ms = config.offsets_retention_ms
    for group in groups:
        gid = group.group_id
        stored = store.of(gid)
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
                        gone = ctx.now >= entry.expire_timestamp_ms
                    else:
                        gone = ctx.now - base(entry) >= retention_ms
                    if gone:
                        expired.append((topic, p))
                        records.append(partition, OffsetTombstone(gid, topic, p))
                    else:
                        all_expired = False
                then_undo(records, partition, store.set([(gid, key, None) for key in expired]))
        if all_expired and group.state.value == "Empty":
            delete_group(gid)
    ctx.arm(ExpirationTimer(partition), config.offsets_retention_check_interval_ms)


def _java_length(text: str) -> int:
    """Java's String.length(): UTF-16 code units (one per character for ASCII)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def _validate_offset_commit(group, req: ev.OffsetCommit) -> None:
    """ClassicGroup.validateOffsetCommit (non-transactional); ConsumerGroup's for a consumer group."""
    if group.KIND == "consumer":
        validate_consumer_member(group, req.member_id, req.generation_id, req.version, commit=True)
        return
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


def validate_consumer_member(group, member_id: str | None, epoch: int, version: int, commit: bool) -> None:
    """``ConsumerGroup.validateOffsetCommit`` / ``validateOffsetFetch``: an admin (epoch -1)
    commits to an empty group and fetches from any; a member must be in the group at its
    current epoch, and commit with OffsetCommit v9 or later."""
    if commit and epoch < 0 and not group.members:
        return
    if not commit and member_id is None and epoch < 0:
        return
    member = group.members.get(member_id)
    if member is None:
        raise MemberError(Error.UNKNOWN_MEMBER_ID)
    if commit and version < 9:
        raise MemberError(Error.UNSUPPORTED_VERSION)
    if epoch != member.member_epoch:
        raise MemberError(Error.STALE_MEMBER_EPOCH)


def _is_subscribed(group, topic: str) -> bool:
    if group.KIND == "consumer":
        return topic in group.subscribed_names()
    if group.subscribed_topics is not None:
        return topic in group.subscribed_topics
    return group.protocol_type == "consumer"


def _expiration_base(group):
    """Which timestamp an offset's retention counts from, or None if it cannot expire (§5.3)."""
    if group.KIND == "consumer":  # ConsumerGroup.offsetExpirationCondition
        return lambda entry: entry.commit_timestamp_ms
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


