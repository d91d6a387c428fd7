"""Kafka wire frames <-> field dicts, through kio (generated from Kafka's message schemas).

Nothing here knows a byte of the wire format: kio reads and writes every request and
response, flexible and not. This module only

* frames and unframes (the 4-byte size prefix), caching kio's readers and writers per
  (api key, version);
* turns kio's frozen dataclasses into plain dicts with Kafka's snake_case field names, and
  back, generically: it walks the dataclass fields. The dicts are what ``core.wire`` speaks:
  kio's ``timedelta`` fields (``session_timeout``) become ``..._ms`` integers, error codes
  numbers, nested entities dicts, arrays lists;
* classifies what cannot be decoded: ``UnsupportedRequest`` (an API key or version kio does
  not know: the header is still read by hand so the caller can answer or log it) and
  ``FrameError`` (truncated, malformed, unknown tagged fields: the connection must close).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import io
import struct
import types
import typing
import uuid
from functools import lru_cache
from typing import Any

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.primitive import i32Timedelta, i64Timedelta

_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
_SIZE = struct.Struct(">i")
_FRAME_HEAD = struct.Struct(">ii")  # size, correlation id

# API keys by Kafka's API name (PascalCase, as core.schema names them) and back.
API_NAMES: dict[int, str] = {k: "".join(p.title() for p in n.split("_")) for k, n in api_key_map.items()}
API_KEYS: dict[str, int] = {n: k for k, n in API_NAMES.items()}


class FrameError(ValueError):
    """A frame that cannot be parsed: Kafka closes the connection."""


class UnsupportedRequest(ValueError):
    """An API key or version with no schema here. ``correlation_id`` comes from the raw header."""

    def __init__(self, api_key: int, version: int, correlation_id: int, client_id: str | None) -> None:
        super().__init__(f"api key {api_key} version {version} is not supported")
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id
        self.client_id = client_id


@dataclasses.dataclass(frozen=True, slots=True)
class DecodedRequest:
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    body: Any  # a kio request dataclass


# --- schema classes and cached readers/writers -----------------------------------------------

@lru_cache(maxsize=None)
def request_class(api_key: int, version: int) -> type:
    """kio's request class; raises UnknownEntity/UnknownAPIKey when there is none."""
    return load_request_schema(api_key, version)


