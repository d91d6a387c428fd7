"""The server's clocks: milliseconds for the core's events and, on a real clock, the alarm
that fires its timers.

* ``RealClock``: wall-clock milliseconds, never going backwards, alarms on the event loop.
* ``ManualClock``: time moves only when the test controls advance it (tests, the
  conformance runner).
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable


class RealClock:
    """Wall-clock milliseconds that never go backwards: anchored to ``time.time()`` at start and
    advanced by the event loop's monotonic clock, which also schedules the alarms."""

    manual = False

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self._anchor_t = self._loop.time()
        self._anchor_ms = int(time.time() * 1000)

    def now_ms(self) -> int:
        return self._anchor_ms + int((self._loop.time() - self._anchor_t) * 1000)

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> asyncio.TimerHandle:
        when = self._anchor_t + (deadline_ms - self._anchor_ms + 0.5) / 1000
        return self._loop.call_at(when, callback)


class ManualClock:
    """Time moves only when the test controls' ``advance`` is called (tests, the conformance
    runner). ``fire_due_at_once``: a timer armed for the current time fires as soon as it is
    armed, as on a broker (a zero ``group.initial.rebalance.delay.ms`` does not wait for an
    advance: the test fixtures); without it (the conformance format) only ``advance`` fires
    timers."""

    manual = True

    def __init__(self, now_ms: int = 0, fire_due_at_once: bool = False) -> None:
        self._now = now_ms
        self.fire_due_at_once = fire_due_at_once

    def now_ms(self) -> int:
        return self._now

    def set(self, now_ms: int) -> None:
        if now_ms < self._now:
            raise ValueError("time cannot go backwards")
        self._now = now_ms
