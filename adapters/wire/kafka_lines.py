"""The groups' changes told as Kafka 4.x's broker tells them (``serve --kafka-log FILE``).

``KafkaGroupLog`` looks at each event's groups before and after the core handled it (the
core is pure and says nothing of why) and writes the INFO statements Kafka's Java group
coordinator logs for the same step, with Kafka's wording, order and reasons, in Kafka's
log4j layout (config/log4j2.yaml at 4.0, ``[%d] %p %m (%c)%n``)::

    [2026-11-29 04:00:00,123] INFO [GroupCoordinator id=0 topic=__consumer_offsets partition=12] \
Preparing to rebalance group g in state PreparingRebalance with old generation 1 (reason: ...). \
(org.apache.kafka.coordinator.group.GroupMetadataManager)

so that the file reads as a Kafka broker's ``server.log`` (``groupcoord verify --kafka-log``).
The prefix is the LogContext of CoordinatorRuntime.CoordinatorContext: ``[%s topic=%s
partition=%d] `` around GroupCoordinatorService's ``GroupCoordinator id=%d``.

The format strings are Kafka's (apache/kafka, trunk at 4.0.0-SNAPSHOT; GMM below is
group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java);
each statement names the method it comes from. ``reasons`` (what ``after`` returns) are the
reasons Kafka gives a rebalance, for the structured ``group`` line.

Not written, because the adapter cannot know them or they are not about a classic group's
state: CoordinatorRuntime's load and unload lines (partition epochs, bytes read), DEBUG
lines, the WARN lines of failed writes (they print the storage exception's message), and
ClassicGroup's two "Group leader [...] failed to join before the rebalance timeout" lines
(a static leader that did not rejoin; rare, and the core does not say which case it took).
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from groupcoord.core import events as ev
from groupcoord.core.classic.states import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE
from groupcoord.core.commands import ExpirationTimer, HeartbeatTimer, JoinTimer, SyncTimer, Write
from groupcoord.core.errors import translate_append_error

GMM = "org.apache.kafka.coordinator.group.GroupMetadataManager"
SHARD = "org.apache.kafka.coordinator.group.GroupCoordinatorShard"
OFFSETS_TOPIC = "__consumer_offsets"

_CAN_REBALANCE = (EMPTY, STABLE, COMPLETING_REBALANCE)  # ClassicGroup.canRebalance
_MEMBER_TIMERS = (HeartbeatTimer, JoinTimer, SyncTimer)
_OBSERVED = frozenset({ev.JoinGroup, ev.SyncGroup, ev.LeaveGroup, ev.TimerFired, ev.WriteCompleted, ev.WriteFailed,
                       ev.DeleteGroups, ev.UnloadPartition, ev.LoadPartition})


def _classic(group: Any) -> bool:
    """None (no group) or a classic group: the groups these lines tell of."""
    return group is None or hasattr(group, "generation_id")


def log4j_time(seconds: float) -> str:
    """log4j2's default ``%d``: ``yyyy-MM-dd HH:mm:ss,SSS`` in the local time zone."""
    whole = int(seconds)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(whole)) + f",{int((seconds - whole) * 1000):03d}"


def java_hash_order(ids, initial_size: int | None = None) -> list[str]:
    """``ids`` in the order a java.util.HashMap/HashSet of String iterates them: by bucket
    (String.hashCode, spread as HashMap.hash) in a table sized for them, ties in insertion
    order. ``initial_size``: the collection a HashSet was copied from (``new HashSet<>(c)``);
    None: filled one by one from the default capacity (Collectors.toMap)."""
    ids = list(ids)
    n = len(ids)
    if initial_size is None:
        capacity = 16
        while n > capacity * 0.75:
            capacity *= 2
    else:
        wanted = max(int(initial_size / 0.75) + 1, 16)
        capacity = 1 << (wanted - 1).bit_length()

    def bucket(s: str) -> int:
        h = 0
        data = s.encode("utf-16-be")
        for i in range(0, len(data), 2):
            h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return [s for _, _, s in sorted((bucket(s), i, s) for i, s in enumerate(ids))]


def java_collection(ids) -> str:
    """AbstractCollection.toString: ``[a, b]``."""
    return "[" + ", ".join(ids) + "]"


