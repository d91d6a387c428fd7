"""Replay: re-running a recorded trace through the core, comparing every recorded output and
checking every invariant after every step. One unit's replay (``engine``), many units and whole
recordings (``stream``), the records' fast codecs and columns (``records``), what a unit reports
(``findings``), trace files and their manifest (``trace_files``, with the one writer of live
recordings), the ``groupcoord replay`` command (``job``, which spark-submit also runs) and its
parts: the trace checked and the per-partition replay both engines run (``partition``), the
Spark session (``spark_session``), the replay on Spark (``spark_job``) and without it
(``plain_job``), and the report (``report``); known faults to plant in a trace (``faults``) and
one group drawn over time (``timeline``); what a stopped or failed command leaves: results
written whole or not at all, pool workers that leave Ctrl-C to the command (``stopping``).

May import: ``runtime``, ``storage``, ``client``, ``protocol``, ``checks`` and
``groupcoord.core``.
"""
