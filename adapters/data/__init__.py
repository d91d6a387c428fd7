"""The data plane: a single-node partition log for Produce, Fetch, ListOffsets, DeleteRecords
and idempotent producers (``log``: topics, partitions, batches kept as the clients' bytes with
offsets assigned by the log, the high watermark, the log start moved by DeleteRecords and
retention; ``producers``: producer ids and the sequence checks), reading compressed batches
back (``compression``), and its durable copy in the server's data directory (``sqlite``).
The Kafka wire around it is ``wire``'s.

May import: ``storage``, ``client``, ``protocol``, ``checks`` and ``groupcoord.core``.
"""
