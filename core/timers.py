"""The timer table: what the core's timer commands arm, and in which order timers fire.

``SetTimer(key, deadline_ms, payload)`` arms ``key``, replacing its timer if armed;
``CancelTimer(key)`` removes it; ``CancelPartitionTimers(partition)`` removes every key whose
``partition`` is that. Timers fire in deadline order, equal deadlines in arming order
(MockCoordinatorTimer's heap order, which Kafka's tests depend on). Every ``SetTimer`` takes a
new arming number, a re-armed key too: as in Kafka's timer wheel, where a re-armed key is a new
task, a key pushed back to a deadline another key already has fires after it.

Two forms of the one table, ordering alike:

* ``TimerTable``: mutable, for drivers that carry commands out as they come (the runtime, the
  simulator, the server, the replay, traces made from the core).
* ``Timers``: immutable, for a search that keeps the timers of every state it explores
  (``Timers.applied`` returns a new table).

``TimerTable`` keeps one heap entry per armed key, and a later deadline for an armed key (a
member's session pushed back by its heartbeat: nearly every timer command) only updates the
table: the heap entry stays where it is, and when it comes up early it is pushed again at the
key's current deadline and arming order. A heartbeat then costs a dict update, not a heap push
and, later, a stale entry to pop. An earlier deadline is pushed at once. Firing order is the
same as with an entry per arming: an entry is pushed at exactly the (deadline, order) it fires
at, and nothing fires before its entry comes up at that place.

Keys are held as plain tuples of their fields: the collector untracks a plain tuple of
strings and numbers, not a named tuple, and a table of thousands of tracked keys made every
collection walk them (a heartbeat in a group of 1000 cost 1.6x). The typed key comes back
out (``pop_due``, ``peek``, ``armed``). A typed key equals and hashes as its plain tuple, so
lookups (``in``, ``get``, ``pop``) take either.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any, Iterable

from .commands import CancelPartitionTimers, CancelTimer, SetTimer, timer_key
from .frozen import frozen


class TimerTable(Mapping):
    """Armed timers as a mapping key -> (deadline, payload), and their firing order."""

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
        """(key, payload) of the next timer due at ``now_ms`` (removed from the table), or None."""
        heap = self._heap
        if not heap or heap[0][0] > now_ms:  # nothing due: most calls, answered without a call
            return None
        armed = self._first(now_ms)
        if armed is None:
            return None
        key, (_deadline, _seq, payload, _entry, _at) = armed
        heapq.heappop(self._heap)
        del self._armed[key]
        return timer_key(key), payload

    def peek(self) -> tuple[int, tuple, Any] | None:
        """(deadline, key, payload) of the timer that fires next, left armed; None if none is."""
        armed = self._first(None)
        if armed is None:
            return None
        key, (deadline, _seq, payload, _entry, _at) = armed
        return deadline, timer_key(key), payload

    def next_deadline(self) -> int | None:
        """The earliest deadline in the heap, cheaply: a pushed-back key's entry may wake its
        caller early (``pop_due`` then fires nothing and the next call has the later deadline);
        ``peek`` has the exact one."""
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            armed = self._armed.get(key)
            if armed is not None and armed[3] == seq:
                return deadline
            heapq.heappop(heap)
        return None

    def _first(self, until_ms: int | None) -> tuple | None:
        """The key and timer at the top of the heap once it is at its place, if due by
        ``until_ms`` (None: whenever): dropped entries are popped, early ones pushed again at
        their key's current place."""
        heap = self._heap
        while heap and (until_ms is None or heap[0][0] <= until_ms):
            deadline, seq, key = heap[0]
            armed = self._armed.get(key)
            if armed is None or armed[3] != seq:  # cancelled, fired or replaced since
                heapq.heappop(heap)
            elif armed[1] != seq:  # pushed back since: its place is (its deadline, its latest arming)
                armed[3], armed[4] = armed[1], armed[0]
                heapq.heapreplace(heap, (armed[0], armed[1], key))
            else:
                return key, armed
        return None

    def pop(self, key, default=None) -> tuple[int, Any] | None:
        """Disarm ``key``: its (deadline, payload), or ``default`` if it was not armed."""
        armed = self._armed.pop(key, None)
        return default if armed is None else (armed[0], armed[2])

    def clear(self) -> None:
        self._armed.clear()
        self._heap.clear()

    def armed(self) -> dict[tuple, tuple[int, Any]]:
        """A copy: typed key -> (deadline, payload)."""
        return {timer_key(k): (a[0], a[2]) for k, a in self._armed.items()}

    def get(self, key, default=None) -> tuple[int, Any] | None:
        armed = self._armed.get(key)
        return default if armed is None else (armed[0], armed[2])

    def __getitem__(self, key) -> tuple[int, Any]:
        armed = self._armed[key]
        return armed[0], armed[2]

    def __contains__(self, key) -> bool:
        return key in self._armed

    def __iter__(self):
        return (timer_key(k) for k in list(self._armed))

    def __len__(self) -> int:
        return len(self._armed)


@frozen
class Timers:
    """The immutable form: ``entries`` are (deadline, arming order, key, payload), in firing
    order; ``seq`` is the last arming order given."""

    entries: tuple = ()
    seq: int = 0

    def applied(self, commands: Iterable, ignore: type | None = None) -> Timers:
        """The table after ``commands`` (those that are not timer commands are passed over);
        ``SetTimer`` of an ``ignore`` key is too (a timer the caller fires by itself)."""
        table = None
        seq = self.seq
        for c in commands:
            t = type(c)
            if t is SetTimer:
                if ignore is not None and type(c.key) is ignore:
                    continue
                if table is None:
                    table = {e[2]: e for e in self.entries}
                seq += 1
                table[c.key] = (c.deadline_ms, seq, c.key, c.payload)
            elif t is CancelTimer:
                if table is None:
                    table = {e[2]: e for e in self.entries}
                table.pop(c.key, None)
            elif t is CancelPartitionTimers:
                table = {e[2]: e for e in (self.entries if table is None else table.values())
                         if e[2].partition != c.partition}
        if table is None:
            return self
        # (deadline, arming order) tells every two entries apart: keys and payloads are never compared
        return Timers(tuple(sorted(table.values())), seq)

    def next(self) -> tuple | None:
        """The (deadline, arming order, key, payload) that fires next, or None."""
        return self.entries[0] if self.entries else None

    def fired(self) -> Timers:
        """The table once its next timer fired."""
        return Timers(self.entries[1:], self.seq)

    def places(self) -> tuple:
        """(deadline, key) in firing order: the table's content, arming numbers aside."""
        return tuple((e[0], e[2]) for e in self.entries)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __len__(self) -> int:
        return len(self.entries)
