"""Replaying traces through the core, record by record, with every check after every step.

spec/trace-format.md describes the format. This module is pure (no I/O): callers feed the
records of one *replay unit* in order, as plain column values, and get back a
``UnitResult`` with the first finding, if any:

* **group scope** (the simulator's traces, ``GroupRecorder``): a unit is one group's records
  sorted by ``seq``; they are the complete input of coordinator instances that served that
  group alone (each starts with a ``LoadPartition`` of the group's offsets partition holding
  the group's stored records), so the replay is exact.
* **instance scope** (a shared coordinator's ``trace.Recorder`` output, e.g. the server's
  ``--trace``): a unit is one recording in its written order; records without a group
  (partition loads, expiration timers, write outcomes) are replayed in place.

Per input the unit checks the input's contract (sequence, time, timers, write order), runs
the event through ``Coordinator.handle``, checks ``adapters/checks/invariants.py`` and ``emitted.py`` over
the step (group, transition, commands, timers), compares the recorded outputs that follow with the replayed
ones and runs ``adapters/checks/trace_checks.py`` over what was recorded. A unit stops at its first
finding: after a divergence the replayed state no longer says anything about the recording.

``StreamReplayer`` runs consecutive units from column batches (what a Spark ``mapInArrow``
task or the plain replayer hands it), ``GroupRecorder`` writes group-scoped traces and
``canonical_data``/``decode_event`` are the fast (de)serializers both use.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

import attrs

from groupcoord.core import commands as cmd
from groupcoord.core import events as ev
from groupcoord.adapters.checks import emitted
from groupcoord.adapters.checks import invariants as inv
from groupcoord.core import trace
from groupcoord.adapters.checks import trace_checks as tc
from groupcoord.core.commands import CancelPartitionTimers, CancelTimer, Respond, SetTimer, Write
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator, partition_for
from groupcoord.core.errors import Error

GROUP, INSTANCE = "group", "instance"
MALFORMED_ROW = "!malformed"
MAX_VALUE_CHARS = 4000

_dumps = json.JSONEncoder(separators=(",", ":")).encode
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

from enum import Enum
from json.encoder import encode_basestring_ascii as _jstr

_ENCODERS: dict[type, Any] = {}
_DATA_ENCODERS: dict[type, Any] = {}


def _enc(value) -> str:
    f = _ENCODERS.get(type(value))
    if f is None:
        f = _make_encoder(type(value))
    return f(value)


def _enc_seq(value) -> str:
    return "[" + ",".join([_enc(x) for x in value]) + "]"


def _make_encoder(cls):
    if attrs.has(cls):
        names = [f.name for f in attrs.fields(cls)]
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
        f = _dumps
    elif issubclass(cls, str):
        f = _jstr
    elif cls is type(None):
        f = lambda v: "null"  # noqa: E731
    elif cls is bytes:
        f = lambda v: '{"hex":"' + v.hex() + '"}'  # noqa: E731
    elif issubclass(cls, (tuple, list)):
        f = _enc_seq
    else:
        return lambda v: _dumps(trace.encode(v))  # raises TraceError for what cannot be encoded
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
        if not attrs.has(type(value)):
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

_PLAIN_DATA: dict[type, Any] = {}


def _make_plain_data(cls):
    names = [f.name for f in attrs.fields(cls)]
    body = "".join(f"    x{i} = v.{n}\n    if T(x{i}) is E:\n        x{i} = x{i}.name\n" for i, n in enumerate(names))
    items = ", ".join(f"{n!r}: x{i}" for i, n in enumerate(names))
    namespace = {"T": type, "E": Error}
    exec(f"def data(v):\n{body}    return {{{items}}}\n", namespace)
    f = _PLAIN_DATA[cls] = namespace["data"]
    return f


def plain_data(value: Any) -> dict:
    """The fields of a record value, error codes by name, for an encoder with
    ``default=plain_default``; TypeError if ``value`` is not a record value."""
    f = _PLAIN_DATA.get(type(value))
    if f is None:
        if not attrs.has(type(value)):
            raise TypeError(f"not a record value: {value!r}")
        f = _make_plain_data(type(value))
    return f(value)


def plain_default(value: Any):
    """``default`` for a JSON encoder of plain data: nested record values and bytes."""
    if type(value) is bytes:
        return {"hex": value.hex()}
    return {"type": type(value).__name__, "data": plain_data(value)}


def record_line(group_id, partition, seq: int, ts_ms: int, direction: str, type_name: str, data: str) -> str:
    """A JSON Lines record, byte for byte ``trace.to_json_line`` of the same record."""
    return ('{"v":1,"group_id":' + ("null" if group_id is None else _jstr(group_id))
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
    names = [f.name for f in attrs.fields(cls)]
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


def _same_data(recorded: str, replayed: str) -> bool:
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


# ------------------------------------------------------------------ findings


DIVERGENCE, VIOLATION, CONTRACT, SEQUENCE, TIME, MALFORMED = (
    "divergence", "violation", "contract", "sequence", "time", "malformed")


@attrs.frozen
class Finding:
    """The first problem of a replay unit.

    ``kind``: divergence (a recorded output differs from the replayed one, or is missing or
    extra; ``checks`` names what the recorded output violates), violation (the replayed core
    breaks an invariant or a trace check: a core bug), contract (the recorded inputs break
    the embedding contract), sequence, time, malformed (a record is not trace format v1).
    ``expected`` is what the replayed core gives (or the contract wants), ``actual`` what the
    trace holds.
    """

    group_id: str | None
    kind: str
    check: str
    checks: tuple[str, ...]
    seq: int | None
    dir: str | None
    type: str | None
    ts_ms: int | None
    file: str | None
    line: int | None
    expected: str | None
    actual: str | None
    detail: str

    def location(self) -> str:
        if self.file is None:
            return f"seq {self.seq}"
        return f"{self.file}:{self.line}"

    def summary(self) -> str:
        head = f"{self.group_id!r} {self.kind} [{', '.join(self.checks) or self.check}] at {self.location()}"
        parts = [head, f"  {self.detail}"]
        if self.expected is not None:
            parts.append(f"  expected: {self.expected}")
        if self.actual is not None:
            parts.append(f"  actual:   {self.actual}")
        return "\n".join(parts)


def _clip(s: str | None) -> str | None:
    if s is None or len(s) <= MAX_VALUE_CHARS:
        return s
    return s[:MAX_VALUE_CHARS] + f"... ({len(s)} chars)"


@attrs.frozen
class UnitResult:
    group_id: str | None
    records: int
    inputs: int
    outputs: int
    instances: int
    skipped: int
    finding: Finding | None


# ------------------------------------------------------------------ replaying one unit


class _Stop(Exception):
    pass


def starts_instance(coordinator: Coordinator | None, partition: int) -> bool:
    """Whether a ``LoadPartition`` of ``partition`` starts a fresh coordinator instance in a
    replay: when there is none yet, when the current one owns no partition (every partition
    was unloaded), or when it already owns this one as active (the recorder restarted the
    coordinator without unloading: a crash)."""
    if coordinator is None:
        return True
    owned = coordinator.owned_partitions()
    return not owned or owned.get(partition) == "active"


class UnitReplay:
    """Replays one unit (a group stream, or an instance recording) record by record."""

    def __init__(self, group_id: str | None, config: CoordinatorConfig, *, outputs: bool = True,
                 scope: str = GROUP, check_invariants: bool = True, loads=json_loads, dumps=None) -> None:
        self.group_id = group_id
        self._json = loads
        self._dumps = dumps  # dumps(obj, default=...) -> bytes (orjson.dumps): the fast comparison
        self.config = config
        self.outputs = outputs
        self.scope = scope
        self.check_invariants = check_invariants
        self.verify_fast_path = False  # tests: also run check_commands and compare
        self.coordinator: Coordinator | None = None
        self.instances = 0
        self.records = self.inputs = self.n_outputs = self.skipped = 0
        self.finding: Finding | None = None
        self._seq: dict = {}
        self._last_ts: dict = {}
        self._timers: dict[tuple, tuple[int, Any]] = {}
        self._in_flight: dict[int, list[int]] = {}
        self._requests: dict = {}
        self._request_groups: dict = {}
        self._loading: set[int] = set()
        self._checks = tc.InstanceChecks()
        # the step whose outputs are being compared
        self._step_event = None
        self._step_ts = 0
        self._step_before: dict = {}
        self._step_after: dict = {}
        self._pending: list = []
        self._matched = 0
        self._recorded: list[tuple[str, str]] = []
        self._where: tuple = (None, None)
        self._first_mismatch = None
        self._answered: list = []
        self._held = None
        self._group_id_check = group_id if scope == GROUP else None
        self._group_key = ("g", group_id)

    # ----------------------------------------------------------- the entry point

    def record(self, v, group_id, partition, seq, ts_ms, direction, type_name, data, file=None, line=None) -> None:
        if self.finding is not None:
            self.skipped += 1
            return
        self.records += 1
        where = self._where = (file, line, seq, direction, type_name, ts_ms, group_id)
        try:
            # the well-formed record, in one test; anything else takes the checks one by one
            if not (v == 1 and type(seq) is int and type(ts_ms) is int and type(data) is str
                    and (type_name in _EVENT_TYPES if direction == "in"
                         else direction == "out" and type_name in _COMMAND_TYPES)):
                self._check_record(v, seq, ts_ms, direction, type_name, data)
            if group_id is None or group_id != self._group_id_check:
                scope = self._scope_of(group_id, partition)
            else:
                scope = self._group_key
            expected = self._seq.get(scope, 0)
            if seq != expected:
                what = "repeated" if seq < expected else "missing records before it"
                self._stop(SEQUENCE, tc.SEQUENCE_ORDER, f"seq {seq} where {expected} was expected ({what})",
                           expected=str(expected), actual=str(seq))
            self._seq[scope] = seq + 1
            last = self._last_ts.get(scope)
            if last is not None and ts_ms < last:
                self._stop(TIME, tc.TIME_ORDER, f"ts_ms {ts_ms} after {last}", expected=f">= {last}", actual=str(ts_ms))
            self._last_ts[scope] = ts_ms
            # One record of lookahead: a record is replayed once the next one has passed the
            # sequence and time checks, so a record out of order is reported as such.
            held = self._held
            self._held = (direction, type_name, data, ts_ms, where)
            if held is not None:
                direction, type_name, data, ts_ms, self._where = held
                if direction == "in":
                    self._input(type_name, data, ts_ms)
                else:
                    self._output(type_name, data, ts_ms)
        except _Stop:
            pass

    def _check_record(self, v, seq, ts_ms, direction, type_name, data) -> None:
        if type_name == MALFORMED_ROW:  # a reader's placeholder for a line it could not parse
            self._stop(MALFORMED, tc.RECORD_WELL_FORMED, str(data))
        if v != trace.VERSION:
            self._stop(MALFORMED, tc.RECORD_WELL_FORMED,
                       f"trace version {v!r}, this reader knows {trace.VERSION}")
        if direction == "in":
            if type_name not in trace.EVENT_TYPES:
                self._stop(MALFORMED, tc.RECORD_WELL_FORMED, f"unknown in type {type_name!r}")
        elif direction == "out":
            if type_name not in trace.COMMAND_TYPES:
                self._stop(MALFORMED, tc.RECORD_WELL_FORMED, f"unknown out type {type_name!r}")
        else:
            self._stop(MALFORMED, tc.RECORD_WELL_FORMED, f"dir must be 'in' or 'out', not {direction!r}")
        if type(seq) is not int or type(ts_ms) is not int or not isinstance(data, str):
            self._stop(MALFORMED, tc.RECORD_WELL_FORMED, "seq and ts_ms must be integers, data a JSON object")

    def _scope_of(self, group_id, partition):
        """The sequence a record belongs to (after checking it belongs to this unit)."""
        if self.scope == GROUP and (group_id is None or group_id != self._group_id_check):
            self._stop(CONTRACT, tc.SEQUENCE_ORDER,
                       f"record of group {group_id!r} inside the stream of {self._group_id_check!r}"
                       if group_id is not None else
                       "a record without group_id in a group-scoped trace (a shared coordinator's "
                       "recording: replay it with scope 'instance')")
        return ("g", group_id) if group_id is not None else ("p", partition)

    def _process(self, held) -> None:
        direction, type_name, data, ts_ms, self._where = held
        if direction == "in":
            self._input(type_name, data, ts_ms)
        else:
            self._output(type_name, data, ts_ms)

    def finish(self) -> UnitResult:
        if self.finding is None:
            try:
                if self._held is not None:
                    held, self._held = self._held, None
                    self._process(held)
                self._close_step()
            except _Stop:
                pass
        return UnitResult(self.group_id, self.records, self.inputs, self.n_outputs, self.instances,
                          self.skipped, self.finding)

    # ----------------------------------------------------------- findings

    def _stop(self, kind: str, check: str, detail: str, *, checks: Iterable[str] = (), expected=None,
              actual=None, where: tuple | None = None) -> None:
        file, line, seq, direction, type_name, ts_ms, group_id = where or self._where
        if group_id is None and self.group_id is None:  # instance scope: the group the problem names
            named = _GROUP_NAMED.search(detail)
            group_id = named.group(1) if named else None
        names = tuple(dict.fromkeys([check, *checks]))
        self.finding = Finding(
            group_id if group_id is not None else self.group_id, kind, check, names, seq, direction, type_name,
            ts_ms, file, line, _clip(expected), _clip(actual), _clip(detail))
        raise _Stop()

    # ----------------------------------------------------------- inputs

    def _input(self, type_name: str, data: str, ts_ms: int) -> None:
        self._close_step()
        self.inputs += 1
        try:
            event = decode_event(type_name, data, self._json)
        except trace.TraceError as e:
            self._stop(MALFORMED, tc.RECORD_WELL_FORMED, str(e), actual=data)
        if event.now_ms != ts_ms:
            self._stop(TIME, tc.TIME_ORDER, f"ts_ms {ts_ms} but the event's now_ms is {event.now_ms}",
                       expected=str(event.now_ms), actual=str(ts_ms))
        et = type(event)
        if et is ev.LoadPartition:
            self._load(event)
        elif self.coordinator is None:
            self._stop(CONTRACT, tc.STARTS_WITH_LOAD,
                       f"the unit starts with {type_name}; its replay starts from a fresh coordinator "
                       f"instance, which needs a LoadPartition first")
        elif et is ev.TimerFired:
            self._timer_fired(event)
        elif et is ev.WriteCompleted or et is ev.WriteFailed:
            self._write_outcome(event)
        elif et is ev.UnloadPartition:
            self._loading.discard(event.partition)
        coordinator = self.coordinator
        is_request = isinstance(event, ev.Request)
        gid = getattr(event, "group_id", None) if is_request else None
        before = self._groups(event)
        if is_request:
            self._requests[event.request_id] = event
            self._request_groups[event.request_id] = before.get(gid) if gid is not None else None
        try:
            # Not runtime.CommandRunner: every output is compared with the recorded one, and write
            # outcomes and timer firings come from the trace, so nothing is carried out here.
            commands = coordinator.handle(event)
        except Exception as e:  # a core bug: report it as the unit's finding
            self._stop(VIOLATION, tc.CORE_RAISES_NOTHING, f"Coordinator.handle raised {type(e).__name__}: {e}")
        after = self._groups(event)
        self._bookkeep(commands)
        if self.check_invariants:
            found = self._check_step(before, after, event, commands, gid)
            if found:
                self._stop(VIOLATION, inv.names_of(found).pop() if len(found) == 1 else _first_name(found),
                           "the replayed core: " + "; ".join(found[:4]), checks=sorted(inv.names_of(found)))
        self._step_event, self._step_ts = event, ts_ms
        self._step_before, self._step_after = before, after
        self._pending, self._matched, self._recorded = commands, 0, []
        self._first_mismatch = None
        if not self.outputs:
            self._close_step()

    def _groups(self, event) -> dict:
        coordinator = self.coordinator
        if self.scope == GROUP:
            group = coordinator.group(self.group_id)
            return {} if group is None else {self.group_id: group}
        return coordinator.groups()

    def _load(self, event: ev.LoadPartition) -> None:
        if starts_instance(self.coordinator, event.partition):
            self._new_instance()
        if event.loading:
            self._loading.add(event.partition)
        else:
            self._loading.discard(event.partition)

    def _new_instance(self) -> None:
        self.coordinator = Coordinator(self.config)
        self.instances += 1
        self._timers.clear()
        self._in_flight.clear()
        self._requests.clear()
        self._request_groups.clear()
        self._answered.clear()
        self._loading.clear()
        self._checks = tc.InstanceChecks()

    def _timer_fired(self, event: ev.TimerFired) -> None:
        armed = self._timers.pop(event.key, None)
        if armed is None:
            self._stop(CONTRACT, tc.TIMER_FIRED_WHEN_ARMED, f"timer {event.key!r} is not armed")
        deadline, payload = armed
        if event.now_ms < deadline:
            self._stop(CONTRACT, tc.TIMER_FIRED_WHEN_ARMED, f"timer {event.key!r} fired at {event.now_ms}, "
                                                            f"before its deadline {deadline}")
        if payload != event.payload:
            self._stop(CONTRACT, tc.TIMER_FIRED_WHEN_ARMED, f"timer {event.key!r} fired with payload "
                                                            f"{event.payload!r}, armed with {payload!r}")

    def _write_outcome(self, event) -> None:
        for partition, ids in self._in_flight.items():
            if event.write_id in ids:
                if ids[0] != event.write_id:
                    self._stop(CONTRACT, tc.WRITE_OUTCOME_ORDER,
                               f"outcome of write {event.write_id} on partition {partition} before that of "
                               f"write {ids[0]}")
                ids.pop(0)
                return

    def _bookkeep(self, commands: list) -> None:
        timers = self._timers
        for c in commands:
            t = type(c)
            if t is SetTimer:
                timers[c.key] = (c.deadline_ms, c.payload)
            elif t is Respond:
                self._answered.append(c.request_id)
            elif t is Write:
                self._in_flight.setdefault(c.partition, []).append(c.write_id)
            elif t is CancelTimer:
                timers.pop(c.key, None)
            elif t is CancelPartitionTimers:
                for key in [k for k in timers if k[1] == c.partition]:
                    del timers[key]

    def _check_step(self, before: dict, after: dict, event, commands: list, gid) -> list[str]:
        found: list[str] = []
        changed = False
        for g in before.keys() | after.keys():
            b, a = before.get(g), after.get(g)
            if a is not b:
                changed = True
                if a is not None:
                    found += inv.check_group(a)
                found += inv.check_transition(b, a, event)
        loading = self._loading
        quick = None if changed else self._unchanged_step_checks(before, event, commands)
        if quick is None or self.verify_fast_path:
            full = emitted.check_commands(
                before, after, event, commands, requests=self._requests, request_groups=self._request_groups,
                is_loading=(lambda g: partition_for(g, self.config.offsets_topic_num_partitions) in loading)
                if loading else None)
            if quick is not None and sorted(quick) != sorted(full):
                raise AssertionError(f"fast path {quick} != check_commands {full} on {event!r}")
            quick = full
        found += quick
        if changed or type(event) is ev.TimerFired or any(type(c) is not SetTimer and type(c) is not Respond
                                                          for c in commands):
            found += inv.check_timers(after, self._timers)
        return found

    def _unchanged_step_checks(self, before: dict, event, commands: list) -> list[str] | None:
        """check_commands for a step that left every group object as it was and emitted only
        timers and answers (heartbeats, commit results, most write completions): then its
        parked/write/completion checks have nothing to look at and what remains is
        check_response for each answer. None when the step needs the full check_commands
        (an answer to a JoinGroup or SyncGroup, a write, anything else)."""
        own = event.request_id if isinstance(event, ev.Request) else _NO_REQUEST
        found: list[str] = []
        seen = set()
        for c in commands:
            t = type(c)
            if t is SetTimer or t is CancelTimer:
                continue
            if t is not Respond:
                return None
            rid = c.request_id
            if rid in seen or type(c.response) in _FULL_CHECK_RESPONSES:
                return None
            seen.add(rid)
            if rid == own:
                gid = getattr(event, "group_id", None)
                loading = bool(self._loading) and gid is not None and partition_for(
                    gid, self.config.offsets_topic_num_partitions) in self._loading
                found += inv.check_response(event, before.get(gid), c.response, loading=loading)
            else:
                request = self._requests.get(rid)
                if request is not None and rid in self._request_groups:
                    found += inv.check_response(request, self._request_groups[rid], c.response)
        return found

    # ----------------------------------------------------------- outputs

    def _output(self, type_name: str, data: str, ts_ms: int) -> None:
        self.n_outputs += 1
        if self._step_event is None:
            self._stop(DIVERGENCE, tc.OUTPUT_MATCHES_REPLAY, "an output record before any input",
                       actual=f"{type_name} {data}")
        if ts_ms != self._step_ts:
            self._stop(TIME, tc.TIME_ORDER, f"output at ts_ms {ts_ms}, its input at {self._step_ts}",
                       expected=str(self._step_ts), actual=str(ts_ms))
        index = self._matched
        self._recorded.append((type_name, data, self._where))
        if self._first_mismatch is None:
            if index >= len(self._pending):
                self._first_mismatch = (index, None, self._where)
            else:
                replayed = self._pending[index]
                if type(replayed).__name__ != type_name:
                    self._first_mismatch = (index, replayed, self._where)
                else:
                    # the fast comparison inline (see _same), the exact one when it fails
                    dumps, plain = self._dumps, _PLAIN_DATA.get(type(replayed))
                    try:
                        same = dumps is not None and plain is not None and dumps(
                            plain(replayed), default=plain_default) == data.encode()
                    except (TypeError, ValueError, UnicodeError):
                        same = False
                    if not same and not self._same(data, replayed):
                        self._first_mismatch = (index, replayed, self._where)
        self._matched = index + 1

    def _same(self, data: str, replayed) -> bool:
        dumps = self._dumps
        if dumps is not None:
            try:
                if dumps(plain_data(replayed), default=plain_default) == data.encode():
                    return True
            except (TypeError, ValueError, UnicodeError):  # not a record value, or what the encoder refuses
                pass
        return _same_data(data, canonical_data(replayed))

    def _close_step(self) -> None:
        event = self._step_event
        if event is None:
            return
        self._step_event = None
        commands = self._pending
        if self.outputs and self._first_mismatch is None and self._matched < len(commands):
            self._first_mismatch = (self._matched, commands[self._matched], self._where)
        if self._first_mismatch is not None:
            self._divergence(event, commands)
        found = self._trace_checks(event, commands)
        if found:
            self._stop(VIOLATION, _first_name(found), "the replayed core: " + "; ".join(found[:4]),
                       checks=sorted(inv.names_of(found)))
        # answered requests are forgotten once their step is checked
        requests, request_groups = self._requests, self._request_groups
        for rid in self._answered:
            requests.pop(rid, None)
            request_groups.pop(rid, None)
        self._answered.clear()

    def _trace_checks(self, event, commands) -> list[str]:
        return self._checks.step(event, commands, self._requests.get, self._request_groups.get,
                                 self._step_after.get)

    def _divergence(self, event, commands) -> None:
        index, replayed, where = self._first_mismatch
        recorded_values = []
        for type_name, data, _ in self._recorded:
            try:
                recorded_values.append(decode_command(type_name, data))
            except trace.TraceError as e:
                rt, rd, rw = self._recorded[len(recorded_values)]
                self._stop(MALFORMED, tc.RECORD_WELL_FORMED, str(e), actual=rd, where=rw)
        names: list[str] = []
        try:
            found = emitted.check_commands(self._step_before, self._step_after, event, recorded_values,
                                       requests=self._requests, request_groups=self._request_groups)
            found += self._trace_checks(event, recorded_values)
            names = sorted(inv.names_of(found))
        except Exception as e:  # the recorded values may be nonsense for the checks
            found = [f"checks could not run on the recorded outputs: {type(e).__name__}: {e}"]
        if index < len(self._recorded):
            actual = f"{self._recorded[index][0]} {self._recorded[index][1]}"
        else:
            actual = "(no more outputs recorded for this input)"
        expected = (f"{type(replayed).__name__} {canonical_data(replayed)}" if replayed is not None
                    else "(no more outputs from the replayed core)")
        what = ("a recorded output differs from the replayed one" if replayed is not None and index < len(self._recorded)
                else "an output is missing from the trace" if replayed is not None
                else "the trace has an output the replayed core does not produce")
        detail = f"output {index + 1} of {type(event).__name__} at {self._step_ts}: {what}"
        if found:
            detail += "; the recorded outputs break: " + "; ".join(found[:4])
        self._stop(DIVERGENCE, tc.OUTPUT_MATCHES_REPLAY, detail, checks=names, expected=expected, actual=actual,
                   where=where)


_NO_REQUEST = object()
_EVENT_TYPES = frozenset(trace.EVENT_TYPES)
_COMMAND_TYPES = frozenset(trace.COMMAND_TYPES)
_GROUP_NAMED = re.compile(r"group '((?:[^'\\]|\\.)*)'")
_FULL_CHECK_RESPONSES = (cmd.JoinGroupResponse, cmd.SyncGroupResponse)


def _first_name(found: list[str]) -> str:
    return found[0].split(":", 1)[0]


# ------------------------------------------------------------------ streams of units


class StreamReplayer:
    """Replays consecutive units from column batches sorted by (group_id, seq) (group scope)
    or in written order per recording (instance scope: ``unit_keys`` names the recording).
    Holds the open unit across batches; ``feed`` returns the units finished so far."""

    def __init__(self, config: CoordinatorConfig | None = None, *, outputs: bool = True, scope: str = GROUP,
                 check_invariants: bool = True, loads=json_loads, dumps=None) -> None:
        self.config = config or CoordinatorConfig()
        self.outputs, self.scope, self.check_invariants = outputs, scope, check_invariants
        self.loads, self.dumps = loads, dumps
        self.current: UnitReplay | None = None
        self._current_key = object()

    def _open(self, key, group_id) -> UnitReplay:
        return UnitReplay(group_id, self.config, outputs=self.outputs, scope=self.scope,
                          check_invariants=self.check_invariants, loads=self.loads, dumps=self.dumps)

    def feed(self, v, group_id, partition, seq, ts_ms, direction, type_name, data, file=None, line=None,
             unit_keys=None) -> list[UnitResult]:
        """Columns as equal-length lists (``file``/``line`` may be None)."""
        done: list[UnitResult] = []
        keys = group_id if unit_keys is None else unit_keys
        current, current_key = self.current, self._current_key
        n = len(seq)
        files = file if file is not None else [None] * n
        lines = line if line is not None else [None] * n
        record = current.record if current is not None else None
        for key, v_, gid, part, seq_, ts, d, tn, data_, f, ln in zip(
                keys, v, group_id, partition, seq, ts_ms, direction, type_name, data, files, lines):
            if key != current_key or current is None:
                if current is not None:
                    done.append(current.finish())
                current = self.current = self._open(key, gid if unit_keys is None else None)
                current_key = self._current_key = key
                record = current.record
            record(v_, gid, part, seq_, ts, d, tn, data_, f, ln)
        return done

    def finish(self) -> list[UnitResult]:
        if self.current is None:
            return []
        result = self.current.finish()
        self.current = None
        self._current_key = object()
        return [result]


def replay_records(records: Iterable[dict], config: CoordinatorConfig | None = None, *, outputs: bool = True,
                   scope: str = GROUP) -> list[UnitResult]:
    """Replay trace record dicts (``trace.Recorder`` output or parsed JSON Lines) in memory:
    grouped by group and sorted by seq (group scope) or as given (instance scope)."""
    rows = list(records)
    if scope == GROUP:
        rows.sort(key=lambda r: (r["group_id"] is not None, r["group_id"] or "", r["seq"]))
    replayer = StreamReplayer(config, outputs=outputs, scope=scope)
    cols = {name: [] for name in ("v", "group_id", "partition", "seq", "ts_ms", "dir", "type", "data")}
    for r in rows:
        for name in cols:
            value = r[name]
            if name == "data" and not isinstance(value, str):
                value = _dumps(value)
            cols[name].append(value)
    keys = [0] * len(rows) if scope == INSTANCE else None
    results = replayer.feed(*(cols[n] for n in cols), unit_keys=keys)
    return results + replayer.finish()


__all__ = [
    "GROUP", "INSTANCE", "Finding", "GroupRecorder", "StreamReplayer", "TraceColumns", "UnitReplay", "UnitResult",
    "canonical_data", "decode_command", "decode_event", "record_line", "replay_records", "starts_instance",
]
