"""Benchmarks that print numbers: the core (``core``), the replay (``replay``), the server on
loopback (``server``), storage (``storage``) and the recording proxy's cost (``proxy``).

May import: ``sim``, ``wire``, ``observe`` and everything below them; not ``conformance`` (a
sibling). Their closing JSON lines: ``rows``.
"""
