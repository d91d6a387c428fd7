"""The consumer group machine (KIP-848): ConsumerGroupHeartbeat, its timers and
ConsumerGroupDescribe, as Kafka's ``GroupMetadataManager`` runs them for a ``ConsumerGroup``.

Theory of operation
-------------------
A consumer group is three epochs and what they bound (model.py):

* the **group epoch** counts changes of who subscribes to what: a member joining, leaving or
  changing its subscription, or a subscribed topic created, deleted or grown, bumps it;
* the **target assignment epoch** is the group epoch the server-side assignor last ran at; the
  target assignment (member -> partitions) is that run's result, sticky to the one before;
* each **member epoch** is the target epoch the member has reached. A member moves towards
  its target one heartbeat at a time (reconcile.py): it first gives up what it must revoke
  (it stays in its epoch, UNREVOKED_PARTITIONS, until its heartbeat no longer reports them),
  then takes the new epoch and the partitions that are free, waiting (UNRELEASED_PARTITIONS)
  for the rest until their previous owners let them go. So no partition has two owners.

The group's state is derived, never set: Empty (no members), Assigning (group epoch ahead of
the target), Reconciling (a member not yet at the target), Stable.

Every heartbeat is one step, in Kafka's order: validate the member (its epoch, instance id),
update it (a subscription change bumps the group epoch), recompute the target when the group
epoch is ahead of it, reconcile the member, re-arm its session timer, answer. A member that
leaves (epoch -1), fails its session, or does not revoke within its rebalance timeout is
fenced: removed, the group epoch bumped; the others learn of it at their next heartbeat. A
static member leaving with epoch -2 keeps its place (and partitions) for its session timeout,
and its instance id rejoins under a new member id.

What changes is written as Kafka writes it (records.py), and the answer waits for the write.
The machine is pure: the time, the topics image and the new member ids are inputs.

Where the machine departs from Kafka (spec/consumer.md, "Deviations"): regular expressions
are resolved on the heartbeat that names them, and a change of the topics image is seen at
the next heartbeat, where Kafka resolves off the request path and refreshes on an interval.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import attrs

from ..commands import (
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    MemberJoinTimer,
    MemberSyncTimer,
    RebalanceTimer,
    SessionTimer,
)
from ..config import CoordinatorConfig
from ..context import Context, Records
from ..errors import Error
from . import assignors
from .model import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from .reconcile import Fenced, reconcile
from .records import (
    ConsumerAssignmentRecord,
    ConsumerGroupEpochRecord,
    ConsumerMemberRecord,
    ConsumerRegexRecord,
    ConsumerSubscriptionRecord,
    ConsumerTargetEpochRecord,
    ConsumerTargetRecord,
)

# topic name -> (topic id, partitions): the coordinator's metadata image
Image = Mapping[str, tuple[str, int]]


class HeartbeatError(Exception):
    """The heartbeat is answered with ``error`` (and Kafka's message)."""

    def __init__(self, error: Error, message: str) -> None:
        super().__init__(message)
        self.error, self.message = error, message


def validate(req, version: int, supported_assignors: tuple[str, ...]) -> HeartbeatError | None:
    """``throwIfConsumerGroupHeartbeatRequestIsInvalid`` (the service's checks, before the
    group's partition is even looked at)."""
    def empty(value) -> bool:  # Kafka's throwIfEmptyString: set, and blank once trimmed
        return value is not None and value.strip(_JAVA_TRIMMED) == ""

    epoch = req.member_epoch
    if version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if empty(req.member_id):
            return HeartbeatError(Error.INVALID_REQUEST, "MemberId can't be empty.")
    if empty(req.group_id):
        return HeartbeatError(Error.INVALID_REQUEST, "GroupId can't be empty.")
    if empty(req.instance_id):
        return HeartbeatError(Error.INVALID_REQUEST, "InstanceId can't be empty.")
    if empty(req.rack_id):
        return HeartbeatError(Error.INVALID_REQUEST, "RackId can't be empty.")
    if epoch == 0:
        if req.rebalance_timeout_ms == -1:
            return HeartbeatError(Error.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or req.topic_partitions:
            return HeartbeatError(Error.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            return HeartbeatError(Error.INVALID_REQUEST, "Either SubscribedTopicNames or SubscribedTopicRegex "
                                                         "must be non-null when (re-)joining.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            return HeartbeatError(Error.INVALID_REQUEST, "InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return HeartbeatError(Error.INVALID_REQUEST, "MemberEpoch is invalid.")
    if req.server_assignor is not None and req.server_assignor not in supported_assignors:
        return HeartbeatError(Error.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported. "
                                                          f"Supported assignors: {', '.join(supported_assignors)}.")
    if req.subscribed_topic_regex is not None and compile_regex(req.subscribed_topic_regex) is None:
        return HeartbeatError(Error.INVALID_REGULAR_EXPRESSION,
                              f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular expression.")
    return None


_JAVA_TRIMMED = "".join(map(chr, range(0x21)))  # String.trim(): every char up to U+0020

# RE2 has no lookaround and no back-references; Python's ``re`` does: refused as RE2J refuses them
_NOT_RE2 = re.compile(r"\(\?[=!]|\(\?<[=!]|\\[1-9]|\(\?P=")


def compile_regex(pattern: str) -> re.Pattern | None:
    if _NOT_RE2.search(pattern):
        return None
    try:
        return re.compile(pattern)
    except (re.error, RecursionError):
        return None


def _resolve(pattern: str, image: Image) -> frozenset:
    compiled = compile_regex(pattern)
    if compiled is None:
        return frozenset()
    return frozenset(name for name in image if not name.startswith("__") and compiled.fullmatch(name))


class ConsumerMachine:
    def __init__(self, config: CoordinatorConfig) -> None:
        self.config = config

    # ------------------------------------------------------------------ the heartbeat

    def heartbeat(self, ctx: Context, records: Records, group: ConsumerGroup, req, image: Image
                  ) -> tuple[ConsumerGroup, ConsumerGroupHeartbeatResponse]:
        """One heartbeat on ``group`` (a new one for a first join); raises HeartbeatError.
        Returns the group after it and the answer."""
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(ctx, records, group, req, image)
        joining = req.member_epoch == 0
        if len(group.members) >= self.config.group_consumer_max_size and \
                (req.member_id == "" or req.member_id not in group.members):
            raise HeartbeatError(Error.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum "
                                                               f"capacity of {self.config.group_consumer_max_size} members.")
        member_id = req.member_id or req.new_member_uuid
        p = group.partition
        replaced: ConsumerMember | None = None
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise HeartbeatError(Error.UNKNOWN_MEMBER_ID,
                                         f"Member {member_id} is not a member of group {group.group_id}.")
                member = ConsumerMember(member_id=member_id)
            _check_epoch(member, req.member_epoch, req.topic_partitions)
        else:
            static = group.static_member(req.instance_id)
            if joining:
                if static is None:
                    member = group.members.get(member_id) or ConsumerMember(member_id=member_id)
                else:
                    if static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        raise HeartbeatError(Error.UNRELEASED_INSTANCE_ID,
                                             f"Static member {member_id} with instance id {req.instance_id} cannot "
                                             f"join the group because the instance id is owned by "
                                             f"{static.member_id} member.")
                    member = attrs.evolve(static, member_id=member_id, member_epoch=0, previous_member_epoch=0)
                    replaced = static
                    group = self.replace_static(records, p, group, static, member)
            else:
                if static is None:
                    raise HeartbeatError(Error.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
                if static.member_id != member_id:
                    raise HeartbeatError(Error.FENCED_INSTANCE_ID,
                                         f"Static member {member_id} with instance id {req.instance_id} was fenced "
                                         f"by member {static.member_id}.")
                member = static
                _check_epoch(member, req.member_epoch, req.topic_partitions)

        # 1. the member's new identity and subscription
        if member.classic is None and req.instance_id is None and req.rack_id is None and \
                req.rebalance_timeout_ms == -1 and req.server_assignor is None and \
                req.subscribed_topic_names is None and req.subscribed_topic_regex is None and \
                req.client_id == member.client_id and req.client_host == member.client_host:
            updated = member  # a steady heartbeat changes nothing of it
        else:
            updated = self._updated(member, req)
        group, updated = self.update_member(ctx, records, group, member, updated, req.topic_partitions, image,
                                            replaced)
        ctx.arm(SessionTimer(p, group.group_id, member_id), self.config.group_consumer_session_timeout_ms)

        full = req.rebalance_timeout_ms != -1 and \
            (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None) and \
            req.topic_partitions is not None
        send = joining or full or (updated is not member and dict(updated.assigned) != dict(member.assigned))
        return group, ConsumerGroupHeartbeatResponse(
            member_id=member_id, member_epoch=updated.member_epoch,
            heartbeat_interval_ms=self.config.group_consumer_heartbeat_interval_ms,
            assignment=as_topic_partitions(updated.assigned) if send else None)

    def update_member(self, ctx: Context, records: Records, group: ConsumerGroup, member: ConsumerMember,
                      updated: ConsumerMember, owned, image: Image, replaced: ConsumerMember | None = None
                      ) -> tuple[ConsumerGroup, ConsumerMember]:
        """The three steps of a member's heartbeat or classic join after its checks: its new
        subscription written (a change bumps the group epoch), the target assignment when the
        group epoch is ahead of it, the member reconciled towards it (``owned``: the partitions
        it reports). ``replaced``: the static member it took the place of."""
        p, member_id = group.partition, updated.member_id
        names_changed = regex_changed = False
        if updated is not member and updated != member or member.member_id not in group.members:
            records.append(p, ConsumerMemberRecord(group.group_id, member_id, updated))
            names_changed = updated.subscribed_topic_names != member.subscribed_topic_names
            regex_changed = updated.subscribed_topic_regex != member.subscribed_topic_regex
            group = self._with_member(group, updated)
        if regex_changed:
            group = self._update_regexes(records, group, image)
        subscription_changed = names_changed or regex_changed
        bump = group.group_epoch == 0 or subscription_changed
        if bump or group.refreshed is not image:  # Kafka: when the subscription or the image changed
            group, changed = self.refresh_subscription(records, group, image)
            if bump or changed:
                group = bump_epoch(records, group)
        if group.group_epoch > group.assignment_epoch:
            group = self._assign(records, group, image, gone=replaced)
        if not updated.reconciled_to(group.assignment_epoch) or subscription_changed:
            before = updated
            try:
                updated = reconcile(updated, group.assignment_epoch, group.target.get(member_id, {}),
                                    self._subscribed_ids(group, updated, image), group.partition_epochs(), owned,
                                    subscription_changed)
            except Fenced as e:
                raise HeartbeatError(Error.FENCED_MEMBER_EPOCH, str(e)) from None
            if updated != before:
                records.append(p, ConsumerAssignmentRecord(group.group_id, member_id, updated))
                if updated.classic is None:  # a classic member has its join and sync timers instead
                    if updated.state is MemberState.UNREVOKED_PARTITIONS:
                        ctx.arm(RebalanceTimer(p, group.group_id, member_id), updated.rebalance_timeout_ms,
                                updated.member_epoch)
                    else:
                        ctx.cancel(RebalanceTimer(p, group.group_id, member_id))
                group = self._with_member(group, updated)
        return group, updated

    @staticmethod
    def _updated(member: ConsumerMember, req) -> ConsumerMember:
        """The member with what the heartbeat sets (a null field keeps its value)."""
        return attrs.evolve(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=tuple(sorted(set(req.subscribed_topic_names)))
            if req.subscribed_topic_names is not None else member.subscribed_topic_names,
            subscribed_topic_regex=(req.subscribed_topic_regex or None) if req.subscribed_topic_regex is not None
            else member.subscribed_topic_regex,
            client_id=req.client_id, client_host=req.client_host, classic=None)

    def _leave(self, ctx: Context, records: Records, group: ConsumerGroup, req, image: Image
               ) -> tuple[ConsumerGroup, ConsumerGroupHeartbeatResponse]:
        """``consumerGroupLeave``: -1 leaves for good (fenced), -2 is a static member's
        temporary leave, its partitions kept until its session ends or it rejoins."""
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise HeartbeatError(Error.UNKNOWN_MEMBER_ID,
                                     f"Member {req.member_id} is not a member of group {group.group_id}.")
        else:
            member = group.static_member(req.instance_id)
            if member is None:
                raise HeartbeatError(Error.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if member.member_id != req.member_id:
                raise HeartbeatError(Error.FENCED_INSTANCE_ID,
                                     f"Static member {req.member_id} with instance id {req.instance_id} was fenced "
                                     f"by member {member.member_id}.")
            if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                left = attrs.evolve(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
                records.append(group.partition, ConsumerAssignmentRecord(group.group_id, member.member_id, left))
                return self._with_member(group, left), ConsumerGroupHeartbeatResponse(
                    member_id=member.member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        group = self.fence(ctx, records, group, member, image)
        return group, ConsumerGroupHeartbeatResponse(member_id=req.member_id, member_epoch=req.member_epoch)

    # ------------------------------------------------------------------ fencing and timers

    # set by the coordinator: ``(ctx, records, group, leaving member id) -> classic group or None``,
    # the online downgrade a fencing may make instead (core/migration.py)
    downgrade: Any = None

    def fence(self, ctx: Context, records: Records, group: ConsumerGroup, member: ConsumerMember,
              image: Image | None = None):
        """``consumerGroupFenceMember``: the member's records go, the group epoch is bumped; or
        the group becomes a classic one when only classic members remain (returned then)."""
        if self.downgrade is not None:
            converted = self.downgrade(ctx, records, group, member.member_id)
            if converted is not None:
                return converted
        gid, p, mid = group.group_id, group.partition, member.member_id
        member_tombstones(records, p, gid, mid)
        members = {k: v for k, v in group.members.items() if k != mid}
        target = {k: v for k, v in group.target.items() if k != mid}
        group = attrs.evolve(group, members=members, target=target)
        if image is not None:
            group, _ = self.refresh_subscription(records, group, image)
        group = bump_epoch(records, group)
        if not members:  # an empty group's epochs agree (KAFKA-20442, apache/kafka#22045)
            group = attrs.evolve(group, assignment_epoch=group.group_epoch)
            records.append(p, ConsumerTargetEpochRecord(gid, group.group_epoch))
        for key in (SessionTimer, RebalanceTimer, MemberJoinTimer, MemberSyncTimer):
            ctx.cancel(key(p, gid, mid))
        if mid in group.rejoin_deadlines:
            group = attrs.evolve(group, rejoin_deadlines={k: v for k, v in group.rejoin_deadlines.items() if k != mid})
        return group

    def session_expired(self, ctx: Context, records: Records, group: ConsumerGroup | None, member_id: str,
                        image: Image) -> ConsumerGroup | None:
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return group
        return self.fence(ctx, records, group, member, image)

    def classic_timer_expired(self, ctx: Context, records: Records, group: ConsumerGroup | None, member_id: str,
                              image: Image):
        """A classic member did not rejoin (or sync) within its rebalance timeout: fenced."""
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return group
        return self.fence(ctx, records, group, member, image)

    def rebalance_expired(self, ctx: Context, records: Records, group: ConsumerGroup | None, member_id: str,
                          epoch: int, image: Image) -> ConsumerGroup | None:
        """The member did not leave ``epoch`` within its rebalance timeout: fenced (a member that
        moved on meanwhile is left alone)."""
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None or member.member_epoch != epoch:
            return group
        return self.fence(ctx, records, group, member, image)

    # ------------------------------------------------------------------ describe

    @staticmethod
    def described(group: ConsumerGroup, image: Image) -> DescribedConsumerGroup:
        names = {tid: name for name, (tid, _) in image.items()}
        return group.described_as_consumer_group(assignors.ASSIGNORS[0], names)

    # ------------------------------------------------------------------ the steps

    @staticmethod
    def _with_member(group: ConsumerGroup, member: ConsumerMember) -> ConsumerGroup:
        members = dict(group.members)
        members[member.member_id] = member
        return attrs.evolve(group, members=members)

    @staticmethod
    def replace_static(records: Records, p: int, group: ConsumerGroup, old: ConsumerMember,
                 new: ConsumerMember) -> ConsumerGroup:
        """``replaceMember``: a static member's instance under its new member id, its target
        carried over."""
        gid = group.group_id
        member_tombstones(records, p, gid, old.member_id)
        target = dict(group.target)
        carried = target.pop(old.member_id, {})
        records.append(p, ConsumerMemberRecord(gid, new.member_id, new))
        records.append(p, ConsumerTargetRecord(gid, new.member_id, carried))
        records.append(p, ConsumerAssignmentRecord(gid, new.member_id, new))
        target[new.member_id] = carried
        members = {k: v for k, v in group.members.items() if k != old.member_id}
        members[new.member_id] = new
        return attrs.evolve(group, members=members, target=target)

    def _update_regexes(self, records: Records, group: ConsumerGroup, image: Image) -> ConsumerGroup:
        """Resolve regular expressions newly subscribed to; drop those nobody subscribes to."""
        used = {m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex}
        resolved = dict(group.resolved)
        for regex in sorted(used - set(resolved)):
            resolved[regex] = _resolve(regex, image)
            records.append(group.partition, ConsumerRegexRecord(group.group_id, regex, resolved[regex]))
        for regex in sorted(set(resolved) - used):
            del resolved[regex]
            records.append(group.partition, ConsumerRegexRecord(group.group_id, regex, None))
        return attrs.evolve(group, resolved=resolved)

    @staticmethod
    def _subscribed_names(group: ConsumerGroup, member: ConsumerMember) -> frozenset:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names |= group.resolved.get(member.subscribed_topic_regex, frozenset())
        return frozenset(names)

    def _subscribed_ids(self, group: ConsumerGroup, member: ConsumerMember, image: Image) -> frozenset:
        return frozenset(image[n][0] for n in self._subscribed_names(group, member) if n in image)

    def refresh_subscription(self, records: Records, group: ConsumerGroup, image: Image
                              ) -> tuple[ConsumerGroup, bool]:
        """``updateSubscriptionMetadata``: the subscribed topics as the image has them now
        (written when they changed, which the caller answers with a new group epoch)."""
        # a regex whose topics changed in the image is resolved again
        resolved = {regex: _resolve(regex, image) for regex in group.resolved}
        if resolved != dict(group.resolved):
            for regex in sorted(resolved):
                if resolved[regex] != group.resolved[regex]:
                    records.append(group.partition, ConsumerRegexRecord(group.group_id, regex, resolved[regex]))
            group = attrs.evolve(group, resolved=resolved)
        names: set = set()
        for m in group.members.values():
            names |= self._subscribed_names(group, m)
        subscribed = {n: image[n] for n in sorted(names) if n in image}
        changed = subscribed != dict(group.subscribed)
        if changed:
            records.append(group.partition, ConsumerSubscriptionRecord(
                group.group_id, tuple((n, tid, count) for n, (tid, count) in subscribed.items())))
            group = attrs.evolve(group, subscribed=subscribed)
        return attrs.evolve(group, refreshed=image), changed

    def _assign(self, records: Records, group: ConsumerGroup, image: Image,
                gone: ConsumerMember | None = None) -> ConsumerGroup:
        """``updateTargetAssignment``: the preferred assignor over every member, sticky to the
        current target; the members whose target changed are written, then the epoch."""
        topics = {tid: assignors.TopicSpec(name, count) for name, (tid, count) in image.items()}
        specs = {
            mid: assignors.MemberSpec(subscribed=self._subscribed_ids(group, m, image),
                                      assigned=group.target.get(mid, {}), instance_id=m.instance_id,
                                      rack_id=m.rack_id)
            for mid, m in group.members.items() if gone is None or mid != gone.member_id}
        name = group.preferred_assignor() or assignors.ASSIGNORS[0]
        new = assignors.assign(name, specs, topics)
        target = {}
        for mid in group.members:
            assigned = {t: frozenset(ps) for t, ps in new.get(mid, {}).items() if ps}
            target[mid] = assigned
            if mid not in group.target or dict(group.target[mid]) != assigned:
                records.append(group.partition, ConsumerTargetRecord(group.group_id, mid, assigned))
        records.append(group.partition, ConsumerTargetEpochRecord(group.group_id, group.group_epoch))
        return attrs.evolve(group, target=target, assignment_epoch=group.group_epoch)


def bump_epoch(records: Records, group: ConsumerGroup) -> ConsumerGroup:
    group = attrs.evolve(group, group_epoch=group.group_epoch + 1)
    records.append(group.partition, ConsumerGroupEpochRecord(group.group_id, group.group_epoch))
    return group


def _check_epoch(member: ConsumerMember, received: int, owned) -> None:
    """``throwIfConsumerGroupMemberEpochIsInvalid``: an epoch ahead of the member's is fenced;
    one behind only when it is not the previous epoch with a subset of the current partitions
    (the answer that moved it on may have been lost). Epoch 0 is a rejoin, always taken
    (KAFKA-19233, apache/kafka#21305: a fenced member rejoins with the id it had)."""
    if received == 0:
        return
    if received > member.member_epoch:
        raise HeartbeatError(Error.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a greater member epoch ({received}) than the one known "
                             f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                             f"partitions and rejoin.")
    if received < member.member_epoch and \
            (received != member.previous_member_epoch or not _subset(owned, member.assigned)):
        raise HeartbeatError(Error.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a smaller member epoch ({received}) than the one known "
                             f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                             f"partitions and rejoin.")


def _subset(owned, assigned: Assignment) -> bool:
    if owned is None:
        return False
    for topic, parts in owned:
        have = assigned.get(topic)
        if have is None or any(p not in have for p in parts):
            return False
    return True


def member_tombstones(records: Records, p: int, gid: str, mid: str) -> None:
    """``removeMember``: the member's tombstones, in Kafka's order."""
    records.append(p, ConsumerAssignmentRecord(gid, mid, None))
    records.append(p, ConsumerTargetRecord(gid, mid, None))
    records.append(p, ConsumerMemberRecord(gid, mid, None))


def as_topic_partitions(assignment: Assignment) -> tuple:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()) if ps)
