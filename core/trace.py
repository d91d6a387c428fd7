"""The trace format (version 1): every input event and output command as one flat record.

A record is a dict of JSON-compatible values:

    {"v": 2, "group_id": "g" | null, "partition": 0 | null, "seq": 17, "ts_ms": 6000,
     "dir": "in" | "out", "type": "Heartbeat", "data": {...the value's fields...}}

``seq`` counts the records of one group (or, for records of no group, of one partition, or of
the whole stream) from 0 without gaps; ``ts_ms`` is the event's time; an output record carries
the time of the input that produced it. ``data`` holds the value's attrs fields, with bytes as
hex strings, tuples as lists, error codes by name, and nested values as
``{"type": ..., "data": ...}`` only where the field can hold several types (records, keys).

This module turns values into records and back; reading and writing files is the adapters'
job (JSON Lines: one record per line; Parquet: the same columns, ``data`` as a JSON string).
Decoding refuses anything unknown with a TraceError naming what is wrong.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any, Iterator

import attrs

from . import commands as cmd
from . import events as ev
from .classic.model import Parked
from .consumer import model as consumer_model
from .consumer import records as consumer_records
from .errors import Error

VERSION = 2  # 2: timer keys and the initial-delay payload are typed values, not tuples
FIELDS = ("v", "group_id", "partition", "seq", "ts_ms", "dir", "type", "data")


class TraceError(ValueError):
    pass


def _registry() -> dict[str, type]:
    types: dict[str, type] = {}
    for module in (ev, cmd):
        for name in dir(module):
            value = getattr(module, name)
            if isinstance(value, type) and attrs.has(value) and value.__module__ == module.__name__:
                types[name] = value
    types["Parked"] = Parked
    for module in (consumer_model, consumer_records):  # KIP-848's records and the values they hold
        for name in dir(module):
            value = getattr(module, name)
            if isinstance(value, type) and attrs.has(value) and value.__module__ == module.__name__:
                types[name] = value
    for key_type in cmd.TIMER_KEYS:
        types[key_type.__name__] = key_type
    return types


TYPES = _registry()
EVENT_TYPES = {name for name, t in TYPES.items() if t.__module__ == ev.__name__}
COMMAND_TYPES = {name for name, t in TYPES.items() if t.__module__ == cmd.__name__}


TIMER_KEY_TYPES = frozenset(cmd.TIMER_KEYS)


def field_names(cls) -> tuple[str, ...]:
    """The fields a record of ``cls`` is written with."""
    return cmd.key_fields(cls) if cls in TIMER_KEY_TYPES else tuple(f.name for f in attrs.fields(cls))


def encode(value: Any) -> Any:
    """A value as JSON-compatible data (attrs values tagged with their type)."""
    if attrs.has(type(value)):
        return {"type": type(value).__name__,
                "data": {f.name: encode(getattr(value, f.name)) for f in attrs.fields(type(value))}}
    if type(value) in TIMER_KEY_TYPES:
        return {"type": type(value).__name__,
                "data": {name: encode(getattr(value, name)) for name in cmd.key_fields(type(value))}}
    if isinstance(value, Error):
        return value.name
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, (frozenset, set)):  # a consumer group's partitions
        return {"set": [encode(v) for v in sorted(value)]}
    if isinstance(value, dict):  # a consumer group's assignment: topic id -> partitions
        return {"map": [[encode(k), encode(v)] for k, v in sorted(value.items())]}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TraceError(f"cannot encode {type(value).__name__}: {value!r}")


def decode(data: Any) -> Any:
    """The inverse of encode (lists come back as tuples, as the core uses them)."""
    if isinstance(data, dict):
        if set(data) == {"hex"}:
            try:
                return bytes.fromhex(data["hex"])
            except (TypeError, ValueError):
                raise TraceError(f"bad hex {data['hex']!r}") from None
        if set(data) == {"set"} and isinstance(data["set"], list):
            return frozenset(decode(v) for v in data["set"])
        if set(data) == {"map"} and isinstance(data["map"], list):
            try:
                return {decode(k): decode(v) for k, v in data["map"]}
            except (TypeError, ValueError):
                raise TraceError("a map's entries must be [key, value] pairs") from None
        if set(data) == {"type", "data"}:
            cls = TYPES.get(data["type"])
            if cls is None:
                raise TraceError(f"unknown type {data['type']!r}")
            fields = data["data"]
            if not isinstance(fields, dict):
                raise TraceError(f"{data['type']}: data must be an object")
            known = field_names(cls)
            extra = set(fields) - set(known)
            if extra:
                raise TraceError(f"{data['type']}: unknown fields {sorted(extra)}")
            values = {}
            for name, raw in fields.items():
                value = decode(raw)
                if name in ("error", "error_code") and isinstance(value, str):
                    try:
                        value = Error.parse(value)
                    except ValueError as e:
                        raise TraceError(f"{data['type']}.{name}: {e}") from None
                values[name] = value
            try:
                return cls(**values)
            except TypeError as e:
                raise TraceError(f"{data['type']}: {e}") from None
        raise TraceError(f"unexpected object {sorted(data)}")
    if isinstance(data, list):
        return tuple(decode(v) for v in data)
    return data


def group_of(value: Any) -> str | None:
    """The group a value concerns, if exactly one."""
    return _own_or_key_field(value, "group_id", str)


def partition_of(value: Any) -> int | None:
    return _own_or_key_field(value, "partition", int)


def _own_or_key_field(value: Any, name: str, kind: type) -> Any:
    """``value``'s field ``name`` if it is a ``kind``, else its key's (a timer's), else None."""
    found = getattr(value, name, None)
    if not isinstance(found, kind):
        found = getattr(getattr(value, "key", None), name, None)
    return found if isinstance(found, kind) else None


class Recorder:
    """Turns (event, commands) pairs into trace records with per-group sequence numbers.

    Responses are attributed to the group of the request they answer."""

    def __init__(self) -> None:
        self._seq: dict[Any, int] = {}
        self._request_group: dict[Any, tuple[str | None, int | None]] = {}

    def _record(self, direction: str, value: Any, ts_ms: int, group_id, partition) -> dict:
        scope = ("g", group_id) if group_id is not None else ("p", partition)
        seq = self._seq.get(scope, 0)
        self._seq[scope] = seq + 1
        encoded = encode(value)
        return {"v": VERSION, "group_id": group_id, "partition": partition, "seq": seq, "ts_ms": ts_ms,
                "dir": direction, "type": encoded["type"], "data": encoded["data"]}

    def records(self, event: Any, commands: list) -> list[dict]:
        ts = event.now_ms
        gid, part = group_of(event), partition_of(event)
        if isinstance(event, ev.Request):
            self._request_group[event.request_id] = (gid, part)
        out = [self._record("in", event, ts, gid, part)]
        for command in commands:
            if isinstance(command, cmd.Respond):
                cgid, cpart = self._request_group.pop(command.request_id, (None, None))
            else:
                cgid, cpart = group_of(command), partition_of(command)
            out.append(self._record("out", command, ts, cgid, cpart))
        return out


def to_json_line(record: dict) -> str:
    return json.dumps(record, separators=(",", ":"), sort_keys=False)


def parse_record(line: str, where: str = "<trace>") -> dict:
    """Validate one JSON Lines record; TraceError names ``where`` (file:line)."""
    try:
        record = json.loads(line)
    except ValueError as e:
        raise TraceError(f"{where}: not JSON: {e}") from None
    if not isinstance(record, dict):
        raise TraceError(f"{where}: a record is an object")
    missing = [f for f in FIELDS if f not in record]
    if missing:
        raise TraceError(f"{where}: missing fields {missing}")
    extra = set(record) - set(FIELDS)
    if extra:
        raise TraceError(f"{where}: unknown fields {sorted(extra)}")
    if record["v"] != VERSION:
        raise TraceError(f"{where}: trace version {record['v']!r}, this reader knows {VERSION}")
    if record["dir"] not in ("in", "out"):
        raise TraceError(f"{where}: dir must be 'in' or 'out'")
    allowed = EVENT_TYPES if record["dir"] == "in" else COMMAND_TYPES
    if record["type"] not in allowed:
        raise TraceError(f"{where}: unknown {record['dir']} type {record['type']!r}")
    if not isinstance(record["seq"], int) or not isinstance(record["ts_ms"], int):
        raise TraceError(f"{where}: seq and ts_ms must be integers")
    return record


def value_of(record: dict, where: str = "<trace>") -> Any:
    try:
        return decode({"type": record["type"], "data": record["data"]})
    except TraceError as e:
        raise TraceError(f"{where}: {e}") from None


def read_lines(lines, name: str = "<trace>") -> Iterator[dict]:
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield parse_record(line, f"{name}:{number}")
