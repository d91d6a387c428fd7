"""The test controls: what tests and the conformance runner drive directly, beside the Kafka
protocol (the control channel of spec/conformance/FORMAT.md): time on a manual clock, the
outcomes of writes, and a coordinator instance going away or taking over. Called on the
server's event loop.

And what tests wait on instead of sleeping (``until``, woken by the server's
``watch.Changes``): a request handled, parked or answered (``request_handled``,
``request_answered``; the server must track requests), a connection gone, the core having
handled a number of events (``events_handled``), a timer armed (``armed``).
"""

from __future__ import annotations

from typing import Any, Callable

import attrs

from groupcoord.adapters.wire.core_loop import CoreLoop
from groupcoord.adapters.wire.listener import Listener
from groupcoord.adapters.wire.partitions import Partitions
from groupcoord.adapters.wire.pipeline import StoragePipeline
from groupcoord.adapters.wire.replies import Replies
from groupcoord.adapters.wire.watch import Changes
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.errors import Error

WAIT_S = 10.0  # how long a wait lasts unless told


@attrs.define
class Controls:
    core: CoreLoop
    pipeline: StoragePipeline
    replies: Replies
    partitions: Partitions
    listener: Listener
    changes: Changes
    after_advance: list = attrs.field(factory=list)  # called after each advance (the data plane's waits)

    def advance(self, ms: int) -> None:
        """Manual clock only: move time by ``ms`` and fire every due timer in Kafka's order;
        then the data plane's held Fetches now due are answered and retention runs."""
        clock = self.core.clock
        if not clock.manual:
            raise RuntimeError("advance needs a ManualClock")
        if ms < 0:
            raise ValueError("time cannot go backwards")
        clock.set(clock.now_ms() + ms)
        self.core.fire_due()
        for hook in self.after_advance:
            hook()

    # A storage that can hold writes back and fail them (MemoryStorage).
    def hold_writes(self) -> None:
        self.pipeline.storage.hold()

    def fail_next_write(self, error: Error) -> None:
        self.pipeline.storage.fail_next(error)

    def release_writes(self, error: Error | None = None) -> None:
        self.pipeline.storage.release(error)
        self.core.drain_writes()
        self.core.set_alarm()

    def unload_all(self) -> None:
        self.core.unload_owned()

    async def reload(self, config: CoordinatorConfig | None = None) -> None:
        """A new coordinator instance (on ``config``, if given) takes over from storage;
        requests parked in the old one are never answered (their connections stay waiting),
        in-flight writes are forgotten."""
        self.pipeline.forget()
        self.replies.abandon_all()
        self.core.cancel_alarm()
        self.core.start(config)
        await self.partitions.load_all()

    # --- waiting (tests): each returns once the condition holds, or raises TimeoutError ---------

    async def until(self, condition: Callable[[], Any], timeout: float = WAIT_S, what: str = "the condition") -> Any:
        """``condition()``'s first true value, checked now and after every change the server
        makes (connections, requests, core events)."""
        return await self.changes.until(condition, timeout, what)

    async def request_handled(self, peer: tuple, correlation_id: int, timeout: float = WAIT_S) -> str:
        """Once the request from ``peer`` is handled: its ``Listener.request_status``,
        "answered", "pending" (parked) or "closed"."""
        status = self.listener.request_status
        return await self.until(lambda: (s := status(peer, correlation_id)) not in ("unknown", "queued") and s,
                                timeout, f"request {correlation_id} from {peer} to be handled")

    async def request_answered(self, peer: tuple, correlation_id: int, timeout: float = WAIT_S) -> str:
        """Once the request from ``peer`` is answered ("answered") or its connection closed
        with it unanswered ("closed")."""
        status = self.listener.request_status
        return await self.until(lambda: (s := status(peer, correlation_id)) in ("answered", "closed") and s,
                                timeout, f"request {correlation_id} from {peer} to be answered")

    @property
    def events_handled(self) -> int:
        """Events the core has handled so far (requests, timers, write outcomes, loads)."""
        return self.core.events_handled

    def armed(self, **match: Any) -> list:
        """The armed timer keys whose fields equal ``match`` (e.g. ``kind="join", group_id="g"``)."""
        return [key for key in self.core.timers.armed()
                if all(getattr(key, name, None) == value for name, value in match.items())]
