"""An observed trace as the verifier reads it: request/response pairs with their times, split
into one unit per group (the APIs that name one group; the others are counted, not checked)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

import attrs

from groupcoord.adapters.protocol import schema

# APIs whose request names exactly the group it is about (the field holding it).
_GROUP_FIELD = {"JoinGroup": "group_id", "SyncGroup": "group_id", "Heartbeat": "group_id",
                "LeaveGroup": "group_id", "OffsetCommit": "group_id", "OffsetDelete": "group_id"}
CHECKED_APIS = frozenset(_GROUP_FIELD) | {"OffsetFetch", "DescribeGroups", "DeleteGroups"}


class TraceError(ValueError):
    """An observed trace that cannot be read: the message names the file and line."""


@attrs.frozen
class Obs:
    """One request and its response (None: none was seen) as the broker handled them."""

    index: int  # place in the file (its line number from 1): names it in reports
    conn: int
    recv_us: int
    send_us: int | None
    api: str
    version: int
    client_id: str | None
    request: dict  # Kafka's fields, bytes as bytes
    response: dict | None  # the same, as observed (bytes as hex text: how they are compared)


def read(path: str | Path) -> list[Obs]:
    """Every pair of the trace at ``path`` (a directory holding observed.jsonl, or that file)."""
    p = Path(path)
    if p.is_dir():
        p = p / "observed.jsonl"
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise TraceError(f"{p}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise TraceError(f"{p}: not UTF-8 text") from None
    return [obs for obs in (parse_line(line, p, n) for n, line in enumerate(lines, start=1) if line.strip())]


def parse_line(line: str, path: Path, n: int) -> Obs:
    """Line ``n`` of ``path``; TraceError names both when it is not a pair."""
    where = f"{path}:{n}"
    try:
        r = json.loads(line)
        api, version = r["api"], r["version"]
        request = fields_from_json(api, version, 0, r["request"])
        response = r["response"]
        send_us = r["send_us"]
        obs = Obs(index=n, conn=int(r["conn"]), recv_us=int(r["recv_us"]),
                  send_us=None if send_us is None else int(send_us), api=api, version=version,
                  client_id=r.get("client_id"), request=request, response=response)
    except (ValueError, KeyError, TypeError, schema.SchemaError) as e:
        raise TraceError(f"{where}: not an observed request/response pair ({e})") from None
    if obs.response is not None and not isinstance(obs.response, dict):
        raise TraceError(f"{where}: response is not an object")
    if obs.send_us is not None and obs.send_us < obs.recv_us:
        raise TraceError(f"{where}: answered before it was received ({obs.send_us} < {obs.recv_us} µs)")
    return obs


def fields_from_json(api: str, version: int, side: int, body: Any) -> dict:
    """Fields read from JSON: the schema's bytes fields from hex text (schema.py's table)."""
    if api not in schema.SCHEMAS:
        return body if isinstance(body, dict) else {}
    if not isinstance(body, dict):
        raise schema.SchemaError(f"{api}: expected an object, got {type(body).__name__}")
    return _from_json(schema.SCHEMAS[api][2 + side], body)


def _from_json(fields, body: dict) -> dict:
    out = dict(body)
    for field in fields:
        name, typ = field[0], field[2]
        value = body.get(name)
        if value is None:
            continue
        if typ == "bytes":
            out[name] = bytes.fromhex(value) if isinstance(value, str) else value
        elif isinstance(typ, list):
            out[name] = [_from_json(typ, e) for e in value]
    return out


def to_json(value: Any) -> Any:
    """A field value as the trace writes it: bytes as hex text."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


def groups_of(obs: Obs) -> tuple[str, ...]:
    """The groups a pair is about (several for a multi-group DeleteGroups or OffsetFetch)."""
    b = obs.request
    field = _GROUP_FIELD.get(obs.api)
    if field is not None:
        return (b[field],)
    if obs.api == "OffsetFetch":
        return (b["group_id"],) if obs.version < 8 else tuple(g["group_id"] for g in b.get("groups", ()))
    if obs.api == "DescribeGroups":
        return tuple(b.get("groups", ()))
    if obs.api == "DeleteGroups":
        return tuple(b.get("groups_names", ()))
    return ()


@attrs.frozen
class Split:
    units: dict  # group id -> [Obs] in the order received
    unchecked: dict  # reason -> count


def split(pairs: Iterable[Obs]) -> Split:
    units: dict[str, list[Obs]] = {}
    unchecked: dict[str, int] = {}
    for obs in pairs:
        groups = groups_of(obs) if obs.api in CHECKED_APIS else ()
        if obs.api not in CHECKED_APIS:
            reason = f"{obs.api} (not about one group)"
        elif len(groups) != 1:
            reason = f"{obs.api} of {len(groups)} groups at once"
        else:
            units.setdefault(groups[0], []).append(obs)
            continue
        unchecked[reason] = unchecked.get(reason, 0) + 1
    for unit in units.values():
        unit.sort(key=lambda o: (o.recv_us, o.index))
    return Split(units, unchecked)


def iter_units(split_: Split) -> Iterator[tuple[str, list[Obs]]]:
    yield from sorted(split_.units.items())


def dump(pairs: Iterable[Obs], directory: str | Path) -> Path:
    """Write ``pairs`` as an observed trace (DIR/observed.jsonl), in the order given."""
    from groupcoord.adapters.protocol.codec import API_KEYS

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "observed.jsonl", "w", encoding="utf-8") as f:
        for o in pairs:
            f.write(json.dumps({"conn": o.conn, "broker": -1, "recv_us": o.recv_us, "send_us": o.send_us,
                                "api": o.api, "api_key": API_KEYS[o.api], "version": o.version,
                                "correlation_id": o.index, "client_id": o.client_id,
                                "request": to_json(o.request), "response": o.response}) + "\n")
    return d / "observed.jsonl"
