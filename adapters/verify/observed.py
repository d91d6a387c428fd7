"""An observed trace as the verifier reads it: request/response pairs with their times, split
into one unit per group (the APIs that name one group; the others are counted, not checked)."""

from __future__ import annotations

import contextlib
import json
import tempfile
import uuid
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator

import attrs

from groupcoord.adapters.observe import trace
from groupcoord.adapters.protocol import schema

# APIs whose request names exactly the group it is about (the field holding it).
_GROUP_FIELD = {"JoinGroup": "group_id", "SyncGroup": "group_id", "Heartbeat": "group_id",
                "LeaveGroup": "group_id", "OffsetCommit": "group_id", "OffsetDelete": "group_id",
                "ConsumerGroupHeartbeat": "group_id"}
CHECKED_APIS = frozenset(_GROUP_FIELD) | {"OffsetFetch", "DescribeGroups", "DeleteGroups", "ConsumerGroupDescribe"}


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
    open_until_us: int | None = None  # unanswered: known to wait until then (none came before)
    # an answer came (``send_us``) but could not be decoded: its size and first bytes when the
    # recording kept them (``N bytes: HEX``), else ""; None for a decoded answer or none at all
    undecodable: str | None = None

    @property
    def unreadable(self) -> bool:
        """An answer came that could not be decoded (``response`` null, ``send_us`` set)."""
        return self.response is None and self.send_us is not None


def trace_dir(path: str | Path) -> Path:
    """The recording directory of ``path`` (the directory, or one of its trace files)."""
    p = Path(path)
    return p if p.is_dir() else p.parent


