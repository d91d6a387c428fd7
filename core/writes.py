"""The write log: every storage write in flight, with the continuations it runs when it
completes or fails (core/continuations.py), and the answers held behind writes.

Kafka answers a request only once the records before it on its partition are in the log, so an
answer that depends on no record of its own still waits for the writes in flight on its
partition when it was made (``result``). ``WriteLog`` keeps those answers by partition with the
highest write id each waits for, and releases them in the order held once every write up to it
is done (``release``), also when writes complete out of order."""

from __future__ import annotations

from typing import Any, Callable, Iterator

from .commands import Respond, Write
from .context import Context, Records
from .frozen import evolve, frozen


@frozen
class PendingWrite:
    write_id: int
    partition: int
    continuations: tuple  # core/continuations.py, run in order when the write completes or fails
    request: Any = None  # the request whose response rides on this write
    response: Any = None  # that response, sent on success


class WriteLog:
    def __init__(self, next_write_id: int = 1) -> None:
        self.pending: dict[int, PendingWrite] = {}
        # the ids of ``pending`` by partition, lowest first (derived: a slow store keeps thousands
        # in flight, and each completion asks for its partition's lowest)
        self._on: dict[int, dict[int, None]] = {}
        # answers held behind writes, by partition: (the highest write id they wait for, Respond)
        self._held: dict[int, list[tuple[int, Respond]]] = {}
        # partitions whose held answers do not wait for ever higher ids (a write completed before
        # an earlier one): released by a whole scan, not from the front (derived)
        self._unordered: set[int] = set()
        self.next_write_id = next_write_id

    # ------------------------------------------------------------------ writes

    def emit(self, ctx: Context, records: Records, request: Any = None, response: Any = None) -> list[int]:
        """One Write per partition the operation wrote to; returns their ids."""
        write_ids = []
        for partition, (written, continuations) in records.items():
            write_id = self.next_write_id
            self.next_write_id += 1
            write_ids.append(write_id)
            self.pending[write_id] = PendingWrite(write_id, partition, tuple(continuations), request, response)
            self._on.setdefault(partition, {})[write_id] = None
            ctx.out.append(Write(write_id, partition, tuple(written)))
        return write_ids

    def take(self, write_id: int) -> PendingWrite | None:
        """The write with this id, no longer in flight (None: no such write)."""
        write = self.pending.pop(write_id, None)
        if write is not None:
            in_flight = self._on[write.partition]
            del in_flight[write_id]
            if not in_flight:
                del self._on[write.partition]
        return write

    def on(self, partition: int) -> list[PendingWrite]:
        """The partition's writes in flight, oldest first."""
        return [self.pending[i] for i in self._on.get(partition, ())]

    def later_on(self, partition: int, write_id: int) -> bool:
        """A write newer than ``write_id`` is in flight on the partition."""
        return any(i > write_id for i in self._on.get(partition, ()))

    def edit(self, change: Callable[[Any], Any], until: Callable[[PendingWrite], bool] | None = None,
             once: bool = False) -> bool:
        """Every continuation of the writes in flight through ``change`` (None: it goes), oldest
        write first, stopping before the first write ``until`` accepts (or, ``once``, after the
        first write changed); True if one changed."""
        changed = False
        for write_id, write in self.pending.items():
            if until is not None and until(write):
                break
            continuations = tuple(new for new in map(change, write.continuations) if new is not None)
            if continuations != write.continuations:
                self.pending[write_id] = evolve(write, continuations=continuations)
                changed = True
                if once:
                    break
        return changed

    # ------------------------------------------------------------------ held answers

    def result(self, ctx: Context, partition: int | None, request_id: Any, response: Any) -> None:
        """An operation's own result: held behind writes still in flight on its partition
        (Kafka answers a write operation without records only once earlier writes commit)."""
        pending = self._on.get(partition) if partition is not None else None
        if pending and partition is not None:
            self.hold(partition, next(reversed(pending)), Respond(request_id, response))
        else:
            ctx.out.append(Respond(request_id, response))

    def hold(self, partition: int, wait_for: int, respond: Respond) -> None:
        held = self._held.setdefault(partition, [])
        if held and wait_for < held[-1][0]:
            self._unordered.add(partition)
        held.append((wait_for, respond))

    def release(self, ctx: Context, partition: int) -> None:
        """The partition's held answers whose writes have all completed, in the order held."""
        held = self._held.get(partition)
        if not held:
            return
        in_flight = self._on.get(partition)
        lowest = next(iter(in_flight)) if in_flight else None
        if partition in self._unordered:
            keep = []
            for entry in held:
                if lowest is None or entry[0] < lowest:
                    ctx.out.append(entry[1])
                else:
                    keep.append(entry)
            held[:] = keep
        else:
            # the ids waited for only grow: the releasable ones are the first
            count = len(held) if lowest is None else next(
                (n for n, entry in enumerate(held) if entry[0] >= lowest), len(held))
            ctx.out.extend(respond for _, respond in held[:count])
            del held[:count]
        if not held:
            del self._held[partition]
            self._unordered.discard(partition)

    def drop_held(self, partition: int) -> list[Respond]:
        """The partition's held answers, no longer held (it is unloaded)."""
        self._unordered.discard(partition)
        return [respond for _, respond in self._held.pop(partition, ())]

    def held(self) -> Iterator[tuple[int, int, Respond]]:
        """(partition, write id waited for, answer) of every held answer."""
        return ((p, w, r) for p, held in self._held.items() for w, r in held)

    @classmethod
    def restore(cls, pending: dict, held: tuple, next_write_id: int) -> "WriteLog":
        log = cls(next_write_id)
        log.pending = dict(pending)
        for write_id in sorted(pending):
            log._on.setdefault(pending[write_id].partition, {})[write_id] = None
        for partition, wait_for, respond in held:
            log.hold(partition, wait_for, respond)
        return log
