"""Judging the core's behaviour: the invariants over a group after every step (``invariants``),
the checks over a recorded trace (``trace_checks``), and the state table drawn and validated by
the ``transitions`` library (``diagram``, which writes spec/states.md's generated sections).

May import: ``groupcoord.core`` (and ``transitions``).
"""
