"""Where the coordinator's records (``__consumer_offsets``) go: the interface and its errors
(``interface``), Kafka's key and value bytes of those records (``records``; KIP-848's consumer
group records in ``consumer_format``; the record batch container, magic v2, in ``batches``, which
the data plane's log reads too), and three stores:
in memory (``memory``), durable SQLite (``sqlite``, whose data directory has one owner at a
time: ``dirlock``), a compacted topic on a Kafka-compatible broker (``broker``).

May import: ``client``, ``protocol``, ``checks`` and ``groupcoord.core``.
"""
