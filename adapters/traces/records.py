"""Trace records as the replay reads and writes them, fast: canonical ``data`` strings (byte for
byte ``trace.encode``), plain values for comparison, JSON Lines records, decoding an input or
output record back into a core value, and columns of records (``TraceColumns``) with the
recorder of one group (``GroupRecorder``)."""

from __future__ import annotations

import json
from enum import Enum
from json.encoder import encode_basestring_ascii as _jstr
from typing import Any, Iterable

import attrs

from groupcoord.core import trace
from groupcoord.core.errors import Error

GROUP, INSTANCE = "group", "instance"
MALFORMED_ROW = "!malformed"
MAX_VALUE_CHARS = 4000

dumps_compact = json.JSONEncoder(separators=(",", ":")).encode
_scan = json.decoder.JSONDecoder().scan_once


def json_loads(text: str):
    """json.loads for canonical data (no surrounding whitespace), minus its Python overhead."""
    try:
        value, end = _scan(text, 0)
    except StopIteration as e:
        raise ValueError(f"expecting a value at char {e.value}") from None
    if end != len(text):
        return json.loads(text)  # whitespace around it, or trailing garbage: let json decide
    return value


_loads = json_loads

# ------------------------------------------------------------------ canonical data strings
#
# trace.encode + json.dumps, specialised: one generated function per attrs class writes the
# value's JSON directly. Output is byte for byte json.dumps(trace.encode(v), separators=(",",
# ":")) (tests/replay/test_replay.py checks it on every record the simulator makes).


_ENCODERS: dict[type, Any] = {}
_DATA_ENCODERS: dict[type, Any] = {}


def _enc(value) -> str:
    f = _ENCODERS.get(type(value))
    if f is None:
        f = _make_encoder(type(value))
    return f(value)


def _enc_seq(value) -> str:
    return "[" + ",".join([_enc(x) for x in value]) + "]"


def _is_record(cls) -> bool:
    return attrs.has(cls) or cls in trace.TIMER_KEY_TYPES


def _make_encoder(cls):
    if _is_record(cls):
        names = trace.field_names(cls)
        # str and int fields inline, everything else through _enc
        body = "".join(f"    x{i} = v.{n}\n    t{i} = T(x{i})\n" for i, n in enumerate(names))
        parts = " + ".join(f"'{',' if i else ''}\"{n}\":' + (S(x{i}) if t{i} is str else R(x{i}) if t{i} is int "
                           f"else E(x{i}))" for i, n in enumerate(names))
        namespace = {"E": _enc, "T": type, "S": _jstr, "R": int.__repr__}
        exec(f"def data(v):\n{body}    return '{{' + {parts or repr('')} + '}}'\n", namespace)
        data_fn = namespace["data"]
        head = '{"type":' + _jstr(cls.__name__) + ',"data":'
        _DATA_ENCODERS[cls] = data_fn
        f = lambda v: head + data_fn(v) + "}"  # noqa: E731
    elif issubclass(cls, Error):
        f = lambda v: '"' + v.name + '"'  # noqa: E731
    elif issubclass(cls, Enum):
        f = lambda v: _enc(v.value)  # noqa: E731
    elif cls is bool:
        f = lambda v: "true" if v else "false"  # noqa: E731
    elif cls is int or cls is float:
        f = dumps_compact
    elif issubclass(cls, str):
        f = _jstr
    elif cls is type(None):
        f = lambda v: "null"  # noqa: E731
    elif cls is bytes:
        f = lambda v: '{"hex":"' + v.hex() + '"}'  # noqa: E731
    elif issubclass(cls, (tuple, list)):
        f = _enc_seq
    else:
        return lambda v: dumps_compact(trace.encode(v))  # raises TraceError for what cannot be encoded
    _ENCODERS[cls] = f
    return f


_ENCODERS[int] = int.__repr__
_ENCODERS[str] = _jstr


def canonical_data(value: Any) -> str:
    """The ``data`` of a value's record as canonical JSON: ``trace.encode``'s fields in attrs
    order, compact separators, ASCII (exactly ``json.dumps(encode(v)["data"],
    separators=(",", ":"))``)."""
    f = _DATA_ENCODERS.get(type(value))
    if f is None:
        if not _is_record(type(value)):
            raise trace.TraceError(f"not a record value: {value!r}")
        _make_encoder(type(value))
        f = _DATA_ENCODERS[type(value)]
    return f(value)


