"""The trace format: every event and command round-trips; bad records are refused by name."""

import json

import pytest

from groupcoord.adapters.protocol.translate import request_event
from groupcoord.adapters.runtime.driver import Driver
from groupcoord.core import trace


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


def test_the_type_registry_is_every_event_command_and_timer_key():
    import attrs

    from groupcoord.core import commands as cmd
    from groupcoord.core import events as ev
    from groupcoord.core import trace
    from groupcoord.core.classic.model import Parked
    from groupcoord.core.consumer import model as consumer_model
    from groupcoord.core.consumer import records as consumer_records

    expected = {name: value for module in (ev, cmd, consumer_model, consumer_records)
                for name, value in vars(module).items()
                if isinstance(value, type) and attrs.has(value) and value.__module__ == module.__name__}
    assert {"ConsumerMember", "ConsumerAssignmentRecord", "ClassicMeta"} <= set(expected)
    expected.update({"Parked": Parked, **{k.__name__: k for k in cmd.TIMER_KEYS}})
    assert trace.TYPES == expected
    assert trace._registry() == trace.TYPES  # built from the modules alone (it runs once, at import)
    assert {"JoinGroup", "TimerFired", "LoadPartition"} <= trace.EVENT_TYPES
    assert {"Respond", "SetTimer", "Write", "GroupMetadataRecord"} <= trace.COMMAND_TYPES
    assert "Error" not in trace.TYPES and "Parked" not in trace.EVENT_TYPES | trace.COMMAND_TYPES


@pytest.mark.parametrize("data, message", [
    ({"hex": "zz"}, "bad hex 'zz'"),
    ({"type": "Nope", "data": {}}, "unknown type 'Nope'"),
    ({"type": "Heartbeat", "data": []}, "Heartbeat: data must be an object"),
    ({"type": "WriteFailed", "data": {"now_ms": 0, "write_id": 1, "error": "BOGUS"}},
     "WriteFailed.error: not a Kafka error: 'BOGUS'"),
    ({"type": "WriteCompleted", "data": {"now_ms": 0}}, "WriteCompleted: "),
    ({"a": 1, "b": 2}, "unexpected object ['a', 'b']"),
])
def test_decoding_refuses_what_it_does_not_know_saying_what(data, message):
    from groupcoord.core import trace

    with pytest.raises(trace.TraceError) as e:
        trace.decode(data)
    assert str(e.value).startswith(message)


def test_error_fields_decode_to_errors_by_name():
    from groupcoord.core import commands as cmd
    from groupcoord.core import events as ev
    from groupcoord.core import trace
    from groupcoord.core.errors import Error

    failed = trace.decode({"type": "WriteFailed", "data": {"now_ms": 0, "write_id": 1, "error": "NOT_COORDINATOR"}})
    assert failed == ev.WriteFailed(now_ms=0, write_id=1, error=Error.NOT_COORDINATOR)
    assert failed.error is Error.NOT_COORDINATOR
    response = trace.decode({"type": "HeartbeatResponse", "data": {"error_code": "REBALANCE_IN_PROGRESS"}})
    assert response.error_code is Error.REBALANCE_IN_PROGRESS
    assert trace.encode(cmd.HeartbeatResponse(Error.NONE)) == {"type": "HeartbeatResponse", "data": {"error_code": "NONE"}}
    # a consumer group's partitions and assignments: sets and maps, sorted, and back
    assert trace.encode({2, 1}) == {"set": [1, 2]} and trace.decode({"set": [2, 1]}) == frozenset({1, 2})
    assert trace.decode(trace.encode({"t": frozenset({0})})) == {"t": frozenset({0})}
    with pytest.raises(trace.TraceError, match="a map's entries must be"):
        trace.decode({"map": [[1]]})
    with pytest.raises(trace.TraceError, match=r"^cannot encode complex: "):
        trace.encode(1j)
    with pytest.raises(trace.TraceError, match=r"^cannot encode object: "):
        trace.encode(object())


