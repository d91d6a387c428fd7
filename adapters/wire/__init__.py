"""The coordinator as a Kafka-protocol server. ``server`` composes it (``GroupServer``) from
units, each in its own module: the listener and its connections (``listener``), the request
handler (``handlers``) with the broker APIs a client needs around the group APIs
(``broker_apis``), the replies the core answers (``replies``), the core loop with the
coordinator, its command runner and timers (``core_loop``), the storage pipeline
(``pipeline``), the partitions served (``partitions``) and the agreement on their ownership
between several servers (``ownership``), the test controls (``controls``) and what tests wait
on instead of sleeping (``watch``); and the clocks (``clock``), the log lines (``log``) and
the server's settings (``options``), read from Kafka's setting names by ``settings`` (for
``groupcoord serve`` and the test fixtures); and an event loop on its own thread
(``loop_thread``) for a server run inside a synchronous program.

May import: ``traces`` (the recording of a live server), ``runtime``, ``storage``, ``client``,
``protocol``, ``checks`` and ``groupcoord.core``; not ``sim``, ``observe`` or ``scenarios``
(siblings), nor a lab wing (``bench``, ``sim``, ``conformance``).
"""
