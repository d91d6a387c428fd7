"""spec/states.md stays generated from the state table, and the table is what Kafka allows
(checked by an independent state-machine library)."""

from __future__ import annotations

import itertools
import re

import pytest
from paths import ROOT
from transitions import MachineError

from groupcoord.adapters.checks.diagram import build_machine, mermaid, render_states_md
from groupcoord.core.classic.states import LEGAL_PREVIOUS, TRANSITION_CAUSES, GroupState, is_legal

STATES_MD = ROOT / "spec" / "states.md"
ALL_PAIRS = list(itertools.product(GroupState, GroupState))


def test_states_md_generated_sections_are_current():
    text = STATES_MD.read_text(encoding="utf-8")
    assert render_states_md(text) == text, "spec/states.md is stale: run python -m groupcoord.adapters.checks.diagram"


def test_render_is_idempotent_and_needs_the_markers():
    text = STATES_MD.read_text(encoding="utf-8")
    assert render_states_md(render_states_md(text)) == render_states_md(text)
    with pytest.raises(ValueError, match="generated:begin table"):
        render_states_md("no markers here\n")


def test_diagram_has_every_state_and_exactly_the_legal_edges():
    diagram = mermaid()
    for state in GroupState:
        assert re.search(rf"\b{state.value}\b", diagram), state
    edges = set(re.findall(r"^\s+(\w+) --> (\w+):", diagram, flags=re.M))
    legal = {(source.value, target.value) for target, sources in LEGAL_PREVIOUS.items() for source in sources}
    assert edges == legal
    assert set(TRANSITION_CAUSES) == {(GroupState(s), GroupState(t)) for s, t in legal}
    assert f"```mermaid\n{diagram}```" in STATES_MD.read_text(encoding="utf-8")


def test_kafka_table_shape():
    legal = {(s, t) for s, t in ALL_PAIRS if is_legal(s, t)}
    assert len(ALL_PAIRS) == 25 and len(legal) == 10
    dead = GroupState.DEAD
    assert {t for s, t in legal if s is dead} == set()  # Dead is terminal (never held: no Dead -> Dead)
    assert {s for s, t in legal if t is dead} == set(GroupState) - {dead}  # any held group may die


@pytest.mark.parametrize("source,target", ALL_PAIRS, ids=[f"{s.value}->{t.value}" for s, t in ALL_PAIRS])
def test_transitions_machine_accepts_exactly_the_legal_pairs(source, target):
    machine = build_machine()
    machine.set_state(source.value)
    trigger = getattr(machine, f"to_{target.value}")
    if is_legal(source, target):
        assert trigger()
        assert machine.state == target.value
    else:
        with pytest.raises(MachineError):
            trigger()
        assert machine.state == source.value
