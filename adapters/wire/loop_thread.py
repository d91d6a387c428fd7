"""An asyncio event loop on its own daemon thread, for a server run inside a synchronous
program (tests, the conformance runner, the test fixtures): ``run`` and ``call`` carry work
onto the loop and wait for its result."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable


class LoopThread:
    def __init__(self, name: str = "groupcoord-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(self, coro, timeout: float = 30) -> Any:
        """``coro``'s result, run on the loop."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 30) -> Any:
        """``fn(*args)``'s result, called on the loop."""
        async def wrapper():
            return fn(*args)
        return self.run(wrapper(), timeout)

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
