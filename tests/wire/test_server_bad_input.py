"""Bad input never crashes the server: malformed, truncated and oversized frames, unknown API
keys and versions, clients vanishing with parked requests, and a hypothesis fuzz of random
bytes and random well-formed but hostile requests. After each, other connections and groups
carry on, and the server logged no internal error.

Well-formed requests aimed at groups that do not exist yet get the answer Kafka gives:
``test_fuzz_requests_get_kafkas_answer`` predicts it from the request alone (the expectations
below, written from Kafka's rules, spec/kafka-classic-semantics.md §3.0-§3.11 and Kafka's
request layer, KafkaApis) and compares it with the decoded answer.

No test sleeps: each waits for what the server tells of its connection and requests (the
test controls, ``track_requests``), bounded by a timeout. Every error the server logs is
reported by the next check, wherever it falls (an example, a test, the shutdown).
"""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import struct
import uuid

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st
from server_harness import InProcessServer

from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.protocol import schema
from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.wire.log import Log
from groupcoord.core.config import CoordinatorConfig

CONFIG = CoordinatorConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=10,
                           offsets_topic_num_partitions=2)
CATALOG = {"t6": 6}
LIMIT = 64 * 1024
WAIT_S = 5.0  # the bound of every wait here; a wait returns as soon as its condition holds
INTERNAL_ERRORS = {"core_error", "request_error", "encode_error", "storage_error"}
CLIENT_ID = "fuzz"
ME = {"host": "127.0.0.1", "node_id": CONFIG.node_id}  # and "port", once the server listens


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
    ME["port"] = s.port
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
    ("an api this server does not serve", request(37, 1, {"topics": [], "timeout_ms": 1000}, 1)),
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


@fuzz(200)
@given(req=hostile_requests(), correlation=st.integers(-2**31, 2**31 - 1), vanish=st.booleans())
def test_fuzz_well_formed_hostile_requests(srv, req, correlation, vanish):
    """Any served API and version, every field as kio's types allow, on groups that every
    example shares. Their state is whatever the earlier examples left, so the answer cannot be
    predicted from the request: it must decode, as the version asked, with the request's
    correlation id (test_fuzz_requests_get_kafkas_answer predicts answers, on fresh groups)."""
    assert internal_errors(srv) == []
    api_key, version, body = req
    try:
        frame = kc.encode_request(api_key, version, correlation, CLIENT_ID, body)
    except Exception:  # kio refuses to encode it (e.g. a value out of its range): not a request
        assume(False)
    # Neither assumption rejects anything drawn from kio's own types (none in 600 draws); the
    # invalid cases hypothesis' statistics count are its own (plain st.lists show them too).
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


# --- fuzz: well-formed requests on fresh groups get Kafka's answer --------------------------------------------

@dataclasses.dataclass(frozen=True)
class Fresh:
    """A group id no example used before (placed in the request when it is sent); several
    ``Fresh(n)`` with one ``n`` in a request are one group."""

    n: int = 0


def often(usual, *others, times: int = 3):
    """``usual`` ``times`` times as often as each of ``others``."""
    return st.sampled_from([usual] * times + list(others)).flatmap(lambda strategy: strategy)


INT8, INT16, INT32, INT64 = (st.integers(-(1 << (b - 1)), (1 << (b - 1)) - 1) for b in (8, 16, 32, 64))
TEXT = st.text(max_size=10)
FRESH = st.integers(0, 3).map(Fresh)  # in lists: a repeated one is a group listed twice
GROUP_ID = often(st.just(Fresh()), st.just(""))  # "" is INVALID_GROUP_ID where Kafka checks it
TOPIC = often(st.sampled_from(sorted(CATALOG)), TEXT)
PARTITION = st.one_of(st.integers(0, 5), st.sampled_from([-1, 6]), INT32)
MIN_SESSION, MAX_SESSION = CONFIG.group_min_session_timeout_ms, CONFIG.group_max_session_timeout_ms
SESSION = often(st.integers(MIN_SESSION, MAX_SESSION), INT32,
                st.sampled_from([MIN_SESSION - 1, MIN_SESSION, MAX_SESSION, MAX_SESSION + 1, 0, -1]), times=8)
