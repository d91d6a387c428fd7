"""The coordinator's KIP-848 operations: what it does with a ConsumerGroupHeartbeat, a
ConsumerGroupDescribe, a consumer group's timer and a write's failure, and with a classic
request to a consumer group. ``ConsumerGroups`` holds what only consumer groups need (their
machine and the topics image); the group store, the operation's records and the classic
machine's step are passed in, as the offsets' operations take theirs (offsets.py)."""

from __future__ import annotations

from typing import Any, Callable

from . import events as ev
from . import migration
from .classic.model import Group
from .classic.states import EMPTY
from .commands import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    GroupTombstone,
    MemberJoinTimer,
    MemberSyncTimer,
    RebalanceTimer,
    SessionTimer,
)
from .config import CoordinatorConfig
from .consumer import records as consumer_records
from .consumer.assignors import ASSIGNORS
from .consumer.machine import ConsumerMachine, HeartbeatError, validate
from .consumer.model import ConsumerGroup
from .context import Context, Records
from .continuations import RevertConsumerGroup
from .errors import Error
from .partitioning import ACTIVE

Rebalance = Callable[[Context, Records, str], None]
CONSUMER_TIMERS = (SessionTimer, RebalanceTimer, MemberJoinTimer, MemberSyncTimer)  # the classic machine's first join phase of a group


