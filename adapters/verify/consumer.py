"""A consumer group's target assignment where the spec leaves it open, and the invariants that
hold whatever the assignor (spec/verify.md, "Consumer groups").

Kafka's server-side assignors (uniform, range) are deterministic functions of the group's
members, subscriptions and topics: a member naming one (``server_assignor``) fixes the target,
and the broker's answers must be the core's. When no member names one, the broker runs its
configured default (``group.consumer.assignors``' first), which the recording does not show
and which may be an assignor of its own: the target is the broker's choice. A heartbeat answer
then differing from the core's in its assignment alone is taken, when it is legal: every
partition in it is of a topic the member subscribes to and exists, none is owned by another
member in the spec's state (assigned to it, or still to be revoked by it: no partition is given
before its owner's heartbeat stopped reporting it), and its epoch is the spec's (a member moved
to the target epoch gets that assignment as its target; a member kept in its epoch may only be
told to give up some of what it owns). The core's state is set to it: the member's assignment
and target, the partitions given taken out of the others' targets, and the answer is the
core's for that choice; the rest of the search follows from that state.

What is never taken: an answer's error, member id or epoch; a partition another member still
owns (``OwnedElsewhere``, whether the target is open or not); a partition of a topic the member
does not subscribe to, or that does not exist.
"""

from __future__ import annotations

from typing import Any

import attrs

from groupcoord.core.consumer.model import ConsumerGroup, MemberState
from groupcoord.core.coordinator import CoordinatorState
from groupcoord.core.errors import Error

# the finding for a partition given while another member still owns it
OWNED_FIELD = "assignment"
OWNED_SPEC = "partitions their owners released"
OWNED_BROKER = "a partition another member still owns"


class OwnedElsewhere(Exception):
    """The broker's answer gives a partition another member owns in the spec's state."""

    def __init__(self, topic_id: str, partition: int, owner: str) -> None:
        super().__init__(f"the broker gives partition {partition} of topic {topic_id} while member {owner} still "
                         f"owns it (its heartbeats have not stopped reporting it, nor has it left or been fenced)")
        self.topic_id, self.partition, self.owner = topic_id, partition, owner


def _as_dict(assignment: Any) -> dict | None:
    """The answer's Assignment (JSON: {"topic_partitions": [...]}, None: null) as topic id ->
    frozenset of partitions."""
    if assignment is None:
        return None
    out: dict[str, frozenset] = {}
    for t in assignment.get("topic_partitions") or ():
        parts = frozenset(t.get("partitions") or ())
        if parts:
            out[str(t.get("topic_id"))] = out.get(str(t.get("topic_id")), frozenset()) | parts
    return out


def _tuples(assignment: dict) -> tuple:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()) if ps)


def adopt(before: CoordinatorState, state: CoordinatorState, group_id: str, member_id: str, core_answer,
          broker_answer: dict | None, image: dict) -> tuple[CoordinatorState, Any] | None:
    """(the state with the broker's choice of ``member_id``'s assignment, the core's answer
    for it), or None when there is nothing to take or it may not be taken. Raises OwnedElsewhere.
    ``core_answer``: the core's ConsumerGroupHeartbeatResponse; ``broker_answer``: the broker's
    fields (JSON); ``image``: name -> (topic id, partitions) the core had."""
    group = state.groups.get(group_id)
    if not isinstance(group, ConsumerGroup) or broker_answer is None:
        return None
    if core_answer.error_code != Error.NONE or broker_answer.get("error_code") != 0:
        return None
    member = group.members.get(member_id)
    if member is None or broker_answer.get("member_epoch") != core_answer.member_epoch:
        return None
    old_group = before.groups.get(group_id)
    old = old_group.members.get(member_id) if isinstance(old_group, ConsumerGroup) else None
    given = _as_dict(broker_answer.get("assignment"))
    wanted = given if given is not None else dict(old.assigned if old is not None else {})
    core = dict(member.assigned)
    if wanted == core and (given is None) == (core_answer.assignment is None):
        return None
    owners = {}
    for other in group.members.values():
        if other.member_id != member_id:
            for topic, parts in other.owns().items():
                for p in parts:
                    owners[(topic, p)] = other.member_id
    for topic, parts in sorted(wanted.items()):
        for p in sorted(parts):
            if (topic, p) in owners:
                raise OwnedElsewhere(topic, p, owners[(topic, p)])
    if group.preferred_assignor() is not None:
        return None  # a member named Kafka's assignor: the target is the core's
    counts = {tid: count for tid, count in image.values()}
    names = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        names |= group.resolved.get(member.subscribed_topic_regex, frozenset())
    subscribed = {image[n][0] for n in names if n in image}
    if any(t not in subscribed or any(p < 0 or p >= counts[t] for p in parts) for t, parts in wanted.items()):
        return None
    if member.member_epoch == group.assignment_epoch:
        moved = attrs.evolve(member, assigned=wanted, pending_revocation={}, state=MemberState.STABLE)
        target = {mid: _without(t, wanted) for mid, t in group.target.items() if mid != member_id}
        target[member_id] = wanted
    else:  # kept in its epoch: told to give up some of what it owns, nothing more
        owns = member.owns() if old is None else old.owns()
        if any(not parts <= owns.get(t, frozenset()) for t, parts in wanted.items()):
            return None
        pending = {t: ps - wanted.get(t, frozenset()) for t, ps in owns.items()}
        pending = {t: ps for t, ps in pending.items() if ps}
        if not pending:
            return None
        moved = attrs.evolve(member, assigned=wanted, pending_revocation=pending, state=MemberState.UNREVOKED_PARTITIONS)
        target = dict(group.target)
    group = attrs.evolve(group, members={**group.members, member_id: moved}, target=target)
    answer = attrs.evolve(core_answer, assignment=None if given is None else _tuples(wanted))
    return attrs.evolve(state, groups={**state.groups, group_id: group}), answer


def _without(assignment, taken: dict) -> dict:
    out = {t: ps - taken.get(t, frozenset()) for t, ps in assignment.items()}
    return {t: ps for t, ps in out.items() if ps}


def target_open(state: CoordinatorState, group_id: str) -> bool:
    """The group's target is the broker's choice: a consumer group none of whose members named
    an assignor."""
    group = state.groups.get(group_id)
    return isinstance(group, ConsumerGroup) and group.preferred_assignor() is None


def without_targets(view: dict | None) -> dict | None:
    """A ConsumerGroupDescribe answer without its members' target assignments (the broker's
    choice where the target is open: not compared; the assignments members hold are)."""
    if not view:
        return view
    groups = [{**g, "members": [{k: v for k, v in m.items() if k != "target_assignment"}
                                for m in g.get("members") or ()]} for g in view.get("groups") or ()]
    return {**view, "groups": groups}
