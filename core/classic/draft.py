"""A group being changed by one event: the mutable twin of ``model.Group``.

An event that changes a group thaws it (shallow copies of its collections), applies Kafka's
steps imperatively, and the coordinator freezes the result when the event is done. The
bookkeeping Kafka keeps beside the member map (static map, protocol counts, awaiting-join
count, leader) is maintained here, in one place.
"""

from __future__ import annotations

from types import MappingProxyType

from ..frozen import evolve, field_copier, field_reader
from ..partitioning import java_hashmap_order
from .model import Group, GroupReads, Member, Parked
from .states import EMPTY, GroupState, require_legal
from .subscription import subscription_topics

_reader = field_reader(Group)
assert _reader is not None  # Group's __init__ takes every field by name
_FIELDS, _values = _reader  # _values: a Group's or a draft's fields, in one call
_AT = {name: i for i, name in enumerate(_FIELDS)}  # a field's position in Group's __init__
_copy_fields = field_copier(Group)


class GroupDraft(GroupReads):
    __slots__ = _FIELDS
    # Group's fields (tests/core check the names), its collections thawed
    group_id: str
    partition: int
    state: GroupState
    previous_state: GroupState
    state_timestamp_ms: int | None
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader_id: str | None
    members: dict[str, Member]
    static_members: dict[str, str]
    pending_members: set[str]
    pending_sync: set[str]
    protocol_counts: dict[str, int]
    num_awaiting_join: int
    new_member_added: bool
    subscribed_topics: frozenset[str] | None

    def __init__(self, group: Group):
        _copy_fields(self, group)
        self.members = dict(group.members)
        self.static_members = dict(group.static_members)
        self.pending_members = set(group.pending_members)
        self.pending_sync = set(group.pending_sync)
        self.protocol_counts = dict(group.protocol_counts)

    def freeze(self) -> Group:
        values = list(_values(self))
        values[_AT["members"]] = MappingProxyType(self.members)
        values[_AT["static_members"]] = MappingProxyType(self.static_members)
        values[_AT["pending_members"]] = frozenset(self.pending_members)
        values[_AT["pending_sync"]] = frozenset(self.pending_sync)
        values[_AT["protocol_counts"]] = MappingProxyType({k: v for k, v in self.protocol_counts.items() if v})
        return Group(*values)

    def transition(self, target: GroupState, now_ms: int) -> None:
        require_legal(self.group_id, self.state, target)
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    # --- membership bookkeeping (ClassicGroup.add/remove/replaceStaticMember/updateMember) ---

    def _count(self, member: Member, delta: int) -> None:
        # A name listed twice counts once (Kafka counts it twice and then fails to elect any
        # protocol; see spec/deviations.md).
        for name in {name for name, _ in member.protocols}:
            self.protocol_counts[name] = self.protocol_counts.get(name, 0) + delta

    def add(self, member: Member) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise AssertionError(f"static member {member.group_instance_id} already in {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count(member, +1)
        if member.awaiting_join is not None:
            self.num_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count(member, -1)
            if member.awaiting_join is not None:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def put(self, member: Member) -> None:
        """Replace a member's value; keeps the awaiting-join count right."""
        old = self.members[member.member_id]
        self.num_awaiting_join += (member.awaiting_join is not None) - (old.awaiting_join is not None)
        if old.protocols != member.protocols:
            self._count(old, -1)
            self._count(member, +1)
        self.members[member.member_id] = member

    def replace_static(self, instance_id: str, old_id: str, new_id: str) -> tuple[Member, Member]:
        """Move an instance's member to a new id. Returns (old, new); the caller answers the old
        member's parked requests (FENCED_INSTANCE_ID)."""
        old = self.members.pop(old_id)
        self._count(old, -1)
        if old.awaiting_join is not None:
            self.num_awaiting_join -= 1
        new = evolve(old, member_id=new_id, awaiting_join=None, awaiting_sync=None, is_new=False)
        self.members[new_id] = new
        self._count(new, +1)
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        # The old id stays pending-sync, as in Kafka (ClassicGroup.replaceStaticMember): if it
        # had not synced, the sync timer still fires and the group rebalances.
        return old, new

    def update(self, member: Member, protocols, rebalance_timeout_ms: int, session_timeout_ms: int,
               parked: Parked | None) -> Member:
        updated = evolve(member, protocols=protocols, rebalance_timeout_ms=rebalance_timeout_ms,
                         session_timeout_ms=session_timeout_ms, awaiting_join=parked)
        self.put(updated)
        return updated

    # --- protocol selection ------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        size = len(self.members)
        return {name for name, count in self.protocol_counts.items() if count == size}

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        # ClassicGroup.supportsProtocols: the Empty rule by state; a group rebalancing without
        # members keeps its protocol type (any name is then listed by "every" member)
        if self.state is EMPTY:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        size = len(self.members)
        return any(self.protocol_counts.get(name, 0) == size for name in names)

    def select_protocol(self) -> str:
        """The vote of §4.1: the most votes win; a tie goes to the name Kafka's HashMap of
        votes iterates first (``stream().max`` keeps the first of equal counts)."""
        if not self.members:
            raise AssertionError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        if len(votes) == 1:  # the common case: no tie to break
            return choice
        most = max(votes.values())
        # Kafka iterates its vote HashMap (deviation D1: insertion order within a bucket follows its members)
        return next(name for name in java_hashmap_order(list(votes)) if votes[name] == most)


def subscribed_topics(g) -> frozenset[str] | None:
    if g.protocol_type != "consumer":
        return None
    if not g.members:
        return frozenset()
    if g.protocol_name is None:
        return None
    topics: set[str] = set()
    # each distinct subscription once: members often send the same bytes
    for metadata in {member.metadata(g.protocol_name) for member in g.members.values()}:
        member_topics = subscription_topics(metadata)
        if member_topics is None:
            return None
        topics |= member_topics
    return frozenset(topics)


def assemble_group(group: Group, members=(), **fields) -> Group:
    """A group value from plain parts: ``group`` with ``members`` added in order (the
    bookkeeping Kafka keeps beside the member map follows from them), its ``leader_id`` kept,
    then ``fields`` set (``pending_members``, ``pending_sync``, ``new_member_added``...) and its
    subscribed topics derived. For loading records and for states built outside the core."""
    draft = GroupDraft(group)
    for member in members:
        draft.add(member)
    draft.leader_id = group.leader_id
    for name, value in fields.items():
        setattr(draft, name, value)
    draft.subscribed_topics = subscribed_topics(draft)
    return draft.freeze()
