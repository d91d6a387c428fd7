"""Where a replay's time goes (``groupcoord bench replay``'s split): the plain replay run
with clocks around its phases. The replay's own classes carry no clock (a clock read per
record would cost what it measures); ``timed_phases`` swaps in subclasses that time:

* ``core``: ``Coordinator.handle``;
* ``invariants``: the checks after each step (``_check_step``: invariants and emitted
  commands) and when it closes (``_close_step``: the trace checks);
* ``compare``: each recorded output against the replayed one (``_output``);
* ``events``: the rest of an input record (decoding its event, the contract checks);
* ``records``: the rest of the record loop (sequence and time checks, lookahead);
* ``columns``: outside the record loop (Arrow reads, sorts and converts the columns).
"""

from __future__ import annotations

import contextlib
import time

from groupcoord.adapters.replay import partition
from groupcoord.adapters.replay.engine import UnitReplay
from groupcoord.adapters.replay.stream import StreamReplayer

PHASES = ("columns", "events", "core", "compare", "invariants", "records")


class PhaseClock:
    def __init__(self) -> None:
        self.seconds = dict.fromkeys(("feed", "input", "core", "check_step", "close_step", "output"), 0.0)

    def timed(self, name: str, f):
        """``f``, its time added to phase ``name``."""
        seconds, clock = self.seconds, time.perf_counter

        def run(*args, **kwargs):
            started = clock()
            try:
                return f(*args, **kwargs)
            finally:
                seconds[name] += clock() - started
        return run

    def split(self, total_seconds: float) -> dict[str, float]:
        """Seconds per phase, given the replay's total (whatever lies outside the record
        loop is ``columns``)."""
        s = self.seconds
        invariants = s["check_step"] + s["close_step"]
        events = s["input"] - s["core"] - invariants  # _input closes the previous step first
        return {"columns": total_seconds - s["feed"], "events": events, "core": s["core"],
                "compare": s["output"], "invariants": invariants,
                "records": s["feed"] - s["input"] - s["output"]}


def _timed_classes(clock: PhaseClock):
    timed = clock.timed

    class TimedUnitReplay(UnitReplay):
        def _input(self, *args):
            return timed("input", super()._input)(*args)

        def _check_step(self, *args):
            return timed("check_step", super()._check_step)(*args)

        def _close_step(self):
            return timed("close_step", super()._close_step)()

        def _output(self, *args):
            return timed("output", super()._output)(*args)

        def _new_instance(self) -> None:
            super()._new_instance()
            self.coordinator.handle = timed("core", self.coordinator.handle)

    class TimedStreamReplayer(StreamReplayer):
        unit_class = TimedUnitReplay

        def feed(self, *args, **kwargs):
            return timed("feed", super().feed)(*args, **kwargs)

        def finish(self):  # the last unit's last step closes here
            return timed("feed", super().finish)()

    return TimedStreamReplayer


@contextlib.contextmanager
def timed_phases():
    """Within it, replays built by ``PartitionReplay`` time their phases on the clock it yields."""
    clock = PhaseClock()
    saved = partition.PartitionReplay.replayer_class
    partition.PartitionReplay.replayer_class = _timed_classes(clock)
    try:
        yield clock
    finally:
        partition.PartitionReplay.replayer_class = saved
