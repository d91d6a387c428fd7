"""The ``groupcoord`` command: argument parsing and wiring only. ``main`` dispatches to ``serve``
(the server, and the parsers of the admin commands that ``admin`` carries out over the wire),
``replay`` (simulate, replay, inject-faults, timeline), ``tla`` and ``record`` (the recording
proxy).

May import: every wing.
"""