# Metadata around offset.metadata.max.bytes, counted as Java counts a String's length (UTF-16
# units: an astral character counts two).
METADATA = st.one_of(st.none(), TEXT, st.builds(
    lambda n, ch: ch * n, st.sampled_from([2047, 2048, 2049, 4095, 4096, 4097]), st.sampled_from(["a", "é", "😀"])))
# OffsetCommit v2-4's retention: any int64 for Kafka; kio's timedelta takes up to about ±8.64e16
# ms to encode (a client's limit, drawn within), and decodes only up to ±(2^63 - 1) / 1000.
RETENTION_ENCODED = (-86_399_999_913_600_000, 86_399_999_913_599_999)
RETENTION = st.integers(*RETENTION_ENCODED)
KIO_DECODES_MS = 9_223_372_036_854_774
STATES = ("Stable", "Empty", "Dead", "PreparingRebalance", "CompletingRebalance")
TYPES = ("classic", "consumer", "share", "unknown")
# Around a filter value: what Java's String.trim() removes (code points up to U+0020) and what
# Python's str.strip() removes, which are not the same.
PADDING = st.sampled_from(["", "", "", " ", "\t", "\n", "\x00", "\x1f", "\xa0"])
CASES = st.sampled_from([str.lower, str.upper, str.title, str])
SOFTWARE = often(st.sampled_from(["librdkafka", "apache-kafka-java", "1.2.3", "a", "a.b-c"]),
                 TEXT, st.sampled_from(["-a", "a-", "a b", "", "a\n", "1.0\n", "\na"]))


def _filter(names):
    named = st.builds(lambda before, case, name, after: before + case(name) + after,
                      PADDING, CASES, st.sampled_from(names), PADDING)
    return st.lists(often(named, TEXT), max_size=3)


def _present(versions, v) -> bool:
    return versions is not None and versions[0] <= v and (len(versions) == 1 or v <= versions[1])


def body_of(fields, v, overrides=None):
    """A request body of ``v``: every field of the schema (facts from Kafka's JSON schemas)
    with any value its type allows, except those ``overrides`` shapes."""
    overrides = overrides or {}
    return st.fixed_dictionaries({f[0]: overrides[f[0]] if f[0] in overrides else value_of(f, v)
                                  for f in fields if _present(f[1], v)})


def value_of(field, v):
    typ = field[2]
    if isinstance(typ, list):
        values = st.lists(body_of(typ, v), max_size=3)
    elif typ == "[i32]":
        values = st.lists(INT32, max_size=3)
    elif typ == "[str]":
        values = st.lists(TEXT, max_size=3)
    else:
        values = {"i8": INT8, "i16": INT16, "i32": INT32, "i64": INT64, "str": TEXT,
                  "bytes": st.binary(max_size=16), "bool": st.booleans()}[typ]
    return st.one_of(st.none(), values) if len(field) > 3 and _present(field[3], v) else values


def _topics(partition_fields):
    return st.lists(st.fixed_dictionaries({"name": TOPIC, "partitions": st.lists(
        st.fixed_dictionaries({"partition_index": PARTITION, **partition_fields}), max_size=3)}), max_size=3)


