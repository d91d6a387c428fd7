"""Kafka's client-side partition assignors and the consumer protocol, as a pure library.

The classic group coordinator never looks inside assignments: the group leader (a client)
computes them with one of these strategies and sends them in its SyncGroup. This module is
what such a client runs, for embedders, the simulator and tests:

* ``RangeAssignor`` ("range"), ``RoundRobinAssignor`` ("roundrobin"), ``StickyAssignor``
  ("sticky", eager) and ``CooperativeStickyAssignor`` ("cooperative-sticky"): ports of
  ``org.apache.kafka.clients.consumer.*Assignor`` (Kafka 4.0, without rack awareness).
  They give the assignments Kafka's clients give, including where Kafka's result depends on
  the iteration order of a ``java.util.HashMap`` (which is emulated: ``java_order``).
* The consumer protocol's ``Subscription`` and ``Assignment`` with their byte formats
  (``ConsumerProtocolSubscription`` v0-3, ``ConsumerProtocolAssignment`` v0-3).
* ``leader_assign``: what ``ConsumerCoordinator.onLeaderElected`` does with a JoinGroup
  response's member list; ``on_assignment``: what a member does with its SyncGroup answer
  (``onJoinComplete``), including the cooperative protocol's second round: a member that
  must revoke partitions rejoins at once, and the next round hands them out.
* ``CooperativeStickyAssignor(scheduled_rebalance_max_delay_ms=...)``: the delayed
  reassignment of a departed member's partitions of Kafka Connect's incremental cooperative
  protocol (``scheduled.rebalance.max.delay.ms``). Not part of Kafka's consumer assignors;
  off (0) by default, in which case assignments are Kafka's byte for byte.

Pure: no clock (``now_ms`` is passed in), no randomness, no I/O.
"""

from __future__ import annotations

import struct
from typing import Iterable, Mapping, Sequence

import attrs

from groupcoord.adapters.client.java_order import JavaHashOrder, java_key, java_order, tp_hash, tp_key
from groupcoord.core.consumer_protocol import (
    DEFAULT_GENERATION,
    Assignment,
    ByteReader,
    ByteWriter,
    ConsumerProtocolError,
    Subscription,
    TopicPartition,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

EAGER, COOPERATIVE = "eager", "cooperative"


# Bad protocol bytes, or an assignment Kafka's client would refuse: one error for both.
AssignorError = ConsumerProtocolError


# ----------------------------------------------------------------- the assignors


class Assignor:
    """``ConsumerPartitionAssignor``. ``assign`` takes the subscriptions keyed by member id in
    Java HashMap order (``leader_assign`` builds that) and returns member -> partitions."""

    name = ""
    protocols: tuple[str, ...] = (EAGER,)

    def subscription_user_data(self, topics) -> bytes | None:
        return None

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        pass

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
               now_ms: int = 0) -> dict[str, list[TopicPartition]]:
        raise NotImplementedError

    def user_data_for(self, member_id: str) -> bytes | None:
        """User data to send with a member's assignment (none for Kafka's own assignors)."""
        return None


def _member_order(members: Iterable[tuple[str, Subscription]]) -> list[str]:
    """MemberInfo's order: static members by instance id first, then by member id."""
    def key(item):
        mid, sub = item
        if sub.group_instance_id is not None:
            return (0, java_key(sub.group_instance_id))
        return (1, java_key(mid))
    return [mid for mid, _ in sorted(members, key=key)]


class RangeAssignor(Assignor):
    name = "range"

    def assign(self, partitions_per_topic, subscriptions, now_ms=0):
        consumers_per_topic: dict[str, list[tuple[str, Subscription]]] = {}
        for mid, sub in subscriptions.items():
            for topic in sub.topics:
                consumers_per_topic.setdefault(topic, []).append((mid, sub))
        assignment: dict[str, list[TopicPartition]] = {mid: [] for mid in subscriptions}
        # partitionsPerTopic is a HashMap: topics are handled in Java's order.
        for topic in java_order(list(partitions_per_topic)):
            count = partitions_per_topic[topic]
            if count <= 0:
                continue
            # A member listing a topic twice appears twice in Kafka's list (LinkedHashMap keeps one).
            members = list(dict.fromkeys(_member_order(consumers_per_topic.get(topic, []))))
            if not members:
                continue
            per, extra = divmod(count, len(members))
            start = 0
            for i, mid in enumerate(members):
                n = per + (1 if i < extra else 0)
                assignment[mid].extend((topic, p) for p in range(start, start + n))
                start += n
        return assignment


