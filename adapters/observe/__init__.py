"""Observing what a Kafka-protocol broker says on the wire: the recording TCP proxy between
unmodified clients and any broker (``proxy``: the listeners, one per broker node, and their
connections; ``link``: one client connection and its upstream connection; ``rewrite``: the
broker addresses in Metadata and FindCoordinator responses pointed at the proxy), the same
from a packet capture (``pcap``, read by dpkt, connections reassembled), requests paired with
responses by correlation id for both (``pairing``), and the observed-trace format they write
and its reader (``trace``; spec/observed-trace.md).

May import: ``traces`` (the files it writes), ``protocol`` (the kio codec), dpkt (``pcap`` only) and the standard library; not
``wire`` or ``sim`` (siblings).
"""