# ------------------------------------------------------------------ plain data (fast comparison)
#
# A value's fields as a dict (``plain_data``), for a C JSON encoder (orjson.dumps) to
# serialise with ``default=plain_default`` for what it does not know: nested record values
# become {"type", "data"}, bytes {"hex"}. Error codes are written by name, which the
# dict does for fields (orjson writes an IntEnum as its number). The replay compares that
# serialisation with the recorded string and only when they differ falls back to the exact
# comparison (canonical_data, then by value). An encoder that writes a value differently
# (non-ASCII, floats, an error code inside a list) therefore costs time, never a wrong answer.

# class -> its fast plain-data function (made on first use; the replay reads it directly)
PLAIN_DATA: dict[type, Any] = {}


def _make_plain_data(cls):
    names = trace.field_names(cls)
    body = "".join(f"    x{i} = v.{n}\n    if T(x{i}) is E:\n        x{i} = x{i}.name\n" for i, n in enumerate(names))
    items = ", ".join(f"{n!r}: x{i}" for i, n in enumerate(names))
    namespace = {"T": type, "E": Error}
    exec(f"def data(v):\n{body}    return {{{items}}}\n", namespace)
    f = PLAIN_DATA[cls] = namespace["data"]
    return f


def plain_data(value: Any) -> dict:
    """The fields of a record value, error codes by name, for an encoder with
    ``default=plain_default``; TypeError if ``value`` is not a record value."""
    f = PLAIN_DATA.get(type(value))
    if f is None:
        if not _is_record(type(value)):
            raise TypeError(f"not a record value: {value!r}")
        f = _make_plain_data(type(value))
    return f(value)


def plain_default(value: Any):
    """``default`` for a JSON encoder of plain data: nested record values and bytes."""
    if type(value) is bytes:
        return {"hex": value.hex()}
    return {"type": type(value).__name__, "data": plain_data(value)}


_VERSION = str(trace.VERSION)


def record_line(group_id, partition, seq: int, ts_ms: int, direction: str, type_name: str, data: str) -> str:
    """A JSON Lines record, byte for byte ``trace.to_json_line`` of the same record."""
    return ('{"v":' + _VERSION + ',"group_id":' + ("null" if group_id is None else _jstr(group_id))
            + ',"partition":' + ("null" if partition is None else str(partition))
            + ',"seq":' + str(seq) + ',"ts_ms":' + str(ts_ms) + ',"dir":"' + direction
            + '","type":"' + type_name + '","data":' + data + "}")


# ------------------------------------------------------------------ decoding events

_DECODERS: dict[str, Any] = {}
_ERRORS: dict[str, Error] = {}


def _error(value):
    if type(value) is str:
        e = _ERRORS.get(value)
        if e is None:
            try:
                e = _ERRORS[value] = Error.parse(value)
            except ValueError as exc:
                raise trace.TraceError(str(exc)) from None
        return e
    return value


def _value(raw):
    t = type(raw)
    if t is int or t is str or raw is None:
        return raw
    if t is list:
        return tuple([x if (type(x) is int or type(x) is str or x is None) else _value(x) for x in raw])
    if t is dict:
        if len(raw) == 2 and "type" in raw and "data" in raw and type(raw["data"]) is dict:
            f = _DECODERS.get(raw["type"])
            if f is None:
                f = _make_decoder(raw["type"])
            if f is not None:
                value = f(raw["data"])
                if value is not None:
                    return value
        elif len(raw) == 1 and "hex" in raw and type(raw["hex"]) is str:
            try:
                return bytes.fromhex(raw["hex"])
            except ValueError:
                pass
    return trace.decode(raw)  # the general path: other values, and the errors


