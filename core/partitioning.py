"""Which offsets-topic partition holds a group: Kafka's ``Utils.abs(groupId.hashCode()) %
partitions``, with Java's ``String.hashCode`` (over UTF-16 code units)."""

from __future__ import annotations

from functools import lru_cache

# What a coordinator holds of a partition it owns: loaded, or still loading.
ACTIVE, LOADING = "active", "loading"


def java_string_hash(s: str) -> int:
    """``String.hashCode()`` as an unsigned 32-bit value (UTF-16 code units)."""
    h = 0
    raw = s.encode("utf-16-be")
    for i in range(0, len(raw), 2):
        h = (31 * h + (raw[i] << 8 | raw[i + 1])) & 0xFFFFFFFF
    return h


@lru_cache(maxsize=1 << 16)
def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % partitions``."""
    h = java_string_hash(group_id)
    if h >= 0x80000000:  # negative as a Java int: Utils.abs is Math.abs, and 0 for MIN_VALUE
        h = 0 if h == 0x80000000 else 0x100000000 - h
    return h % num_partitions
