"""The commands and records the core emits (core/commands.py)."""

from __future__ import annotations

from drive import _record

from groupcoord.core import commands as c


def test_a_records_key_in_the_offsets_topic_is_shared_by_its_tombstone():
    assert _record("g").key == c.GroupTombstone("g").key == ("group", "g")
    assert c.OffsetCommitRecord("g", "t", 1, 5, -1, "", 0).key == c.OffsetTombstone("g", "t", 1).key == (
        "offset", "g", "t", 1)
