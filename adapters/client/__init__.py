"""What a Kafka client does, as a library: a raw asyncio Kafka client (``kafka_client``), the
consumer's partition assignors with sticky and cooperative rebalancing (``assignors``), and the
Java orders their results depend on (``java_order``). The consumer-protocol bytes are the core's
(``groupcoord.core.consumer_protocol``).

May import: ``protocol`` and ``groupcoord.core``.
"""
