"""Running the core: the one command runner (``runner``), the timer table (``timers``: the
core's ``groupcoord.core.timers.TimerTable``, the one every driver uses), the wake-up at the
earliest deadline for event-loop adapters (``alarm``), a synchronous driver with a manual clock
and in-memory storage for tests and scenarios (``driver``), and an asyncio service that embeds
the core (``embedded``, the example of spec/contract.md).

May import: ``storage``, ``client``, ``protocol``, ``checks`` and ``groupcoord.core``.
"""
