"""Offsets between the core and tla/Coordinator.tla, both ways.

A key is ``(topic, partition)``; the spec holds per key the latest value ``[off, by]`` (``by``:
the place in ``writes`` of the in-flight write that set it, 0 when none) and, while writes of
it are in flight, ``committed[key] = [v, n]``. The core holds ``OffsetEntry`` objects and tells
which write set an entry by identity: the ``UndoOffsets`` of that write names the same object.
"""

from __future__ import annotations

from typing import Any, Callable

from groupcoord.adapters.tla.values import F, OutOfModel, fn
from groupcoord.core import events as ev
from groupcoord.core.commands import (
    OffsetCommitRecord,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    OffsetTombstone,
    Write,
)
from groupcoord.core.continuations import DropSimpleGroup, UndoOffsets
from groupcoord.core.errors import Error
from groupcoord.core.offsets import OffsetEntry

OFFSET_REQUESTS = (ev.OffsetCommit, ev.OffsetFetch, ev.OffsetDelete)


def _code(error) -> str:
    return Error.parse(error).name


def _value(entry: OffsetEntry | None):
    return None if entry is None else entry.offset


# ----------------------------------------------------------------------------- core -> spec


def setters(gid: str, writes: list) -> dict[int, int]:
    """id(entry) -> the place (1, 2, ...) of the in-flight write that set it; ``writes`` in order."""
    places: dict[int, int] = {}
    for place, w in enumerate(writes, start=1):
        for cb in w.continuations:
            if type(cb) is UndoOffsets:
                for g, _key, _before, after in cb.changes:
                    if g == gid and after is not None:
                        places[id(after)] = place
    return places


def read_state(snap, gid: str, writes: list) -> dict:
    """``offsets`` and ``committed`` of group ``gid``; ``writes``: the partition's in flight, in order."""
    places = setters(gid, writes)
    latest = snap.offsets.get(gid, {})
    offsets = {key: F(off=e.offset, by=places.get(id(e), 0)) for key, e in latest.items()}
    shadow = snap.committed_offsets.get(gid, {})
    committed = {key: F(v=_value(slot[0]), n=slot[1]) for key, slot in shadow.items()}
    return dict(offsets=fn(offsets), committed=fn(committed))


def read_callback(cb, gid: str, places: dict[int, int]) -> F | None:
    """The spec's callback for an offsets continuation (None: not one); ``places``: see setters."""
    kind = type(cb)
    if kind is UndoOffsets:
        if any(g != gid for g, *_ in cb.changes):
            raise OutOfModel("a write changing offsets of another group")
        return F(k="offsets", undo=frozenset(F(key=key, prev=_value(before), pby=places.get(id(before), 0),
                                               wrote=_value(after))
                                             for _, key, before, after in cb.changes))
    if kind is DropSimpleGroup and cb.group_id == gid:
        return F(k="drop_simple")
    return None


def read_record(r, gid: str) -> F | None:
    if isinstance(r, OffsetCommitRecord) and r.group_id == gid:
        return F(type="OffsetCommit", key=(r.topic, r.partition), off=r.offset)
    if isinstance(r, OffsetTombstone) and r.group_id == gid:
        return F(type="OffsetTombstone", key=(r.topic, r.partition))
    return None


def _parts(topics) -> tuple:
    return tuple(((t.name, p.partition_index), _code(p.error_code)) for t in topics for p in t.partitions)


def read_response(r, gid: str) -> F | None:
    if isinstance(r, OffsetCommitResponse):
        return F(api="OffsetCommit", parts=_parts(r.topics))
    if isinstance(r, OffsetDeleteResponse):
        return F(api="OffsetDelete", code=_code(r.error_code), parts=_parts(r.topics))
    if isinstance(r, OffsetFetchResponse):
        if [g.group_id for g in r.groups] != [gid]:
            raise OutOfModel("an OffsetFetch of other groups")
        g = r.groups[0]
        return F(api="OffsetFetch", code=_code(g.error_code), offs=fn(
            {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions}))
    return None


