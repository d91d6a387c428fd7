"""The garbage collector of a serving process.

A server holds hundreds of thousands of long-lived objects (groups, members, their timers);
with the collector's defaults every full collection walks all of them, a pause of hundreds of
milliseconds under load. ``settle_collector`` is called once the server has started (its
partitions loaded): what exists by then is moved out of the collector's sight
(``gc.freeze``), and the young generation is made larger so that a heartbeat's short-lived
objects die before they are promoted. ``GcPauses`` measures what remains (``bench load``).
"""

from __future__ import annotations

import gc
import time

YOUNG_THRESHOLD = 50_000  # objects allocated before a young collection (CPython's default: 700 or 2000)


def settle_collector() -> None:
    gc.collect()
    gc.freeze()
    _young, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)


class GcPauses:
    """The collector's pauses, timed by ``gc.callbacks`` while ``start``ed: wall-clock (what a
    request waiting behind it sees) and the thread's CPU time (the collection's own cost: on a
    busy machine the wall-clock pause also holds the time the process waited for a CPU)."""

    def __init__(self) -> None:
        self.longest_ms = 0.0
        self.longest_since_mark_ms = 0.0  # the caller resets it where a measured window starts
        self.longest_cpu_since_mark_ms = 0.0
        self._began_cpu = 0.0
        self.full_collections = 0
        self.collections = 0
        self._began = 0.0

    def start(self) -> None:
        gc.callbacks.append(self._callback)

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            self._began_cpu = time.thread_time()
            return
        pause_ms = (time.perf_counter() - self._began) * 1000
        cpu_ms = (time.thread_time() - self._began_cpu) * 1000
        if cpu_ms > self.longest_cpu_since_mark_ms:
            self.longest_cpu_since_mark_ms = cpu_ms
        self.collections += 1
        if info.get("generation") == 2:
            self.full_collections += 1
        if pause_ms > self.longest_ms:
            self.longest_ms = pause_ms
        if pause_ms > self.longest_since_mark_ms:
            self.longest_since_mark_ms = pause_ms