def _make_decoder(type_name: str):
    cls = trace.TYPES.get(type_name)
    if cls is None:
        return None
    names = trace.field_names(cls)
    keys = frozenset(names)
    # ints, strings and nulls are taken as they are; everything else goes through _value
    # (errors through _error), without a call per scalar field
    body = "".join(
        f"    x{i} = d[{n!r}]\n"
        + (f"    x{i} = ERR(x{i})\n" if n in ("error", "error_code") else
           f"    t = T(x{i})\n    if t is not int and t is not str and x{i} is not None:\n        x{i} = V(x{i})\n")
        for i, n in enumerate(names))
    args = ", ".join(f"{n}=x{i}" for i, n in enumerate(names))
    namespace = {"C": cls, "V": _value, "T": type, "ERR": lambda raw: _error(_value(raw)), "KEYS": keys}
    exec(f"def dec(d):\n    if d.keys() != KEYS:\n        return None\n{body}    return C({args})\n", namespace)
    _DECODERS[type_name] = namespace["dec"]
    return namespace["dec"]


def decode_event(type_name: str, data: str, loads=json_loads):
    """The event of an input record (``data`` as a JSON string); TraceError if it is not one.
    ``loads`` parses JSON (adapters may pass a faster one, e.g. orjson.loads)."""
    if type_name not in trace.EVENT_TYPES:
        raise trace.TraceError(f"unknown in type {type_name!r}")
    try:
        d = loads(data)
    except (TypeError, ValueError) as e:  # orjson.JSONDecodeError is a ValueError
        raise trace.TraceError(f"data is not JSON: {e}") from None
    if type(d) is not dict:
        raise trace.TraceError("data must be an object")
    f = _DECODERS.get(type_name) or _make_decoder(type_name)
    try:
        event = f(d)
    except (TypeError, ValueError, KeyError):
        event = None
    if event is None:  # missing fields (defaults) or something wrong: the general path explains
        event = trace.decode({"type": type_name, "data": d})
    if not hasattr(event, "now_ms"):
        raise trace.TraceError(f"{type_name} is not an event")
    return event


def decode_command(type_name: str, data: str):
    if type_name not in trace.COMMAND_TYPES:
        raise trace.TraceError(f"unknown out type {type_name!r}")
    try:
        d = _loads(data)
    except (TypeError, ValueError) as e:
        raise trace.TraceError(f"data is not JSON: {e}") from None
    return trace.decode({"type": type_name, "data": d})


def same_data(recorded: str, replayed: str) -> bool:
    if recorded == replayed:
        return True
    try:
        return _loads(recorded) == _loads(replayed)
    except (TypeError, ValueError):
        return False


# ------------------------------------------------------------------ recording


class TraceColumns:
    """Trace records as columns (the Parquet layout), appended row by row."""

    NAMES = ("v", "group_id", "partition", "seq", "ts_ms", "dir", "type", "data")

    def __init__(self) -> None:
        self.group_id: list = []
        self.partition: list = []
        self.seq: list = []
        self.ts_ms: list = []
        self.dir: list = []
        self.type: list = []
        self.data: list = []

    def __len__(self) -> int:
        return len(self.seq)

    def append(self, group_id, partition, seq, ts_ms, direction, type_name, data) -> None:
        self.group_id.append(group_id)
        self.partition.append(partition)
        self.seq.append(seq)
        self.ts_ms.append(ts_ms)
        self.dir.append(direction)
        self.type.append(type_name)
        self.data.append(data)

    def extend(self, other: "TraceColumns") -> None:
        for name in self.NAMES[1:]:
            getattr(self, name).extend(getattr(other, name))

    def rows(self) -> Iterable[tuple]:
        return zip(self.group_id, self.partition, self.seq, self.ts_ms, self.dir, self.type, self.data)

    def lines(self) -> Iterable[str]:
        for row in self.rows():
            yield record_line(*row)


class GroupRecorder:
    """Records a coordinator instance that serves one group (group scope): every record of
    the instance, partition loads and write outcomes included, carries the group's id and
    offsets partition, numbered by one per-group sequence across instances."""

    def __init__(self, group_id: str, partition: int, columns: TraceColumns | None = None) -> None:
        self.group_id, self.partition = group_id, partition
        self.columns = columns if columns is not None else TraceColumns()
        self.seq = 0

    def record(self, event, commands: list) -> None:
        gid, part, cols = self.group_id, self.partition, self.columns
        ts = event.now_ms
        seq = self.seq
        cols.append(gid, part, seq, ts, "in", type(event).__name__, canonical_data(event))
        for command in commands:
            seq += 1
            cols.append(gid, part, seq, ts, "out", type(command).__name__, canonical_data(command))
        self.seq = seq + 1
