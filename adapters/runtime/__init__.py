"""Running the core: the timer table (``timers``), a synchronous driver with a manual clock and
in-memory storage for tests and scenarios (``driver``), and an asyncio service that embeds the
core (``embedded``, the example of spec/contract.md).

May import: ``storage``, ``client``, ``protocol``, ``checks`` and ``groupcoord.core``.
"""
