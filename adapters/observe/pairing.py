"""Requests paired with their responses by correlation id: what the proxy and the capture
reader (``pcap``) both do with the frames of one connection. A group API's request is decoded
(kio, through ``codec``) and kept until its response; the pair becomes one record. A data-plane
API's (``DATA_PLANE_APIS``: Produce, Fetch, ...) is neither decoded nor recorded, so no verdict
judges it: its pair is only counted (``Counts.paired``), when the response comes (a Produce
with acks=0 gets none and is not waited for)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Protocol

from groupcoord.adapters.observe.rewrite import METADATA
from groupcoord.adapters.observe.trace import RECORDED_APIS, observed
from groupcoord.adapters.protocol import codec

RECORDED = {codec.API_KEYS[name]: name for name in RECORDED_APIS}
# The data plane (spec/data-plane.md): its pairs are counted, never recorded or judged.
DATA_PLANE_APIS = ("Produce", "Fetch", "ListOffsets", "InitProducerId", "CreateTopics", "DeleteTopics",
                   "DeleteRecords", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit")
DATA_PLANE = {codec.API_KEYS[name]: name for name in DATA_PLANE_APIS}
PRODUCE = codec.API_KEYS["Produce"]


class MalformedFrame(Exception):
    """A frame that is not a request (or, from the broker, not a response)."""


class Counts(Protocol):
    def passed(self, api: str) -> None: ...
    def undecoded(self, api: str) -> None: ...
    def paired(self, api: str) -> None: ...


@dataclass(slots=True)
class Pending:
    api_key: int
    version: int
    client_id: str | None
    recv_us: int
    request: dict | None  # None: not recorded, only its response rewritten (Metadata)
    # a Metadata request: the topics it asked about (None: every topic), for its answer's
    # topics record (``metadata_record``); "": not a Metadata request, or one not read
    asked: list | None | str = ""
    counted: str | None = None  # a data-plane API's name: its response is counted, not read


def counted_pairs(counts: dict[str, int]) -> str:
    """The data-plane pairs counted, for a summary line: "Fetch 12, Produce 3" (or "none")."""
    return ", ".join(f"{api} {n}" for api, n in sorted(counts.items())) or "none"


def note_request(frame: bytes, recv_us: int, pending: dict[int, Pending], counts: Counts) -> None:
    """Keep in ``pending`` what the response will be matched with; raises MalformedFrame."""
    try:
        api_key, version, correlation_id, client_id = codec.peek_header(frame)
    except codec.FrameError as e:
        raise MalformedFrame(f"malformed frame: {e}") from None
    name = RECORDED.get(api_key)
    if name is None:
        counts.passed(codec.API_NAMES.get(api_key, f"api key {api_key}"))
        if api_key == METADATA and codec.has_schema(api_key, version):
            pending[correlation_id] = Pending(api_key, version, client_id, recv_us, None, _asked(frame))
        elif api_key in DATA_PLANE and not (api_key == PRODUCE and _produce_acks(frame, version) == 0):
            pending[correlation_id] = Pending(api_key, version, client_id, recv_us, None, counted=DATA_PLANE[api_key])
        return
    if not codec.has_schema(api_key, version):
        counts.undecoded(f"{name} v{version}")  # passes through as it is
        return
    try:
        decoded = codec.decode_request(frame)
    except (codec.FrameError, codec.UnsupportedRequest) as e:
        raise MalformedFrame(f"malformed frame: {e}") from None
    pending[correlation_id] = Pending(api_key, version, decoded.client_id, recv_us, codec.to_fields(decoded.body))


def _produce_acks(frame: bytes, version: int) -> int | None:
    """A Produce request's ``acks``, read from its first fields without decoding its records
    (None when they cannot be read). From v9 the header and the body are flexible: tagged
    fields after the client id, a compact transactional id."""
    try:
        (n,) = _INT16.unpack_from(frame, 8)  # the client id, a nullable string in every header
        p = 10 + max(n, 0)
        if version >= 9:
            tags, p = _uvarint(frame, p)
            for _ in range(tags):
                _tag, p = _uvarint(frame, p)
                size, p = _uvarint(frame, p)
                p += size
            length, p = _uvarint(frame, p)  # the transactional id: length + 1, 0 for null
            p += max(length - 1, 0)
        else:
            (n,) = _INT16.unpack_from(frame, p)
            p += 2 + max(n, 0)
        return _INT16.unpack_from(frame, p)[0]
    except (struct.error, IndexError):
        return None


def _uvarint(data: bytes, p: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[p]
        p += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, p
        shift += 7


_INT16 = struct.Struct(">h")


def _asked(frame: bytes) -> list | None | str:
    """The topic names a Metadata request asks about (None: all), "" when it cannot be read."""
    try:
        fields = codec.to_fields(codec.decode_request(frame).body)
    except (codec.FrameError, codec.UnsupportedRequest):
        return ""
    topics = fields.get("topics")
    if topics is None:
        return None
    return [t.get("name") for t in topics]


def metadata_record(conn: int, broker: int, correlation_id: int, pending: Pending, send_us: int,
                    body: Any) -> dict | None:
    """A Metadata answer's topics as the verifier's topics image reads them (spec/verify.md):
    name, topic id (v10+), partition count and error code of every topic it lists, and what was
    asked (``all``: every topic; else ``asked``, the names). None when the request was not read."""
    if pending.api_key != METADATA or pending.asked == "":
        return None
    topics = []
    for t in getattr(body, "topics", ()) or ():
        tid = getattr(t, "topic_id", None)
        topics.append({"name": t.name, "topic_id": None if tid is None or int(tid) == 0 else str(tid),
                       "partitions": len(t.partitions or ()), "error_code": int(t.error_code)})
    return {"conn": conn, "broker": broker, "recv_us": pending.recv_us, "send_us": send_us, "api": "Metadata",
            "api_key": METADATA, "version": pending.version, "correlation_id": correlation_id, "client_id": pending.client_id,
            "all": pending.asked is None, "asked": pending.asked or [], "topics": topics}


def decode_response(pending: Pending, frame: bytes) -> tuple[Any, dict | None]:
    """(kio's body, its fields when the pair is recorded); raises codec.FrameError."""
    _, body = codec.decode_response(pending.api_key, pending.version, frame)
    return body, codec.to_fields(body) if pending.request is not None else None


def correlation_id_of(frame: bytes) -> int:
    return int.from_bytes(frame[:4], "big", signed=True)


def pair_record(conn: int, broker: int, correlation_id: int, pending: Pending, send_us: int | None,
                response: dict | None, open_until_us: int | None = None, undecodable: str | None = None) -> dict:
    return observed(conn, broker, pending.recv_us, send_us, RECORDED[pending.api_key], pending.api_key,
                    pending.version, correlation_id, pending.client_id, pending.request, response, open_until_us,
                    undecodable)
