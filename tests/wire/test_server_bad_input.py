"""Bad input never crashes the server: malformed, truncated and oversized frames, unknown API
keys and versions, clients vanishing with parked requests, and a hypothesis fuzz of random
bytes and random well-formed but hostile requests. After each, other connections and groups
carry on, and the server logged no internal error.

No test sleeps: each waits for what the server tells of its connection and requests (the
test controls, ``track_requests``), bounded by a timeout. Every error the server logs is
reported by the next check, wherever it falls (an example, a test, the shutdown).
"""

from __future__ import annotations

import dataclasses
import json
import socket
import struct

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st
from server_harness import InProcessServer

from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.wire.log import Log
from groupcoord.core.config import CoordinatorConfig

CONFIG = CoordinatorConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=10,
                           offsets_topic_num_partitions=2)
CATALOG = {"t6": 6}
LIMIT = 64 * 1024
WAIT_S = 5.0  # the bound of every wait here; a wait returns as soon as its condition holds
INTERNAL_ERRORS = {"core_error", "request_error", "encode_error", "storage_error"}
CLIENT_ID = "fuzz"


class LogLines:
    """The server's log, one JSON line per write (``Log`` writes whole lines)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.seen = 0  # lines already checked

    def write(self, text: str) -> None:
        self.lines.append(text)

    def flush(self) -> None:
        pass


@pytest.fixture(scope="module")
def srv():
    log = LogLines()
    s = InProcessServer(config=CONFIG, catalog=apis.TopicCatalog(dict(CATALOG)), max_request_bytes=LIMIT,
                        track_requests=True, log=Log(log, fmt="json", level="info"), fetch_wait_cap_ms=0)
    s.log = log
    yield s
    s.stop()
    assert internal_errors(s) == [], "logged after the last check (the last test, or the shutdown)"


def internal_errors(srv) -> list[dict]:
    """Every error the server logged since the previous call. Each line is looked at once, by
    a caller that asserts there is none; so an error logged between two checks (between
    examples, between tests, during the shutdown) is reported by the next one."""
    log = srv.log
    end = len(log.lines)
    lines, log.seen = log.lines[log.seen:end], end
    found = []
    for line in lines:
        record = json.loads(line)
        if record.get("level") == "error" or record.get("event") in INTERNAL_ERRORS:
            found.append({k: record[k] for k in ("event", "error", "api", "api_key", "version", "event_type",
                                                  "traceback", "detail") if k in record})
    return found


# --- connections, as the server sees them ------------------------------------------------------------

def peer_of(sock: socket.socket) -> tuple:
    return sock.getsockname()[:2]


def connect(srv) -> socket.socket:
    """A connection the server has accepted: what it tells of this address is of this connection."""
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=WAIT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    listener, peer = srv.server.listener, peer_of(sock)
    srv.until(lambda: listener.connection_status(peer) in ("open", "closing"), WAIT_S, "the server to accept")
    return sock


def hang_up(srv, sock: socket.socket, reset: bool = False) -> None:
    """Close ``sock`` (``reset``: with a RST) and wait until the server has seen it go."""
    peer = peer_of(sock)
    if reset:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    gone(srv, peer)


def gone(srv, peer: tuple) -> None:
    listener = srv.server.listener
    srv.until(lambda: listener.connection_status(peer) == "lost", WAIT_S, "the server to see the connection go")


def closed_by_server(srv, sock: socket.socket) -> bool:
    """The server closed ``sock`` (waited for on the server), and the client sees the close."""
    listener, peer = srv.server.listener, peer_of(sock)
    srv.until(lambda: listener.connection_status(peer) in ("closing", "lost"), WAIT_S, "the server to close")
    sock.settimeout(WAIT_S)  # a bound: the close is on its way
    try:
        while True:
            if sock.recv(65536) == b"":
                return True
    except ConnectionResetError:
        return True


def read_frame(sock) -> bytes | None:
    sock.settimeout(WAIT_S)  # a bound: the answer is written when this is called

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


def request(api_key, version, fields, correlation=1, client_id=CLIENT_ID) -> bytes:
    return kc.encode_request(api_key, version, correlation, client_id, kc.request_body(api_key, version, fields))


def handled(srv, sock, correlation: int) -> str:
    """Once the server has handled that request: "answered", "pending" (parked) or "closed"."""
    return srv.run(srv.server.controls.request_handled(peer_of(sock), correlation, WAIT_S), WAIT_S + 5)


def answered(srv, sock, correlation: int) -> str:
    """Once the server has answered that request ("answered") or closed its connection ("closed")."""
    return srv.run(srv.server.controls.request_answered(peer_of(sock), correlation, WAIT_S), WAIT_S + 5)


def send_frame(srv, sock, body: bytes) -> str:
    """``body`` as one frame; once the server has handled it, or closed the connection on it:
    "answered", "pending" or "closed"."""
    listener, peer = srv.server.listener, peer_of(sock)
    sock.sendall(struct.pack(">i", len(body)) + body)
    srv.until(lambda: listener.frames_handled(peer) >= 1 or listener.connection_status(peer) in ("closing", "lost"),
              WAIT_S, "the server to handle the frame")
    if len(body) < 8:  # shorter than a request header: the server closes the connection
        assert srv.call(lambda: listener.connection_status(peer)) in ("closing", "lost")
        return "closed"
    correlation = struct.unpack_from(">i", body, 4)[0]
    return srv.call(lambda: listener.request_status(peer, correlation))


def expects_no_answer(body: bytes) -> bool:
    """Produce with acks=0: Kafka sends nothing back."""
    try:
        decoded = kc.decode_request(body)
    except (kc.FrameError, kc.UnsupportedRequest):
        return False
    return decoded.api_key == 0 and decoded.body.acks == 0


def check_answer_echoes_correlation(sock, body: bytes) -> None:
    """An answer to ``body`` (read off ``sock``) carries the request's correlation id."""
    if expects_no_answer(body):
        return
    frame = read_frame(sock)
    assert frame is not None and frame[:4] == body[4:8], (body[4:8], frame and frame[:4])


