"""Replaying a stream of units: records sorted by unit and seq, each unit through its own
``UnitReplay`` (``StreamReplayer``), and whole recordings given as record dicts
(``replay_records``)."""

from __future__ import annotations

from typing import Iterable

from groupcoord.adapters.replay.engine import UnitReplay
from groupcoord.adapters.replay.findings import UnitResult
from groupcoord.adapters.traces.records import GROUP, INSTANCE, dumps_compact, json_loads
from groupcoord.core.config import CoordinatorConfig


class StreamReplayer:
    """Replays consecutive units from column batches sorted by (group_id, seq) (group scope)
    or in written order per recording (instance scope: ``unit_keys`` names the recording).
    Holds the open unit across batches; ``feed`` returns the units finished so far."""

    def __init__(self, config: CoordinatorConfig | None = None, *, outputs: bool = True, scope: str = GROUP,
                 check_invariants: bool = True, loads=json_loads, dumps=None, torn_ends: dict | None = None
                 ) -> None:
        self.config = config or CoordinatorConfig()
        self.outputs, self.scope, self.check_invariants = outputs, scope, check_invariants
        self.loads, self.dumps = loads, dumps
        self.torn_ends = {} if torn_ends is None else torn_ends  # shared with every unit (UnitReplay)
        self.current: UnitReplay | None = None
        self._current_key = object()

    unit_class = UnitReplay

    def _open(self, key, group_id) -> UnitReplay:
        return self.unit_class(group_id, self.config, outputs=self.outputs, scope=self.scope,
                          check_invariants=self.check_invariants, loads=self.loads, dumps=self.dumps,
                          torn_ends=self.torn_ends)

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
                value = dumps_compact(value)
            cols[name].append(value)
    keys = [0] * len(rows) if scope == INSTANCE else None
    results = replayer.feed(*(cols[n] for n in cols), unit_keys=keys)
    return results + replayer.finish()
