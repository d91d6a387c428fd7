"""The state table as a ``transitions`` machine (validation) and as a mermaid diagram.

Not on any hot path: the coordinator checks transitions against ``LEGAL_PREVIOUS`` directly;
this module exists so the table is validated by an independent library and drawn for spec/.
"""

from __future__ import annotations

from groupcoord.core.classic.states import EDGES, LEGAL_PREVIOUS, TRANSITION_CAUSES, GroupState


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
    for source, target in EDGES:
        lines.append(f"    {source.value} --> {target.value}: {TRANSITION_CAUSES[(source, target)]}")
    return "\n".join(lines) + "\n"


# --- spec/states.md ------------------------------------------------------------------------

def transition_table() -> str:
    """The legal transitions as a markdown table, in the diagram's order, with their causes."""
    rows = ["| From | To | Cause |", "|---|---|---|"]
    for source, target in EDGES:
        rows.append(f"| {source.value} | {target.value} | {TRANSITION_CAUSES[(source, target)]} |")
    return "\n".join(rows) + "\n"


def render_states_md(existing_text: str) -> str:
    """``existing_text`` (spec/states.md) with its generated sections rewritten: the text
    between ``<!-- generated:begin NAME -->`` and ``<!-- generated:end NAME -->`` for NAME in
    ``table`` and ``diagram``. Pure: the caller reads and writes the file."""
    return rewrite_sections(existing_text, {"table": transition_table(),
                                            "diagram": f"```mermaid\n{mermaid()}```\n"})


def rewrite_sections(text: str, sections: dict[str, str]) -> str:
    """``text`` with each named generated section's body replaced: the text between
    ``<!-- generated:begin NAME -->`` and ``<!-- generated:end NAME -->`` (each marker once,
    in that order)."""
    for name, body in sections.items():
        begin, end = f"<!-- generated:begin {name} -->", f"<!-- generated:end {name} -->"
        if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
            raise ValueError(f"expected one {begin!r} followed by one {end!r}")
        head, rest = text.split(begin)
        _, tail = rest.split(end)
        text = f"{head}{begin}\n{body}{end}{tail}"
    return text


if __name__ == "__main__":
    # python -m groupcoord.adapters.checks.diagram [--check] [PATH]   (PATH defaults to spec/states.md)
    import sys
    from pathlib import Path

    args = sys.argv[1:]
    check = "--check" in args
    paths = [a for a in args if a != "--check"]
    path = Path(paths[0] if paths else "spec/states.md")
    old = path.read_text(encoding="utf-8")
    new = render_states_md(old)
    if new == old:
        print(f"{path}: up to date")
    elif check:
        print(f"{path}: generated sections are stale; run python -m groupcoord.adapters.checks.diagram")
        sys.exit(1)
    else:
        path.write_text(new, encoding="utf-8")
        print(f"{path}: regenerated")
