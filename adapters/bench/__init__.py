"""Benchmarks that print numbers: the core (``core``), the replay (``replay``), the server on
loopback (``server``), storage (``storage``), the data plane against Tansu (``data``), the recording
proxy's cost (``proxy``) and the ``groupcoord_server`` test fixture's start-up (``fixture``).
Their closing JSON lines: ``rows``.

A lab wing: only ``cli``'s ``bench`` commands import it, inside the command. May import:
``groupcoord.testing``, ``conformance`` and everything below them; not ``tla`` (a sibling).
"""