def shaped(api: str, v: int) -> dict:
    """The fields each API's answer turns on, drawn so that every rule below is met often
    (rather than drawn at random and filtered)."""
    if api == "JoinGroup":  # each rule stops the ones after it: the later ones need the earlier ones passed
        return {"group_id": often(st.just(Fresh()), st.just(""), times=6), "session_timeout_ms": SESSION,
                "member_id": often(st.just(""), TEXT, times=6),
                "protocol_type": often(st.just("consumer"), st.just(""), TEXT, times=6),
                "protocols": often(st.lists(st.fixed_dictionaries({"name": TEXT, "metadata": st.binary(max_size=16)}),
                                            min_size=1, max_size=3), st.just([]), times=6)}
    if api in ("SyncGroup", "Heartbeat", "LeaveGroup"):
        return {"group_id": GROUP_ID}
    if api == "OffsetCommit":
        return {"group_id": st.just(Fresh()),
                "retention_time_ms": often(st.sampled_from([-1, 0, 60_000]), RETENTION, st.sampled_from(
                    [KIO_DECODES_MS, KIO_DECODES_MS + 1, -KIO_DECODES_MS - 1, RETENTION_ENCODED[1]])),
                "generation_id_or_member_epoch": st.one_of(st.sampled_from([-1, -2, 0, 1]), INT32),
                "topics": _topics({"committed_offset": INT64, "committed_leader_epoch": INT32,
                                   "committed_metadata": METADATA})}
    if api == "OffsetFetch":
        topics = st.lists(st.fixed_dictionaries({"name": TOPIC, "partition_indexes": st.lists(PARTITION, max_size=3)}),
                          max_size=3)
        nullable_topics = st.one_of(st.none(), topics) if v >= 2 else topics
        return {"group_id": st.just(Fresh()), "topics": nullable_topics,
                "groups": st.lists(st.fixed_dictionaries({
                    "group_id": FRESH, "member_id": st.one_of(st.none(), TEXT), "member_epoch": INT32,
                    "topics": st.one_of(st.none(), topics)}), max_size=3)}
    if api in ("DescribeGroups", "DeleteGroups"):
        return {"groups": st.lists(FRESH, max_size=4), "groups_names": st.lists(FRESH, max_size=4)}
    if api == "ListGroups":
        return {"states_filter": _filter(STATES), "types_filter": _filter(TYPES)}
    if api == "OffsetDelete":
        return {"group_id": GROUP_ID, "topics": _topics({})}
    if api == "FindCoordinator":
        return {"key_type": often(st.sampled_from([0, 1, 2]), INT8)}
    return {}


VERSIONS = {**schema.SUPPORTED_VERSIONS, "ApiVersions": apis.API_VERSIONS_RANGE}


def fresh_request(api: str):
    """(version, body) of a request of ``api``: a group API, or ApiVersions (not a group API,
    but its answer follows from the request alone too)."""
    lo, hi = VERSIONS[api]
    if api == "ApiVersions":
        return st.integers(lo, hi).flatmap(lambda v: st.tuples(st.just(v), st.fixed_dictionaries(
            {"client_software_name": SOFTWARE, "client_software_version": SOFTWARE}) if v >= 3 else st.just({})))
    return st.integers(lo, hi).flatmap(lambda v: st.tuples(st.just(v), body_of(schema.SCHEMAS[api][2], v,
                                                                                 shaped(api, v))))


def placed(value, prefix: str):
    """``value`` with each ``Fresh(n)`` made the group id ``<prefix>-<n>``."""
    if isinstance(value, Fresh):
        return f"{prefix}-{value.n}"
    if isinstance(value, dict):
        return {k: placed(v, prefix) for k, v in value.items()}
    if isinstance(value, list):
        return [placed(v, prefix) for v in value]
    return value


# The answer Kafka gives each request on groups that do not exist, from its request layer
# (KafkaApis), GroupCoordinatorService and the classic group coordinator; section numbers are
# spec/kafka-classic-semantics.md's. Each checks what the request decides and returns the rule
# it applied (hypothesis' statistics count them); what the request does not decide is left
# alone: member ids end in a random UUID, ListGroups lists whatever groups the server holds.

def java_trim(text: str) -> str:
    """Java's String.trim(): code points up to U+0020 off both ends."""
    return text.strip("".join(map(chr, range(0x21))))


# Known deviations, where the server answers otherwise than Kafka (each checked as what the
# server answers, and counted in hypothesis' statistics):
# * JoinGroup listing a protocol name twice: the name counts once (spec/deviations.md D13);
# * FindCoordinator for transaction keys: 42 rather than the transaction coordinator (D7);
# * OffsetCommit v2-4 with a retention beyond what kio decodes: the connection is closed as
#   for a malformed frame, where Kafka answers (spec/deviations.md D16).

def deviation(kafka, server, why: str):
    """Where this server is known to answer otherwise than Kafka: returns ``server``, what it
    answers (and what is checked); ``kafka`` is what Kafka answers, ``why`` where it is told."""
    event(f"known deviation: {why}")
    return server


def closes(api: str, v: int, r: dict) -> bool:
    """The server closes the connection on this request, which Kafka answers."""
    if api == "OffsetCommit" and 2 <= v <= 4 and abs(r["retention_time_ms"]) > KIO_DECODES_MS:
        deviation("an answer", "the connection closed", "OffsetCommit v2-4 retention_time_ms beyond "
                  "±(2^63 - 1) / 1000: kio cannot decode it (spec/deviations.md D16)")
        return True
    return False


