"""What the server logs: structured lines (``Log``: logfmt or JSON, one line per event) and
the groups' state changes (``GroupStateLog``)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

from groupcoord.core import events as ev
from groupcoord.core.commands import GroupMetadataRecord, GroupTombstone, Write

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


class Log:
    """Structured log lines on a stream: ``text`` is key=value (logfmt), ``json`` one object per
    line. Every line has ts, level and event."""

    def __init__(self, stream: TextIO | None = None, fmt: str = "text", level: str = "info") -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.fmt = fmt
        self.threshold = _LEVELS[level]

    def enabled(self, level: str) -> bool:
        return _LEVELS[level] >= self.threshold

    def __call__(self, level: str, event: str, **fields: Any) -> None:
        if _LEVELS[level] < self.threshold:
            return
        record = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z",
                  "level": level, "event": event, **fields}
        if self.fmt == "json":
            line = json.dumps(record, default=str, separators=(",", ":"))
        else:
            line = " ".join(f"{k}={_logfmt(v)}" for k, v in record.items())
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass


def _logfmt(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = value if isinstance(value, str) else (json.dumps(value, default=str) if isinstance(value, (list, dict, tuple)) else str(value))
    if text == "" or any(c in text for c in ' "=\n\t'):
        return json.dumps(text)
    return text


class NullLog(Log):
    def __init__(self) -> None:
        super().__init__(stream=None, level="error")
        self.threshold = 100

    def __call__(self, level: str, event: str, **fields: Any) -> None:
        return None


_STATE_CHANGING = (ev.JoinGroup, ev.SyncGroup, ev.LeaveGroup, ev.ConsumerGroupHeartbeat)


class GroupStateLog:
    """A ``group`` line at ``info`` whenever a group's state, generation or member count
    changes (what operators and the CLI tests follow), with ``reason``, the reason Kafka gives
    the rebalance, when the event started one (kafka_lines.KafkaGroupLog). Only the groups an
    event can have changed are looked at: most events (heartbeats, commits) change none."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self._view: dict[str, tuple] = {}  # group id -> (state, generation, members) last logged
        self._write_groups: dict[int, set] = {}  # write id -> the groups its records are about

    def reset(self) -> None:
        """A new coordinator instance: its write ids start again."""
        self._view = {}
        self._write_groups = {}

    def wrote(self, write: Write) -> None:
        groups = {r.group_id for r in write.records if type(r) in (GroupMetadataRecord, GroupTombstone)}
        if groups:
            self._write_groups[write.write_id] = groups

    def note(self, event: Any, coordinator: Any, reasons: dict[str, str] | None = None) -> None:
        kind = type(event)
        if kind in _STATE_CHANGING:
            gids: Any = (event.group_id,)
        elif kind is ev.TimerFired:
            gid = getattr(event.key, "group_id", None)
            gids = () if gid is None else (gid,)
        elif kind is ev.WriteCompleted or kind is ev.WriteFailed:
            gids = self._write_groups.pop(event.write_id, ())
        elif kind is ev.DeleteGroups:
            gids = event.groups_names
        elif kind is ev.UnloadPartition:
            gids = [g for g in self._view if coordinator.group(g) is None]
        else:
            return
        for gid in gids:
            group = coordinator.group(gid)
            # a KIP-848 consumer group has no generation: its group epoch stands for it
            view = None if group is None else (group.state.value, _generation(group), len(group.members))
            if self._view.get(gid) != view:
                if view is None:
                    self._view.pop(gid, None)
                    self.log("info", "group", group=gid, state="Dead")
                else:
                    self._view[gid] = view
                    reason = reasons.get(gid) if reasons else None
                    extra = {"reason": reason} if reason is not None else {}
                    self.log("info", "group", group=gid, state=view[0], generation=view[1], members=view[2],
                             protocol=getattr(group, "protocol_name", None), leader=getattr(group, "leader_id", None),
                             **extra)


def _generation(group: Any) -> int:
    """A classic group's generation, or a consumer group's (KIP-848) group epoch."""
    generation = getattr(group, "generation_id", None)
    return generation if generation is not None else getattr(group, "group_epoch", 0)
