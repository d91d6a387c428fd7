"""The observed-trace format's values and files without a proxy: the one conversion of
non-JSON values, a torn last line, Parquet and JSON Lines read back alike."""

from __future__ import annotations

import json
import uuid

import pytest

from groupcoord.adapters.observe.trace import COLUMNS, JOURNAL, JSONL, ObservedWriter, dumps, observed, read_observed


def sample(n: int) -> dict:
    return observed(n, 0, 1_000 + n, None if n % 2 else 2_000 + n, "JoinGroup", 11, 5, n, None if n == 3 else "c",
                    {"group_id": "g", "protocols": [{"name": "range", "metadata": b"\x00\x01\xff"}],
                     "topic_id": uuid.UUID(int=n)},
                    None if n % 2 else {"error_code": 0, "member_id": "m", "members": []})


def test_bytes_are_hex_and_other_values_their_str():
    text = dumps(sample(2))
    back = json.loads(text)
    assert list(back) == list(COLUMNS)
    assert back["request"]["protocols"][0]["metadata"] == "0001ff"
    assert back["request"]["topic_id"] == "00000000-0000-0000-0000-000000000002"


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_what_is_written_is_read_back(tmp_path, fmt):
    writer = ObservedWriter(tmp_path, fmt)
    for n in range(1, 5):
        writer.write(sample(n))
    writer.close()
    assert read_observed(tmp_path) == [json.loads(dumps(sample(n))) for n in range(1, 5)]


def test_a_torn_last_line_is_left_out_and_a_journal_is_read(tmp_path):
    lines = [dumps(sample(n)) for n in (1, 2)]
    (tmp_path / JOURNAL).write_text("\n".join(lines) + "\n" + lines[0][:20])
    assert [r["conn"] for r in read_observed(tmp_path)] == [1, 2]
    (tmp_path / JSONL).write_text(lines[1] + "\n")  # a finished file comes before a journal
    assert [r["conn"] for r in read_observed(tmp_path)] == [2]


def test_a_new_recording_replaces_the_old_one(tmp_path):
    first = ObservedWriter(tmp_path, "parquet")
    first.write(sample(1))
    first.close()
    second = ObservedWriter(tmp_path, "jsonl")
    second.close()
    assert read_observed(tmp_path) == [] and sorted(p.name for p in tmp_path.iterdir()) == [JSONL]