class RoundRobinAssignor(Assignor):
    name = "roundrobin"

    def assign(self, partitions_per_topic, subscriptions, now_ms=0):
        assignment: dict[str, list[TopicPartition]] = {mid: [] for mid in subscriptions}
        members = _member_order(subscriptions.items())
        if not members:
            return assignment
        topics = sorted({t for sub in subscriptions.values() for t in sub.topics}, key=java_key)
        subscribed = {mid: set(sub.topics) for mid, sub in subscriptions.items()}
        i = 0
        for topic in topics:
            count = partitions_per_topic.get(topic)
            if count is None:
                continue
            for p in range(count):
                while topic not in subscribed[members[i]]:
                    i = (i + 1) % len(members)
                assignment[members[i]].append((topic, p))
                i = (i + 1) % len(members)
        return assignment


class _MemberData:
    __slots__ = ("partitions", "generation")

    def __init__(self, partitions, generation):
        self.partitions = list(partitions)
        self.generation = generation  # None: absent


class _PartitionMovements:
    """AbstractStickyAssignor.PartitionMovements, with Java's HashSet order where it shows."""

    def __init__(self) -> None:
        self.by_topic: dict[str, dict[tuple[str, str], JavaHashOrder]] = {}
        self.movements: dict[TopicPartition, tuple[str, str]] = {}

    def _remove_record(self, tp):
        pair = self.movements.pop(tp)
        per_topic = self.by_topic[tp[0]]
        per_topic[pair].remove(tp)
        if not len(per_topic[pair]):
            del per_topic[pair]
        if not per_topic:
            del self.by_topic[tp[0]]
        return pair

    def _add_record(self, tp, pair) -> None:
        self.movements[tp] = pair
        per_topic = self.by_topic.setdefault(tp[0], {})
        per_topic.setdefault(pair, JavaHashOrder(tp_hash)).add(tp)

    def move(self, tp, old: str, new: str) -> None:
        if tp in self.movements:
            existing = self._remove_record(tp)
            if existing[0] != new:
                self._add_record(tp, (existing[0], new))
        else:
            self._add_record(tp, (old, new))

    def actual_partition_to_move(self, tp, old: str, new: str):
        per_topic = self.by_topic.get(tp[0])
        if per_topic is None:
            return tp
        if tp in self.movements:
            old = self.movements[tp][0]
        reverse = per_topic.get((new, old))
        if reverse is None:
            return tp
        return reverse.first()


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
        return _GeneralAssignment(self, partitions_per_topic, consumer_to_owned, subscriptions).build()

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
                    _list_remove(consumer_to_owned[other], tp)
                    previous_owner[tp] = consumer
                elif generation > other_generation:
                    owned.append(tp)
                    _list_remove(consumer_to_owned[other], tp)
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
                _list_remove(owned, tp)
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


def _list_remove(values: list, value) -> None:
    try:
        values.remove(value)
    except ValueError:
        pass


def _unassigned_constrained(ppt, assigned: list[TopicPartition]) -> list[TopicPartition]:
    """getUnassignedPartitions of the constrained builder (two pointers, as Kafka)."""
    topics = sorted(ppt, key=java_key)
    if not assigned:
        return [(t, p) for t in topics for p in range(ppt[t])]
    ordered = sorted(assigned, key=tp_key)
    out, i, direct = [], 0, False
    nxt = ordered[0]
    for topic in topics:
        for p in range(ppt[topic]):
            if direct or not (nxt[0] == topic and nxt[1] == p):
                out.append((topic, p))
            elif i + 1 < len(ordered):
                i += 1
                nxt = ordered[i]
            else:
                direct = True
    return out


