"""Java's orders where Kafka's client-side results depend on them: ``String.compareTo``,
``TopicPartition.hashCode`` and the iteration order of a ``java.util.HashMap``."""

from __future__ import annotations

from typing import Iterable, Sequence

from groupcoord.core import java_string_hash

TopicPartition = tuple[str, int]


def java_key(s: str) -> bytes:
    """A sort key with ``String.compareTo``'s order (UTF-16 code units)."""
    return s.encode("utf-16-be")


def tp_hash(tp: TopicPartition) -> int:
    """``TopicPartition.hashCode()`` (unsigned 32-bit)."""
    return (31 * (31 + tp[1]) + java_string_hash(tp[0])) & 0xFFFFFFFF


def tp_key(tp: TopicPartition) -> tuple:
    """``TopicPartitionComparator``: topic, then partition."""
    return java_key(tp[0]), tp[1]


def _table_size_for(n: int) -> int:
    cap = 1
    while cap < n:
        cap <<= 1
    return cap


class JavaHashOrder:
    """The iteration order of a ``java.util.HashMap`` / ``HashSet``, following its history.

    Entries iterate by bucket (spread hash masked by the table size), then in the order they
    entered the bucket; the table doubles when the size exceeds 3/4 of it and never shrinks.
    (Treeified bins, 8+ colliding keys, are not modelled.)
    """

    __slots__ = ("_hash", "_cap", "_seq", "_entries")

    def __init__(self, hash_fn, keys: Iterable = (), initial_capacity: int | None = None) -> None:
        self._hash = hash_fn
        self._cap = _table_size_for(initial_capacity) if initial_capacity else 16
        self._seq = 0
        self._entries: dict = {}
        for key in keys:
            self.add(key)

    def add(self, key) -> None:
        if key not in self._entries:
            self._entries[key] = self._seq
            self._seq += 1
            if len(self._entries) > self._cap * 3 // 4:
                self._cap <<= 1

    def remove(self, key) -> None:
        self._entries.pop(key, None)

    def __contains__(self, key) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def order(self) -> list:
        mask, h = self._cap - 1, self._hash
        return sorted(self._entries, key=lambda k: (_spread(h(k)) & mask, self._entries[k]))

    def first(self):
        return self.order()[0]


def _spread(h: int) -> int:
    return h ^ (h >> 16)


def java_order(keys: Sequence, hash_fn=java_string_hash, initial_capacity: int | None = None) -> list:
    """The iteration order of a HashMap into which ``keys`` were put in this order."""
    return JavaHashOrder(hash_fn, keys, initial_capacity).order()
