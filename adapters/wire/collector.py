"""The garbage collector of a serving process.

A server holds hundreds of thousands of long-lived objects (groups, members, their timers);
with the collector's defaults every full collection walks all of them, a pause of hundreds of
milliseconds under load, several a minute. ``settle_collector`` is called once the server has
started (its partitions loaded):

* what exists by then is moved out of the collector's sight (``gc.freeze``), and so is what
  survives each later full collection: those objects have proved long-lived, and the next
  full collection walks only what came after them. Reference counting still frees them; only
  a reference cycle among them that becomes garbage stays (``bench load`` watches RSS);
* the young generation is larger (``YOUNG_THRESHOLD``), so that the objects of the requests
  in flight die before they are promoted, and promoted objects (which make full collections
  come sooner) are fewer, while a middle-generation collection stays short;
* a full collection waits for more middle-generation ones (``OLDEST_THRESHOLD``). Under a
  backlog (a saturated server with 100,000 commits waiting for storage) the requests in flight
  live for seconds and are promoted; every full collection walks them all, and at CPython's
  default (10) there were 40 a minute, one of ~300 ms every 1.5 s.

``GcPauses`` measures the pauses that remain (``bench load``).
"""

from __future__ import annotations

import gc
import time

YOUNG_THRESHOLD = 10_000  # objects allocated before a young collection (CPython's default: 700)
OLDEST_THRESHOLD = 100  # middle-generation collections before a full one may run (default: 10)


def settle_collector() -> None:
    gc.collect()
    gc.freeze()
    _young, older, _oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, OLDEST_THRESHOLD)
    if _freeze_after_full not in gc.callbacks:
        gc.callbacks.append(_freeze_after_full)


def unsettle_collector(threshold: tuple[int, int, int]) -> None:
    """Undo ``settle_collector`` (for a process that goes on with other work): CPython's
    collector with ``threshold`` again, sees everything."""
    if _freeze_after_full in gc.callbacks:
        gc.callbacks.remove(_freeze_after_full)
    gc.set_threshold(*threshold)
    gc.unfreeze()


def _freeze_after_full(phase: str, info: dict) -> None:
    if phase == "stop" and info.get("generation") == 2:
        gc.freeze()


class GcPauses:
    """The collector's pauses, timed by ``gc.callbacks`` while ``start``ed: wall-clock (what a
    request waiting behind it sees) and the thread's CPU time (the collection's own cost: on a
    busy machine the wall-clock pause also holds the time the process waited for a CPU)."""

    def __init__(self) -> None:
        self.longest_ms = 0.0
        self.longest_since_mark_ms = 0.0  # the caller resets it where a measured window starts
        self.longest_cpu_since_mark_ms = 0.0
        self.cpu_ms_by_generation = [0.0, 0.0, 0.0]  # the thread's CPU time in collections of each generation
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
        self.cpu_ms_by_generation[info.get("generation", 2)] += cpu_ms
        if cpu_ms > self.longest_cpu_since_mark_ms:
            self.longest_cpu_since_mark_ms = cpu_ms
        self.collections += 1
        if info.get("generation") == 2:
            self.full_collections += 1
        if pause_ms > self.longest_ms:
            self.longest_ms = pause_ms
        if pause_ms > self.longest_since_mark_ms:
            self.longest_since_mark_ms = pause_ms
