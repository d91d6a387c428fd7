"""The Kafka wire protocol, and nothing else: frames to field dicts and back through kio
(``codec``, with the one table of API keys), the field facts of the group APIs, the classic
eleven and KIP-848's two (``schema``), and the translation between a decoded request and a
core event, and between a core response and a version's fields (``translate``).

May import: ``groupcoord.core`` and kio.
"""
