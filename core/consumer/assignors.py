"""KIP-848's server-side assignors, ``uniform`` and ``range``, as pure functions.

``assign(name, members, topics)`` gives, for the same inputs, the target assignment Kafka's group
coordinator computes with its ``UniformAssignor`` / ``RangeAssignor`` (package
``org.apache.kafka.coordinator.group.assignor``). The Kafka files and methods each part follows,
the commits read and every ordering choice are listed in spec/consumer.md, section "Assignors".

Orders. Kafka's builders walk Java hash maps and sets in places; here:

- members are walked in Java ``String.compareTo`` order of their ids (Kafka walks the group's
  ``HashMap``; its assignor tests hand in ``TreeMap``s, i.e. this order);
- a topic set the homogeneous builder walks is walked in the order of a Java ``HashSet<Uuid>``
  of that size (bucket of ``Uuid.hashCode``, spread as ``HashMap.hash`` does), ties in a bucket
  by ``Uuid.compareTo``; when some topic id is not a UUID (Kafka's 22-character base64 text or
  the 36-character hex form) every order on topic ids is Java string order instead;
- a member's ``assigned`` mapping is walked in its own iteration order, its partitions ascending.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Collection, Iterable, Mapping

import attrs

__all__ = ["ASSIGNORS", "MemberSpec", "TopicSpec", "assign"]

# Kafka's default order for group.consumer.assignors: uniform first (the default assignor).
ASSIGNORS = ("uniform", "range")


@attrs.frozen
class MemberSpec:
    subscribed: frozenset[str]  # topic ids the member subscribes to (after regex resolution), present in `topics`
    assigned: Mapping[str, frozenset[int]]  # its current target assignment: topic id -> partitions (stickiness input)
    instance_id: str | None = None
    rack_id: str | None = None


@attrs.frozen
class TopicSpec:
    name: str
    partitions: int


def assign(
    assignor: str, members: Mapping[str, MemberSpec], topics: Mapping[str, TopicSpec]
) -> dict[str, dict[str, frozenset[int]]]:
    """member id -> topic id -> partitions; every member of `members` present (empty dict when nothing)."""
    if assignor not in ASSIGNORS:
        raise ValueError(f"unknown assignor {assignor!r}: not one of {', '.join(ASSIGNORS)}")
    for member_id, member in members.items():
        for topic_id in member.subscribed:
            if topic_id not in topics:
                # Kafka: PartitionAssignorException (subscribed to a topic missing from the metadata)
                raise ValueError(f"member {member_id!r} subscribes to topic {topic_id!r}, which is not in the topics")
    _check_single_owner(members, topics)
    order = _TopicOrder(topics)
    if assignor == "range":
        computed = _range(members, topics)
    elif not members:
        computed = {}
    elif _homogeneous(members):
        computed = _uniform_homogeneous(members, topics, order)
    else:
        computed = _uniform_heterogeneous(members, topics, order)
    return {
        member_id: {
            topic_id: frozenset(computed[member_id][topic_id])
            for topic_id in order.hash_set_order(computed.get(member_id, {}))
            if computed[member_id][topic_id]
        }
        for member_id in members
    }


# -- orders -------------------------------------------------------------------------------------

_BASE64_UUID = re.compile(r"[A-Za-z0-9_-]{22}")
_HEX_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _java_string_key(text: str) -> bytes:
    """Sort key giving Java's ``String.compareTo`` order (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


def _uuid_bits(topic_id: str) -> tuple[int, int] | None:
    """Kafka ``Uuid``'s (mostSignificantBits, leastSignificantBits), signed, or None if not a UUID."""
    if _BASE64_UUID.fullmatch(topic_id):
        try:
            raw = base64.b64decode(topic_id + "==", altchars=b"-_", validate=True)
        except binascii.Error:
            return None
    elif _HEX_UUID.fullmatch(topic_id):
        raw = bytes.fromhex(topic_id.replace("-", ""))
    else:
        return None
    if len(raw) != 16:
        return None
    return int.from_bytes(raw[:8], "big", signed=True), int.from_bytes(raw[8:], "big", signed=True)


def _table_size_for(capacity: int) -> int:
    size = 1
    while size < capacity:
        size <<= 1
    return size


