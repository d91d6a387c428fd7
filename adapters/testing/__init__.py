"""``groupcoord.testing``: the public testing library (spec/testing.md). Installed under its own
name (pyproject.toml maps ``groupcoord.testing`` to this folder) because users import it:
hypothesis strategies for groups, members, configurations and request sequences
(``strategies``); ``CoordinatorStateMachine``, a hypothesis rule-based machine whose checks are
the spec's invariants and the verifier's judgement of each answer, against the core, an
in-process server or any broker (``machine``, ``systems``); the pytest plugin and its server
fixtures (``plugin``, ``servers``); librdkafka's mock cluster in a child process, a broker
to check (``librdkafka_mock``, spec/peers.md).

May import: ``verify``, ``conformance``, ``bench`` and every wing below them, and
``groupcoord.core``. Only ``cli`` imports it.
"""
