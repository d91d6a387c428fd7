"""Simulated consumers: the deterministic simulator that writes traces (``simulator``) and the
narrated rebalance demo (``demo``).

May import: ``replay``, ``runtime``, ``storage``, ``client``, ``protocol``, ``checks`` and
``groupcoord.core``; not ``wire`` (a sibling).
"""
