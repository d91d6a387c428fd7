"""Replay: re-running a recorded trace through the core, comparing every recorded output and
checking every invariant after every step. One unit's replay (``engine``), many units and whole
recordings (``stream``), the records' fast codecs and columns (``records``), what a unit reports
(``findings``), trace files and their manifest (``trace_files``, with the one writer of live
recordings), the Spark and plain jobs (``job``), known faults to plant in a trace (``faults``)
and one group drawn over time (``timeline``).

May import: ``runtime``, ``storage``, ``client``, ``protocol``, ``checks`` and
``groupcoord.core``.
"""
