"""A keyed timer table with Kafka's firing order, for drivers and adapters.

Arming a key replaces its timer; timers fire in deadline order, ties in the order they were
armed (MockCoordinatorTimer's heap order, which Kafka's tests depend on).

Each armed key has one entry in the heap, and a later deadline for an armed key (a member's
session pushed back by its heartbeat: nearly every timer command) only updates the table:
the heap entry stays where it is, and when it comes up early it is pushed again at the key's
current deadline and arming order. A heartbeat then costs a dict update, not a heap push
and, later, a stale entry to pop. An earlier deadline is pushed at once. Firing order is the
same as with an entry per arming: an entry is pushed at exactly the (deadline, order) it fires
at, and nothing fires before its entry comes up at that place.

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
        # key -> [deadline, arming order, payload, its heap entry's arming order, and deadline]
        self._armed: dict[tuple, list] = {}
        self._heap: list[tuple[int, int, tuple]] = []  # (deadline, arming order, key); some early or dropped
        self._seq = 0

    def apply(self, command) -> bool:
        """Apply a timer command; False if ``command`` is not one."""
        if isinstance(command, SetTimer):
            self._seq += 1
            key = tuple(command.key)
            deadline = command.deadline_ms
            armed = self._armed.get(key)
            if armed is not None and armed[4] <= deadline:
                armed[0], armed[1], armed[2] = deadline, self._seq, command.payload  # its entry comes up first
                return True
            self._armed[key] = [deadline, self._seq, command.payload, self._seq, deadline]
            heapq.heappush(self._heap, (deadline, self._seq, key))
            if len(self._heap) > 2 * len(self._armed) + 1024:  # drop entries of cancelled or replaced timers
                self._heap = [(a[0], a[1], k) for k, a in self._armed.items()]
                for a in self._armed.values():
                    a[3], a[4] = a[1], a[0]
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
            armed = self._live(heapq.heappop(heap))
            if armed is not None:
                key, (_deadline, _seq, payload, _entry, _at) = armed
                del self._armed[key]
                return timer_key(key), payload
        return None

    def next_deadline(self) -> int | None:
        """The earliest deadline in the heap (a pushed-back key's entry may wake its caller early:
        ``pop_due`` then fires nothing and the next call has the later deadline)."""
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            armed = self._armed.get(key)
            if armed is not None and armed[3] == seq:
                return deadline
            heapq.heappop(heap)
        return None

    def _live(self, entry: tuple) -> tuple | None:
        """``entry``'s key and timer if it fires at the entry's place; an early entry is pushed
        again at its key's current place; a dropped one is forgotten."""
        deadline, seq, key = entry
        armed = self._armed.get(key)
        if armed is None or armed[3] != seq:
            return None
        if armed[1] != seq:  # pushed back since: its place is (its deadline, its latest arming)
            armed[3], armed[4] = armed[1], armed[0]
            heapq.heappush(self._heap, (armed[0], armed[1], key))
            return None
        return key, armed

    def armed(self) -> dict[tuple, tuple[int, Any]]:
        return {timer_key(k): (a[0], a[2]) for k, a in self._armed.items()}

    def __len__(self) -> int:
        return len(self._armed)
