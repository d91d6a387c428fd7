"""What a Kafka client does, as a library: a raw asyncio Kafka client (``kafka_client``); the
consumer's partition assignors (``assignors``: range, round robin and the client's side of a
rebalance, on ``assignor_base``), the sticky and cooperative-sticky ones (``sticky``, with the
general case in ``sticky_general``); and the Java orders their results depend on
(``java_order``). The consumer-protocol bytes are the core's (``groupcoord.core.classic.subscription``).

May import: ``protocol`` and ``groupcoord.core``.
"""
