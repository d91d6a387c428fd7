"""Which partition of the offsets topic holds a group (core/partitioning.py)."""

from __future__ import annotations


def test_java_string_hash_is_string_hashcode_over_utf16_units():
    from groupcoord.core.partitioning import java_string_hash

    # partition_for caches its answers, so the hash itself is checked here
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("group") == 98629247
    assert java_string_hash("my-group") == (-1906497762) % (1 << 32)
    assert java_string_hash("polygenelubricants") == 1 << 31
    assert java_string_hash("\U0001f600") == (31 * 0xD83D + 0xDE00)  # a surrogate pair: two units