class ConsumerGroups:
    def __init__(self, config: CoordinatorConfig) -> None:
        self.config = config
        self.machine = ConsumerMachine(config)
        self.machine.downgrade = self._downgrade
        self.image: dict[str, tuple[str, int]] = {}  # the topics: name -> (topic id, partitions)

    def topics(self, event: ev.TopicsChanged) -> None:
        # a new mapping each time: a group keeps the one it last refreshed against (model.py)
        self.image = {name: (topic_id, partitions) for name, topic_id, partitions in event.topics}

    @staticmethod
    def refused(req: ev.ConsumerGroupHeartbeat) -> ConsumerGroupHeartbeatResponse | None:
        """The service's checks, before the group's partition is looked at."""
        refused = validate(req, req.version, ASSIGNORS)
        if refused is None:
            return None
        return ConsumerGroupHeartbeatResponse(error_code=refused.error, error_message=refused.message)

    def heartbeat(self, ctx: Context, records: Records, groups: dict, req: ev.ConsumerGroupHeartbeat,
                  partition: int, rebalance: Rebalance) -> ConsumerGroupHeartbeatResponse:
        """``getOrMaybeCreateConsumerGroup`` (an empty classic group replaced, one with members
        upgraded when the policy allows), then the machine's heartbeat."""
        gid = req.group_id
        existing = groups.get(gid)
        try:
            if req.member_epoch < 0:  # a leave
                if not isinstance(existing, ConsumerGroup):
                    raise HeartbeatError(Error.GROUP_ID_NOT_FOUND, f"Group {gid} not found." if existing is None
                                         else f"Group {gid} is not a consumer group.")
                group = existing
            elif existing is None:
                if req.member_epoch != 0:
                    raise HeartbeatError(Error.GROUP_ID_NOT_FOUND, f"Consumer group {gid} not found.")
                group = ConsumerGroup(group_id=gid, partition=partition)
            elif isinstance(existing, ConsumerGroup):
                group = existing
            elif req.member_epoch == 0 and existing.state is EMPTY:
                records.append(partition, GroupTombstone(gid))  # its offsets stay
                group = ConsumerGroup(group_id=gid, partition=partition)
            elif req.member_epoch == 0 and migration.can_upgrade(existing, self.config):
                group = migration.upgrade(ctx, records, existing, self.image)
            else:
                raise HeartbeatError(Error.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group")
            after, response = self.machine.heartbeat(ctx, records, group, req, self.image)
        except HeartbeatError as e:
            records.clear()
            return ConsumerGroupHeartbeatResponse(error_code=e.error, error_message=e.message)
        self._took(ctx, records, groups, gid, existing, after, partition, rebalance)
        return response

    def classic_request(self, ctx: Context, records: Records, groups: dict, req, rebalance: Rebalance):
        """A classic JoinGroup, SyncGroup, Heartbeat or LeaveGroup to a consumer group with
        members (core/migration.py)."""
        group = groups[req.group_id]
        assert isinstance(group, ConsumerGroup)
        after: Any
        response: Any
        try:
            if type(req) is ev.JoinGroup:
                after, response = migration.join(ctx, records, self.machine, group, req, self.image, self.config)
            elif type(req) is ev.SyncGroup:
                after, response = migration.sync(ctx, group, req, self.image)
            elif type(req) is ev.Heartbeat:
                after, response = migration.heartbeat(ctx, group, req.member_id, req.group_instance_id,
                                                      req.generation_id)
            else:
                after, response = migration.leave(ctx, records, self.machine, group, req, self.image)
        except HeartbeatError as e:
            records.clear()
            return migration.error_answer(req, e.error)
        self._took(ctx, records, groups, req.group_id, group, after, group.partition, rebalance)
        return response

    def give_way(self, ctx: Context, records: Records, groups: dict, group: ConsumerGroup, req: ev.JoinGroup,
                 join: Callable[[Context, Records], Any]):
        """``maybeDeleteEmptyConsumerGroup``: an empty consumer group's tombstones, then the
        classic join (``join``) that makes a classic group of the id."""
        del groups[group.group_id]
        for record in consumer_records.tombstones(group):
            records.append(group.partition, record)
        records.then(group.partition, RevertConsumerGroup(group.group_id, group, None))
        return join(ctx, records)

    def timer(self, ctx: Context, records: Records, groups: dict, event: ev.TimerFired, rebalance: Rebalance) -> None:
        key = event.key
        group = groups.get(key.group_id)
        if not isinstance(group, ConsumerGroup):
            return
        if type(key) is SessionTimer:
            after = self.machine.session_expired(ctx, records, group, key.member_id, self.image)
        elif type(key) is MemberJoinTimer or type(key) is MemberSyncTimer:
            after = self.machine.classic_timer_expired(ctx, records, group, key.member_id, self.image)
        else:
            after = self.machine.rebalance_expired(ctx, records, group, key.member_id, event.payload, self.image)
        if after is not group and after is not None:
            self._took(ctx, records, groups, key.group_id, group, after, group.partition, rebalance)

    def _took(self, ctx: Context, records: Records, groups: dict, gid: str, before, after, partition: int,
              rebalance: Rebalance) -> None:
        """The step's group is held; a group made classic starts its join phase; a failed write
        brings ``before`` back."""
        groups[gid] = after
        if isinstance(after, Group):
            rebalance(ctx, records, gid)
        if partition in records:
            records.then(partition, RevertConsumerGroup(gid, before, after))

    def _downgrade(self, ctx: Context, records: Records, group: ConsumerGroup, leaving: str) -> Group | None:
        """The fencing of ``leaving`` leaves only classic members: the group becomes classic,
        or None when the policy or the group does not allow it."""
        if not migration.can_downgrade(group, leaving, self.config):
            return None
        return migration.downgrade(ctx, records, group, leaving, self.image)

    def describe(self, req: ev.ConsumerGroupDescribe, groups: dict,
                 status_of: Callable[[str], str | None]) -> ConsumerGroupDescribeResponse:
        described = []
        for gid in req.group_ids:
            if not gid:
                described.append(DescribedConsumerGroup(group_id=gid, error_code=Error.INVALID_GROUP_ID))
                continue
            status = status_of(gid)
            group = groups.get(gid)
            if status is not ACTIVE:
                error = Error.NOT_COORDINATOR if status is None else Error.COORDINATOR_LOAD_IN_PROGRESS
                described.append(DescribedConsumerGroup(group_id=gid, error_code=error))
            elif isinstance(group, ConsumerGroup):
                described.append(self.machine.described(group, self.image))
            else:
                described.append(DescribedConsumerGroup(
                    group_id=gid, error_code=Error.GROUP_ID_NOT_FOUND,
                    error_message=f"Group {gid} not found." if group is None else
                    f"Group {gid} is not a consumer group."))
        return ConsumerGroupDescribeResponse(tuple(described))

    def loaded(self, ctx: Context, group: ConsumerGroup) -> None:
        """A group read back from its records: each member's session starts again (Kafka's
        ``onLoaded``)."""
        for mid in group.members:
            ctx.arm(SessionTimer(group.partition, group.group_id, mid), self.config.group_consumer_session_timeout_ms)

    @staticmethod
    def delete(groups: dict, group: ConsumerGroup) -> list:
        """The group goes; its tombstones, for the coordinator to write."""
        del groups[group.group_id]
        return consumer_records.tombstones(group)

    @staticmethod
    def written(groups: dict, continuation: RevertConsumerGroup, error) -> None:
        if error is None:
            return
        gid, before, after = continuation.group_id, continuation.before, continuation.after
        current = groups.get(gid)
        if after is None:  # the group gave way to a classic one, whose own failure removed it
            if current is None:
                groups[gid] = before
        elif current is after:
            if before is None:
                del groups[gid]
            else:
                groups[gid] = before