def test_the_group_and_partition_of_a_value_come_from_its_fields_or_its_timer_key():
    from groupcoord.core import commands as cmd
    from groupcoord.core import events as ev
    from groupcoord.core import trace

    key = cmd.HeartbeatTimer(3, "g", "m")
    assert trace.group_of(cmd.SetTimer(key, 10)) == "g" and trace.partition_of(cmd.SetTimer(key, 10)) == 3
    assert trace.group_of(ev.TimerFired(now_ms=0, key=key)) == "g"
    assert trace.partition_of(ev.TimerFired(now_ms=0, key=cmd.ExpirationTimer(5))) == 5
    assert trace.group_of(ev.TimerFired(now_ms=0, key=cmd.ExpirationTimer(5))) is None
    assert trace.partition_of(cmd.Write(1, 4, ())) == 4 and trace.group_of(cmd.Write(1, 4, ())) is None
    assert trace.partition_of(cmd.CancelTimer(key)) == 3 and trace.group_of(cmd.CancelTimer(key)) == "g"
    assert trace.group_of(cmd.Respond("r", cmd.HeartbeatResponse(0))) is None
    assert trace.partition_of(cmd.Respond("r", cmd.HeartbeatResponse(0))) is None
    assert trace.group_of(ev.LoadPartition(now_ms=0, partition=2)) is None
    assert trace.partition_of(ev.LoadPartition(now_ms=0, partition=2)) == 2


def test_the_recorder_files_each_record_under_its_group_or_partition():
    from groupcoord.core import commands as cmd
    from groupcoord.core import events as ev
    from groupcoord.core import trace

    recorder = trace.Recorder()
    key = cmd.HeartbeatTimer(3, "g", "m")
    [fired, armed] = recorder.records(ev.TimerFired(now_ms=5, key=key), [cmd.SetTimer(key, 15)])
    assert (fired["group_id"], fired["partition"], fired["seq"], fired["dir"]) == ("g", 3, 0, "in")
    assert (armed["group_id"], armed["partition"], armed["seq"], armed["dir"], armed["ts_ms"]) == ("g", 3, 1, "out", 5)
    [load, write] = recorder.records(ev.LoadPartition(now_ms=6, partition=3), [cmd.Write(1, 3, ())])
    assert (load["group_id"], load["partition"], load["seq"]) == (None, 3, 0)
    assert (write["group_id"], write["partition"], write["seq"]) == (None, 3, 1)
    # an answer to a request the recorder never saw (it started late) belongs to no group
    [done, answer] = recorder.records(ev.WriteCompleted(now_ms=7, write_id=1), [cmd.Respond("r", cmd.HeartbeatResponse(0))])
    assert (answer["group_id"], answer["partition"], answer["seq"]) == (None, None, 1)
    assert (done["group_id"], done["partition"], done["seq"]) == (None, None, 0)


def test_a_json_line_is_compact_and_keeps_the_field_order():
    from groupcoord.core import trace

    record = {"v": 2, "group_id": None, "partition": 1, "seq": 0, "ts_ms": 5, "dir": "in", "type": "X", "data": {"b": 1, "a": [1, 2]}}
    assert trace.to_json_line(record) == ('{"v":2,"group_id":null,"partition":1,"seq":0,"ts_ms":5,"dir":"in",'
                                          '"type":"X","data":{"b":1,"a":[1,2]}}')


@pytest.mark.parametrize("line, message", [
    ("[1]", "<trace>: a record is an object"),
    ('{"v": 2, "group_id": null, "partition": 0, "seq": 0, "ts_ms": 0, "dir": "up", "type": "X", "data": {}}',
     "<trace>: dir must be 'in' or 'out'"),
    ('{"v": 2, "group_id": null, "partition": 0, "seq": "0", "ts_ms": 0, "dir": "in", "type": "LoadPartition", "data": {}}',
     "<trace>: seq and ts_ms must be integers"),
    ('{"v": 2, "group_id": null, "partition": 0, "seq": 0, "ts_ms": 0.5, "dir": "in", "type": "LoadPartition", "data": {}}',
     "<trace>: seq and ts_ms must be integers"),
    ("{", "<trace>: not JSON"),
])
def test_bad_lines_are_refused_naming_where(line, message):
    from groupcoord.core import trace

    with pytest.raises(trace.TraceError) as e:
        trace.parse_record(line)
    assert str(e.value).startswith(message)
    with pytest.raises(trace.TraceError) as e:
        list(trace.read_lines(["", line]))
    assert str(e.value).startswith(message.replace("<trace>", "<trace>:2"))


def test_a_bad_value_is_refused_naming_where():
    from groupcoord.core import trace

    with pytest.raises(trace.TraceError, match=r"^<trace>: unknown type 'Nope'$"):
        trace.value_of({"type": "Nope", "data": {}})


def test_a_value_without_a_group_or_partition_of_the_right_type_has_none():
    from types import SimpleNamespace

    from groupcoord.core.trace import group_of, partition_of

    assert group_of(SimpleNamespace(group_id=5)) is None
    assert group_of(SimpleNamespace(group_id=None, key=SimpleNamespace(group_id=b"g"))) is None
    assert partition_of(SimpleNamespace(partition="0", key=SimpleNamespace(partition=1))) == 1
    assert partition_of(SimpleNamespace(partition="0")) is None
