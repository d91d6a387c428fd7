"""Just enough of the consumer protocol's subscription format to know a group's topics.

Kafka reads every member's subscription with the version-0 layout (a prefix of all later
versions): int16 version, then an array (int32 count) of int16-length strings. A malformed
subscription means the topics are unknown (None), as in Kafka.
"""

from __future__ import annotations

import struct


def subscription_topics(metadata: bytes) -> frozenset[str] | None:
    try:
        (version,) = struct.unpack_from(">h", metadata, 0)
        if version < 0:
            return None
        (count,) = struct.unpack_from(">i", metadata, 2)
        if count < 0:
            return None
        offset, topics = 6, []
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, offset)
            offset += 2
            if length < 0 or offset + length > len(metadata):
                return None
            topics.append(metadata[offset:offset + length].decode("utf-8"))
            offset += length
        return frozenset(topics)
    except (struct.error, UnicodeDecodeError):
        return None


def encode_subscription(topics: list[str], user_data: bytes | None = None) -> bytes:
    """A version-0 subscription (what tests and the demo send)."""
    out = [struct.pack(">hi", 0, len(topics))]
    for topic in topics:
        raw = topic.encode("utf-8")
        out.append(struct.pack(">h", len(raw)) + raw)
    if user_data is None:
        out.append(struct.pack(">i", -1))
    else:
        out.append(struct.pack(">i", len(user_data)) + user_data)
    return b"".join(out)
