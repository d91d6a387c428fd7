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


def java_hashmap_order(keys: list[str]) -> list[str]:
    """The order a java.util.HashMap holding ``keys`` (given in insertion order) iterates them:
    by bucket, the spread String.hashCode masked by the table size (16, doubled past 3/4
    full); keys of one bucket in insertion order."""
    size = 16
    while len(keys) > size * 3 // 4:
        size *= 2
    return sorted(keys, key=lambda key: java_hashmap_bucket(key, size))  # stable: a bucket keeps insertion order


def java_hashmap_bucket(key: str, size: int = 16) -> int:
    """The bucket of a string key in a java.util.HashMap table of ``size`` buckets."""
    h = java_string_hash(key)
    return (h ^ (h >> 16)) & (size - 1)


@lru_cache(maxsize=1 << 16)
def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % partitions``."""
    h = java_string_hash(group_id)
    if h >= 0x80000000:  # negative as a Java int: Utils.abs is Math.abs, and 0 for MIN_VALUE
        h = 0 if h == 0x80000000 else 0x100000000 - h
    return h % num_partitions
