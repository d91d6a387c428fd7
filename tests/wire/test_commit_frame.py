"""The OffsetCommit fast path (``wire.fast_frames``) reads exactly the event the general path
builds (kio, then ``request_event``), gives up on every frame it does not expect (the general
path then answers or refuses it), and writes the answer's bytes exactly as kio does."""

from __future__ import annotations

from frame_damage import damaged
from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.protocol.schema import SchemaError
from groupcoord.adapters.protocol.translate import request_event, response_fields
from groupcoord.adapters.wire.fast_frames import RETENTION_LIMIT_MS, offset_commit_response_body, read_offset_commit
from groupcoord.core.commands import OffsetCommitResponse, PartitionResult, TopicResult
from groupcoord.core.errors import Error

int32 = st.integers(-2**31, 2**31 - 1)
int64 = st.integers(-2**63, 2**63 - 1)
names = st.text(max_size=140)  # past 127 bytes a compact length takes two varint bytes
partitions = st.lists(st.tuples(int32, int64, int32, st.none() | names), max_size=4)
retention_ms = st.integers(-2**40, 2**40)  # kio's encoder goes through a float; the edges are tested below
commits = st.tuples(st.integers(2, 9), int32, st.none() | names, names, int32, names, st.none() | names, retention_ms,
                    st.lists(st.tuples(names, partitions), max_size=4))


def _frame(version, correlation_id, client_id, group_id, generation_id, member_id, instance_id, retention_ms,
           topics) -> bytes:
    body = {"group_id": group_id, "generation_id_or_member_epoch": generation_id, "member_id": member_id,
            "topics": [{"name": name, "partitions": [
                {"partition_index": i, "committed_offset": o, "committed_metadata": m,
                 **({"committed_leader_epoch": e} if version >= 6 else {})} for i, o, e, m in parts]}
                for name, parts in topics]}
    if version >= 7:
        body["group_instance_id"] = instance_id
    if version <= 4:
        body["retention_time_ms"] = retention_ms
    return kc.encode_request(8, version, correlation_id, client_id, kc.request_body(8, version, body))[4:]


def _general(frame: bytes):
    """What the general path reads: the request's header and the event's fields, or None."""
    try:
        request = kc.decode_request(frame)
    except (kc.FrameError, kc.UnsupportedRequest):
        return None
    if request.api_key != 8:
        return None
    try:
        event = request_event("OffsetCommit", request.version, kc.to_fields(request.body), request_id=None, now_ms=0)
    except SchemaError:
        return None
    return (request.version, request.correlation_id, request.client_id, event.group_id, event.generation_id,
            event.member_id, event.group_instance_id, event.retention_time_ms, event.topics)


def _short(*texts) -> bool:
    return all(len((t or "").encode()) < 127 for t in texts)


@settings(max_examples=400, deadline=None)
@given(commits)
def test_reads_every_commit_as_the_general_path_does(commit):
    frame = _frame(*commit)
    got = read_offset_commit(frame, 9)
    if got is not None:
        assert got == _general(frame)
    version, _cid, _client, group_id, _gen, member_id, instance_id, _retention, topics = commit
    flexible_names = [group_id, member_id, instance_id] + [n for n, _ in topics] + [
        m for _, parts in topics for *_, m in parts]
    if version < 8 or _short(*flexible_names):  # only a compact string's length can be too long
        assert got is not None and got == _general(frame)
        assert [(n, [(p.partition_index, p.committed_offset, p.committed_metadata) for p in parts])
                for n, parts in got[8]] == [(n, [(i, o, m) for i, o, _e, m in parts]) for n, parts in topics]
        assert got[7] == (commit[7] if version <= 4 else -1)


@settings(max_examples=400, deadline=None)
@given(commits, st.data())
def test_a_damaged_frame_is_read_as_the_general_path_reads_it_or_left_to_it(commit, data):
    frame = damaged(_frame(*commit), data)
    got = read_offset_commit(frame, 9)
    assert got is None or got == _general(frame)


def test_other_apis_versions_and_long_or_null_arrays_take_the_general_path():
    one = [("t", [(0, 5, -1, "")])]
    assert read_offset_commit(_frame(9, 1, "c", "g", 1, "m", None, -1, one), 8) is None
    assert read_offset_commit(_frame(9, 1, "c", "g", 1, "m", None, -1, one), 9) is not None
    heartbeat = kc.encode_request(12, 4, 1, "c", kc.request_body(12, 4, {
        "group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}))[4:]
    assert read_offset_commit(heartbeat, 9) is None
    assert read_offset_commit(b"\x00\x08", 9) is None
    many = [("t", [(i, i, -1, "") for i in range(130)])]  # a compact array of 127+ takes two varint bytes
    assert read_offset_commit(_frame(9, 1, "c", "g", 1, "m", None, -1, many), 9) is None
    assert len(read_offset_commit(_frame(7, 1, "c", "g", 1, "m", None, -1, many), 9)[8][0][1]) == 130
    v5 = bytearray(_frame(5, 1, "c", "g", 1, "m", None, -1, []))
    v5[-4:] = b"\xff\xff\xff\xff"  # a null topics array
    assert read_offset_commit(bytes(v5), 9) is None



def test_a_retention_time_past_the_limit_is_left_to_the_general_path():
    """Past 2**52 ms kio's timedelta may not hold a retention time exactly, or at all
    (spec/deviations.md D16: the general path then closes the connection)."""
    frame = _frame(2, 1, "c", "g", 1, "m", None, -1, [("t", [(0, 5, -1, "")])])
    at = frame.index(b"\xff" * 8)

    def with_retention(ms: int) -> bytes:
        return frame[:at] + ms.to_bytes(8, "big", signed=True) + frame[at + 8:]

    for within in (RETENTION_LIMIT_MS, -RETENTION_LIMIT_MS, 604_800_000):
        assert read_offset_commit(with_retention(within), 9)[7] == within == _general(with_retention(within))[7]
    for beyond in (RETENTION_LIMIT_MS + 1, -RETENTION_LIMIT_MS - 1, 2**63 - 1):
        assert read_offset_commit(with_retention(beyond), 9) is None
    assert _general(with_retention(2**63 - 1)) is None


results = st.lists(st.builds(TopicResult, names, st.lists(st.builds(PartitionResult, int32, st.sampled_from(Error)),
                                                          max_size=4).map(tuple)), max_size=4).map(tuple)


@settings(max_examples=400, deadline=None)
@given(st.integers(2, 9), results)
def test_writes_every_answer_as_kio_does(version, topics):
    fields = response_fields("OffsetCommit", version, OffsetCommitResponse(topics))
    assert offset_commit_response_body(version, topics) == kc.encode_response_body(
        8, version, kc.response_body(8, version, fields))


def test_long_names_and_arrays_take_longer_varints_in_an_answer():
    topics = (TopicResult("t" * 300, tuple(PartitionResult(i, Error.NONE) for i in range(200))),)
    for version in (7, 8, 9):
        fields = response_fields("OffsetCommit", version, OffsetCommitResponse(topics))
        assert offset_commit_response_body(version, topics) == kc.encode_response_body(
            8, version, kc.response_body(8, version, fields))
