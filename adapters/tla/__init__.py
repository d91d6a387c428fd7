"""The TLA+ spec tied to the core: TLA+ values (``values``), the mapping between spec states and
core states (``model``), the state-graph check of TLC's reachable graph (``graph``), trace
validation (``trace``), re-created coordinator bugs (``mutants``) and the TLC runner
(``run``).

May import: ``bench``, ``conformance`` and everything below them.
"""
