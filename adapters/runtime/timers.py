"""A keyed timer table with Kafka's firing order, for drivers and adapters.

Arming a key replaces its timer; timers fire in deadline order, ties in the order they were
armed (MockCoordinatorTimer's heap order, which Kafka's tests depend on).

Keys are held as plain tuples of their fields: the collector untracks a plain tuple of
strings and numbers, not a named tuple, and a table of thousands of tracked keys made every
collection walk them (a heartbeat in a group of 1000 cost 1.6x). The typed key comes back
out (``pop_due``, ``armed``).
"""

from __future__ import annotations

import heapq
from typing import Any

from groupcoord.core.commands import CancelPartitionTimers, CancelTimer, SetTimer, timer_key


class TimerTable:
    def __init__(self) -> None:
        self._armed: dict[tuple, tuple[int, int, Any]] = {}  # key -> (deadline, seq, payload)
        self._heap: list[tuple[int, int, tuple]] = []
        self._seq = 0

    def apply(self, command) -> bool:
        """Apply a timer command; False if ``command`` is not one."""
        if isinstance(command, SetTimer):
            self._seq += 1
            key = tuple(command.key)
            self._armed[key] = (command.deadline_ms, self._seq, command.payload)
            heapq.heappush(self._heap, (command.deadline_ms, self._seq, key))
            if len(self._heap) > 2 * len(self._armed) + 1024:  # drop replaced entries
                self._heap = [(d, s, k) for k, (d, s, _) in self._armed.items()]
                heapq.heapify(self._heap)
        elif isinstance(command, CancelTimer):
            self._armed.pop(tuple(command.key), None)
        elif isinstance(command, CancelPartitionTimers):
            for key in [k for k in self._armed if k[0] == command.partition]:  # every key starts with it
                del self._armed[key]
        else:
            return False
        return True

    def pop_due(self, now_ms: int) -> tuple[tuple, Any] | None:
        """The next timer due at ``now_ms`` (removed from the table), or None."""
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            deadline, seq, key = heapq.heappop(heap)
            armed = self._armed.get(key)
            if armed is not None and armed[1] == seq:
                del self._armed[key]
                return timer_key(key), armed[2]
        return None

    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            armed = self._armed.get(key)
            if armed is not None and armed[1] == seq:
                return deadline
            heapq.heappop(heap)
        return None

    def armed(self) -> dict[tuple, tuple[int, Any]]:
        return {timer_key(k): (d, p) for k, (d, _, p) in self._armed.items()}

    def __len__(self) -> int:
        return len(self._armed)
