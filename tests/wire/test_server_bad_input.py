"""Bad input never crashes the server: malformed, truncated and oversized frames, unknown API
keys and versions, clients vanishing with parked requests, and a hypothesis fuzz of random
bytes and random well-formed but hostile requests. After each, other connections and groups
carry on, and the server logged no internal error."""

from __future__ import annotations

import dataclasses
import io
import json
import socket
import struct
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from server_harness import InProcessServer

from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.wire.log import Log
from groupcoord.core.config import CoordinatorConfig

CONFIG = CoordinatorConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=10,
                           offsets_topic_num_partitions=2)
LIMIT = 64 * 1024
INTERNAL_ERRORS = {"core_error", "request_error", "encode_error", "storage_error"}


@pytest.fixture(scope="module")
def srv():
    log_stream = io.StringIO()
    s = InProcessServer(config=CONFIG, catalog=apis.TopicCatalog({"t6": 6}), max_request_bytes=LIMIT,
                        track_requests=True, log=Log(log_stream, fmt="json", level="info"), fetch_wait_cap_ms=0)
    s.log_stream = log_stream
    yield s
    s.stop()


def internal_errors(srv) -> list[dict]:
    """Internal errors logged since the last call (each is reported once)."""
    text = srv.log_stream.getvalue()
    start = getattr(srv, "log_seen", 0)
    srv.log_seen = len(text)
    lines = [json.loads(l) for l in text[start:].splitlines() if l.strip()]
    return [{k: l[k] for k in ("event", "error", "api_key", "version", "event_type", "traceback", "detail") if k in l}
            for l in lines if l["event"] in INTERNAL_ERRORS]