class _GeneralAssignment:
    """GeneralAssignmentBuilder (subscriptions differ)."""

    def __init__(self, owner: AbstractStickyAssignor, ppt, current, subscriptions) -> None:
        self.owner, self.ppt, self.current, self.subscriptions = owner, dict(ppt), current, subscriptions
        self.total = sum(self.ppt.values())
        self.topic2consumers: dict[str, list[str]] = {t: [] for t in self.ppt}
        self.consumer2topics: dict[str, list[str]] = {}
        for cid, sub in subscriptions.items():
            topics: list[str] = []
            self.consumer2topics[cid] = topics
            for topic in sub.topics:
                if topic in self.ppt:
                    topics.append(topic)
                    self.topic2consumers[topic].append(cid)
            if cid not in current:
                current[cid] = []
        self.cpc = {tp: c for c, tps in current.items() for tp in tps}
        sorted_topics = sorted(self.topic2consumers, key=lambda t: (len(self.topic2consumers[t]), java_key(t)))
        self.sorted_all = [(t, p) for t in sorted_topics for p in range(self.ppt[t])]
        self.subs: set[str] = set()  # the TreeSet sortedCurrentSubscriptions
        self.revocation_required = False
        self.movements = _PartitionMovements()

    # TreeSet<String> ordered by (assignment size, member id)
    def _sorted_subs(self) -> list[str]:
        current = self.current
        return sorted(self.subs, key=lambda c: (len(current[c]), java_key(c)))

    def _partition_key(self, tp):
        return len(self.topic2consumers[tp[0]]), java_key(tp[0]), tp[1]

    def build(self):
        owner = self.owner
        prev: dict[TopicPartition, tuple[str, int]] = {}
        for consumer, sub in self.subscriptions.items():
            data = owner.member_data(sub)
            if data.generation is not None and data.generation < owner.max_generation:
                self._update_prev(prev, data.partitions, consumer, data.generation)
            elif data.generation is None and owner.max_generation > DEFAULT_GENERATION:
                self._update_prev(prev, data.partitions, consumer, DEFAULT_GENERATION)
        assigned = self._assign_owned()
        unassigned = self._unassigned(assigned)
        self.subs.update(self.current)
        self._balance(prev, unassigned)
        return self.current

    @staticmethod
    def _update_prev(prev, partitions, consumer, generation) -> None:
        for tp in partitions:
            if tp not in prev or generation > prev[tp][1]:
                prev[tp] = (consumer, generation)

    def _assign_owned(self) -> list[TopicPartition]:
        assigned = []
        for consumer in list(self.current):
            sub = self.subscriptions.get(consumer)
            if sub is None:
                for tp in self.current[consumer]:
                    self.cpc.pop(tp, None)
                del self.current[consumer]
                continue
            keep = []
            for tp in self.current[consumer]:
                if tp[0] not in self.topic2consumers:
                    self.cpc.pop(tp, None)
                elif tp[0] not in sub.topics:
                    self.revocation_required = True  # (Kafka leaves cpc as it is here)
                else:
                    keep.append(tp)
                    assigned.append(tp)
            self.current[consumer][:] = keep
        return assigned

    def _unassigned(self, assigned):
        if not assigned:
            return self.sorted_all
        ordered = sorted(assigned, key=self._partition_key)
        out, i, direct = [], 0, False
        nxt = ordered[0]
        for tp in self.sorted_all:
            if direct or nxt != tp:
                out.append(tp)
            elif i + 1 < len(ordered):
                i += 1
                nxt = ordered[i]
            else:
                direct = True
        return out

    def _max_size(self, topics) -> int:
        if len(topics) == len(self.ppt):
            return self.total
        return sum(self.ppt[t] for t in topics)

    def _is_balanced(self) -> bool:
        order = self._sorted_subs()
        current = self.current
        if len(current[order[0]]) >= len(current[order[-1]]) - 1:
            return True
        owners = {tp: c for c, tps in current.items() for tp in tps}
        for consumer in order:
            mine = current[consumer]
            count = len(mine)
            topics = self.consumer2topics[consumer]
            if count == self._max_size(topics):
                continue
            mine_set = set(mine)
            for topic in topics:
                for p in range(self.ppt[topic]):
                    tp = (topic, p)
                    if tp not in mine_set:
                        other = owners[tp]
                        if count + 1 < len(current[other]):
                            return False
        return True

    @staticmethod
    def _score(assignment) -> int:
        sizes = [len(v) for v in assignment.values()]
        return sum(abs(a - b) for i, a in enumerate(sizes) for b in sizes[i + 1:])

    def _maybe_assign_partition(self, tp) -> bool:
        for consumer in self._sorted_subs():
            if tp[0] in self.consumer2topics[consumer]:
                self.current[consumer].append(tp)
                self.cpc[tp] = consumer
                return True
        return False

    def _can_consumer_participate(self, consumer) -> bool:
        partitions = self.current[consumer]
        if len(partitions) < self._max_size(self.consumer2topics[consumer]):
            return True
        return any(len(self.topic2consumers[tp[0]]) >= 2 for tp in partitions)

    def _balance(self, prev, unassigned) -> None:
        initializing = not self.current[self._sorted_subs()[-1]]
        for tp in unassigned:
            if self.topic2consumers[tp[0]]:
                self._maybe_assign_partition(tp)
        fixed = {(t, p) for t, consumers in self.topic2consumers.items() if len(consumers) < 2
                 for p in range(self.ppt[t])}
        self.sorted_all[:] = [tp for tp in self.sorted_all if tp not in fixed]
        if unassigned is not self.sorted_all:
            unassigned[:] = [tp for tp in unassigned if tp not in fixed]
        fixed_assignments = {}
        for consumer in list(self.consumer2topics):
            if not self._can_consumer_participate(consumer):
                self.subs.discard(consumer)
                fixed_assignments[consumer] = self.current.pop(consumer)
        before = {c: list(tps) for c, tps in self.current.items()}
        before_cpc = dict(self.cpc)
        if not self.revocation_required:
            self._perform_reassignments(unassigned, prev)
        performed = self._perform_reassignments(self.sorted_all, prev)
        if not initializing and performed and self._score(self.current) >= self._score(before):
            self.current.clear()
            self.current.update({c: list(tps) for c, tps in before.items()})
            self.cpc = before_cpc
        for consumer, tps in fixed_assignments.items():
            self.current[consumer] = tps
            self.subs.add(consumer)

    def _perform_reassignments(self, partitions, prev) -> bool:
        performed = False
        while True:
            modified = False
            for tp in partitions:
                if self._is_balanced():
                    break
                consumer = self.cpc[tp]
                size = len(self.current[consumer])
                if tp in prev and size > len(self.current[prev[tp][0]]) + 1:
                    self._reassign(tp, prev[tp][0])
                    performed = modified = True
                    continue
                for other in self.topic2consumers[tp[0]]:
                    if size > len(self.current[other]) + 1:
                        new = next(c for c in self._sorted_subs() if tp[0] in self.consumer2topics[c])
                        self._reassign(tp, new)
                        performed = modified = True
                        break
            if not modified:
                return performed

    def _reassign(self, tp, new: str) -> None:
        consumer = self.cpc[tp]
        moved = self.movements.actual_partition_to_move(tp, consumer, new)
        old = self.cpc[moved]
        self.movements.move(moved, old, new)
        _list_remove(self.current[old], moved)
        self.current[new].append(moved)
        self.cpc[moved] = new


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
            _list_remove(assignment[consumer], tp)
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


