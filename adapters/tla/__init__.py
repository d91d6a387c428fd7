"""The TLA+ spec tied to the core: TLA+ values (``values``), core states and commands read as the
spec's values (``model``), spec states and inputs made into core ones (``build``), the
state-graph check of TLC's reachable graph (``graph``), trace validation (a run of the core
read as the spec's states, ``trace``; where traces come from, ``trace_sources``; the generated
TraceCheck module, ``trace_module``; its TLC run, ``trace_check``), re-created coordinator bugs
(``mutants``), the TLC runner (``run``) and the measured numbers the runs write into
tla/README.md (``docs``).

May import: ``groupcoord.testing``, ``conformance`` and everything below them; not ``bench`` (a
sibling).
"""
