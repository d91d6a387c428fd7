"""Kafka's sticky assignors: ``StickyAssignor`` ("sticky", eager) and
``CooperativeStickyAssignor`` ("cooperative-sticky"), ports of Kafka 4.0's
``AbstractStickyAssignor`` and its subclasses (without rack awareness), plus the delayed
reassignment of Kafka Connect's incremental cooperative protocol
(``scheduled_rebalance_max_delay_ms``; off by default)."""

from __future__ import annotations

import struct

from groupcoord.adapters.client.assignor_base import COOPERATIVE, EAGER, Assignor, AssignorError
from groupcoord.adapters.client.java_order import java_key, java_order, tp_key
from groupcoord.adapters.client.sticky_general import GeneralAssignment, all_but_ordered, list_remove
from groupcoord.core.classic.subscription import (
    DEFAULT_GENERATION,
    Assignment,
    ByteReader,
    ByteWriter,
    Subscription,
    TopicPartition,
)


class _MemberData:
    __slots__ = ("partitions", "generation")

    def __init__(self, partitions, generation):
        self.partitions = list(partitions)
        self.generation = generation  # None: absent


class AbstractStickyAssignor(Assignor):
    """Port of AbstractStickyAssignor (constrained and general assignment, no racks)."""

    def __init__(self) -> None:
        self.max_generation = DEFAULT_GENERATION  # kept across assignments, as in Kafka
        self.partitions_transferring_ownership: dict[TopicPartition, str] | None = {}

    def member_data(self, sub: Subscription) -> _MemberData:
        raise NotImplementedError

    def assign(self, partitions_per_topic, subscriptions, now_ms=0):
        consumer_to_owned: dict[str, list[TopicPartition]] = {}
        multiple_owners: set[TopicPartition] = set()
        if self._all_subscriptions_equal(set(partitions_per_topic), subscriptions, consumer_to_owned, multiple_owners):
            self.partitions_transferring_ownership = {}
            return self._constrained(partitions_per_topic, consumer_to_owned, multiple_owners)
        self.partitions_transferring_ownership = None
        return GeneralAssignment(self, partitions_per_topic, consumer_to_owned, subscriptions).build()

    def _all_subscriptions_equal(self, all_topics, subscriptions, consumer_to_owned, multiple_owners) -> bool:
        equal = True
        subscribed: set[str] = set()
        previous_owner: dict[TopicPartition, str] = {}
        for consumer, sub in subscriptions.items():
            if not subscribed:
                subscribed.update(sub.topics)
            elif equal and not (len(sub.topics) == len(subscribed) and subscribed.issuperset(sub.topics)):
                equal = False
            data = self.member_data(sub)
            generation = DEFAULT_GENERATION if data.generation is None else data.generation
            self.max_generation = max(self.max_generation, generation)
            owned: list[TopicPartition] = []
            consumer_to_owned[consumer] = owned
            for tp in data.partitions:
                if tp[0] not in all_topics:
                    continue
                other = previous_owner.get(tp)
                if other is None:
                    owned.append(tp)
                    previous_owner[tp] = consumer
                    continue
                other_generation = subscriptions[other].generation_id
                if generation == other_generation:
                    multiple_owners.add(tp)
                    list_remove(consumer_to_owned[other], tp)
                    previous_owner[tp] = consumer
                elif generation > other_generation:
                    owned.append(tp)
                    list_remove(consumer_to_owned[other], tp)
                    previous_owner[tp] = consumer
        return equal

    def _constrained(self, ppt, consumer_to_owned, multiple_owners):
        total = sum(ppt.values())
        n = len(consumer_to_owned)
        min_quota, max_quota = total // n, -(-total // n)
        expected_over = total % n
        over = 0
        assignment: dict[str, list[TopicPartition]] = {c: [] for c in consumer_to_owned}
        assigned: list[TopicPartition] = []
        maybe_revoked: dict[TopicPartition, str] = {}
        under: list[str] = []
        exact: list[str] = []
        transferring = self.partitions_transferring_ownership

        for consumer, owned in consumer_to_owned.items():
            owned = sorted(owned, key=lambda tp: (tp[1], java_key(tp[0])))
            for tp in multiple_owners:
                list_remove(owned, tp)
            target = assignment[consumer]
            if len(owned) < min_quota:
                target.extend(owned)
                assigned.extend(owned)
                under.append(consumer)
            elif len(owned) >= max_quota and over < expected_over:
                over += 1
                if over == expected_over:
                    exact.clear()
                target.extend(owned[:max_quota])
                assigned.extend(owned[:max_quota])
                for tp in owned[max_quota:]:
                    maybe_revoked[tp] = consumer
            else:
                target.extend(owned[:min_quota])
                assigned.extend(owned[:min_quota])
                for tp in owned[min_quota:]:
                    maybe_revoked[tp] = consumer
                if over < expected_over:
                    exact.append(consumer)

        unassigned = _unassigned_constrained(ppt, assigned)
        under.sort(key=java_key)
        exact.sort(key=java_key)

        def assign_new(tp, consumer) -> int:
            target = assignment[consumer]
            target.append(tp)
            if (tp in maybe_revoked and maybe_revoked[tp] != consumer) or tp in multiple_owners:
                transferring[tp] = consumer
            return len(target)

        index = 0  # a java.util.Iterator over `under` that supports remove()
        for tp in unassigned:
            if index < len(under):
                consumer = under[index]
                index += 1
            elif not under and not exact:
                raise AssignorError("sticky assignor: no more unfilled consumers to be assigned")
            elif not under:
                consumer = exact.pop(0)
            else:
                consumer = under[0]
                index = 1
            count = assign_new(tp, consumer)
            if count == min_quota:
                del under[index - 1]
                index -= 1
                exact.append(consumer)
            elif count == max_quota:
                over += 1

        if under:
            if over != expected_over:
                raise AssignorError("sticky assignor: expected number of members over minQuota not reached")
            for consumer in under:
                if len(assignment[consumer]) != min_quota:
                    raise AssignorError(f"sticky assignor: consumer {consumer} does not reach minQuota")
        return assignment