ASSIGNORS = {cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)}


def make_assignor(name: str, **options) -> Assignor:
    try:
        cls = ASSIGNORS[name]
    except KeyError:
        raise AssignorError(f"unknown assignor {name!r}; known: {', '.join(ASSIGNORS)}") from None
    return cls(**options)


# ----------------------------------------------------------------- the client's side


def rebalance_protocol(assignors: Sequence[Assignor]) -> str:
    """The protocol every configured assignor supports, preferring cooperative (Kafka's
    ConsumerCoordinator picks the highest common one)."""
    common = set(assignors[0].protocols)
    for a in assignors[1:]:
        common &= set(a.protocols)
    if not common:
        raise AssignorError("the configured assignors support no common rebalance protocol")
    return COOPERATIVE if COOPERATIVE in common else EAGER


def leader_assign(assignor: Assignor, members: Sequence[tuple[str, str | None, bytes]],
                  partitions_per_topic: Mapping[str, int], *, protocol: str = EAGER,
                  now_ms: int = 0) -> dict[str, bytes]:
    """The leader's SyncGroup assignments (member id -> assignment bytes) for a JoinGroup
    response's members ``(member_id, group_instance_id, metadata)``, as
    ConsumerCoordinator.onLeaderElected computes them. Topics without metadata (not in
    ``partitions_per_topic``) are skipped, as Kafka skips topics it has no partitions for."""
    subs = {mid: decode_subscription(meta, inst) for mid, inst, meta in members}
    ordered = {mid: subs[mid] for mid in java_order([mid for mid, _, _ in members])}
    # AbstractPartitionAssignor: a HashSet of the subscribed topics, then a HashMap of those
    # with partitions, each filled in the other's iteration order.
    subscribed = java_order(list(dict.fromkeys(t for s in ordered.values() for t in s.topics)))
    ppt = {t: partitions_per_topic[t] for t in java_order(
        [t for t in subscribed if partitions_per_topic.get(t, 0) > 0])}
    raw = assignor.assign(ppt, ordered, now_ms)
    if protocol == COOPERATIVE and assignor.name != CooperativeStickyAssignor.name:
        validate_cooperative(ordered, raw)
    return {mid: encode_assignment(Assignment(tuple(raw.get(mid, ())), assignor.user_data_for(mid)),
                                  topic_order=java_order)
            for mid in ordered}