def connect(srv, timeout: float = 5.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_frame(sock) -> bytes | None:
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data
    head = exactly(4)
    if head is None:
        return None
    return exactly(struct.unpack(">i", head)[0])


def closed_by_server(sock, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def request(api_key, version, fields, correlation=1, client_id="fuzz") -> bytes:
    return kc.encode_request(api_key, version, correlation, client_id, kc.request_body(api_key, version, fields))


def assert_alive(srv) -> None:
    """A new connection gets ApiVersions answered, and no internal error was logged."""
    with connect(srv) as sock:
        sock.sendall(request(18, 0, {}, correlation=42))
        frame = read_frame(sock)
        assert frame is not None
        correlation, body = kc.decode_response(18, 0, frame)
        assert correlation == 42 and int(body.error_code) == 0
    assert internal_errors(srv) == []


def handled(srv, sock, correlation: int, timeout: float = 5.0) -> str:
    """Wait until the server has handled (answered, parked, or closed on) that request."""
    peer = sock.getsockname()[:2]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = srv.call(lambda: srv.server.listener.request_status(peer, correlation))
        if status != "unknown":
            return status
        time.sleep(0.001)
    raise AssertionError("the server did not handle the request in time")


# --- frames that cannot be parsed: the connection is closed ------------------------------------------

@pytest.mark.parametrize("name, data", [
    ("negative size", struct.pack(">i", -5) + b"abcde"),
    ("oversized (over socket.request.max.bytes)", struct.pack(">i", LIMIT + 1)),
    ("shorter than a header", struct.pack(">i", 3) + b"\x00\x12\x00"),
    ("garbage body", struct.pack(">i", 14) + struct.pack(">hhi", 11, 5, 1) + b"\xff\xff\x00\x01\x02\x03"),
    ("unknown api key", struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1)),
    ("unsupported version of a served api", struct.pack(">i", 10) + struct.pack(">hhih", 12, 99, 1, -1)),
    ("an api this server does not serve", request(19, 5, {"topics": [], "timeout_ms": 1000}, 1)),
    ("a version kio knows but this server does not advertise", request(8, 10, {"group_id": "g"}, 1)),
    ("trailing bytes after the body", (lambda f: struct.pack(">i", len(f) - 4 + 2) + f[4:] + b"\x00\x00")(
        request(12, 3, {"group_id": "g", "generation_id": 1, "member_id": "m"}))),
    ("unknown tagged field (kio refuses it)", (lambda f: struct.pack(">i", len(f) - 4 + 3) + f[4:-1] + b"\x01\x05\x01\x00")(
        request(12, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"}))),
])
def test_unparseable_frames_close_the_connection_and_nothing_else(srv, name, data):
    with connect(srv) as bystander, connect(srv) as sock:
        sock.sendall(data)
        assert closed_by_server(sock), name
        bystander.sendall(request(3, 1, {"topics": None}, correlation=9))
        correlation, body = kc.decode_response(3, 1, read_frame(bystander))
        assert correlation == 9 and body.brokers[0].port == srv.port
    assert_alive(srv)


def test_api_versions_with_an_unknown_version_is_answered_unsupported_version(srv):
    with connect(srv) as sock:
        sock.sendall(struct.pack(">i", 12) + struct.pack(">hhih", 18, 77, 5, 2) + b"ab")
        correlation, body = kc.decode_response(18, 0, read_frame(sock))
        assert correlation == 5 and int(body.error_code) == 35
        # the connection stays usable: the client retries with a version from the list
        sock.sendall(request(18, 0, {}, correlation=6))
        correlation, body = kc.decode_response(18, 0, read_frame(sock))
        assert correlation == 6 and int(body.error_code) == 0
    assert_alive(srv)


def test_a_truncated_frame_then_a_vanished_client(srv):
    with connect(srv) as sock:
        sock.sendall(struct.pack(">i", 100) + b"\x00\x0c\x00\x03")
    assert_alive(srv)


def test_pipelined_requests_are_answered_in_order(srv):
    with connect(srv) as sock:
        frames = [request(18, 0, {}, correlation=i) if i % 2 else request(3, 1, {"topics": None}, correlation=i)
                  for i in range(1, 41)]
        sock.sendall(b"".join(frames))
        got = []
        for i in range(1, 41):
            api, v = (18, 0) if i % 2 else (3, 1)
            got.append(kc.decode_response(api, v, read_frame(sock))[0])
        assert got == list(range(1, 41))


def test_clients_vanishing_with_parked_requests(srv):
    join = {"group_id": "vanish", "session_timeout_ms": 200, "rebalance_timeout_ms": 200, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
    for _round in range(3):
        socks = [connect(srv) for _ in range(4)]
        for i, sock in enumerate(socks):
            sock.sendall(request(11, 3, join, correlation=i))  # v3: joins at once, parks
        for i, sock in enumerate(socks):
            handled(srv, sock, i)
        for sock in socks:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset
            sock.close()
        assert_alive(srv)
    # the group expires its vanished members and the coordinator keeps serving it
    deadline = time.monotonic() + 10
    while srv.call(lambda: srv.server.core.coordinator.group("vanish").members) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.call(lambda: srv.server.core.coordinator.group("vanish").members) == {}
    assert_alive(srv)


# --- fuzz ---------------------------------------------------------------------------------------------------

SERVED = sorted(apis.served_versions().items())
SERVED_PAIRS = [(k, v) for k, (lo, hi) in SERVED for v in range(lo, hi + 1)]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=200))
def test_fuzz_random_bytes(srv, data):
    with connect(srv) as sock:
        sock.sendall(data)
    with connect(srv) as sock:
        sock.sendall(struct.pack(">i", len(data)) + data)  # framed random bytes
        closed_by_server(sock, timeout=0.02)
    assert internal_errors(srv) == []


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(api_key=st.one_of(st.sampled_from([k for k, _ in SERVED]), st.integers(-5, 100)),
       version=st.integers(-2, 20), correlation=st.integers(-2**31, 2**31 - 1),
       client_id=st.one_of(st.none(), st.text(max_size=20)), body=st.binary(max_size=120))
def test_fuzz_random_frames_with_plausible_headers(srv, api_key, version, correlation, client_id, body):
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + client_id.encode()
    frame = struct.pack(">hhi", api_key, version, correlation) + cid + body
    with connect(srv) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        sock.settimeout(0.5)
        try:
            sock.recv(65536)
        except (socket.timeout, ConnectionResetError):
            pass
    assert internal_errors(srv) == []


GROUPS = st.sampled_from(["g", "", "fuzz", "vanish"])
# Produce's record batches: any bytes (no data plane reads them).
from kio.static.primitive import Records  # noqa: E402

st.register_type_strategy(Records, st.binary(max_size=64))


@st.composite
def hostile_requests(draw):
    api_key, version = draw(st.sampled_from(SERVED_PAIRS))
    cls = kc.request_class(api_key, version)
    body = draw(st.from_type(cls))
    # Aim at a few groups, so that requests meet each other's state.
    if any(f.name == "group_id" for f in dataclasses.fields(cls)):
        body = dataclasses.replace(body, group_id=draw(GROUPS))
    return api_key, version, body


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(req=hostile_requests(), correlation=st.integers(0, 2**31 - 1), vanish=st.booleans())
def test_fuzz_well_formed_hostile_requests(srv, req, correlation, vanish):
    api_key, version, body = req
    try:
        frame = kc.encode_request(api_key, version, correlation, "fuzz", body)
    except Exception:  # kio refuses to encode it (e.g. a value out of its range): not a request
        assume(False)
    assume(len(frame) < LIMIT)
    internal_errors(srv)
    sock = connect(srv)
    try:
        sock.sendall(frame)
        status = handled(srv, sock, correlation)
        if status == "answered" and not (api_key == 0 and body.acks == 0):  # acks=0: Kafka sends nothing
            sock.settimeout(2)
            response = read_frame(sock)
            if response is not None:  # a reply decodes as the version asked for
                got, _ = kc.decode_response(api_key, version, response)
                assert got == correlation
        if vanish:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        sock.close()
    assert internal_errors(srv) == [], internal_errors(srv)


def test_still_alive_after_the_fuzz(srv):
    assert_alive(srv)


def test_a_protocol_listed_twice_counts_once():
    from groupcoord.adapters.runtime.driver import Driver
    from groupcoord.adapters.protocol.translate import request_event

    driver = Driver(CoordinatorConfig(offsets_topic_num_partitions=1))
    body = {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""},
                                                       {"name": "range", "metadata": b""}]}
    driver.dispatch(request_event("JoinGroup", 3, body, request_id="j", now_ms=0, new_member_uuid="u"))
    driver.advance(3000)
    response = driver.responses["j"]
    assert response.error_code == 0 and response.generation_id == 1 and response.protocol_name == "range"


def test_a_protocol_listed_twice_through_the_wire(srv):
    join = {"group_id": "dup", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""},
                                                       {"name": "range", "metadata": b""}]}
    with connect(srv) as sock:
        sock.sendall(request(11, 3, join, correlation=1))
        # The initial delay is 0 here: the join is answered as soon as its timer fires.
        correlation, body = kc.decode_response(11, 3, read_frame(sock))
        assert correlation == 1 and int(body.error_code) == 0 and body.protocol_name == "range"
    assert_alive(srv)
