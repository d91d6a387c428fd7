"""The test controls: what tests and the conformance runner drive directly, beside the Kafka
protocol (the control channel of spec/conformance/FORMAT.md): time on a manual clock, the
outcomes of writes, and a coordinator instance going away or taking over. Called on the
server's event loop.
"""

from __future__ import annotations

from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.errors import Error
from groupcoord.adapters.wire.core_loop import CoreLoop
from groupcoord.adapters.wire.partitions import Partitions
from groupcoord.adapters.wire.pipeline import StoragePipeline
from groupcoord.adapters.wire.replies import Replies


class Controls:
    def __init__(self, core: CoreLoop, pipeline: StoragePipeline, replies: Replies, partitions: Partitions) -> None:
        self.core = core
        self.pipeline = pipeline
        self.replies = replies
        self.partitions = partitions

    def advance(self, ms: int) -> None:
        """Manual clock only: move time by ``ms`` and fire every due timer in Kafka's order."""
        clock = self.core.clock
        if not clock.manual:
            raise RuntimeError("advance needs a ManualClock")
        if ms < 0:
            raise ValueError("time cannot go backwards")
        clock.set(clock.now_ms() + ms)
        self.core.fire_due()

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
