"""What tests wait on instead of sleeping: the server tells one ``Changes`` of every change a
test can wait for (a connection opened or lost, bytes read, a request handled or answered,
an event the core handled with the timers it armed), and ``until(condition)`` returns as soon
as the condition holds, checked at once and again after each change, within a timeout.

Telling is one list check while nobody waits; only the test controls wait
(``controls.Controls.until`` and what it offers on top).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable


class Changes:
    def __init__(self) -> None:
        self._waiters: list[asyncio.Future] = []

    def changed(self) -> None:
        """Something a test can wait on changed: every waiter checks its condition again."""
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                _wake(waiter)

    async def until(self, condition: Callable[[], Any], timeout: float, what: str = "the condition") -> Any:
        """``condition()``'s first true value, checked now and after each change; TimeoutError
        (naming ``what``) if it is still false after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not (value := condition()):
            if loop.time() >= deadline:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
            waiter = loop.create_future()
            self._waiters.append(waiter)
            # The deadline wakes the waiter too (checked once more, then reported). Awaiting the
            # waiter itself, not a wrapper, resumes this task in the loop step right after the
            # change: nothing already scheduled for later (a timer) runs before the check.
            expiry = loop.call_at(deadline, _wake, waiter)
            try:
                await waiter
            finally:
                expiry.cancel()
        return value


def _wake(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)