def assert_alive(srv) -> None:
    """A new connection gets ApiVersions answered, and no internal error was logged."""
    with connect(srv) as sock:
        sock.sendall(request(18, 0, {}, correlation=42))
        frame = read_frame(sock)
        assert frame is not None
        correlation, body = kc.decode_response(18, 0, frame)
        assert correlation == 42 and int(body.error_code) == 0
    assert internal_errors(srv) == []


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
    assert internal_errors(srv) == []
    with connect(srv) as bystander, connect(srv) as sock:
        sock.sendall(data)
        assert closed_by_server(srv, sock), name
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
    sock = connect(srv)
    sock.sendall(struct.pack(">i", 100) + b"\x00\x0c\x00\x03")
    hang_up(srv, sock)
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
    assert internal_errors(srv) == []


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
            hang_up(srv, sock, reset=True)
        assert_alive(srv)
    # the group expires its vanished members and the coordinator keeps serving it
    coordinator = srv.server.core.coordinator
    srv.until(lambda: coordinator.group("vanish") is not None and not coordinator.group("vanish").members, 10,
              "the vanished members to expire")
    assert srv.call(lambda: coordinator.group("vanish").members) == {}
    assert_alive(srv)


# --- fuzz: bytes ----------------------------------------------------------------------------------------------

SERVED = sorted(apis.served_versions().items())
SERVED_PAIRS = [(k, v) for k, (lo, hi) in SERVED for v in range(lo, hi + 1)]


def fuzz(examples: int) -> settings:
    """No deadline (each example is a few round trips to the server), and every health check
    on, including those the project's hypothesis profile suppresses (tests/conftest.py)."""
    return settings(max_examples=examples, deadline=None, suppress_health_check=[])


@fuzz(150)
@given(data=st.binary(max_size=200))
def test_fuzz_random_bytes(srv, data):
    assert internal_errors(srv) == []  # since the previous check: earlier examples and tests
    sock = connect(srv)
    sock.sendall(data)  # unframed: whatever frames the bytes make, then the client goes
    hang_up(srv, sock)
    sock = connect(srv)
    try:
        status = send_frame(srv, sock, data)  # the same bytes as one frame
        event(f"status: {status}")
        if status == "answered":
            check_answer_echoes_correlation(sock, data)
    finally:
        hang_up(srv, sock)
    assert internal_errors(srv) == []


@fuzz(150)
@given(api_key=st.one_of(st.sampled_from([k for k, _ in SERVED]), st.integers(-5, 100)),
       version=st.integers(-2, 20), correlation=st.integers(-2**31, 2**31 - 1),
       client_id=st.one_of(st.none(), st.text(max_size=20)), body=st.binary(max_size=120))
def test_fuzz_random_frames_with_plausible_headers(srv, api_key, version, correlation, client_id, body):
    assert internal_errors(srv) == []
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + client_id.encode()
    frame = struct.pack(">hhi", api_key, version, correlation) + cid + body
    sock = connect(srv)
    try:
        status = send_frame(srv, sock, frame)
        event(f"status: {status}")
        if status == "answered":
            check_answer_echoes_correlation(sock, frame)
    finally:
        hang_up(srv, sock)
    assert internal_errors(srv) == []


# --- fuzz: well-formed requests on groups every example shares ------------------------------------------

GROUPS = st.sampled_from(["g", "", "fuzz"])
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


@fuzz(300)
@given(req=hostile_requests(), correlation=st.integers(-2**31, 2**31 - 1), vanish=st.booleans())
def test_fuzz_well_formed_hostile_requests(srv, req, correlation, vanish):
    """Any served API and version, every field as kio's types allow, on groups that every
    example shares. Their state is whatever the earlier examples left, so the answer cannot be
    predicted from the request: it must decode, as the version asked, with the request's
    correlation id."""
    assert internal_errors(srv) == []
    api_key, version, body = req
    try:
        frame = kc.encode_request(api_key, version, correlation, CLIENT_ID, body)
    except Exception:  # kio refuses to encode it (e.g. a value out of its range): not a request
        assume(False)
    assume(len(frame) < LIMIT)
    sock = connect(srv)
    try:
        sock.sendall(frame)
        status = handled(srv, sock, correlation)
        event(f"status: {status}")
        if status == "answered" and not (api_key == 0 and body.acks == 0):  # acks=0: Kafka sends nothing
            response = read_frame(sock)
            assert response is not None
            got, _ = kc.decode_response(api_key, version, response)
            assert got == correlation
    finally:
        hang_up(srv, sock, reset=vanish)
    assert internal_errors(srv) == []


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
