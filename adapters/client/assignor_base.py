"""What every client-side assignor shares: Kafka's ``ConsumerPartitionAssignor`` interface,
the two rebalance protocols, and the order of a group's members."""

from __future__ import annotations

from typing import Iterable, Mapping

from groupcoord.adapters.client.java_order import java_key
from groupcoord.core.classic.subscription import Assignment, ConsumerProtocolError, Subscription, TopicPartition

EAGER, COOPERATIVE = "eager", "cooperative"


# Bad protocol bytes, or an assignment Kafka's client would refuse: one error for both.
AssignorError = ConsumerProtocolError


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


def member_order(members: Iterable[tuple[str, Subscription]]) -> list[str]:
    """MemberInfo's order: static members by instance id first, then by member id."""
    def key(item):
        mid, sub = item
        if sub.group_instance_id is not None:
            return (0, java_key(sub.group_instance_id))
        return (1, java_key(mid))
    return [mid for mid, _ in sorted(members, key=key)]