@contextlib.contextmanager
def _reading(d: Path):
    """Errors reading the recording ``d`` as TraceError, naming it."""
    try:
        yield
    except FileNotFoundError as e:
        raise TraceError(str(e)) from None
    except OSError as e:
        raise TraceError(f"{d}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise TraceError(f"{d}: not UTF-8 text") from None
    except TraceError:
        raise
    except ValueError as e:
        raise TraceError(str(e)) from None


def torn_line(path: str | Path) -> tuple[Path, str] | None:
    """The JSON Lines file of the recording at ``path`` and its torn last line (``torn_tail``:
    left out by every reader), or None."""
    from groupcoord.adapters.traces.trace_files import torn_tail

    d = trace_dir(path)
    with _reading(d):
        source, lines = trace.source_file(d)
        tail = torn_tail(source) if lines else None
    return None if tail is None else (source, tail)


def group_in(text: str) -> str | None:
    """The group a torn line was about, as far as its text tells (its request's group id)."""
    from groupcoord.adapters.traces.trace_files import torn_group

    return torn_group(text)


def read(path: str | Path) -> list[Obs]:
    """Every pair of the recording at ``path`` (observe.trace reads JSON Lines or Parquet)."""
    d = trace_dir(path)
    with _reading(d):
        records = trace.read_observed(d)
    return [from_record(r, n, f"{d} record {n}") for n, r in enumerate(records, start=1)]


def shares(path: str | Path, share_bytes: int) -> Iterator[Split]:
    """The recording's groups a share at a time, each share's pairs about ``share_bytes`` of its
    JSON Lines: every group in one share, the pairs about no group counted with the first.
    A recording larger than a share is first copied, line by line, into one temporary file
    per share (a pair about groups of several shares into each), so that only one share's
    pairs are held at once. A Parquet file, or a smaller one, is one share."""
    d = trace_dir(path)
    with _reading(d):
        source, lines = trace.source_file(d)
        count = -(-source.stat().st_size // share_bytes) if lines else 1
    if count <= 1:
        yield split(read(d))
        return
    unchecked: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="groupcoord-verify-") as tmp:
        files = [Path(tmp) / f"share-{k}.jsonl" for k in range(count)]
        outs = [open(f, "w", encoding="utf-8") for f in files]
        try:
            with _reading(d):
                for n, (line, record) in enumerate(trace.json_lines_with_text(source), start=1):
                    obs = from_record(record, n, f"{d} record {n}")
                    groups = groups_of(obs) if obs.api in CHECKED_APIS else ()
                    if not groups:
                        reason = unchecked_reason(obs)
                        unchecked[reason] = unchecked.get(reason, 0) + 1
                    for k in sorted({_share(g, count) for g in groups}):
                        outs[k].write(f"{n}\t{line}")
        finally:
            for out in outs:
                out.close()
        for k, f in enumerate(files):
            units: dict[str, list[Obs]] = {}
            with open(f, encoding="utf-8") as lines_in:
                for text in lines_in:
                    n_text, line = text.split("\t", 1)
                    n = int(n_text)
                    for g, part in per_group(from_record(json.loads(line), n, f"{d} record {n}")):
                        if _share(g, count) == k:
                            units.setdefault(g, []).append(part)
            f.unlink()
            for unit in units.values():
                in_order(unit)
            yield Split(units, unchecked if k == 0 else {})
            units = {}


def _share(group_id: str, count: int) -> int:
    return zlib.crc32(group_id.encode("utf-8", "surrogatepass")) % count


def from_record(r: dict, n: int, where: str) -> Obs:
    """Record ``n`` (its place from 1: a line of observed.jsonl); TraceError names ``where``."""
    try:
        api, version = r["api"], r["version"]
        request = fields_from_json(api, version, 0, r["request"])
        send_us = r["send_us"]
        obs = Obs(index=n, conn=int(r["conn"]), recv_us=int(r["recv_us"]),
                  send_us=None if send_us is None else int(send_us), api=api, version=version,
                  client_id=r.get("client_id"), request=request, response=r["response"],
                  open_until_us=r.get("open_until_us"),
                  undecodable=(r.get("undecodable") or "") if r["response"] is None and send_us is not None else None)
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
        elif typ == "uuid":  # KIP-848's topic ids, as text in the trace
            out[name] = uuid.UUID(value) if isinstance(value, str) else value
        elif isinstance(typ, list):
            out[name] = [_from_json(typ, e) for e in value]
        elif isinstance(typ, schema.Struct) and isinstance(value, dict):
            out[name] = _from_json(typ, value)
    return out


def to_json(value: Any) -> Any:
    """A field value as the trace holds it (observe.trace's one conversion: bytes as hex)."""
    return json.loads(trace.dumps(value))


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
    if obs.api == "ConsumerGroupDescribe":
        return tuple(g for g in b.get("group_ids", ()) if isinstance(g, str))
    return ()


@attrs.frozen
class Split:
    units: dict  # group id -> [Obs] in the order received
    unchecked: dict  # reason -> count


# A request about several groups is, for each, that group's part: Kafka handles them one by one.
_PARTS = {"DeleteGroups": ("groups_names", "results"), "DescribeGroups": ("groups", "groups"),
          "OffsetFetch": ("groups", "groups"), "ConsumerGroupDescribe": ("group_ids", "groups")}


def per_group(obs: Obs) -> list[tuple[str, Obs]]:
    """(group, the pair as that group's alone) for each group ``obs`` is about."""
    groups = groups_of(obs) if obs.api in CHECKED_APIS else ()
    if len(groups) <= 1:
        return [(g, obs) for g in groups]
    asked, answered = _PARTS[obs.api]
    out = []
    for g in dict.fromkeys(groups):
        request = {**obs.request, asked: [e for e in obs.request[asked] if (e if isinstance(e, str) else e["group_id"]) == g]}
        response = obs.response
        if response is not None:
            response = {**response, answered: [e for e in response.get(answered, ()) if e.get("group_id") == g]}
        out.append((g, attrs.evolve(obs, request=request, response=response)))
    return out


def unchecked_reason(obs: Obs) -> str:
    """Why a pair about no group is not checked (``per_group`` gave nothing)."""
    return f"{obs.api} (not about one group)" if obs.api not in CHECKED_APIS else f"{obs.api} of no group"


def in_order(unit: list[Obs]) -> list[Obs]:
    """A unit's pairs in the order received (the search's order of reading them)."""
    unit.sort(key=lambda o: (o.recv_us, o.index))
    return unit


def split(pairs: Iterable[Obs]) -> Split:
    units: dict[str, list[Obs]] = {}
    unchecked: dict[str, int] = {}
    for obs in pairs:
        parts = per_group(obs)
        for g, part in parts:
            units.setdefault(g, []).append(part)
        if not parts:
            reason = unchecked_reason(obs)
            unchecked[reason] = unchecked.get(reason, 0) + 1
    for unit in units.values():
        in_order(unit)
    return Split(units, unchecked)


def iter_units(split_: Split) -> Iterator[tuple[str, list[Obs]]]:
    yield from sorted(split_.units.items())


def dump(pairs: Iterable[Obs], directory: str | Path, fmt: str = "jsonl") -> Path:
    """Write ``pairs`` as a recording (observe.trace's writer), in the order given."""
    from groupcoord.adapters.protocol.codec import API_KEYS

    writer = trace.ObservedWriter(directory, fmt)
    for o in pairs:
        writer.write(trace.observed(o.conn, -1, o.recv_us, o.send_us, o.api, API_KEYS[o.api], o.version, o.index,
                                    o.client_id, o.request, o.response, o.open_until_us, o.undecodable or None))
    return writer.close()
