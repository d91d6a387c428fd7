"""Where the two protocols meet (Kafka's ``group.consumer.migration.policy``): classic members
inside a consumer group, and a group converted from one kind to the other.

* **Classic members in a consumer group.** A JoinGroup to a consumer group with members makes
  the joining client a member like the others, its subscription read from the JoinGroup
  metadata and its target assigned server-side; it learns its partitions from SyncGroup (as
  assignment bytes) and is told REBALANCE_IN_PROGRESS by Heartbeat whenever it must rejoin
  to move on (``classicGroup{Join,Sync,Heartbeat,Leave}ToConsumerGroup``). Join and sync
  timeouts fence it as the rebalance timeout fences a consumer-protocol member.
* **Online upgrade.** The first ConsumerGroupHeartbeat to a classic group with members turns it
  into a consumer group at the same epoch, its members keeping their partitions
  (``convertToConsumerGroup``), when the policy allows upgrades.
* **Online downgrade.** When the last consumer-protocol member leaves a group whose other
  members all speak the classic protocol, the group becomes a classic group and rebalances
  (``convertToClassicGroup``), when the policy allows downgrades.
* **Offline.** An empty group of either kind is replaced by a group of the other kind
  (tombstones, then the new group), whatever the policy.

Functions of what they read and write, as the rest of the core: the coordinator calls them.
"""

from __future__ import annotations

from typing import Mapping

import attrs

