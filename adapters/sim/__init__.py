"""Simulated consumers: the deterministic simulator that writes traces (``simulator``: many
groups into a trace directory) and its parts: the simulated Kafka consumer (``consumer``), one
group's world of coordinator instances, clock, storage and statistics (``world``), each group's
seeded set-up and incidents (``workload``) and the run's summary (``report``); and the narrated rebalance demo (``demo``).

May import: ``replay``, ``traces``, ``runtime``, ``storage``, ``client``, ``protocol``, ``checks`` and
``groupcoord.core``; not ``wire`` or ``observe`` (siblings).
"""
