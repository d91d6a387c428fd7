"""The transition table (core/classic/states.py)."""

from __future__ import annotations


def test_an_event_crossing_preparing_rebalance_takes_both_edges_or_none():
    from groupcoord.core.classic.states import (
        COMPLETING_REBALANCE,
        DEAD,
        EMPTY,
        PREPARING_REBALANCE,
        STABLE,
        edges_between,
    )

    assert edges_between(STABLE, PREPARING_REBALANCE) == ((STABLE, PREPARING_REBALANCE),)
    assert edges_between(STABLE, COMPLETING_REBALANCE) == (
        (STABLE, PREPARING_REBALANCE), (PREPARING_REBALANCE, COMPLETING_REBALANCE))
    assert edges_between(EMPTY, EMPTY) == ((EMPTY, PREPARING_REBALANCE), (PREPARING_REBALANCE, EMPTY))
    # the first hop is legal (Stable -> PreparingRebalance) but not the second (-> Stable)
    assert edges_between(STABLE, STABLE) == ()
    # the second hop is legal (PreparingRebalance -> Empty) but not the first (Dead ->)
    assert edges_between(DEAD, EMPTY) == ()
