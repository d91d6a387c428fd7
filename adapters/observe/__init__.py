"""Observing what a Kafka-protocol broker says on the wire: the recording TCP proxy between
unmodified clients and any broker (``proxy``: the listeners, one per broker node, and their
connections; ``link``: one client connection and its upstream connection, requests matched
to responses by correlation id; ``rewrite``: the broker addresses in Metadata and
FindCoordinator responses pointed at the proxy), and the observed-trace format it writes and
its reader (``trace``; spec/observed-trace.md).

May import: ``protocol`` (the kio codec) and the standard library; not ``wire`` or ``sim``
(siblings).
"""
