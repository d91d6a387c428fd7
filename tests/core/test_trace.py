"""The trace format: every event and command round-trips; bad records are refused by name."""

import json

import pytest

from groupcoord.core import trace
from groupcoord.adapters.runtime.driver import Driver
from groupcoord.adapters.protocol.translate import request_event


def _recorded():
    recorder, lines = trace.Recorder(), []
    driver = Driver(observer=lambda e, cmds: lines.extend(recorder.records(e, cmds)))
    join = {"group_id": "g", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000, "member_id": "",
            "group_instance_id": "i", "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"\x01"}]}
    driver.dispatch(request_event("JoinGroup", 9, join, request_id="j", now_ms=0, new_member_uuid="u"))
    driver.advance(3000)
    m = driver.responses["j"].member_id
    driver.dispatch(request_event("SyncGroup", 5, {"group_id": "g", "generation_id": 1, "member_id": m,
                                                   "group_instance_id": "i",
                                                   "assignments": [{"member_id": m, "assignment": b"\x02"}]},
                                  request_id="s", now_ms=driver.now_ms))
    driver.advance(60_000)
    return lines


def test_every_record_round_trips_through_json():
    lines = _recorded()
    kinds = {r["type"] for r in lines}
    assert {"JoinGroup", "SyncGroup", "Respond", "Write", "SetTimer", "TimerFired", "WriteCompleted",
            "LoadPartition"} <= kinds
    for number, record in enumerate(lines):
        parsed = trace.parse_record(trace.to_json_line(record), f"t:{number}")
        value = trace.value_of(parsed)
        assert trace.encode(value) == {"type": record["type"], "data": record["data"]}


def test_sequence_numbers_are_per_group_and_gapless():
    lines = _recorded()
    by_group = {}
    for r in lines:
        if r["group_id"] is not None:
            by_group.setdefault(r["group_id"], []).append(r["seq"])
    assert by_group["g"] == list(range(len(by_group["g"])))
    responses = [r for r in lines if r["type"] == "Respond"]
    assert responses and all(r["group_id"] == "g" for r in responses)


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r.update(v=1), "trace version"),
    (lambda r: r.update(type="Explode"), "unknown in type"),
    (lambda r: r.pop("seq"), "missing fields"),
    (lambda r: r.update(extra=1), "unknown fields"),
    (lambda r: r["data"].update(bogus=1), "unknown fields ['bogus']"),
])
def test_bad_records_are_refused_naming_the_line(mutate, message):
    record = next(r for r in _recorded() if r["type"] == "JoinGroup")
    mutate(record)
    line = json.dumps(record)
    with pytest.raises(trace.TraceError, match="f.jsonl:7"):
        trace.value_of(trace.parse_record(line, "f.jsonl:7"), "f.jsonl:7")
    with pytest.raises(trace.TraceError, match=message.replace("[", r"\[").replace("]", r"\]")):
        trace.value_of(trace.parse_record(line, "f.jsonl:7"), "f.jsonl:7")


def test_not_json_is_refused():
    with pytest.raises(trace.TraceError, match="x:3: not JSON"):
        list(trace.read_lines(["", "  ", "{"], "x"))