def expect_join(v, r, got) -> str:
    """§3.0: the group id, then the session timeout bounds, before any lookup; §3.1."""
    member, instance = r["member_id"], r.get("group_instance_id")
    if r["group_id"] == "":
        rule, error, member_id = "empty group id: 24", 24, member
    elif not MIN_SESSION <= r["session_timeout_ms"] <= MAX_SESSION:
        rule, error, member_id = "session timeout out of bounds: 26", 26, member
    elif member != "":
        rule, error, member_id = "a member id, no group: 25", 25, member  # §3.1 step 1, the id echoed
    elif r["protocol_type"] == "" or not r["protocols"]:
        rule, error, member_id = "no protocol type or none listed: 23", 23, ""  # an Empty group's support
    elif instance is None and v >= 4:
        assert got["error_code"] == 79 and got["member_id"].startswith(f"{CLIENT_ID}-"), got  # <client id>-<UUID>
        assert got["generation_id"] == -1, got
        return "v4+ dynamic new member: 79 with its id"
    else:  # a new member joins (static: <instance id>-<UUID>), answered after the initial delay (0 here)
        new_id = got["member_id"]
        assert got["error_code"] == 0 and new_id.startswith(f"{instance if instance is not None else CLIENT_ID}-"), got
        assert got["generation_id"] == 1 and got["leader"] == new_id, got
        assert [m["member_id"] for m in got["members"]] == [new_id], got  # the leader gets the member list
        # The vote (§4.1): among the names every member lists (each listing counts), its own
        # first choice. A name listed twice counts twice in Kafka, so no lone member lists it
        # "as often as there are members"; no such name at all fails the election.
        names = [p["name"] for p in r["protocols"]]
        kafka = next((n for n in names if names.count(n) == 1), "no answer (the election fails)")
        protocol = kafka if kafka == names[0] else deviation(kafka, names[0], "a protocol listed twice counts "
                                                                               "once: spec/deviations.md D13")
        assert got["protocol_name"] == protocol, got
        if v >= 7:
            assert got["protocol_type"] == r["protocol_type"], got
        return f"new {'static' if instance is not None else 'dynamic'} member: generation 1, its own leader"
    assert (got["error_code"], got["member_id"], got["generation_id"]) == (error, member_id, -1), got
    return rule


def expect_sync(v, r, got) -> str:
    """KafkaApis: v5+ needs the protocol type and name; §3.0; §3.5: no group -> 25."""
    rule, error = ("empty group id: 24", 24) if r["group_id"] == "" else ("no group: 25", 25)
    if v >= 5 and (r["protocol_type"] is None or r["protocol_name"] is None):
        rule, error = "v5+ without protocol type or name: 23", 23  # KafkaApis, before the group id
    assert (got["error_code"], got["assignment"]) == (error, b""), got
    return rule


def expect_heartbeat(v, r, got) -> str:
    """§3.0; §3.6: no group -> 25."""
    rule, error = ("empty group id: 24", 24) if r["group_id"] == "" else ("no group: 25", 25)
    assert got["error_code"] == error, got
    return rule


def expect_leave(v, r, got) -> str:
    """§3.0; §3.7: no group -> NONE, 25 for each member (v0-2: that 25 at the top)."""
    if r["group_id"] == "":
        assert got["error_code"] == 24 and got.get("members", []) == [], got
        return "empty group id: 24"
    if v < 3:
        assert got["error_code"] == 25, got
        return "v0-2, no group: 25"
    assert got["error_code"] == 0, got
    assert [(m["member_id"], m["group_instance_id"], m["error_code"]) for m in got["members"]] == [
        (m["member_id"], m["group_instance_id"], 25) for m in r["members"]], got
    return "v3+, no group: 25 for each member"


