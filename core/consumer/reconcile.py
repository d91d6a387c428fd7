"""One member's reconciliation towards the group's target assignment (Kafka's
``CurrentAssignmentBuilder``): revoke first, assign a partition only once its previous owner
has released it.

A member moves to the next epoch only when it no longer reports (``owned``, the partitions
its heartbeat says it holds; None when the heartbeat did not say) any partition it must
revoke. Until then it stays in its epoch, in UNREVOKED_PARTITIONS. At the target epoch, a
partition another member still owns (``partition_epochs``) is held back: the member is
UNRELEASED_PARTITIONS until the owner lets it go.
"""

from __future__ import annotations

from typing import Mapping

import attrs

from .model import Assignment, ConsumerMember, MemberState

Owned = tuple  # ((topic id, (partition, ...)), ...) as the heartbeat reported, or None


class Fenced(Exception):
    """The member must abandon its partitions and rejoin (FENCED_MEMBER_EPOCH)."""


def _owns_any(owned: Owned | None, pending: Assignment) -> bool:
    """``ownsRevokedPartitions``: a heartbeat that did not report its partitions may hold any."""
    if owned is None:
        return True
    return any(p in pending.get(topic, ()) for topic, parts in owned for p in parts)


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment, subscribed: frozenset,
              partition_epochs: Mapping[tuple[str, int], int], owned: Owned | None,
              subscription_changed: bool = False) -> ConsumerMember:
    """The member's next state (``CurrentAssignmentBuilder.build``); itself when it cannot move.
    ``subscribed``: the topic ids the member subscribes to now."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target, target_epoch, subscribed, partition_epochs, owned)
        if subscription_changed:
            return _drop_unsubscribed(member, subscribed, owned)
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return _drop_unsubscribed(member, subscribed, owned) if subscription_changed else member
        # revoked: on to the next epoch, but never past the target (a subscription change may
        # have put the member here before the new target exists)
        return _next(member, min(member.member_epoch + 1, target_epoch), target, target_epoch, subscribed,
                     partition_epochs, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target, target_epoch, subscribed, partition_epochs, owned)
    # UNKNOWN: a state from a newer coordinator; start again from nothing
    if owned is None or owned:
        raise Fenced("The consumer group member is in a unknown state. The member must abandon all its "
                     "partitions and rejoin.")
    return _next(member, target_epoch, target, target_epoch, subscribed, partition_epochs, owned)


def _drop_unsubscribed(member: ConsumerMember, subscribed: frozenset, owned: Owned | None) -> ConsumerMember:
    """``updateCurrentAssignment``: topics no longer subscribed leave the assignment at once,
    to be revoked."""
    if not subscribed and not member.pending_revocation:
        assigned: dict = {}
        pending = dict(member.assigned)
    else:
        assigned = {t: p for t, p in member.assigned.items() if t in subscribed}
        pending = dict(member.pending_revocation)
        for t, p in member.assigned.items():
            if t not in subscribed:
                pending[t] = pending.get(t, frozenset()) | p
    if assigned == dict(member.assigned):
        return member
    if pending and _owns_any(owned, pending):
        return attrs.evolve(member, state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned,
                            pending_revocation=pending)
    return attrs.evolve(member, assigned=assigned)


def _next(member: ConsumerMember, epoch: int, target: Assignment, target_epoch: int, subscribed: frozenset,
          partition_epochs: Mapping[tuple[str, int], int], owned: Owned | None) -> ConsumerMember:
    """``computeNextAssignment``."""
    unreleased = False
    assigned: dict[str, frozenset] = {}
    revoking: dict[str, frozenset] = {}
    adding: dict[str, frozenset] = {}
    for topic in sorted(set(target) | set(member.assigned)):
        wanted = target.get(topic, frozenset()) if topic in subscribed else frozenset()
        current = member.assigned.get(topic, frozenset())
        kept = current & wanted
        gone = current - kept
        mine = member.pending_revocation.get(topic, frozenset())
        new = frozenset(p for p in wanted - kept
                        if partition_epochs.get((topic, p), -1) == -1 or p in mine)
        unreleased = unreleased or len(new) < len(wanted - kept)
        if kept:
            assigned[topic] = kept
        if gone:
            revoking[topic] = gone
        if new:
            adding[topic] = new
    if revoking and _owns_any(owned, revoking):
        return _moved(member, MemberState.UNREVOKED_PARTITIONS, epoch, assigned, revoking)
    if adding:
        for topic, parts in adding.items():
            assigned[topic] = assigned.get(topic, frozenset()) | parts
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return _moved(member, state, target_epoch, assigned, {})
    if unreleased:
        return _moved(member, MemberState.UNRELEASED_PARTITIONS, target_epoch, assigned, {})
    return _moved(member, MemberState.STABLE, target_epoch, assigned, {})


def _moved(member: ConsumerMember, state: MemberState, epoch: int, assigned: dict, pending: dict) -> ConsumerMember:
    # ``updateMemberEpoch``: the previous epoch is the one the member leaves
    return attrs.evolve(member, state=state, member_epoch=epoch, previous_member_epoch=member.member_epoch,
                        assigned=assigned, pending_revocation=pending)
