"""The values a core step builds, built again alone: the floor under ``bench core``'s ratios.

For each input event, ``step_values`` records what the core's step built: its commands, and
the values it newly keeps (groups, members, stored offsets, committed-offset slots, pending
writes, held responses). It writes one Python function per event that builds exactly those
values again from literals, with no lookup, check or dispatch. A value that existed before the
step (in the coordinator's state or in the input event) is referenced, not built; a value built
twice in one step is built once. Timing the functions gives the cost of the values alone: the
rest of a step's cost is its logic. Dictionary insertions are not rebuilt, so this is a floor.
"""

from __future__ import annotations

import enum
import time
import types
from typing import Callable

import attrs

from groupcoord.core.coordinator import Coordinator, CoordinatorState

_WARM_CALLS = 10
_ATOMS = (int, str, bytes, bool, float, type(None))
_SEQUENCES = (tuple, list, frozenset, set)
_MAPPINGS = (dict, types.MappingProxyType)


def _parts(value) -> tuple:
    """The values ``value`` holds directly."""
    kind = type(value)
    if attrs.has(kind):
        return tuple(getattr(value, f.name) for f in attrs.fields(kind))
    if isinstance(value, _SEQUENCES):
        return tuple(value)
    if isinstance(value, _MAPPINGS):
        return tuple(x for item in value.items() for x in item)
    return ()


def _is_atom(value) -> bool:
    return type(value) in _ATOMS or isinstance(value, enum.Enum)


def _reach(value, known: set[int]) -> None:
    """Add the ids of ``value`` and everything it holds to ``known``. The caller keeps
    ``value`` alive while it uses the ids, so none is freed and reused."""
    stack = [value]
    while stack:
        v = stack.pop()
        if _is_atom(v) or id(v) in known:
            continue
        known.add(id(v))
        stack.extend(_parts(v))


class _Source:
    """Python source that builds values; what it references lives in ``namespace``, a name
    for each value (a global lookup, as cheap as the core's own)."""

    def __init__(self):
        self.namespace: dict = {}
        self._names: dict[int, str] = {}
        # values built in earlier steps (StepValues.values keeps them alive): a step that returns one
        # again, e.g. a response the core builds once, did not build it
        self.earlier: set[int] = set()

    def _name(self, value) -> str:
        name = self._names.get(id(value))
        if name is None:
            name = self._names[id(value)] = f"_v{len(self._names)}"
            self.namespace[name] = value
        return name

    def build(self, value, known: set[int]) -> str:
        """An expression building ``value``; ids in ``known`` or ``earlier`` are referenced, and
        every value built joins ``known`` (so a value held twice is built once)."""
        kind = type(value)
        if kind in _ATOMS:
            return repr(value)
        if isinstance(value, enum.Enum) or id(value) in known or id(value) in self.earlier:
            return self._name(value)
        known.add(id(value))
        if attrs.has(kind):
            fields = [f for f in attrs.fields(kind) if f.init]
            keywords = any(f.kw_only for f in fields)
            args = ", ".join((f"{f.alias}=" if keywords else "") + self.build(getattr(value, f.name), known)
                             for f in fields)
            return f"{self._name(kind)}({args})"
        if isinstance(value, tuple) and hasattr(kind, "_fields"):  # a NamedTuple
            return f"{self._name(kind)}({', '.join(self.build(x, known) for x in value)})"
        if kind is tuple:
            return "(" + "".join(self.build(x, known) + ", " for x in value) + ")"
        if kind is list:
            return "[" + ", ".join(self.build(x, known) for x in value) + "]"
        if kind in (frozenset, set):
            return f"{kind.__name__}((" + "".join(self.build(x, known) + ", " for x in value) + "))"
        if kind in _MAPPINGS:
            items = ", ".join(f"{self.build(k, known)}: {self.build(v, known)}" for k, v in value.items())
            return "{" + items + "}" if kind is dict else f"{self._name(kind)}({{{items}}})"
        raise TypeError(f"cannot build a {kind.__name__} again")


def _held(state: CoordinatorState | None) -> tuple:
    """The values in the state a step may have built: groups, stored offsets, pending writes
    and held responses (the slots of committed offsets are compared apart, by key)."""
    if state is None:
        return ()
    roots = list(state.groups.values())
    roots += [entry for stored in state.offsets.values() for entry in stored.values()]
    roots += list(state.writes.values())
    roots += [respond for _, _, respond in state.deferred]
    return tuple(roots)


def _slots(state: CoordinatorState | None) -> dict:
    """Committed-offset slots, (group, key) -> (committed value, writes in flight)."""
    if state is None:
        return {}
    return {(g, key): slot for g, stored in state.committed_offsets.items() for key, slot in stored.items()}


class StepValues:
    """A ``step`` for ``bench.core.run_inputs``: runs ``Coordinator.handle`` and writes the
    source of a function building what it built. ``builders()`` compiles them, in order."""

    def __init__(self):
        self.source = _Source()
        self.bodies: list[str] = []
        self.kinds: list[str] = []
        # what each builder must return, to check it against; it keeps the ids in ``earlier`` alive
        self.values: list[tuple] = []

    def __call__(self, coordinator: Coordinator, event) -> list:
        before = coordinator.snapshot() if coordinator is not None else None
        known: set[int] = set()  # what ``before`` and ``event`` hold, alive until the step is done
        for root in _held(before):
            _reach(root, known)
        _reach(event, known)
        slots_before = _slots(before)
        commands = coordinator.handle(event)
        after = coordinator.snapshot()
        kept = [root for root in _held(after) if id(root) not in known]
        # the core holds a new key's slot as a two-item list
        kept += [list(slot) for key, slot in _slots(after).items() if key not in slots_before]
        built = (commands, *kept)
        self.bodies.append(f"    return ({', '.join(self.source.build(v, known) for v in built)},)\n")
        self.kinds.append(type(event).__name__)
        self.values.append(built)
        _reach(built, self.source.earlier)
        return commands

    def builders(self) -> list[Callable[[], tuple]]:
        """The functions, in step order, each already called often enough for the interpreter
        to have specialised its code (after 8 calls in CPython 3.11), as the core's code is."""
        source = "".join(f"def _step{n}():\n{body}" for n, body in enumerate(self.bodies))
        namespace = self.source.namespace
        exec(compile(source, "<step values>", "exec"), namespace)
        builders = [namespace[f"_step{n}"] for n in range(len(self.bodies))]
        for _ in range(_WARM_CALLS):
            run_builders(builders)
        return builders


def run_builders(builders: list, clock=time.perf_counter) -> float:
    """Seconds to call every builder once."""
    started = clock()
    for build in builders:
        build()
    return clock() - started


def builders_by_kind(builders: list, kinds: list[str], clock=time.perf_counter) -> dict[str, float]:
    """Seconds spent in each kind's builders, each call timed alone as ``mix_by_input`` times
    the core's steps: clock included, freeing what it built left out."""
    spent: dict[str, float] = dict.fromkeys(kinds, 0.0)
    for build, kind in zip(builders, kinds):
        started = clock()
        built = build()
        spent[kind] += clock() - started
        del built
    return spent