def _unassigned_constrained(ppt, assigned: list[TopicPartition]) -> list[TopicPartition]:
    """getUnassignedPartitions of the constrained builder."""
    every = [(t, p) for t in sorted(ppt, key=java_key) for p in range(ppt[t])]
    return all_but_ordered(every, sorted(assigned, key=tp_key)) if assigned else every


class StickyAssignor(AbstractStickyAssignor):
    """"sticky" (eager): the previous assignment travels in the subscription's user data."""

    name = "sticky"

    def __init__(self) -> None:
        super().__init__()
        self.member_assignment: list[TopicPartition] | None = None
        self.generation = DEFAULT_GENERATION

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        self.member_assignment = list(assignment.partitions)
        self.generation = generation_id

    def subscription_user_data(self, topics) -> bytes | None:
        if self.member_assignment is None:
            return None
        w = ByteWriter()
        w.topic_partitions(self.member_assignment, java_order)
        w.int32(self.generation)
        return w.bytes()

    def member_data(self, sub: Subscription) -> _MemberData:
        if not sub.user_data:
            return _MemberData((), None)
        r = ByteReader(sub.user_data, "sticky user data")
        try:
            partitions = r.topic_partitions()
        except AssignorError:
            return _MemberData((), DEFAULT_GENERATION)
        try:
            generation = r.int32()
        except AssignorError:
            generation = None  # version-0 user data has no generation
        return _MemberData(partitions, generation)


