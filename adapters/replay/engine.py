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
the event through ``Coordinator.handle``, checks ``adapters/checks/invariants.py`` and
``emitted.py`` over the step (group, transition, commands, timers), compares the recorded outputs
that follow with the replayed ones and runs ``adapters/checks/trace_checks.py`` over what was recorded. A unit stops at its first
finding: after a divergence the replayed state no longer says anything about the recording.
A unit whose records end at a JSON Lines file's torn last line of its own (``torn_ends``, told
by the reader) takes the outputs missing from its last step for that line's: no divergence.

``stream.StreamReplayer`` runs consecutive units from column batches (what a Spark
``mapInArrow`` task or the plain replayer hands it); ``records`` holds ``GroupRecorder``, which
writes group-scoped traces, and the fast (de)serializers both use (``canonical_data``,
``decode_event``); ``findings`` holds what a unit reports.
"""

from __future__ import annotations

import re
from typing import Iterable

from groupcoord.adapters.checks import emitted
from groupcoord.adapters.checks import invariants as inv
from groupcoord.adapters.checks import trace_checks as tc
from groupcoord.adapters.replay.findings import (
    CONTRACT,
    DIVERGENCE,
    MALFORMED,
    SEQUENCE,
    TIME,
    VIOLATION,
    Finding,
    UnitResult,
    clip,
)
from groupcoord.adapters.traces.records import (
    GROUP,
    MALFORMED_ROW,
    PLAIN_DATA,
    canonical_data,
    decode_command,
    decode_event,
    json_loads,
    plain_data,
    plain_default,
    same_data,
)
from groupcoord.core import commands as cmd
from groupcoord.core import events as ev
from groupcoord.core import trace
from groupcoord.core.commands import CancelPartitionTimers, CancelTimer, Respond, SetTimer, Write
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator, partition_for
from groupcoord.core.timers import TimerTable

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
                 scope: str = GROUP, check_invariants: bool = True, loads=json_loads, dumps=None,
                 torn_ends: dict | None = None) -> None:
        self.group_id = group_id
        self._json = loads
        self._dumps = dumps  # dumps(obj, default=...) -> bytes (orjson.dumps): the fast comparison
        self.config = config
        self.outputs = outputs
        self.scope = scope
        self.check_invariants = check_invariants
        # (file, line) of a JSON Lines file's last record before its torn last line -> the torn
        # line's group (None when its text cannot tell); filled by the reader, maybe after this opens
        self.torn_ends = torn_ends
        self._cut = False  # the unit's records end at a torn line of its own (see finish)
        self.verify_fast_path = False  # tests: also run check_commands and compare
        self.coordinator: Coordinator | None = None
        self._image: ev.TopicsChanged | None = None  # the last topics image seen
        self.instances = 0
        self.records = self.inputs = self.n_outputs = self.skipped = 0
        self.finding: Finding | None = None
        self._seq: dict = {}  # sequence scope -> the next seq expected (instance scope)
        self._last_ts: dict = {}
        self._group_seq, self._group_ts = 0, None  # the same for the unit's group (group scope)
        self._timers = TimerTable()  # what the replayed core armed: a TimerFired must be for one of them
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
            if not (v == _VERSION and type(seq) is int and type(ts_ms) is int and type(data) is str
                    and (type_name in _EVENT_TYPES if direction == "in"
                         else direction == "out" and type_name in _COMMAND_TYPES)):
                self._check_record(v, seq, ts_ms, direction, type_name, data)
            if group_id is not None and group_id == self._group_id_check:
                # the unit's own group (group scope): its sequence and time held in attributes
                expected, last = self._group_seq, self._group_ts
                if seq != expected or (last is not None and ts_ms < last):
                    self._out_of_order(seq, expected, ts_ms, last)
                self._group_seq, self._group_ts = seq + 1, ts_ms
            else:
                scope = self._scope_of(group_id, partition)
                expected, last = self._seq.get(scope, 0), self._last_ts.get(scope)
                if seq != expected or (last is not None and ts_ms < last):
                    self._out_of_order(seq, expected, ts_ms, last)
                self._seq[scope], self._last_ts[scope] = seq + 1, ts_ms
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

    def _out_of_order(self, seq: int, expected: int, ts_ms: int, last: int | None) -> None:
        if seq != expected:
            what = "repeated" if seq < expected else "missing records before it"
            self._stop(SEQUENCE, tc.SEQUENCE_ORDER, f"seq {seq} where {expected} was expected ({what})",
                       expected=str(expected), actual=str(seq))
        self._stop(TIME, tc.TIME_ORDER, f"ts_ms {ts_ms} after {last}", expected=f">= {last}", actual=str(ts_ms))

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
                self._cut = self._ends_at_torn_line()
                self._close_step()
            except _Stop:
                pass
        return UnitResult(self.group_id, self.records, self.inputs, self.n_outputs, self.instances,
                          self.skipped, self.finding)

    def _ends_at_torn_line(self) -> bool:
        """Whether the unit's last record is the last whole line of a file whose torn last line
        was the unit's (its group, or a group its text does not tell; an instance-scoped unit is
        the file's recording): the outputs of the last step that line held are missing, and the
        unit's verdict rests on the lines before it."""
        file, line = self._where[:2]
        if not self.torn_ends or (file, line) not in self.torn_ends:
            return False
        group = self.torn_ends[(file, line)]
        return self.scope != GROUP or group is None or group == self.group_id

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
            ts_ms, file, line, clip(expected), clip(actual), clip(detail))
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
        if et is ev.TopicsChanged:  # the topics image: every instance of the recording starts with it
            self._image = event
            if self.coordinator is None:
                return
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
        if self.scope == GROUP:
            group = self.coordinator.group(self.group_id)
            return _NO_GROUPS if group is None else {self.group_id: group}
        return self.coordinator.groups()

    def _load(self, event: ev.LoadPartition) -> None:
        if starts_instance(self.coordinator, event.partition):
            self._new_instance()
        if event.loading:
            self._loading.add(event.partition)
        else:
            self._loading.discard(event.partition)

    def _new_instance(self) -> None:
        self.coordinator = Coordinator(self.config)
        if self._image is not None:  # the recorder feeds each instance the topics first
            self.coordinator.handle(self._image)
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
                timers.apply(c)
            elif t is Respond:
                self._answered.append(c.request_id)
            elif t is Write:
                self._in_flight.setdefault(c.partition, []).append(c.write_id)
            elif t is CancelTimer or t is CancelPartitionTimers:
                timers.apply(c)

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
        # a Write changes no timer: with every group as it was, only a timer command or a timer
        # firing can break a timer invariant
        if changed or type(event) is ev.TimerFired or any(type(c) is not SetTimer and type(c) is not Respond
                                                          and type(c) is not Write for c in commands):
            found += inv.check_timers(after, self._timers)
        return found

    def _unchanged_step_checks(self, before: dict, event, commands: list) -> list[str] | None:
        """check_commands for a step that left every group object as it was and emitted only
        timers, answers and writes without group records (heartbeats, offset commits, most
        write completions): then its parked/write/completion checks have nothing to look at
        and what remains is check_response for each answer. None when the step needs the
        full check_commands (an answer to a JoinGroup or SyncGroup, a group record, anything
        else)."""
        own = event.request_id if isinstance(event, ev.Request) else _NO_REQUEST
        found: list[str] = []
        seen = set()
        for c in commands:
            t = type(c)
            if t is SetTimer or t is CancelTimer:
                continue
            if t is Write:
                if any(isinstance(r, cmd.GroupMetadataRecord) for r in c.records):
                    return None
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
                    dumps, plain = self._dumps, PLAIN_DATA.get(type(replayed))
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
        return same_data(data, canonical_data(replayed))

    def _close_step(self) -> None:
        event = self._step_event
        if event is None:
            return
        self._step_event = None
        commands = self._pending
        # at a torn end the last step's missing outputs were on the line left out: no divergence
        if self.outputs and self._first_mismatch is None and self._matched < len(commands) and not self._cut:
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
_VERSION = trace.VERSION
_NO_GROUPS: dict = {}  # a group-scoped step's groups when its group is absent (read, never changed)
_EVENT_TYPES = frozenset(trace.EVENT_TYPES)
_COMMAND_TYPES = frozenset(trace.COMMAND_TYPES)
_GROUP_NAMED = re.compile(r"group '((?:[^'\\]|\\.)*)'")
_FULL_CHECK_RESPONSES = (cmd.JoinGroupResponse, cmd.SyncGroupResponse)


def _first_name(found: list[str]) -> str:
    return found[0].split(":", 1)[0]


