"""Where the coordinator's records (``__consumer_offsets``) go: the interface and its errors
(``interface``), Kafka's key and value bytes of those records (``records``), and three stores:
in memory (``memory``), durable SQLite (``sqlite``), a compacted topic on a Kafka-compatible
broker (``broker``).

May import: ``client``, ``protocol``, ``checks`` and ``groupcoord.core``.
"""