class _TopicOrder:
    """Kafka's orders on topic ids (``Uuid.compareTo``, ``HashSet<Uuid>`` iteration)."""

    def __init__(self, topics: Mapping[str, TopicSpec]) -> None:
        bits = {topic_id: _uuid_bits(topic_id) for topic_id in topics}
        self._uuids: dict[str, tuple[int, int]] | None = (
            {t: b for t, b in bits.items() if b is not None} if all(b is not None for b in bits.values()) else None
        )

    def _known(self, topic_id: str) -> bool:
        return self._uuids is not None and topic_id in self._uuids

    def compare_key(self, topic_id: str) -> tuple[int, int] | bytes:
        """``Uuid.compareTo``: signed most, then least significant bits (string order otherwise)."""
        if self._uuids is not None and topic_id in self._uuids:
            return self._uuids[topic_id]
        return _java_string_key(topic_id)

    def hash_set_order(self, topic_ids: Collection[str]) -> list[str]:
        """The iteration order of ``new HashSet<Uuid>(topicIds)``."""
        if not all(self._known(t) for t in topic_ids) or self._uuids is None:
            return sorted(topic_ids, key=_java_string_key)
        uuids = self._uuids
        # HashSet(Collection c): HashMap(max((int) (c.size() / .75f) + 1, 16)), sized once.
        mask = _table_size_for(max(len(topic_ids) * 4 // 3 + 1, 16)) - 1

        def bucket(topic_id: str) -> int:
            msb, lsb = uuids[topic_id]
            xor = (msb ^ lsb) & 0xFFFF_FFFF_FFFF_FFFF
            h = ((xor >> 32) ^ xor) & 0xFFFF_FFFF  # Uuid.hashCode
            return (h ^ (h >> 16)) & mask  # HashMap.hash, then the table index

        return sorted(topic_ids, key=lambda t: (bucket(t), uuids[t]))


def _member_order(members: Iterable[str]) -> list[str]:
    return sorted(members, key=_java_string_key)


def _valid_partitions(partitions: Iterable[int], count: int) -> list[int]:
    """A member's partitions of a topic, ascending, those beyond the topic's partition count dropped."""
    return sorted(p for p in partitions if 0 <= p < count)


def _check_single_owner(members: Mapping[str, MemberSpec], topics: Mapping[str, TopicSpec]) -> None:
    """A target assignment gives a partition to one member; the assignors rely on it."""
    owners: dict[tuple[str, int], str] = {}
    for member_id, member in members.items():
        for topic_id, partitions in member.assigned.items():
            if topic_id not in member.subscribed or topic_id not in topics:
                continue  # dropped anyway
            for partition in _valid_partitions(partitions, topics[topic_id].partitions):
                other = owners.setdefault((topic_id, partition), member_id)
                if other != member_id:
                    raise ValueError(
                        f"partition {partition} of topic {topic_id!r} is assigned to both {other!r} and {member_id!r}"
                    )


def _homogeneous(members: Mapping[str, MemberSpec]) -> bool:
    """Kafka's SubscriptionType.HOMOGENEOUS: every member subscribes to the same topics."""
    first = next(iter(members.values())).subscribed
    return all(member.subscribed == first for member in members.values())


# -- uniform, homogeneous subscriptions ---------------------------------------------------------


def _uniform_homogeneous(
    members: Mapping[str, MemberSpec], topics: Mapping[str, TopicSpec], order: _TopicOrder
) -> dict[str, dict[str, set[int]]]:
    """UniformHomogeneousAssignmentBuilder.build (without racks: Kafka's rack strategy is off)."""
    member_ids = _member_order(members)
    subscribed = next(iter(members.values())).subscribed
    if not subscribed:
        return {}
    counts = {topic_id: topics[topic_id].partitions for topic_id in subscribed}

    # The partitions nobody holds, in the topic set's order, each topic's ascending.
    held = {
        (topic_id, partition)
        for member in members.values()
        for topic_id, partitions in member.assigned.items()
        if topic_id in counts
        for partition in _valid_partitions(partitions, counts[topic_id])
    }
    unassigned = [
        (topic_id, partition)
        for topic_id in order.hash_set_order(subscribed)
        for partition in range(counts[topic_id])
        if (topic_id, partition) not in held
    ]
    total = sum(counts.values())
    minimum_quota, extra_left = divmod(total, len(member_ids))

    # maybeRevokePartitions: keep up to the quota, in the order the member's assignment is walked.
    target: dict[str, dict[str, set[int]]] = {}
    unfilled: list[tuple[str, int]] = []  # (member id, remaining quota)
    for member_id in member_ids:
        quota = minimum_quota
        has_extra = False
        if extra_left > 0:
            quota += 1
            has_extra = True
        kept: dict[str, set[int]] = {}
        for topic_id, partitions in members[member_id].assigned.items():
            if topic_id not in counts:
                continue  # no longer subscribed: the whole topic goes
            ordered = _valid_partitions(partitions, counts[topic_id])
            if len(ordered) <= quota:
                quota -= len(ordered)
                kept[topic_id] = set(ordered)
                continue
            keep: set[int] = set()
            for partition in ordered:
                if quota > 0:
                    quota -= 1
                    keep.add(partition)
                else:
                    unassigned.append((topic_id, partition))
            kept[topic_id] = keep
        if quota > 0 and has_extra:
            quota -= 1  # the member does not fill its extra partition: another may claim it
            has_extra = False
        if quota == 0 and has_extra:
            extra_left -= 1
        if quota > 0 or (extra_left > 0 and not has_extra):
            unfilled.append((member_id, quota))
        target[member_id] = kept

    # assignRemainingPartitions: the last unfilled members take the unclaimed extra partitions.
    takers: list[tuple[str, int]] = []
    for member_id, quota in reversed(unfilled):
        if extra_left > 0:
            extra_left -= 1
            quota += 1
        if quota > 0:
            takers.append((member_id, quota))
    takers.reverse()
    index = 0
    for member_id, quota in takers:
        for _ in range(quota):
            if index >= len(unassigned):
                break
            topic_id, partition = unassigned[index]
            index += 1
            target[member_id].setdefault(topic_id, set()).add(partition)
    if index < len(unassigned):
        raise AssertionError("partitions were left unassigned")  # Kafka: PartitionAssignorException
    return target


# -- uniform, heterogeneous subscriptions -------------------------------------------------------

_MAX_ITERATION_COUNT = 16


class _Balancer:
    """UniformHeterogeneousAssignmentBuilder.MemberAssignmentBalancer: least and most loaded ranges."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.sorted_members: list[int] = []
        self.least_end = 0
        self.least_count = -1
        self.next_least = 0
        self.most_start = 0
        self.most_end = 0
        self.most_count = 1
        self.next_most = -1

    def initialize(self, members: list[int]) -> int:
        if not members:
            raise ValueError("cannot balance an empty subscriber list")
        sizes = self.sizes
        self.sorted_members = sorted(members, key=lambda m: (sizes[m], m))
        first, last = self.sorted_members[0], self.sorted_members[-1]
        self.least_end = 0
        self.least_count = sizes[first] - 1
        self.next_least = 0
        self.most_start = len(self.sorted_members)
        self.most_end = len(self.sorted_members)
        self.most_count = sizes[last] + 1
        self.next_most = len(self.sorted_members) - 1
        return sizes[last] - sizes[first]

    def next_least_loaded(self) -> int:
        members, sizes = self.sorted_members, self.sizes
        if self.next_least >= self.least_end:
            self.least_count += 1
            while self.least_end < len(members) and sizes[members[self.least_end]] == self.least_count:
                self.least_end += 1
            self.next_least = 0
        member = members[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        members, sizes = self.sorted_members, self.sizes
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                self.most_count = sizes[members[self.most_start - 1]]
            else:
                self.most_count -= 1
            while self.most_start > 0 and sizes[members[self.most_start - 1]] == self.most_count:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = members[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        members = self.sorted_members
        slot = self.next_most + 1
        members[slot], members[self.most_end - 1] = members[self.most_end - 1], members[slot]
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1


def _uniform_heterogeneous(
    members: Mapping[str, MemberSpec], topics: Mapping[str, TopicSpec], order: _TopicOrder
) -> dict[str, dict[str, set[int]]]:
    """UniformHeterogeneousAssignmentBuilder.build."""
    member_ids = _member_order(members)
    subscribers: dict[str, list[int]] = {}
    for index, member_id in enumerate(member_ids):
        for topic_id in members[member_id].subscribed:
            subscribers.setdefault(topic_id, []).append(index)
    if not subscribers:
        return {}
    counts = {topic_id: topics[topic_id].partitions for topic_id in subscribers}
    sizes = [0] * len(member_ids)
    owners = {topic_id: [-1] * count for topic_id, count in counts.items()}
    target: dict[str, dict[str, set[int]]] = {}

    def topic_key(topic_id: str) -> tuple[float, int, tuple[int, int] | bytes]:
        # partitions per subscriber descending (as Java doubles), subscribers ascending, then the id
        count, subscriber_count = counts[topic_id], len(subscribers[topic_id])
        return (-(count / subscriber_count), subscriber_count, order.compare_key(topic_id))

    def sort_topics(topic_ids: Iterable[str]) -> list[str]:
        return sorted(topic_ids, key=topic_key)

    # maybeRevokePartitions: drop what the member no longer subscribes to, record the owners.
    for index, member_id in enumerate(member_ids):
        member = members[member_id]
        kept: dict[str, set[int]] = {}
        for topic_id, partitions in member.assigned.items():
            if topic_id not in member.subscribed:
                continue
            ordered = _valid_partitions(partitions, counts[topic_id])
            sizes[index] += len(ordered)
            for partition in ordered:
                owners[topic_id][partition] = index
            kept[topic_id] = set(ordered)
        target[member_id] = kept

    def move(topic_id: str, partition: int, index: int) -> None:
        old = owners[topic_id][partition]
        if old != -1:
            old_partitions = target[member_ids[old]].get(topic_id)
            if old_partitions is not None:
                old_partitions.discard(partition)
                if not old_partitions:
                    del target[member_ids[old]][topic_id]
            sizes[old] -= 1
        target[member_ids[index]].setdefault(topic_id, set()).add(partition)
        owners[topic_id][partition] = index
        sizes[index] += 1

    # assignRemainingPartitions: each topic's free partitions to its least loaded subscribers.
    unassigned = {
        topic_id: free
        for topic_id in counts
        if (free := [p for p in range(counts[topic_id]) if owners[topic_id][p] == -1])
    }
    balancer = _Balancer(sizes)
    for topic_id in sort_topics(unassigned):
        balancer.initialize(subscribers[topic_id])
        for partition in unassigned[topic_id]:
            move(topic_id, partition, balancer.next_least_loaded())

    # balance / balanceTopics: topics with two subscribers or more, round after round.
    movable = sort_topics(t for t in counts if len(subscribers[t]) >= 2)
    if movable:
        _balance_topics(movable, subscribers, counts, owners, _Balancer(sizes), move)
    return target


def _balance_topics(
    sorted_topics: list[str],
    subscribers: Mapping[str, list[int]],
    counts: Mapping[str, int],
    owners: Mapping[str, list[int]],
    balancer: _Balancer,
    move: Callable[[str, int, int], None],
) -> None:
    last_rebalanced = -1
    for _ in range(_MAX_ITERATION_COUNT):
        for topic_index, topic_id in enumerate(sorted_topics):
            if topic_index == last_rebalanced:
                return  # a whole round without a move
            moved = _balance_topic(topic_id, subscribers[topic_id], counts[topic_id], owners[topic_id], balancer, move)
            if moved > 0 or last_rebalanced == -1:
                last_rebalanced = topic_index


def _balance_topic(
    topic_id: str,
    topic_subscribers: list[int],
    count: int,
    topic_owners: list[int],
    balancer: _Balancer,
    move: Callable[[str, int, int], None],
) -> int:
    """UniformHeterogeneousAssignmentBuilder.balanceTopic: most loaded subscribers give to least loaded ones."""
    if balancer.initialize(topic_subscribers) <= 1:
        return 0
    partitions = sorted(range(count), key=lambda p: (topic_owners[p], p))
    start: dict[int, int] = {}
    end: dict[int, int] = {}  # exclusive
    for position, partition in enumerate(partitions):
        owner = topic_owners[partition]
        start.setdefault(owner, position)
        end[owner] = position + 1
    moved = 0
    while not balancer.is_balanced():
        giver = -1
        while True:
            giver = balancer.next_most_loaded()
            if giver == -1:
                break
            if giver not in end or end[giver] - start[giver] <= 0:
                balancer.exclude_most_loaded()
                continue
            break
        if giver == -1:
            break
        end[giver] -= 1
        partition = partitions[end[giver]]
        taker = balancer.next_least_loaded()
        if balancer.is_balanced():
            break
        move(topic_id, partition, taker)
        moved += 1
    return moved


# -- range ----------------------------------------------------------------------------------------


def _range(members: Mapping[str, MemberSpec], topics: Mapping[str, TopicSpec]) -> dict[str, dict[str, set[int]]]:
    """RangeAssignor.assign: each topic's partitions in contiguous ranges over its sorted subscribers.

    Homogeneous and heterogeneous groups take the same arithmetic (assignHomogeneousGroup counts
    every member, assignHeterogeneousGroup each topic's subscribers: the same number when all
    subscribe alike). Static members first, by instance id, then the others by member id
    (sortMemberIds); the current assignment plays no part.
    """

    def member_key(member_id: str) -> tuple[int, bytes, bytes]:
        instance_id = members[member_id].instance_id
        if instance_id is not None:
            return (0, _java_string_key(instance_id), _java_string_key(member_id))
        return (1, _java_string_key(member_id), b"")

    ordered = sorted(members, key=member_key)
    target: dict[str, dict[str, set[int]]] = {member_id: {} for member_id in ordered}
    topic_ids = {topic_id for member in members.values() for topic_id in member.subscribed}
    for topic_id in topic_ids:
        subscribers = [m for m in ordered if topic_id in members[m].subscribed]
        count = topics[topic_id].partitions
        minimum_quota, extra = divmod(count, len(subscribers))
        start = 0
        for position, member_id in enumerate(subscribers):
            end = min(start + minimum_quota + (1 if position < extra else 0), count)
            if start < end:
                target[member_id][topic_id] = set(range(start, end))
            start = end
    return target
