"""Replay: re-running a recorded trace through the core, comparing every recorded output and
checking every invariant after every step. One unit's replay (``engine``), many units and whole
recordings (``stream``), what a unit reports (``findings``), the ``groupcoord replay`` command
(``job``, which spark-submit also runs) and its parts: the trace checked and the per-partition
replay both engines run (``partition``), the replay on Spark (``spark_job``) and without it
(``plain_job``), and the report (``report``); known faults to plant in a trace (``faults``) and
one group drawn over time (``timeline``). The trace files it reads, their records' codecs, the
Spark session and what a stopped command leaves are ``traces``'.

May import: ``traces``, ``runtime``, ``storage``, ``client``, ``protocol``, ``checks`` and
``groupcoord.core``.
"""