@lru_cache(maxsize=None)
def response_class(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


def has_schema(api_key: int, version: int) -> bool:
    try:
        request_class(api_key, version)
        response_class(api_key, version)
    except (UnknownEntity, UnknownAPIKey):
        return False
    return True


@lru_cache(maxsize=None)
def _request_readers(api_key: int, version: int):
    cls = request_class(api_key, version)
    return entity_reader(cls.__header_schema__), entity_reader(cls)


@lru_cache(maxsize=None)
def _response_readers(api_key: int, version: int):
    cls = response_class(api_key, version)
    return entity_reader(cls.__header_schema__), entity_reader(cls)


@lru_cache(maxsize=None)
def _request_writers(api_key: int, version: int):
    cls = request_class(api_key, version)
    return cls.__header_schema__, entity_writer(cls.__header_schema__), entity_writer(cls)


@lru_cache(maxsize=None)
def _response_writers(api_key: int, version: int):
    cls = response_class(api_key, version)
    return cls.__header_schema__, entity_writer(cls.__header_schema__), entity_writer(cls)


def peek_header(frame: bytes) -> tuple[int, int, int, str | None]:
    """api key, version, correlation id and (v1 header) client id, read without a schema.

    Every request header version starts with these fields in this layout (the client id is a
    non-compact nullable string even in header v2), so this works for unknown versions too."""
    if len(frame) < 8:
        raise FrameError(f"frame of {len(frame)} bytes is shorter than a request header")
    api_key, version, correlation_id = _HEADER.unpack_from(frame, 0)
    client_id = None
    if len(frame) >= 10:
        (n,) = struct.unpack_from(">h", frame, 8)
        if 0 <= n <= len(frame) - 10:
            client_id = bytes(frame[10:10 + n]).decode("utf-8", "replace")
    return api_key, version, correlation_id, client_id


def decode_request(frame: bytes) -> DecodedRequest:
    """A request frame (size prefix stripped). Raises UnsupportedRequest or FrameError."""
    api_key, version, correlation_id, client_id = peek_header(frame)
    try:
        read_header, read_body = _request_readers(api_key, version)
    except (UnknownEntity, UnknownAPIKey):
        raise UnsupportedRequest(api_key, version, correlation_id, client_id) from None
    try:
        header, offset = read_header(frame, 0)
        body, size = read_body(frame, offset)
    except (SerialError, KeyError, ValueError, TypeError, OverflowError, IndexError) as e:
        # KeyError: kio refuses unknown tagged fields; ValueError: bad UTF-8, bad values
        raise FrameError(f"cannot decode api key {api_key} v{version}: {type(e).__name__}: {e}") from None
    if offset + size != len(frame):
        raise FrameError(f"api key {api_key} v{version}: {len(frame) - offset - size} bytes after the body")
    return DecodedRequest(api_key, version, header.correlation_id, header.client_id, body)


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """A framed response (size prefix included)."""
    header_cls, write_header, write_body = _response_writers(api_key, version)
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    write_header(buf, header_cls(correlation_id=correlation_id))
    write_body(buf, body)
    out = buf.getbuffer()
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def encode_response_body(api_key: int, version: int, body: Any) -> bytes:
    """A response body alone (no header, no size): cacheable across correlation ids."""
    _header_cls, _write_header, write_body = _response_writers(api_key, version)
    buf = io.BytesIO()
    write_body(buf, body)
    return buf.getvalue()


def frame_response(api_key: int, version: int, correlation_id: int, body_bytes: bytes) -> bytes:
    """A framed response from a body encoded by ``encode_response_body``: the header's bytes
    after the correlation id are kio's own, written once per (api key, version)."""
    tail = _response_header_tail(api_key, version)
    return _FRAME_HEAD.pack(4 + len(tail) + len(body_bytes), correlation_id) + tail + body_bytes


@lru_cache(maxsize=None)
def _response_header_tail(api_key: int, version: int) -> bytes:
    header_cls, write_header, _write_body = _response_writers(api_key, version)
    buf = io.BytesIO()
    write_header(buf, header_cls(correlation_id=0))
    return buf.getvalue()[4:]


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None, body: Any) -> bytes:
    """A framed request (for clients: the command line, tests, the benchmark)."""
    header_cls, write_header, write_body = _request_writers(api_key, version)
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    write_header(buf, header_cls(request_api_key=api_key, request_api_version=version,
                                 correlation_id=correlation_id, client_id=client_id))
    write_body(buf, body)
    out = buf.getbuffer()
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """A response frame (size prefix stripped) -> (correlation id, kio response)."""
    read_header, read_body = _response_readers(api_key, version)
    try:
        header, offset = read_header(frame, 0)
        body, _size = read_body(frame, offset)
    except (SerialError, KeyError, ValueError, TypeError, OverflowError, IndexError) as e:
        raise FrameError(f"cannot decode response api key {api_key} v{version}: {e}") from None
    return header.correlation_id, body


# --- kio dataclasses <-> dicts ---------------------------------------------------------------

_SCALAR, _TD32, _TD64, _ERROR, _ENTITY, _ENTITIES, _SCALARS, _UUID, _DATETIME = range(9)


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    attr: str        # kio's attribute name
    key: str         # the dict key (Kafka's snake_case name; ..._ms for durations)
    kind: int
    nested: type | None
    default: Any     # dataclasses.MISSING when required
    nullable: bool
    kafka_type: str | None


def _unwrap_optional(tp) -> tuple[Any, bool]:
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return (args[0] if len(args) == 1 else tp), len(args) != len(typing.get_args(tp))
    return tp, False


@lru_cache(maxsize=None)
def _spec(cls: type) -> tuple[_Field, ...]:
    out = []
    for f in dataclasses.fields(cls):
        tp, nullable = _unwrap_optional(f.type)
        kafka_type = f.metadata.get("kafka_type")
        nested = None
        if typing.get_origin(tp) is tuple:
            elem = typing.get_args(tp)[0]
            if dataclasses.is_dataclass(elem):
                kind, nested = _ENTITIES, elem
            else:
                kind = _SCALARS
        elif dataclasses.is_dataclass(tp):
            kind, nested = _ENTITY, tp
        elif kafka_type == "timedelta_i32":
            kind = _TD32
        elif kafka_type == "timedelta_i64":
            kind = _TD64
        elif kafka_type == "error_code":
            kind = _ERROR
        elif kafka_type == "uuid":
            kind = _UUID
        elif kafka_type == "datetime_i64":
            kind = _DATETIME
        else:
            kind = _SCALAR
        key = f.name + "_ms" if kind in (_TD32, _TD64) else f.name
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = f.default_factory()  # type: ignore[misc]
        else:
            default = dataclasses.MISSING
        out.append(_Field(f.name, key, kind, nested, default, nullable, kafka_type))
    return tuple(out)


