"""The state table as a ``transitions`` machine (validation) and as a mermaid diagram.

Not on any hot path: the coordinator checks transitions against ``LEGAL_PREVIOUS`` directly;
this module exists so the table is validated by an independent library and drawn for spec/.
"""

from __future__ import annotations

from .states import LEGAL_PREVIOUS, TRANSITION_CAUSES, GroupState


def build_machine():
    """A ``transitions`` Machine with one trigger per legal transition (``to_<Target>``)."""
    from transitions import Machine

    machine = Machine(states=[s.value for s in GroupState], initial=GroupState.EMPTY.value,
                      auto_transitions=False, ignore_invalid_triggers=False)
    for target, sources in LEGAL_PREVIOUS.items():
        machine.add_transition(f"to_{target.value}", sorted(s.value for s in sources), target.value)
    return machine


def mermaid() -> str:
    """The state diagram in mermaid syntax, one edge per legal transition."""
    lines = ["stateDiagram-v2", f"    [*] --> {GroupState.EMPTY.value}: group created"]
    order = list(GroupState)
    for target in order:
        for source in sorted(LEGAL_PREVIOUS[target], key=order.index):
            label = TRANSITION_CAUSES[(source, target)]
            lines.append(f"    {source.value} --> {target.value}: {label}")
    return "\n".join(lines) + "\n"