def _keys(topics) -> tuple:
    keys = tuple((name, p) for name, partitions in topics for p in partitions)
    if len(set(keys)) != len(keys):
        raise OutOfModel("a key named twice in one request")
    return keys


def read_event(event, gid: str, spec_id: Callable, spec_inst: Callable, metadata_max_bytes: int) -> F:
    """The spec's event for an offsets request of group ``gid``."""
    if isinstance(event, ev.OffsetCommit):
        keys = _keys((name, tuple(p.partition_index for p in parts)) for name, parts in event.topics)
        for _, parts in event.topics:
            for p in parts:
                if p.committed_metadata is not None and len(p.committed_metadata.encode("utf-16-le")) // 2 \
                        > metadata_max_bytes:
                    raise OutOfModel("offset metadata over offset.metadata.max.bytes (not in the spec)")
        offs = tuple(zip(keys, (p.committed_offset for _, parts in event.topics for p in parts)))
        return F(type="OffsetCommit", mid=spec_id(event.member_id), inst=spec_inst(event.group_instance_id),
                 gen=event.generation_id, v=event.version, offs=offs)
    if isinstance(event, ev.OffsetFetch):
        if [g.group_id for g in event.groups] != [gid]:
            raise OutOfModel("an OffsetFetch of other groups")
        topics = event.groups[0].topics
        return F(type="OffsetFetch", stable=event.require_stable, keys=None if topics is None else _keys(topics))
    if isinstance(event, ev.OffsetDelete):
        return F(type="OffsetDelete", keys=_keys(event.topics))
    raise TypeError(f"not an offsets request: {event!r}")


def aged(commands, gid: str, partition: int) -> tuple:
    """The keys an expiration tombstoned, in order (the ``aged`` of the spec's ExpireTimer)."""
    return tuple((r.topic, r.partition) for c in commands if isinstance(c, Write) and c.partition == partition
                 for r in c.records if isinstance(r, OffsetTombstone) and r.group_id == gid)


# ----------------------------------------------------------------------------- spec -> core


def entry(value: int) -> OffsetEntry:
    """A core entry for a spec value: committed at time 0, retention from the configuration."""
    return OffsetEntry(value, -1, "", 0, None)


class Built:
    """The core's offsets for a spec state: ``latest`` (key -> entry), ``committed``."""

    def __init__(self, s) -> None:
        offs = s["offsets"] if isinstance(s["offsets"], dict) else {}
        self.by = {key: e["by"] for key, e in offs.items()}
        self.latest = {key: entry(e["off"]) for key, e in offs.items()}
        cmt = s["committed"] if isinstance(s["committed"], dict) else {}
        self.committed = {key: (None if c["v"] is None else entry(c["v"]), c["n"]) for key, c in cmt.items()}
        self.written: dict = {}  # (place, key) -> the entry that write set: a later undo's previous one

    def undo(self, cb, gid: str, place: int) -> UndoOffsets:
        """The core's undo of the write at ``place`` in ``writes``: its value is the latest
        entry itself where that write set it."""
        changes = []
        for u in sorted(cb["undo"], key=lambda u: u["key"]):
            key, wrote = u["key"], u["wrote"]
            if wrote is None:
                after = None
            elif self.by.get(key) == place and self.latest[key].offset == wrote:
                after = self.latest[key]
            else:
                after = entry(wrote)
            self.written[place, key] = after
            before = None if u["prev"] is None else self.written.get((u["pby"], key)) or entry(u["prev"])
            changes.append((gid, key, before, after))
        return UndoOffsets(tuple(changes))


def expirable(s) -> list:
    """The keys the spec's ExpireTimer may age in state ``s`` (Expirable), in key order."""
    state, ptype, subs = s["state"], s["protocolType"], s["subs"]
    offs = s["offsets"] if isinstance(s["offsets"], dict) else {}
    base = ptype is None or state == "Empty" or (ptype == "consumer" and subs is not None and state == "Stable")
    if state in ("Absent", "Dead") or not base:
        return []
    subscribed: Callable[[Any], bool] = (lambda k: k[0] in subs) if subs is not None else (lambda k: ptype == "consumer")
    return sorted(k for k in offs if not subscribed(k))