def _plain(value: Any) -> Any:
    """A kio scalar as a plain Python value (phantom ints/strs are subclasses already)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value


def to_fields(entity: Any) -> dict:
    """A kio dataclass as a dict of Kafka field names (durations as ``..._ms`` ints)."""
    out = {}
    for f in _spec(type(entity)):
        value = getattr(entity, f.attr)
        if value is None:
            out[f.key] = None
        elif f.kind == _SCALAR:
            out[f.key] = _plain(value)
        elif f.kind in (_TD32, _TD64):
            out[f.key] = round(value.total_seconds() * 1000)
        elif f.kind == _ERROR:
            out[f.key] = int(value)
        elif f.kind == _ENTITIES:
            out[f.key] = [to_fields(e) for e in value]
        elif f.kind == _ENTITY:
            out[f.key] = to_fields(value)
        elif f.kind == _SCALARS:
            out[f.key] = [_plain(v) for v in value]
        elif f.kind == _DATETIME:
            out[f.key] = round(value.timestamp() * 1000)
        else:  # uuid
            out[f.key] = value
    return out


_ZERO = {"string": "", "bytes": b"", "bool": False, "records": None}


def _zero(f: _Field) -> Any:
    if f.kind in (_ENTITIES, _SCALARS):
        return ()
    if f.kind == _ENTITY:
        return from_fields(f.nested, {})
    if f.kind == _ERROR:
        return ErrorCode.none
    if f.kind == _TD32:
        return i32Timedelta.parse(datetime.timedelta(0))
    if f.kind == _TD64:
        return i64Timedelta.parse(datetime.timedelta(0))
    if f.kind in (_UUID, _DATETIME):
        return None
    if f.nullable and f.kafka_type in ("string", "bytes", "records"):
        return None
    return _ZERO.get(f.kafka_type, 0)


def _convert(f: _Field, value: Any) -> Any:
    if value is None:
        if f.kind in (_ENTITIES, _SCALARS) and not f.nullable:
            return ()
        return None
    kind = f.kind
    if kind == _SCALAR:
        if isinstance(value, enum.Enum):
            return value.value
        return value
    if kind == _ERROR:
        return value if isinstance(value, ErrorCode) else ErrorCode(int(value))
    if kind == _ENTITIES:
        return tuple(from_fields(f.nested, v) if isinstance(v, dict) else v for v in value)
    if kind == _SCALARS:
        return tuple(value)
    if kind == _ENTITY:
        return from_fields(f.nested, value) if isinstance(value, dict) else value
    if kind == _TD32:
        return i32Timedelta.parse(datetime.timedelta(milliseconds=value))
    if kind == _TD64:
        return i64Timedelta.parse(datetime.timedelta(milliseconds=value))
    if kind == _UUID:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    if kind == _DATETIME:
        return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.timezone.utc)
    return value


def from_fields(cls: type, fields: dict) -> Any:
    """A kio dataclass from a dict of Kafka field names. Keys the class does not have are
    ignored (so one dict can serve every version); missing ones take the schema default."""
    kwargs = {}
    for f in _spec(cls):
        if f.key in fields:
            kwargs[f.attr] = _convert(f, fields[f.key])
        elif f.attr in fields:
            kwargs[f.attr] = _convert(f, fields[f.attr])
        elif f.default is not dataclasses.MISSING:
            kwargs[f.attr] = f.default
        else:
            kwargs[f.attr] = _zero(f)
    return cls(**kwargs)


def request_body(api_key: int, version: int, fields: dict) -> Any:
    return from_fields(request_class(api_key, version), fields)


def response_body(api_key: int, version: int, fields: dict) -> Any:
    return from_fields(response_class(api_key, version), fields)
