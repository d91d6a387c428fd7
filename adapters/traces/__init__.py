"""Trace files and what the commands that read and write them share: the files themselves, JSON
Lines and Parquet with their manifest and the one writer of live recordings
(``trace_files``; spec/trace-format.md), the records' fast codecs and columns, decoding a
record back into a core event or command (``records``), results written whole or not at all
and pool workers that leave Ctrl-C to the command (``stopping``), the one progress display
(``progress``) and the Spark session the jobs that read traces run in (``spark_session``).

Below every wing that records, reads or judges a trace (``wire``, ``observe``, ``verify``,
``replay``, ``sim``) so that none of them needs another for its files.

May import: ``groupcoord.core`` and the standard library (pyarrow, pyspark and tqdm inside
the functions that use them).
"""
