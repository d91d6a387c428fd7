"""The conformance suite (the lab's scenarios: encoded from Kafka's own tests and the project's,
``suite``), the same scenarios over the wire against the server (``wire``) and a scenario seen
as a broker's observed trace (``observed``). Each scenario file is run by ``scenarios.runner``.

May import: ``verify``, ``scenarios``, ``sim``, ``wire`` and everything below them; not
``groupcoord.testing`` (a sibling). No product wing imports it.
"""
