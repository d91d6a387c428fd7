"""The coordinator as a Kafka-protocol server: listener, connections and the core loop
(``server``), the broker APIs a client needs around the group APIs (``broker_apis``) and the
agreement on partition ownership between several servers (``ownership``).

May import: ``replay``, ``runtime``, ``storage``, ``client``, ``protocol``, ``checks`` and
``groupcoord.core``; not ``sim`` (a sibling).
"""