from .classic.draft import GroupDraft, assemble_group
from .classic.joining import metadata_record
from .classic.model import Group, Member
from .classic.states import STABLE as CLASSIC_STABLE
from .classic.subscription import (
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from .commands import (
    GroupTombstone,
    HeartbeatResponse,
    HeartbeatTimer,
    JoinGroupResponse,
    JoinTimer,
    LeaveGroupMemberResponse,
    LeaveGroupResponse,
    MemberJoinTimer,
    MemberSyncTimer,
    RebalanceTimer,
    SessionTimer,
    SyncGroupResponse,
    SyncTimer,
)
from .config import CoordinatorConfig
from .consumer.machine import ConsumerMachine, HeartbeatError, Image, bump_epoch, member_tombstones
from .consumer.model import ClassicMeta, ConsumerGroup, ConsumerMember, MemberState
from .consumer.records import (
    ConsumerAssignmentRecord,
    ConsumerGroupEpochRecord,
    ConsumerMemberRecord,
    ConsumerTargetEpochRecord,
    ConsumerTargetRecord,
    tombstones,
)
from .context import Context, Records
from .errors import Error
from .events import JoinGroup, LeaveGroup, SyncGroup

POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


def upgrade_enabled(config: CoordinatorConfig) -> bool:
    return config.group_consumer_migration_policy in ("upgrade", "bidirectional")


def downgrade_enabled(config: CoordinatorConfig) -> bool:
    return config.group_consumer_migration_policy in ("downgrade", "bidirectional")


def _ids(partitions, image: Image) -> dict[str, frozenset]:
    """(topic name, partition) pairs as an assignment by topic id; topics the image lacks go."""
    out: dict[str, set] = {}
    for topic, p in partitions:
        if topic in image:
            out.setdefault(image[topic][0], set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


def _names(assignment, image: Image) -> list[tuple[str, int]]:
    by_id = {tid: name for name, (tid, _) in image.items()}
    return [(by_id[t], p) for t, ps in sorted(assignment.items()) if t in by_id for p in sorted(ps)]


def _owned(partitions, image: Image) -> tuple:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(_ids(partitions, image).items()))


# ---------------------------------------------------------------- online upgrade


def can_upgrade(group: Group, config: CoordinatorConfig) -> bool:
    """``validateOnlineUpgrade``."""
    return upgrade_enabled(config) and group.protocol_type == "consumer" and \
        len(group.members) <= config.group_consumer_max_size


def upgrade(ctx: Context, records: Records, classic: Group, image: Image,
            session_ms: Mapping[str, int] | None = None) -> ConsumerGroup:
    """``convertToConsumerGroup``: the classic group's members, at its generation, keep their
    partitions; parked joins and syncs are answered REBALANCE_IN_PROGRESS."""
    gid, p, generation = classic.group_id, classic.partition, classic.generation_id
    members: dict[str, ConsumerMember] = {}
    try:
        for mid, m in classic.members.items():
            sub = decode_subscription(m.metadata(classic.protocol_name) if classic.protocol_name
                                      else m.protocols[0][1])
            assigned = _ids(decode_assignment(m.assignment).partitions, image) if m.assignment else {}
            members[mid] = ConsumerMember(
                member_id=mid, instance_id=m.group_instance_id, rack_id=sub.rack_id, client_id=m.client_id,
                client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
                subscribed_topic_names=tuple(sorted(set(sub.topics))), member_epoch=generation,
                previous_member_epoch=generation, state=MemberState.STABLE, assigned=assigned,
                classic=ClassicMeta(m.session_timeout_ms, m.protocols))
    except ConsumerProtocolError:
        raise HeartbeatError(Error.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {gid} to consumer group "
                                                       "because the embedded consumer protocol is malformed.") from None
    for member in classic.members.values():
        if member.awaiting_join is not None:
            ctx.respond(member.awaiting_join.request_id, JoinGroupResponse(
                error_code=Error.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        if member.awaiting_sync is not None:
            ctx.respond(member.awaiting_sync.request_id, SyncGroupResponse(error_code=Error.REBALANCE_IN_PROGRESS))
    for mid in classic.members:
        ctx.cancel(HeartbeatTimer(p, gid, mid))
    for key in (JoinTimer(p, gid), SyncTimer(p, gid)):
        ctx.cancel(key)
    group = ConsumerGroup(group_id=gid, partition=p, group_epoch=generation, assignment_epoch=generation,
                          members=members, target={mid: m.assigned for mid, m in members.items()})
    records.append(p, GroupTombstone(gid))
    for mid, cm in members.items():
        records.append(p, ConsumerMemberRecord(gid, mid, cm))
    records.append(p, ConsumerGroupEpochRecord(gid, generation))
    for mid, cm in members.items():
        records.append(p, ConsumerTargetRecord(gid, mid, cm.assigned))
    records.append(p, ConsumerTargetEpochRecord(gid, generation))
    for mid, cm in members.items():
        records.append(p, ConsumerAssignmentRecord(gid, mid, cm))
    for mid, m in classic.members.items():
        ctx.arm(SessionTimer(p, gid, mid), m.session_timeout_ms)
    return group


# ---------------------------------------------------------------- online downgrade


def can_downgrade(group: ConsumerGroup, leaving: str, config: CoordinatorConfig) -> bool:
    """``validateOnlineDowngradeWithFencedMember``."""
    others = [m for mid, m in group.members.items() if mid != leaving]
    return bool(others) and all(m.classic is not None for m in others) and downgrade_enabled(config) and \
        len(others) <= config.group_max_size


def downgrade(ctx: Context, records: Records, group: ConsumerGroup, leaving: str, image: Image) -> Group:
    """``convertToClassicGroup``: the other members, all classic, form a Stable classic group at
    the group epoch with their targets as assignments; the caller then rebalances it."""
    gid, p = group.group_id, group.partition
    for record in tombstones(group):
        records.append(p, record)
    for mid in group.members:
        ctx.cancel(SessionTimer(p, gid, mid))
        ctx.cancel(RebalanceTimer(p, gid, mid))
        ctx.cancel(MemberJoinTimer(p, gid, mid))
        ctx.cancel(MemberSyncTimer(p, gid, mid))
    members = []
    for mid, m in group.members.items():
        if mid == leaving:
            continue
        assert m.classic is not None
        members.append(Member(member_id=mid, group_instance_id=m.instance_id, client_id=m.client_id,
                              client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
                              session_timeout_ms=m.classic.session_timeout_ms, protocol_type="consumer",
                              protocols=m.classic.protocols))
    # ClassicGroup.add: the first member added leads
    classic = assemble_group(Group(group_id=gid, partition=p, state=CLASSIC_STABLE, generation_id=group.group_epoch,
                                   protocol_type="consumer", state_timestamp_ms=ctx.now,
                                   leader_id=members[0].member_id), members)
    draft = GroupDraft(classic)
    draft.protocol_name = draft.select_protocol()
    for mid, member in list(draft.members.items()):
        assignment = encode_assignment(_names(group.target.get(mid, {}), image), _version(member.protocols))
        draft.members[mid] = attrs.evolve(member, assignment=assignment)
    classic = assemble_group(draft.freeze())
    records.append(p, metadata_record(classic, ctx.now, with_members=True))
    for mid, member in classic.members.items():
        ctx.arm(HeartbeatTimer(p, gid, mid), member.session_timeout_ms)
    return classic


def _version(protocols) -> int:
    """The assignment version to write: the member's subscription version, as Kafka's
    ``ConsumerProtocol.deserializeVersion`` of its first protocol."""
    data = protocols[0][1] if protocols else b""
    if len(data) < 2:
        return 0
    return min(3, max(0, int.from_bytes(data[:2], "big", signed=True)))


# ---------------------------------------------------------------- classic members in a consumer group


def _refused(error: Error) -> HeartbeatError:
    """A classic request refused whole: classic answers carry no message, only the code."""
    return HeartbeatError(error, error.name)


def _member_of(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
    """``validateConsumerGroupMember``."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise _refused(Error.UNKNOWN_MEMBER_ID)
        return member
    member = group.static_member(instance_id)
    if member is None:
        raise _refused(Error.UNKNOWN_MEMBER_ID)
    if member.member_id != member_id:
        raise _refused(Error.FENCED_INSTANCE_ID)
    return member


def _classic_only(member: ConsumerMember) -> ClassicMeta:
    if member.classic is None:
        raise _refused(Error.UNKNOWN_MEMBER_ID)
    return member.classic


def _must_rejoin(ctx: Context, group: ConsumerGroup, member: ConsumerMember) -> bool:
    """The member must rejoin to move on: the group epoch is ahead of it, it has partitions to
    revoke, or partitions it waited for are free now (``classicGroupHeartbeatToConsumerGroup``)."""
    if member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS:
        return True
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        epochs = group.partition_epochs()
        target = group.target.get(member.member_id, {})
        waiting = any(epochs.get((t, q), -1) != -1 for t, ps in target.items() for q in ps
                      if q not in member.assigned.get(t, frozenset()))
        return not waiting
    return False


def join(ctx: Context, records: Records, machine: ConsumerMachine, group: ConsumerGroup, req: JoinGroup,
         image: Image, config: CoordinatorConfig) -> tuple[ConsumerGroup | Group, JoinGroupResponse]:
    """``classicGroupJoinToConsumerGroup``."""
    unknown = req.member_id == ""
    member_id = req.new_member_uuid if unknown else req.member_id
    p, gid = group.partition, group.group_id
    if len(group.members) >= config.group_consumer_max_size and (unknown or member_id not in group.members):
        raise _refused(Error.GROUP_MAX_SIZE_REACHED)
    if not group.supports_classic_protocols(req.protocol_type, {name for name, _ in req.protocols}):
        raise _refused(Error.INCONSISTENT_GROUP_PROTOCOL)
    if req.version >= 4 and req.group_instance_id is None and unknown:
        return group, JoinGroupResponse(error_code=Error.MEMBER_ID_REQUIRED, member_id=member_id)
    replaced = None
    if req.group_instance_id is None:
        member = group.members.get(member_id) or ConsumerMember(member_id=member_id)
    else:
        static = group.static_member(req.group_instance_id)
        if unknown:
            if static is None:
                member = ConsumerMember(member_id=member_id)
            else:  # a classic static member takes the instance id's place, released or not
                member = attrs.evolve(static, member_id=member_id, member_epoch=0, previous_member_epoch=0)
                replaced = static
                group = machine.replace_static(records, p, group, static, member)
        else:
            if static is None:
                raise _refused(Error.UNKNOWN_MEMBER_ID)
            if static.member_id != member_id:
                raise _refused(Error.FENCED_INSTANCE_ID)
            member = static
    try:
        sub = decode_subscription(req.protocols[0][1])
    except (ConsumerProtocolError, IndexError):
        raise _refused(Error.INCONSISTENT_GROUP_PROTOCOL) from None
    updated = attrs.evolve(
        member, instance_id=req.group_instance_id if req.group_instance_id is not None else member.instance_id,
        rack_id=sub.rack_id if sub.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
        subscribed_topic_names=tuple(sorted(set(sub.topics))), client_id=req.client_id, client_host=req.client_host,
        classic=ClassicMeta(req.session_timeout_ms, req.protocols))
    group, updated = machine.update_member(ctx, records, group, member, updated, _owned(sub.owned_partitions, image),
                                           image, replaced)
    if replaced is not None and can_downgrade_replaced(group, member_id, config):
        classic = downgrade(ctx, records, group, "", image)
        return classic, JoinGroupResponse(error_code=Error.NONE, member_id=member_id, generation_id=classic.generation_id,
                                          protocol_type="consumer", protocol_name=classic.protocol_name)
    ctx.cancel(MemberJoinTimer(p, gid, member_id))
    if member_id in group.rejoin_deadlines:
        group = attrs.evolve(group, rejoin_deadlines={k: v for k, v in group.rejoin_deadlines.items()
                                                      if k != member_id})
    ctx.arm(SessionTimer(p, gid, member_id), req.session_timeout_ms)
    ctx.arm(MemberSyncTimer(p, gid, member_id), req.rebalance_timeout_ms)
    return group, JoinGroupResponse(error_code=Error.NONE, member_id=member_id, generation_id=updated.member_epoch,
                                    protocol_type="consumer", protocol_name=req.protocols[0][0])


def can_downgrade_replaced(group: ConsumerGroup, joined: str, config: CoordinatorConfig) -> bool:
    """``validateOnlineDowngradeWithReplacedMember``: the joining static member, classic, took
    the place of the last consumer-protocol one."""
    return all(m.classic is not None for m in group.members.values()) and downgrade_enabled(config) and \
        len(group.members) <= config.group_max_size


def sync(ctx: Context, group: ConsumerGroup, req: SyncGroup, image: Image
         ) -> tuple[ConsumerGroup, SyncGroupResponse]:
    """``classicGroupSyncToConsumerGroup``: the member's current partitions, as assignment bytes."""
    member = _member_of(group, req.member_id, req.group_instance_id)
    classic = _classic_only(member)
    _check_generation(member, req.generation_id)
    _check_protocol(member, classic, req.protocol_type, req.protocol_name)
    if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
        # ``throwIfRebalanceInProgress``
        return _rejoin_timer(ctx, group, member), SyncGroupResponse(error_code=Error.REBALANCE_IN_PROGRESS)
    p, gid = group.partition, group.group_id
    ctx.cancel(MemberSyncTimer(p, gid, member.member_id))
    ctx.arm(SessionTimer(p, gid, member.member_id), classic.session_timeout_ms)
    return group, SyncGroupResponse(error_code=Error.NONE, protocol_type=req.protocol_type, protocol_name=req.protocol_name,
                             assignment=encode_assignment(_names(member.assigned, image), _version(classic.protocols)))


def heartbeat(ctx: Context, group: ConsumerGroup, member_id: str, instance_id: str | None,
              generation_id: int) -> tuple[ConsumerGroup, HeartbeatResponse]:
    """``classicGroupHeartbeatToConsumerGroup``."""
    member = _member_of(group, member_id, instance_id)
    classic = _classic_only(member)
    _check_generation(member, generation_id)
    p, gid = group.partition, group.group_id
    ctx.arm(SessionTimer(p, gid, member.member_id), classic.session_timeout_ms)
    if _must_rejoin(ctx, group, member):
        return _rejoin_timer(ctx, group, member), HeartbeatResponse(Error.REBALANCE_IN_PROGRESS)
    return group, HeartbeatResponse(Error.NONE)


def leave(ctx: Context, records: Records, machine: ConsumerMachine, group: ConsumerGroup, req: LeaveGroup,
          image: Image) -> tuple[ConsumerGroup, LeaveGroupResponse]:
    """``classicGroupLeaveToConsumerGroup``: each member named leaves (fenced); one bump for all."""
    results, p, gid = [], group.partition, group.group_id
    gone = False
    for identity in req.members:
        mid, instance = identity.member_id, identity.group_instance_id
        try:
            if instance is None:
                member = group.members.get(mid)
                if member is None:
                    raise _refused(Error.UNKNOWN_MEMBER_ID)
            else:
                member = group.static_member(instance)
                if member is None:
                    raise _refused(Error.UNKNOWN_MEMBER_ID)
                if mid != "" and member.member_id != mid:
                    raise _refused(Error.FENCED_INSTANCE_ID)
            _classic_only(member)
        except HeartbeatError as e:
            results.append(LeaveGroupMemberResponse(mid, instance, e.error))
            continue
        mid = member.member_id
        member_tombstones(records, p, gid, mid)
        for key in (SessionTimer, RebalanceTimer, MemberJoinTimer, MemberSyncTimer):
            ctx.cancel(key(p, gid, mid))
        group = attrs.evolve(group, members={k: v for k, v in group.members.items() if k != mid},
                             target={k: v for k, v in group.target.items() if k != mid},
                             rejoin_deadlines={k: v for k, v in group.rejoin_deadlines.items() if k != mid})
        gone = True
        results.append(LeaveGroupMemberResponse(mid, instance, Error.NONE))
    if gone:
        group, _ = machine.refresh_subscription(records, group, image)
        group = bump_epoch(records, group)
    return group, LeaveGroupResponse(Error.NONE, tuple(results))


def _check_generation(member: ConsumerMember, generation_id: int) -> None:
    if member.member_epoch != generation_id:
        raise _refused(Error.ILLEGAL_GENERATION)


def _check_protocol(member: ConsumerMember, classic: ClassicMeta, protocol_type: str | None,
                    protocol_name: str | None) -> None:
    """``throwIfClassicProtocolUnmatched``."""
    if protocol_type is not None and protocol_type != "consumer":
        raise _refused(Error.INCONSISTENT_GROUP_PROTOCOL)
    if protocol_name is not None and protocol_name != classic.protocol_name:
        raise _refused(Error.INCONSISTENT_GROUP_PROTOCOL)


def _rejoin_timer(ctx: Context, group: ConsumerGroup, member: ConsumerMember) -> ConsumerGroup:
    """``scheduleConsumerGroupJoinTimeoutIfAbsent``: the member must rejoin within its rebalance
    timeout, counted from the first time it was told (a deadline already set is kept)."""
    if member.member_id in group.rejoin_deadlines:
        return group
    ctx.arm(MemberJoinTimer(group.partition, group.group_id, member.member_id), member.rebalance_timeout_ms)
    return attrs.evolve(group, rejoin_deadlines={**group.rejoin_deadlines,
                                                 member.member_id: ctx.now + member.rebalance_timeout_ms})


def error_answer(req, error: Error):
    """The answer to a classic request to a consumer group that failed whole."""
    if isinstance(req, JoinGroup):
        return JoinGroupResponse(error_code=error, member_id=req.member_id)
    if isinstance(req, SyncGroup):
        return SyncGroupResponse(error_code=error)
    if isinstance(req, LeaveGroup):
        return LeaveGroupResponse(error)
    return HeartbeatResponse(error)
