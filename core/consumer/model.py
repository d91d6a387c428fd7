"""A consumer group's data (Kafka's ``ConsumerGroup`` and ``ConsumerGroupMember``), as frozen
values: the group's epochs, its members with their epochs and partitions, the target
assignment. Partitions are named by topic id; an assignment is ``{topic id: frozenset of
partitions}``. Only ``machine`` makes new ones."""

from __future__ import annotations

import enum
from typing import Any, Mapping

import attrs

from ..commands import DescribedConsumerGroup, DescribedConsumerMember, DescribedTopicPartitions, ListedGroup
from ..partitioning import java_hashmap_bucket

Assignment = Mapping[str, frozenset]  # topic id -> partitions

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class ConsumerGroupState(enum.Enum):
    """``ConsumerGroup.ConsumerGroupState``: derived from the epochs, never set."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    """``MemberState``: where a member is in its reconciliation."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"  # must revoke partitions to move to the next epoch
    UNRELEASED_PARTITIONS = "unreleased_partitions"  # at the target epoch, waiting for partitions others own
    UNKNOWN = "unknown"  # a state a newer coordinator wrote: the member is fenced at its next heartbeat


def merged(a: Assignment, b: Assignment) -> dict[str, frozenset]:
    out = dict(a)
    for topic, parts in b.items():
        out[topic] = out.get(topic, frozenset()) | parts
    return out


@attrs.frozen
class ClassicMeta:
    """A member that speaks the classic protocol inside a consumer group (Kafka's
    ``ClassicMemberMetadata``): its session timeout and its JoinGroup protocols."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        return self.protocols[0][0]


@attrs.frozen
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    subscribed_topic_names: tuple[str, ...] = ()  # sorted
    subscribed_topic_regex: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = attrs.field(default=MemberState.STABLE, converter=MemberState)  # a trace holds its value
    assigned: Assignment = attrs.field(factory=dict)
    pending_revocation: Assignment = attrs.field(factory=dict)
    classic: ClassicMeta | None = None  # set: the member uses the classic protocol

    def reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def owns(self) -> dict[str, frozenset]:
        """Every partition whose owner this member is: assigned, or still to be revoked."""
        return merged(self.assigned, self.pending_revocation)

    def described(self, target: Assignment, names: Mapping[str, str]) -> DescribedConsumerMember:
        return DescribedConsumerMember(
            member_id=self.member_id, instance_id=self.instance_id, rack_id=self.rack_id,
            member_epoch=self.member_epoch, client_id=self.client_id, client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names, subscribed_topic_regex=self.subscribed_topic_regex,
            assignment=_described(self.assigned, names), target_assignment=_described(target, names),
            member_type=0 if self.classic is not None else 1)


def _described(assignment: Assignment, names: Mapping[str, str]) -> tuple[DescribedTopicPartitions, ...]:
    # Kafka leaves out topics the metadata image no longer has (their names are unknown)
    return tuple(DescribedTopicPartitions(t, names[t], tuple(sorted(p)))
                 for t, p in sorted(assignment.items()) if t in names)


@attrs.frozen
class ConsumerGroup:
    """``subscribed``: the subscription metadata the group epoch was computed with: for each
    subscribed topic that exists, ``name -> (topic id, partitions)``; a change of it (a topic
    created, deleted or grown) bumps the group epoch. ``resolved``: each subscribed regular
    expression's matching topic names at that time."""

    KIND = "consumer"

    group_id: str
    partition: int
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: Mapping[str, ConsumerMember] = attrs.field(factory=dict)
    target: Mapping[str, Assignment] = attrs.field(factory=dict)
    subscribed: Mapping[str, tuple[str, int]] = attrs.field(factory=dict)
    resolved: Mapping[str, frozenset] = attrs.field(factory=dict)
    # the topics image ``subscribed`` was last computed against (held, never written: a group
    # loaded or restored computes it again at its next heartbeat, as Kafka's refresh deadline)
    refreshed: Any = attrs.field(default=None, eq=False, repr=False)
    # classic members told to rejoin, with their join timeout's deadline (Kafka arms it only
    # if absent: a member heartbeating without rejoining is still fenced in time)
    rejoin_deadlines: Mapping[str, int] = attrs.field(factory=dict, eq=False, repr=False)

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def supports_classic_protocols(self, protocol_type: str, names: set) -> bool:
        """``ConsumerGroup.supportsClassicProtocols``: an empty group takes any non-empty
        protocol type and list; else the type is "consumer" and one of the names is one every
        classic member lists."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        return protocol_type == "consumer" and any(
            all(any(n == name for n, _ in c.protocols) for c in classic) for name in names)

    def subscribed_names(self) -> frozenset:
        """Every topic name a member subscribes to, by name or through a resolved regex."""
        names: set = set()
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                names |= self.resolved.get(m.subscribed_topic_regex, frozenset())
        return frozenset(names)

    def partition_epochs(self) -> dict[tuple[str, int], int]:
        """``currentPartitionEpoch``: each owned partition's owner's epoch."""
        out = {}
        for m in self.members.values():
            for topic, parts in m.owns().items():
                for p in parts:
                    out[(topic, p)] = m.member_epoch
        return out

    def preferred_assignor(self) -> str | None:
        """The server assignor most members name (``computePreferredServerAssignor``). Kafka
        takes the first of the most named in its HashMap's order, which for a small map is the
        order of the names' hash buckets ("uniform" before "range")."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return None
        return min(counts, key=lambda name: (-counts[name], java_hashmap_bucket(name), name))

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, "consumer", self.state.value, self.KIND)

    def described_as_consumer_group(self, default_assignor: str, names: Mapping[str, str]) -> DescribedConsumerGroup:
        members = tuple(m.described(self.target.get(mid, {}), names) for mid, m in self.members.items())
        return DescribedConsumerGroup(group_id=self.group_id, group_state=self.state.value,
                                      group_epoch=self.group_epoch, assignment_epoch=self.assignment_epoch,
                                      assignor_name=self.preferred_assignor() or default_assignor, members=members)

    def described(self) -> Any:
        """DescribeGroups (the classic API) does not see a consumer group: Kafka answers Dead."""
        from ..commands import DescribedGroup

        return DescribedGroup(group_id=self.group_id, group_state=ConsumerGroupState.DEAD.value)
