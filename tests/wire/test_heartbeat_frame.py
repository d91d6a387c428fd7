"""The Heartbeat fast path (``wire.fast_frames``) reads exactly what kio reads, and gives
up on every frame it does not expect (the general path then answers or refuses it)."""

from __future__ import annotations

from frame_damage import damaged
from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.wire.fast_frames import HeartbeatReader, read_heartbeat

names = st.text(max_size=140)  # past 127 bytes a compact length takes two varint bytes
heartbeats = st.tuples(st.integers(0, 4), st.integers(-2**31, 2**31 - 1), st.none() | names, names,
                       st.integers(-2**31, 2**31 - 1), names, st.none() | names)


def _frame(version, correlation_id, client_id, group_id, generation_id, member_id, instance_id) -> bytes:
    body = {"group_id": group_id, "generation_id": generation_id, "member_id": member_id}
    if version >= 3:
        body["group_instance_id"] = instance_id
    return kc.encode_request(12, version, correlation_id, client_id, kc.request_body(12, version, body))[4:]


def _kio(frame: bytes):
    try:
        request = kc.decode_request(frame)
    except (kc.FrameError, kc.UnsupportedRequest):
        return None
    if request.api_key != 12:
        return None
    fields = kc.to_fields(request.body)
    return (request.version, request.correlation_id, request.client_id, fields["group_id"], fields["generation_id"],
            fields["member_id"], fields.get("group_instance_id"))


@settings(max_examples=400, deadline=None)
@given(heartbeats)
def test_reads_every_heartbeat_as_kio_does(hb):
    frame = _frame(*hb)
    got = read_heartbeat(frame, 4)
    if got is not None:  # long names take the general path
        assert got == _kio(frame)
    version, _cid, _client, group_id, _gen, member_id, instance_id = hb
    if all(len((s or "").encode()) < 127 for s in (group_id, member_id, instance_id)):
        assert got == _kio(frame)
        expected_instance = instance_id if version >= 3 else None
        assert got[3:] == (group_id, hb[4], member_id, expected_instance)


@settings(max_examples=400, deadline=None)
@given(heartbeats, st.data())
def test_a_damaged_frame_is_read_as_kio_reads_it_or_left_to_the_general_path(hb, data):
    frame = damaged(_frame(*hb), data)
    got = read_heartbeat(frame, 4)
    assert got is None or got == _kio(frame)


def test_other_apis_and_versions_past_the_limit_take_the_general_path():
    frame = _frame(4, 1, "c", "g", 1, "m", None)
    assert read_heartbeat(frame, 3) is None
    join = kc.encode_request(11, 5, 1, "c", kc.request_body(11, 5, {
        "group_id": "g", "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": []}))[4:]
    assert read_heartbeat(join, 4) is None
    assert read_heartbeat(b"\x00\x0c", 4) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(heartbeats, st.sampled_from(["whole", "cut", "other_header"])), max_size=30))
def test_the_reader_remembers_frames_but_reads_every_one_as_read_heartbeat_does(frames):
    reader = HeartbeatReader(4, limit=5)
    for hb, how in frames:
        frame = _frame(*hb)
        if how == "cut":
            frame = frame[:-1]
        elif how == "other_header":  # same bytes after the correlation id, another API key or version
            frame = bytes([0, 11]) + frame[2:]
        assert reader.read(frame) == read_heartbeat(frame, 4)
        assert reader.read(frame) == read_heartbeat(frame, 4)