def expect_commit(v, r, got) -> str:
    """KafkaApis: unknown topics and partitions get 3 and never reach the coordinator (nor
    does a request left with none); §3.8: no group and generation < 0: a simple group
    commits; >= 0: 69 (v9+) or 22; metadata over offset.metadata.max.bytes: 12."""
    expected, rules = [], set()
    for topic in r["topics"]:
        for p in topic["partitions"]:
            metadata = p["committed_metadata"]
            if not 0 <= p["partition_index"] < CATALOG.get(topic["name"], 0):
                rule, error = "unknown partition: 3", 3
            elif r["generation_id_or_member_epoch"] >= 0:
                rule, error = ("generation >= 0, no group: 69", 69) if v >= 9 else ("generation >= 0, no group: 22", 22)
            elif metadata is not None and len(metadata.encode("utf-16-le")) // 2 > CONFIG.offset_metadata_max_bytes:
                rule, error = "simple commit, metadata too long: 12", 12
            else:
                rule, error = "simple commit: 0", 0
            expected.append((topic["name"], p["partition_index"], error))
            rules.add(rule)
    answers = [(t["name"], p["partition_index"], p["error_code"]) for t in got["topics"] for p in t["partitions"]]
    assert sorted(answers) == sorted(expected), got  # KafkaApis merges its own answers in: any order
    return ", ".join(sorted(rules)) or "no partitions"


def _no_offsets(topics, v):
    """§3.9: no group: every partition asked for is -1, no metadata, no error; all: none."""
    if topics is None:
        return []
    return [{"name": t["name"], "partitions": [
        {"partition_index": p, "committed_offset": -1, **({"committed_leader_epoch": -1} if v >= 5 else {}),
         "metadata": "", "error_code": 0} for p in t["partition_indexes"]]} for t in topics]


def expect_fetch(v, r, got) -> str:
    if v < 8:
        assert got["topics"] == _no_offsets(r["topics"], v), got
        assert got.get("error_code", 0) == 0, got
        return "no group: -1 for each partition" + (", all: none" if r["topics"] is None else "")
    assert got["groups"] == [{"group_id": g["group_id"], "topics": _no_offsets(g["topics"], v), "error_code": 0}
                             for g in r["groups"]], got
    return "v8+, each group in order: no group: -1 for each partition"


def expect_describe(v, r, got) -> str:
    """§3.0 (the empty id is a group id here); no group: Dead, no error; KafkaApis adds the
    authorized operations (all the group's: no authorizer) to error-free groups when asked."""
    ops = ({"authorized_operations": apis.GROUP_OPERATIONS if r["include_authorized_operations"] else -2147483648}
           if v >= 3 else {})
    expected = [{"error_code": 0, "group_id": g, "group_state": "Dead", "protocol_type": "", "protocol_data": "",
                 "members": [], **ops} for g in r["groups"]]

    def by_id(group):  # groups are answered per partition: in any order
        return group["group_id"]
    assert sorted(got["groups"], key=by_id) == sorted(expected, key=by_id), got
    return "no group: Dead, 0" + (", the group's operations when asked" if v >= 3 else "")


def expect_list(v, r, got) -> str:
    """NONE; each group listed passes the filters: states lower-cased and trimmed (Java's
    trim), types lower-cased only (GroupType.parse); every group here is classic. Which
    groups exist is not the request's to decide: not predicted."""
    assert got["error_code"] == 0, got
    states = {java_trim(s).lower() for s in r.get("states_filter", [])}
    types = {t.lower() for t in r.get("types_filter", [])}
    for group in got["groups"]:
        assert v < 4 or not states or group["group_state"].lower() in states, (group, r)
        if v >= 5:
            assert group["group_type"] == "classic", group
            assert not types or "classic" in types, (group, r)
    return "0, the filters hold" if got["groups"] else "0, none listed"


def expect_delete(v, r, got) -> str:
    """KafkaApis takes each name once; §3.11: no group -> 69."""
    assert sorted((g["group_id"], g["error_code"]) for g in got["results"]) == sorted(
        (g, 69) for g in set(r["groups_names"])), got
    return "no group: 69, each name once"


def expect_offset_delete(v, r, got) -> str:
    """§3.0 (the empty id is invalid here); §3.11: no group -> 69; a group-level error drops
    the topics KafkaApis answered itself."""
    rule, error = ("empty group id: 24", 24) if r["group_id"] == "" else ("no group: 69", 69)
    assert (got["error_code"], got["topics"]) == (error, []), got
    return rule


