"""The five group states and Kafka's legal-transition table, declared once.

Everything else (the coordinator's guard, the property tests, the TLA+ checks and the
mermaid diagram in spec/) reads ``LEGAL_PREVIOUS``.
"""

from __future__ import annotations

from enum import Enum


class GroupState(str, Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

# target state -> the states it may be entered from (ClassicGroupState.java).
LEGAL_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    EMPTY: frozenset({PREPARING_REBALANCE}),
    PREPARING_REBALANCE: frozenset({STABLE, COMPLETING_REBALANCE, EMPTY}),
    COMPLETING_REBALANCE: frozenset({PREPARING_REBALANCE}),
    STABLE: frozenset({COMPLETING_REBALANCE}),
    # Kafka also lists Dead -> Dead; the core never holds a Dead group (it checks the edge and
    # drops the group at once), so that edge cannot be taken and is left out.
    DEAD: frozenset({STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY}),
}

# What causes each legal transition; used for the diagram's edge labels.
TRANSITION_CAUSES: dict[tuple[GroupState, GroupState], str] = {
    (EMPTY, PREPARING_REBALANCE): "member added",
    (STABLE, PREPARING_REBALANCE): "join, leave, expiry, sync timeout, over group.max.size at load",
    (COMPLETING_REBALANCE, PREPARING_REBALANCE): "join, leave, expiry, sync timeout, failed assignment write",
    (PREPARING_REBALANCE, COMPLETING_REBALANCE): "join phase completes with members",
    (PREPARING_REBALANCE, EMPTY): "join phase completes with no members",
    (COMPLETING_REBALANCE, STABLE): "leader's assignment written",
    (EMPTY, DEAD): "deleted (DeleteGroups, expiration), unload",
    (PREPARING_REBALANCE, DEAD): "unload",
    (COMPLETING_REBALANCE, DEAD): "unload",
    (STABLE, DEAD): "unload",
}


# Every edge of the table, grouped by target in the states' order (the diagram's order).
EDGES: tuple[tuple[GroupState, GroupState], ...] = tuple(
    (source, target) for target in GroupState for source in sorted(LEGAL_PREVIOUS[target], key=list(GroupState).index))


def is_legal(source: GroupState, target: GroupState) -> bool:
    return source in LEGAL_PREVIOUS[target]


def edges_between(source: GroupState, target: GroupState) -> tuple[tuple[GroupState, GroupState], ...]:
    """The table edges one event takes from ``source`` to ``target``: the edge itself, or the two
    through PreparingRebalance (a rebalance whose join completes at once); () if neither is legal."""
    if is_legal(source, target):
        return ((source, target),)
    if is_legal(source, PREPARING_REBALANCE) and is_legal(PREPARING_REBALANCE, target):
        return ((source, PREPARING_REBALANCE), (PREPARING_REBALANCE, target))
    return ()


class IllegalTransition(RuntimeError):
    pass


def require_legal(group_id: str, source: GroupState, target: GroupState) -> None:
    if source not in LEGAL_PREVIOUS[target]:
        raise IllegalTransition(f"group {group_id}: {source} -> {target} is not legal")
