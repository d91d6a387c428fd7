"""Checking what a broker said on the wire (an observed trace, spec/observed-trace.md) against
the core, group by group: what the trace cannot show (the order of requests in flight together,
when timers fired, when writes were acknowledged, the ids the broker made up) is searched for,
never assumed (spec/verify.md). The pairs read and split by group (``observed``), the search
(``search``), answers compared by rule (``compare``), both engines and the report (``run``),
and traces made by the core itself, for tests and benchmarks (``from_core``).

May import: ``observe``, ``traces`` (trace files and records, the Spark session), ``protocol``
and ``groupcoord.core``; no lab wing (``bench``, ``sim``, ``conformance``).
"""
