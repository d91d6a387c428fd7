"""``groupcoord.testing``: the public testing library (spec/testing.md). Installed under its own
name (pyproject.toml maps ``groupcoord.testing`` to this folder) because users import it:
hypothesis strategies for groups, members, configurations and request sequences
(``strategies``); ``CoordinatorStateMachine``, a hypothesis rule-based machine whose checks are
the spec's invariants and the verifier's judgement of each answer, against the core, an
in-process server or any broker (``machine``, ``systems``); the pytest plugin and its server
fixtures (``plugin``, ``servers``); ``check_delivery``, whether every acknowledged record reached
each consumer group exactly once and in order (``delivery``); librdkafka's mock cluster in a child process, a broker
to check (``librdkafka_mock``, spec/peers.md).

``from groupcoord.testing import CoordinatorStateMachine, strategies`` takes the public names
(``__all__``) from here.

May import: ``verify`` and every wing below it, and ``groupcoord.core``; no lab wing
(``bench``, ``sim``, ``conformance``). ``cli`` imports it, and ``bench`` (the fixture's
start-up).
"""

from __future__ import annotations

import importlib

# The public names, each from its module, imported when first asked for (the pytest plugin,
# loaded in every test run, imports this package: hypothesis and the servers wait until used).
_PUBLIC = {
    "CoordinatorStateMachine": "machine", "Divergence": "machine", "Inconclusive": "machine",
    "System": "systems", "CoreSystem": "systems", "ServerSystem": "systems", "BrokerSystem": "systems",
    "Unreachable": "systems",
    "InProcessServer": "servers", "ExistingServer": "servers", "start_server": "servers",
    "check_delivery": "delivery", "DeliveryResult": "delivery", "DeliveryFinding": "delivery",
    "strategies": None,  # the module itself: groupcoord.testing.strategies
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_PUBLIC[name] or name}")
    value = module if _PUBLIC[name] is None else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
