"""One input's context and one operation's records, passed explicitly to whatever handles them.

``Context`` is made by ``Coordinator.handle`` for each event and dropped after it: the event's
time and the commands it emits, in order. ``Records`` are what one operation writes, by
partition, each record list with the continuations its write runs when it completes or fails
(core/continuations.py); an operation makes its own, and ``WriteLog.emit`` turns them into one
Write per partition. Nothing of either outlives the input."""

from __future__ import annotations

from typing import Any

from .commands import CancelTimer, Respond, SetTimer


class Context:
    __slots__ = ("now", "out")

    def __init__(self, now_ms: int) -> None:
        self.now = now_ms
        self.out: list = []

    def respond(self, request_id: Any, response: Any) -> None:
        self.out.append(Respond(request_id, response))

    def arm(self, key: Any, delay_ms: int, payload: Any = None) -> None:
        self.out.append(SetTimer(key, self.now + delay_ms, payload))

    def cancel(self, key: Any) -> None:
        self.out.append(CancelTimer(key))


class Records(dict):
    """partition -> (records, continuations) of one operation."""

    __slots__ = ()

    def append(self, partition: int, record: Any, continuation: Any = None) -> None:
        records, continuations = self.setdefault(partition, ([], []))
        records.append(record)
        if continuation is not None:
            continuations.append(continuation)

    def then(self, partition: int, continuation: Any) -> None:
        """``continuation`` runs after the partition's write, which has records already."""
        self[partition][1].append(continuation)
