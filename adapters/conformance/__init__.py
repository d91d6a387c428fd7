"""Conformance scenarios (the JSON format of spec/conformance/FORMAT.md): the runner on the
core (``scenarios``) and the same scenarios over the wire against the server (``wire``).

May import: ``sim``, ``wire`` and everything below them; not ``bench`` (a sibling).
"""