class CooperativeStickyAssignor(AbstractStickyAssignor):
    """"cooperative-sticky": owned partitions come in the subscription; a partition moving to
    another member is only revoked in this round and handed out in the next one.

    ``scheduled_rebalance_max_delay_ms`` > 0 adds Kafka Connect's delayed reassignment: the
    partitions of a member that left are held back (assigned to nobody) until the delay has
    passed since they were first found lost; every member's assignment then carries the
    remaining delay in its user data (``assignment_delay``), after which members rejoin and
    the held partitions are assigned. The state lives in the leader's assignor instance; a new
    leader starts without it and assigns at once."""

    name = "cooperative-sticky"
    protocols = (COOPERATIVE, EAGER)

    def __init__(self, scheduled_rebalance_max_delay_ms: int = 0) -> None:
        super().__init__()
        self.generation = DEFAULT_GENERATION
        self.delay_ms = scheduled_rebalance_max_delay_ms
        self.previous: dict[str, list[TopicPartition]] | None = None  # the last assignment computed here
        self.held: dict[TopicPartition, str] = {}  # lost partition -> member that had it
        self.deadline_ms: int | None = None
        self._remaining = 0

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        self.generation = generation_id

    def subscription_user_data(self, topics) -> bytes | None:
        return struct.pack(">i", self.generation)

    def member_data(self, sub: Subscription) -> _MemberData:
        if sub.generation_id != DEFAULT_GENERATION:
            return _MemberData(sub.owned_partitions, sub.generation_id)
        if sub.user_data is None:
            generation = None
        elif len(sub.user_data) >= 4:
            generation = struct.unpack_from(">i", sub.user_data)[0]
        else:
            generation = DEFAULT_GENERATION
        return _MemberData(sub.owned_partitions, generation)

    def assign(self, partitions_per_topic, subscriptions, now_ms=0):
        assignment = super().assign(partitions_per_topic, subscriptions)
        transferring = self.partitions_transferring_ownership
        if transferring is None:
            transferring = _transferring(subscriptions, assignment)
        for tp, consumer in transferring.items():
            list_remove(assignment[consumer], tp)
        if self.delay_ms > 0:
            self._hold_lost(partitions_per_topic, subscriptions, assignment, now_ms)
        return assignment

    def _hold_lost(self, ppt, subscriptions, assignment, now_ms) -> None:
        owned = {tp for sub in subscriptions.values() for tp in sub.owned_partitions}
        existing = {(t, p) for t, n in ppt.items() for p in range(n)}
        lost = {tp: m for tp, m in self.held.items() if tp in existing and tp not in owned}
        for member, partitions in (self.previous or {}).items():
            if member not in subscriptions:
                for tp in partitions:
                    if tp in existing and tp not in owned:
                        lost.setdefault(tp, member)
        self._remaining = 0
        if lost and self.deadline_ms is None:
            self.deadline_ms = now_ms + self.delay_ms
        if lost and now_ms < self.deadline_ms:
            self._remaining = self.deadline_ms - now_ms
            for partitions in assignment.values():
                partitions[:] = [tp for tp in partitions if tp not in lost]
            self.held = lost
        else:
            self.held, self.deadline_ms = {}, None
        self.previous = {m: list(tps) for m, tps in assignment.items()}

    def user_data_for(self, member_id: str) -> bytes | None:
        return encode_assignment_delay(self._remaining) if self._remaining > 0 else None


def _transferring(subscriptions, assignment) -> dict[TopicPartition, str]:
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for consumer, assigned in assignment.items():
        owned = subscriptions[consumer].owned_partitions
        owned_set, assigned_set = set(owned), set(assigned)
        for tp in assigned:
            if tp not in owned_set:
                added[tp] = consumer
        revoked.update(tp for tp in owned if tp not in assigned_set)
    return {tp: c for tp, c in added.items() if tp in revoked}


def encode_assignment_delay(delay_ms: int) -> bytes:
    """The user data of a delayed assignment: int16 version 0, int32 remaining delay (ms)."""
    return struct.pack(">hi", 0, delay_ms)


def assignment_delay(assignment: Assignment) -> int:
    """The remaining delay a (cooperative-sticky with delay) assignment carries, else 0."""
    data = assignment.user_data
    if data is None or len(data) != 6:
        return 0
    version, delay = struct.unpack(">hi", data)
    return delay if version == 0 and delay > 0 else 0