def expect_find(v, r, got) -> str:
    """KafkaApis: key type 0 (groups): this broker, which leads every offsets partition; 1
    (transactions): the transaction coordinator; 2 (share) before v6 or with share groups off,
    and any other type: INVALID_REQUEST (42), no node."""
    key_type = r.get("key_type", 0)
    if key_type == 0:
        rule, expected = "groups: this broker", (0, ME["node_id"], ME["host"], ME["port"])
    elif key_type == 1:
        rule = "transactions: the transaction coordinator"
        expected = deviation((0, "the transaction coordinator"), (42, -1, "", -1),
                             "FindCoordinator for transactions: spec/deviations.md D7")
    else:
        rule, expected = "any other key type: 42", (42, -1, "", -1)
    keys = [r["key"]] if v < 4 else r["coordinator_keys"]
    answers = ([(got["error_code"], got["node_id"], got["host"], got["port"])] if v < 4 else
               [(c["error_code"], c["node_id"], c["host"], c["port"]) for c in got["coordinators"]])
    assert answers == [expected] * len(keys), got
    if v >= 4:
        assert [c["key"] for c in got["coordinators"]] == keys, got
    return rule


SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")  # ApiVersionsRequest's pattern


def expect_api_versions(v, r, got) -> str:
    """v3+: the client software name and version match Kafka's pattern, whole (Java's
    Matcher.matches), else INVALID_REQUEST (42), whose answer lists no API."""
    rule, error = "0 with the served versions", 0
    if v >= 3 and not all(SOFTWARE_NAME.fullmatch(s) for s in (r["client_software_name"],
                                                              r["client_software_version"])):
        rule, error = "v3+ bad software name or version: 42", 42
    assert got["error_code"] == error, got
    served = {k["api_key"]: (k["min_version"], k["max_version"]) for k in got["api_keys"]}
    if error == 0:
        assert served == apis.served_versions(), got
    else:  # only an UNSUPPORTED_VERSION answer lists an API (ApiVersions' own)
        assert served == {}, got
    return rule


EXPECT = {"JoinGroup": expect_join, "SyncGroup": expect_sync, "Heartbeat": expect_heartbeat,
          "LeaveGroup": expect_leave, "OffsetCommit": expect_commit, "OffsetFetch": expect_fetch,
          "DescribeGroups": expect_describe, "ListGroups": expect_list, "DeleteGroups": expect_delete,
          "OffsetDelete": expect_offset_delete, "FindCoordinator": expect_find, "ApiVersions": expect_api_versions}


# KIP-848's APIs have no expectation here yet: tests/wire/test_consumer_protocol_wire.py checks them.
NOT_FUZZED = {"ConsumerGroupHeartbeat", "ConsumerGroupDescribe"}


def test_every_group_api_has_an_expectation():
    assert set(EXPECT) == set(schema.SUPPORTED_VERSIONS) - NOT_FUZZED | {"ApiVersions"}


@pytest.mark.parametrize("api", sorted(EXPECT))
@fuzz(25)
@given(data=st.data(), correlation=st.integers(-2**31, 2**31 - 1))
def test_fuzz_requests_get_kafkas_answer(srv, api, data, correlation):
    assert internal_errors(srv) == []
    v, drawn = data.draw(fresh_request(api), label="version, body")
    body = placed(drawn, f"fresh-{uuid.uuid4().hex[:12]}")
    api_key = kc.API_KEYS[api]
    sock = connect(srv)
    try:
        sock.sendall(request(api_key, v, body, correlation))
        # each is answered: a new member's join once the initial delay (0 here) is over
        status = answered(srv, sock, correlation)
        if status == "answered":
            got_correlation, response = kc.decode_response(api_key, v, read_frame(sock))
    finally:
        hang_up(srv, sock)
    if closes(api, v, body):
        assert status == "closed"
    else:
        assert status == "answered" and got_correlation == correlation
        event(EXPECT[api](v, body, kc.to_fields(response)))
    assert internal_errors(srv) == []


def test_still_alive_after_the_fuzz(srv):
    assert_alive(srv)


def test_a_protocol_listed_twice_counts_once():
    from groupcoord.adapters.protocol.translate import request_event
    from groupcoord.adapters.runtime.driver import Driver

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
