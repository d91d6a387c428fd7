"""Benchmarks that print numbers: the core (``core``), the replay (``replay``), the server on
loopback (``server``) and storage (``storage``).

May import: ``sim``, ``wire`` and everything below them; not ``conformance`` (a sibling).
"""
