"""Judging the core's behaviour: the invariants over a group at rest, across one event and in one
answer (``invariants``), over what one event emits (``emitted``), the checks over a recorded
trace (``trace_checks``), and the state table drawn and validated by the ``transitions`` library
(``diagram``, which writes spec/states.md's generated sections).

May import: ``groupcoord.core`` (and ``transitions``).
"""