class _Seen:
    """What an event's groups were before it (frozen values: holding them costs nothing)."""

    __slots__ = ("groups", "partition_active", "offsets", "started")

    def __init__(self, groups: dict, partition_active: bool = False, offsets: dict | None = None) -> None:
        self.groups = groups
        self.partition_active = partition_active
        self.offsets = offsets or {}
        self.started = time.monotonic()


class KafkaGroupLog:
    """``before(event, coordinator)`` ahead of the core, ``after(event, coordinator, seen,
    commands)`` once it is done: the Kafka lines of that step go to ``stream`` (None: none
    are written; ``after`` still returns the reasons)."""

    def __init__(self, stream: TextIO | None, node_id: int = 0) -> None:
        self.stream = stream
        self.node_id = node_id
        # the leader's assignment writes in flight: write id -> (origin, member, groups)
        self._writes: dict[int, tuple[str, str | None, frozenset]] = {}
        self._event_writes: list = []
        self._origin: tuple[str, str | None] = ("", None)

    def reset(self) -> None:
        """A new coordinator instance: its write ids start again."""
        self._writes = {}

    def close(self) -> None:
        if self.stream is not None:
            try:
                self.stream.close()
            except OSError:
                pass
            self.stream = None

    # ------------------------------------------------------------------ observing the core

    def before(self, event: Any, coordinator: Any) -> _Seen | None:
        """None for the events that change no group (heartbeats, commits, reads)."""
        kind = type(event)
        if kind not in _OBSERVED:  # the hot path: heartbeats and commits
            return None
        if kind is ev.JoinGroup or kind is ev.SyncGroup or kind is ev.LeaveGroup:
            gids: Any = (event.group_id,)
            self._origin = (kind.__name__, getattr(event, "member_id", None))
        elif kind is ev.TimerFired:
            key = event.key
            if type(key) in _MEMBER_TIMERS:
                gids = (key.group_id,)
            elif type(key) is ExpirationTimer:  # one line for the partition, of the records written
                gids = ()
            else:
                return None
            self._origin = ("TimerFired", None)
        elif kind is ev.WriteCompleted or kind is ev.WriteFailed:
            origin = self._writes.pop(event.write_id, None)
            if origin is None or kind is ev.WriteCompleted:  # (Stable: Kafka logs nothing)
                return None
            gids = origin[2]
            self._origin = origin[:2]
        elif kind is ev.DeleteGroups:
            gids = tuple(g for g in event.groups_names if g is not None)
            self._origin = ("DeleteGroups", None)
            gids = tuple(g for g in gids if _classic(coordinator.group(g)))
            return _Seen({g: coordinator.group(g) for g in gids},
                         offsets={g: len(coordinator.offsets(g)) for g in gids})
        elif kind is ev.UnloadPartition:
            gids = [g for g, group in coordinator.groups().items() if group.partition == event.partition]
            self._origin = ("UnloadPartition", None)
        elif kind is ev.LoadPartition:
            self._origin = ("LoadPartition", None)
            return _Seen({}, partition_active=coordinator.owned_partitions().get(event.partition) == "active")
        else:
            return None
        # Kafka's lines here are the classic groups' (a KIP-848 consumer group has no generation)
        return _Seen({g: group for g in gids if _classic(group := coordinator.group(g))})

    def after(self, event: Any, coordinator: Any, seen: _Seen, commands: list) -> dict[str, str]:
        """Write the step's lines (``commands``: what the core answered to ``event``); return
        group id -> the reason Kafka gives its rebalance."""
        self._event_writes = [c for c in commands if type(c) is Write]
        if type(event) is ev.SyncGroup:  # a failure of the leader's assignment write is a rebalance's reason
            for write in self._event_writes:
                self._writes[write.write_id] = (self._origin[0], self._origin[1], frozenset((event.group_id,)))
        lines: list[tuple[int, str, str]] = []  # (partition, logger, message)
        reasons: dict[str, str] = {}
        kind = type(event)
        try:
            if kind is ev.LoadPartition:
                self._loaded(event, coordinator, seen, lines, reasons)
            elif kind is ev.DeleteGroups:
                self._deleted(event, coordinator, seen, lines)
            elif kind is ev.UnloadPartition:
                for gid, b in seen.groups.items():
                    if b is not None:
                        # GMM.onUnloaded, before the group goes to Dead
                        lines.append((b.partition, GMM, f"[GroupId={gid}] Unloading group metadata for generation "
                                                        f"{b.generation_id}."))
            elif kind is ev.TimerFired and type(event.key) is ExpirationTimer:
                records = sum(len(w.records) for w in self._event_writes)
                took = int((time.monotonic() - seen.started) * 1000)
                # GroupCoordinatorShard.cleanupGroupMetadata, once a cycle
                lines.append((event.key.partition, SHARD, f"Generated {records} tombstone records while cleaning "
                                                          f"up group metadata in {took} milliseconds."))
            else:
                for gid, b in seen.groups.items():
                    a = coordinator.group(gid)
                    if a is None and b is None:
                        continue
                    self._group_step(event, gid, b, a, lines, reasons)
        finally:
            self._event_writes = []
        if lines and self.stream is not None:
            self._write(lines)
        return reasons

    # ------------------------------------------------------------------ one group's step

    def _group_step(self, event: Any, gid: str, b: Any, a: Any, lines: list, reasons: dict) -> None:
        partition = (a if a is not None else b).partition

        def say(message: str) -> None:
            lines.append((partition, GMM, message))

        state_b = b.state if b is not None else EMPTY  # a JoinGroup creates the group Empty
        gen_b = b.generation_id if b is not None else 0
        members_b = b.members if b is not None else {}
        gone_by_cause: set[str] = set()  # members the event itself removed (not the join's completion)
        reason: str | None = None
        kind = type(event)

        if kind is ev.JoinGroup:
            reason = self._join(event, gid, b, a, state_b, say, gone_by_cause)
        elif kind is ev.LeaveGroup:
            reason = self._leave(event, gid, b, a, state_b, say, gone_by_cause)
        elif kind is ev.SyncGroup:
            if a is not None and b is not None and b.state is COMPLETING_REBALANCE \
                    and any(gid in {getattr(r, "group_id", None) for r in w.records} for w in self._event_writes):
                # GMM.classicGroupSyncToClassicGroup: the leader's SyncGroup, as its record is made
                say(f"Assignment received from leader {event.member_id} for group {gid} for generation "
                    f"{b.generation_id}. The group has {len(b.members)} members, {len(b.static_members)} of which "
                    f"are static.")
        elif kind is ev.TimerFired:
            key = event.key
            if type(key) is HeartbeatTimer and b is not None:
                mid = key.member_id
                if mid in b.pending_members and (a is None or mid not in a.pending_members):
                    # GMM.expireClassicGroupMemberHeartbeat
                    say(f"Pending member {mid} in group {gid} has been removed after session timeout expiration.")
                elif mid in b.members and (a is None or mid not in a.members):
                    say(f"Member {mid} in group {gid} has failed, removing it from the group.")
                    gone_by_cause.add(mid)
                    reason = f"removing member {mid} on heartbeat expiration."
            elif type(key) is SyncTimer and b is not None and b.pending_sync:
                # GMM.expirePendingSync: the members are removed (DEBUG line), then the rebalance
                pending = [m for m in b.members if m in b.pending_sync]
                gone_by_cause.update(pending)
                reason = (f"Removing {java_collection(java_hash_order(pending, len(pending)))} on pending sync "
                          f"request expiration")
        elif kind is ev.WriteFailed:
            origin, member = self._origin
            if origin == "SyncGroup" and b is not None and b.state is COMPLETING_REBALANCE:
                # GMM.classicGroupSyncToClassicGroup, the append future failing (Kafka's missing space kept)
                reason = (f"Error {translate_append_error(event.error).name} when storing group assignment"
                          f"during SyncGroup (member: {member}).")

        if a is None:
            return
        if state_b in _CAN_REBALANCE and (a.state is PREPARING_REBALANCE or a.generation_id > gen_b) \
                and reason is not None:
            # GMM.prepareRebalance: logged after transitionTo(PREPARING_REBALANCE)
            say(f"Preparing to rebalance group {gid} in state {PREPARING_REBALANCE.value} with old generation "
                f"{gen_b} (reason: {reason}).")
            reasons[gid] = reason
        if a.generation_id > gen_b:
            self._completed(gid, members_b, a, gone_by_cause, say)

    def _join(self, req: ev.JoinGroup, gid: str, b: Any, a: Any, state_b: Any, say, gone: set) -> str | None:
        if a is None:
            return None
        client_reason = req.reason or "not provided"  # JoinGroupRequest.joinReason
        pending_b = b.pending_members if b is not None else frozenset()
        members_b = b.members if b is not None else {}
        mid, iid = req.member_id, req.group_instance_id
        state = state_b.value
        if mid == "":
            if iid is not None:  # GMM.classicGroupJoinNewStaticMember
                old = b.static_members.get(iid) if b is not None else None
                new = a.static_members.get(iid)
                if old is not None and new is not None and new != old:
                    say(f"Static member with groupInstanceId={iid} and unknown member id joins group {gid} in "
                        f"{state} state. Replacing previously mapped member {old} with this groupInstanceId.")
                    gone.add(old)
                    # GMM.updateStaticMemberThenRebalanceOrCompleteJoin
                    if state_b is STABLE:
                        if a.state is STABLE and a.generation_id == b.generation_id:
                            say("Static member which joins during Stable stage and doesn't affect the selected "
                                "protocol will not trigger a rebalance.")
                            return None
                        return (f"Group's selectedProtocol will change because static member {new} with instance "
                                f"id {iid} joined with change of protocol; client reason: {client_reason}")
                    if state_b is COMPLETING_REBALANCE:
                        return f"Updating metadata for static member {new} with instance id {iid}; client reason: " \
                               f"{client_reason}"
                    return None
                if old is None and new is not None and new not in members_b:
                    say(f"Static member with groupInstanceId={iid} and unknown member id joins group {gid} in "
                        f"{state} state. Created a new member id {new} for this member and added to the group.")
                    return f"Adding new member {new} with group instance id {iid}; client reason: {client_reason}"
                return None
            # GMM.classicGroupJoinNewDynamicMember
            new_pending = [m for m in a.pending_members if m not in pending_b]
            if new_pending:
                say(f"Dynamic member with unknown member id joins group {gid} in {state} state. Created a new "
                    f"member id {new_pending[0]} and requesting the member to rejoin with this id.")
                return None
            added = [m for m in a.members if m not in members_b]
            if added:
                say(f"Dynamic member with unknown member id joins group {gid} in state {state}. Created a new "
                    f"member id {added[0]} and added the member to the group.")
                # GMM.addMemberThenRebalanceOrCompleteJoin
                return f"Adding new member {added[0]} with group instance id null; client reason: {client_reason}"
            return None
        # GMM.classicGroupJoinExistingMember
        if mid in pending_b and mid in a.members:
            say(f"Pending dynamic member with id {mid} joins group {gid} in {state} state. Adding to the group now.")
            return f"Adding new member {mid} with group instance id {_java(iid)}; client reason: {client_reason}"
        member = members_b.get(mid)
        if member is None:
            return None
        if state_b is PREPARING_REBALANCE:  # never logged: a group in PreparingRebalance cannot rebalance
            return f"Member {mid} is joining group during {state}; client reason: {client_reason}"
        if state_b is STABLE and mid == b.leader_id:
            return f"Leader {mid} re-joining group during {state}; client reason: {client_reason}"
        if member.protocols != req.protocols:
            return f"Updating metadata for member {mid} during {state}; client reason: {client_reason}"
        return None

    def _leave(self, req: ev.LeaveGroup, gid: str, b: Any, a: Any, state_b: Any, say, gone: set) -> str | None:
        """GMM.classicGroupLeaveToClassicGroup: one line per member that leaves, in the
        request's order, then the rebalance's reason."""
        if b is None:
            return None
        members, pending, static = set(b.members), set(b.pending_members), dict(b.static_members)
        valid: list[str] = []
        for identity in req.members:
            mid, iid = identity.member_id, identity.group_instance_id
            client_reason = identity.reason if identity.reason is not None else "not provided"
            if mid == "":
                target = static.get(iid) if iid is not None else None
                if target is None or target not in members:
                    continue
                # GMM.removeCurrentMemberFromClassicGroup; the response (and the reason) lists the request's id
                say(f"[Group {gid}] Member {target} has left group through explicit `LeaveGroup` request; "
                    f"client reason: {client_reason}")
                members.discard(target)
                static.pop(iid, None)
                gone.add(target)
                valid.append(mid)
            elif mid in pending:
                say(f"[Group {gid}] Pending member {mid} has left group through explicit `LeaveGroup` request; "
                    f"client reason: {client_reason}")
                pending.discard(mid)
                valid.append(mid)
            elif mid in members and (iid is None or static.get(iid) == mid):  # ClassicGroup.validateMember
                say(f"[Group {gid}] Member {mid} has left group through explicit `LeaveGroup` request; "
                    f"client reason: {client_reason}")
                members.discard(mid)
                if iid is not None:
                    static.pop(iid, None)
                gone.add(mid)
                valid.append(mid)
        if valid and state_b in (STABLE, COMPLETING_REBALANCE):
            return f"explicit `LeaveGroup` request for ({', '.join(valid)}) members."
        return None

    @staticmethod
    def _completed(gid: str, members_b: Any, a: Any, gone: set, say) -> None:
        """GMM.completeClassicGroupJoin: the dynamic members that did not rejoin are removed,
        then the next generation."""
        dropped = [m for m in members_b if m not in a.members and m not in gone]
        if dropped:
            # a HashMap's key set (Collectors.toMap); ties in a bucket in the group's member order
            say(f"Group {gid} removed dynamic members who haven't joined: {java_collection(java_hash_order(dropped))}")
        if a.state is EMPTY:
            say(f"Group {gid} with generation {a.generation_id} is now empty.")
        else:
            say(f"Stabilized group {gid} generation {a.generation_id} with {len(a.members)} members.")

    # ------------------------------------------------------------------ partitions and admin

    def _loaded(self, event: ev.LoadPartition, coordinator: Any, seen: _Seen, lines: list, reasons: dict) -> None:
        if event.loading or seen.partition_active:
            return
        for gid in dict.fromkeys(getattr(r, "group_id", None) for r in event.records):  # the groups read, in order
            group = coordinator.group(gid) if gid is not None else None
            if group is None or group.partition != event.partition:
                continue
            # GMM.onLoaded (Kafka iterates its groups in hash order; here in the order they were read)
            lines.append((event.partition, GMM, f"Loaded classic group {gid} with {len(group.members)} members."))
            if group.state is PREPARING_REBALANCE:
                reason = (f"Freshly-loaded group {gid} (size {len(group.members)}) is over capacity "
                          f"{coordinator.config.group_max_size}. Rebalancing in order to give a chance for "
                          f"consumers to commit offsets")
                lines.append((event.partition, GMM, f"Preparing to rebalance group {gid} in state "
                                                    f"{PREPARING_REBALANCE.value} with old generation "
                                                    f"{group.generation_id} (reason: {reason})."))
                reasons[gid] = reason

    def _deleted(self, event: ev.DeleteGroups, coordinator: Any, seen: _Seen, lines: list) -> None:
        """GroupCoordinatorShard.deleteGroups: one line for each partition's share of the
        request (GroupCoordinatorService splits it by partition), also when none was deleted."""
        owned = coordinator.owned_partitions()
        by_partition: dict[int, tuple[list, list]] = {}
        for gid in seen.groups:
            partition = coordinator.partition_of(gid)
            if owned.get(partition) != "active":
                continue
            deleted, offsets = by_partition.setdefault(partition, ([], [0]))
            if seen.groups[gid] is not None and coordinator.group(gid) is None and gid not in deleted:
                deleted.append(gid)
                offsets[0] += seen.offsets.get(gid, 0)
        for partition, (deleted, offsets) in by_partition.items():
            lines.append((partition, SHARD, f"The following groups were deleted: {', '.join(deleted)}. A total of "
                                            f"{offsets[0]} offsets were removed."))

    # ------------------------------------------------------------------ output

    def _write(self, lines: list) -> None:
        stamp = log4j_time(time.time())
        text = "".join(f"[{stamp}] INFO [GroupCoordinator id={self.node_id} topic={OFFSETS_TOPIC} "
                       f"partition={partition}] {message} ({logger})\n" for partition, logger, message in lines)
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass


def _java(value: str | None) -> str:
    """A Java string concatenation's view of a nullable string."""
    return "null" if value is None else value
