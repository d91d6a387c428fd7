"""Scenario files (the JSON format of spec/conformance/FORMAT.md) run on the core: read, their
steps fed to a ``Driver`` and its answers matched, optionally recording what the coordinator did
as a trace (``runner``). Product commands run them (``groupcoord scenario``, the scenario a
probe writes to reproduce a divergence, ``tla validate``'s traces); the project's own suite and
the same scenarios over the wire are ``conformance``'s.

May import: ``traces`` (a run's recording), ``runtime``, ``storage``, ``client``, ``protocol``,
``checks`` and ``groupcoord.core``; not ``sim``, ``wire`` or ``observe`` (siblings), nor a lab
wing (``bench``, ``sim``, ``conformance``).
"""
