"""The general case of Kafka's ``AbstractStickyAssignor``: members whose subscriptions differ
(``GeneralAssignmentBuilder``), with the partition movements it tracks to stay sticky."""

from __future__ import annotations

from groupcoord.adapters.client.assignor_base import Assignor
from groupcoord.adapters.client.java_order import JavaHashOrder, java_key, tp_hash
from groupcoord.core.classic.subscription import DEFAULT_GENERATION, TopicPartition


class PartitionMovements:
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


def list_remove(values: list, value) -> None:
    try:
        values.remove(value)
    except ValueError:
        pass


def all_but_ordered(partitions, ordered: list) -> list:
    """``partitions`` without ``ordered``, a non-empty list of them in the same order: the
    two-pointer walk of Kafka's getUnassignedPartitions (both builders)."""
    out, i, direct = [], 0, False
    nxt = ordered[0]
    for tp in partitions:
        if direct or nxt != tp:
            out.append(tp)
        elif i + 1 < len(ordered):
            i += 1
            nxt = ordered[i]
        else:
            direct = True
    return out


class GeneralAssignment:
    """GeneralAssignmentBuilder (subscriptions differ)."""

    def __init__(self, owner: Assignor, ppt, current, subscriptions) -> None:  # an AbstractStickyAssignor
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
        self.movements = PartitionMovements()

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
        return all_but_ordered(self.sorted_all, sorted(assigned, key=self._partition_key))

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
        list_remove(self.current[old], moved)
        self.current[new].append(moved)
        self.cpc[moved] = new
