"""The classic group's data: members and groups, as frozen values.

A request that changes a group replaces the group value (copy-on-write); a request that does
not (most heartbeats) leaves the same object in place, which keeps the hot path allocation-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from types import MappingProxyType
from typing import Any

from ..commands import DescribedGroup, DescribedMember, ListedGroup
from ..errors import Error
from ..frozen import frozen
from .states import DEAD, EMPTY, GroupState

EMPTY_MAP: Mapping[Any, Any] = MappingProxyType({})


@frozen
class Parked:
    """A request the coordinator holds unanswered (a JoinGroup or SyncGroup)."""

    request_id: Any
    version: int


@frozen
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's preference order
    assignment: bytes = b""
    awaiting_join: Parked | None = None
    awaiting_sync: Parked | None = None
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol_name: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        return b""

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise AssertionError(f"member {self.member_id} supports none of {sorted(candidates)}")

    @property
    def has_satisfied_heartbeat(self) -> bool:
        """A parked join or sync counts as a heartbeat, except for a member never yet joined."""
        return not self.is_new and (self.awaiting_join is not None or self.awaiting_sync is not None)


class GroupReads:
    """The reads a frozen ``Group`` and its mutable twin (draft.py's ``GroupDraft``) share."""

    __slots__ = ()
    state: GroupState
    members: Mapping[str, Member]
    pending_members: AbstractSet[str]
    num_awaiting_join: int

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @property
    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def can_rebalance(self) -> bool:
        return self.state in _CAN_REBALANCE


@frozen
class Group(GroupReads):
    group_id: str
    partition: int
    state: GroupState = EMPTY
    previous_state: GroupState = DEAD
    state_timestamp_ms: int | None = None
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: Mapping[str, Member] = EMPTY_MAP  # insertion ordered
    static_members: Mapping[str, str] = EMPTY_MAP  # group_instance_id -> member_id
    pending_members: frozenset[str] = frozenset()  # ids handed out with MEMBER_ID_REQUIRED
    pending_sync: frozenset[str] = frozenset()
    protocol_counts: Mapping[str, int] = EMPTY_MAP  # protocol name -> members listing it
    num_awaiting_join: int = 0
    new_member_added: bool = False
    subscribed_topics: frozenset[str] | None = None

    # ListGroups and DescribeGroups: each kind of group answers for itself
    KIND = "classic"

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, self.protocol_type or "", self.state.value, self.KIND)

    def described(self) -> DescribedGroup:
        """Kafka's ``ClassicGroup``: members' metadata and the protocol only when Stable."""
        stable = self.state is GroupState.STABLE
        members = tuple(
            DescribedMember(mid, m.group_instance_id, m.client_id, m.client_host,
                            m.metadata(self.protocol_name) if stable else b"", m.assignment)
            for mid, m in self.members.items())
        return DescribedGroup(group_id=self.group_id, group_state=self.state.value,
                              protocol_type=self.protocol_type or "",
                              protocol_data=self.protocol_name or "" if stable else "", members=members)


_CAN_REBALANCE = frozenset({EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE})


class MemberError(Exception):
    """Kafka's validation exceptions (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ...)."""

    def __init__(self, error: Error):
        super().__init__(error.name)
        self.error = error


def validate_member(group, member_id: str, instance_id: str | None) -> None:
    """ClassicGroup.validateMember: instance first (unknown -> 25, other member -> 82)."""
    if instance_id is not None:
        existing = group.static_members.get(instance_id)
        if existing is None:
            raise MemberError(Error.UNKNOWN_MEMBER_ID)
        if existing != member_id:
            raise MemberError(Error.FENCED_INSTANCE_ID)
    if member_id not in group.members:
        raise MemberError(Error.UNKNOWN_MEMBER_ID)
