"""Kafka's client-side partition assignors and the consumer protocol, as a pure library.

The classic group coordinator never looks inside assignments: the group leader (a client)
computes them with one of these strategies and sends them in its SyncGroup. This module is
what such a client runs, for embedders, the simulator and tests:

* ``RangeAssignor`` ("range"), ``RoundRobinAssignor`` ("roundrobin"), ``StickyAssignor``
  ("sticky", eager) and ``CooperativeStickyAssignor`` ("cooperative-sticky", both in
  ``sticky``): ports of
  ``org.apache.kafka.clients.consumer.*Assignor`` (Kafka 4.0, without rack awareness).
  They give the assignments Kafka's clients give, including where Kafka's result depends on
  the iteration order of a ``java.util.HashMap`` (which is emulated: ``java_order``).
* The consumer protocol's ``Subscription`` and ``Assignment``; their byte formats
  (``ConsumerProtocolSubscription`` v0-3, ``ConsumerProtocolAssignment`` v0-3) are the core's.
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

from typing import Iterable, Mapping, Sequence

import attrs

from groupcoord.adapters.client.assignor_base import (
    COOPERATIVE,
    EAGER,
    Assignor,
    AssignorError,
    member_order,
)
from groupcoord.adapters.client.java_order import java_key, java_order, tp_key
from groupcoord.adapters.client.sticky import (
    CooperativeStickyAssignor,
    StickyAssignor,
    assignment_delay,
)
from groupcoord.core.classic.subscription import (
    DEFAULT_GENERATION,
    Assignment,
    Subscription,
    TopicPartition,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)


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
            members = list(dict.fromkeys(member_order(consumers_per_topic.get(topic, []))))
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
        members = member_order(subscriptions.items())
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