def validate_cooperative(subscriptions: Mapping[str, Subscription], assignment) -> None:
    """ConsumerCoordinator.validateCooperativeAssignment: no owned partition may move to
    another member in one round."""
    added, revoked = set(), set()
    for mid, partitions in assignment.items():
        owned = set(subscriptions[mid].owned_partitions)
        added |= set(partitions) - owned
        revoked |= owned - set(partitions)
    both = added & revoked
    if both:
        raise AssignorError(f"cooperative assignor moved owned partitions {sorted(both)} in one round")


@attrs.frozen
class AssignmentOutcome:
    """What a member does with the assignment in its SyncGroup answer."""

    assigned: tuple[TopicPartition, ...]
    added: tuple[TopicPartition, ...]
    revoked: tuple[TopicPartition, ...]
    rejoin: bool  # cooperative: it revoked something, so it rejoins at once (the second round)
    rejoin_after_ms: int  # > 0: a delayed assignment; rejoin when it has passed


def on_assignment(owned: Iterable[TopicPartition], assignment_bytes: bytes, protocol: str) -> AssignmentOutcome:
    """ConsumerCoordinator.onJoinComplete: added = assigned - owned; with the cooperative
    protocol revoked = owned - assigned, and any revocation asks for another round. (With the
    eager protocol everything was revoked before joining, so ``owned`` is empty.)"""
    assignment = decode_assignment(assignment_bytes)
    assigned = sorted(set(assignment.partitions), key=tp_key)
    owned_set = set(owned)
    added = tuple(tp for tp in assigned if tp not in owned_set)
    revoked = ()
    if protocol == COOPERATIVE:
        kept = set(assigned)
        revoked = tuple(sorted((tp for tp in owned_set if tp not in kept), key=tp_key))
    return AssignmentOutcome(tuple(assigned), added, revoked, bool(revoked), assignment_delay(assignment))


def member_subscription(assignor: Assignor, topics: Sequence[str], owned: Iterable[TopicPartition] = (),
                        generation_id: int = DEFAULT_GENERATION, rack_id: str | None = None) -> bytes:
    """The metadata a consumer sends in JoinGroup for one assignor (ConsumerCoordinator.metadata)."""
    return encode_subscription(Subscription(
        tuple(topics), assignor.subscription_user_data(topics), tuple(sorted(owned, key=tp_key)),
        generation_id, rack_id), topic_order=java_order)
