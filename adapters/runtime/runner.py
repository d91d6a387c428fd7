"""The one loop that carries out the core's commands.

``CommandRunner.feed(event)`` hands an event to ``Coordinator.handle`` and carries out what
comes back, in order:

* ``Respond``: ``respond(request_id, response)``;
* ``Write``: ``store(write)``. A synchronous store returns the outcome event
  (``WriteCompleted``/``WriteFailed``) and the runner feeds it at once; an asynchronous one
  returns None and feeds the outcome later with ``feed``;
* ``SetTimer``/``CancelTimer``/``CancelPartitionTimers``: the runner's ``TimerTable``.

Time is the caller's: ``fire_due(now_ms)`` fires every timer due by then, in Kafka's order
(deadline, then arming order), and ``next_deadline()`` says when to call it next.
``observer(event, commands)``, if given, sees every step (e.g. to record a trace); ``handle``
replaces ``coordinator.handle`` where the caller wraps it (the server logs a core failure).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

from groupcoord.core import events as ev
from groupcoord.core.commands import Respond, Write
from groupcoord.core.coordinator import Coordinator
from groupcoord.core.timers import TimerTable

Respond_ = Callable[[Any, Any], None]
Store = Callable[[Write], Any]  # -> WriteCompleted | WriteFailed | None (reported later)
Observer = Callable[[Any, list], None]


class CommandRunner:
    def __init__(self, coordinator: Coordinator, respond: Respond_, store: Store,
                 observer: Observer | None = None, timers: TimerTable | None = None,
                 handle: Callable[[Any], list] | None = None) -> None:
        self.coordinator = coordinator
        self.handle = handle if handle is not None else coordinator.handle
        self.respond = respond
        self.store = store
        self.observer = observer
        self.timers = timers if timers is not None else TimerTable()

    def feed(self, event) -> list:
        """Handle ``event`` and the storage outcomes it yields at once; all their commands."""
        commands, queue = self._carry_out(event, None)
        if queue is None:  # nothing more to handle (most events): the core's own list
            return commands
        emitted = list(commands)
        while queue:
            commands, _queue = self._carry_out(queue.popleft(), queue)
            emitted.extend(commands)
        return emitted

    def _carry_out(self, event, queue: deque | None) -> tuple[list, deque | None]:
        """Handle one event and carry out its commands; a synchronous write outcome joins
        ``queue`` (made if None). Returns the commands and the queue."""
        commands = self.handle(event)
        if self.observer is not None:
            self.observer(event, commands)
        respond = self.respond
        for command in commands:
            kind = type(command)
            if kind is Respond:
                respond(command.request_id, command.response)
            elif kind is Write:
                outcome = self.store(command)
                if outcome is not None:
                    if queue is None:
                        queue = deque()
                    queue.append(outcome)
            else:
                self.timers.apply(command)
        return commands, queue

    def fire_due(self, now_ms: int) -> list:
        """Fire every timer due at ``now_ms`` (also those armed by the firings themselves)."""
        emitted = []
        while (due := self.timers.pop_due(now_ms)) is not None:
            key, payload = due
            emitted.extend(self.feed(ev.TimerFired(now_ms=now_ms, key=key, payload=payload)))
        return emitted

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()
