"""One wake-up call at the earliest timer deadline, for adapters on an event loop.

``set(deadline)`` after every change of the timer table: a deadline that did not move keeps
the call already armed (re-arming on every heartbeat would cost a loop call each), a new one
replaces it, None cancels it. The clock's ``call_at(deadline_ms, callback)`` returns a handle
with ``cancel()`` (asyncio's ``loop.call_at`` under a real clock).
"""

from __future__ import annotations

from typing import Any, Callable


class Alarm:
    def __init__(self, clock: Any, on_fire: Callable[[], None]) -> None:
        self._clock = clock
        self._on_fire = on_fire
        self._handle: Any = None
        self._at: int | None = None

    def set(self, deadline_ms: int | None) -> None:
        if deadline_ms == self._at:
            return
        if self._handle is not None:
            self._handle.cancel()
        self._at = deadline_ms
        self._handle = None if deadline_ms is None else self._clock.call_at(deadline_ms, self._fire)

    def cancel(self) -> None:
        self.set(None)

    def _fire(self) -> None:
        self._handle = self._at = None
        self._on_fire()
