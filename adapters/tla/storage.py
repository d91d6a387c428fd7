"""The spec's log (``stored`` in tla/Coordinator.tla): the group in __consumer_offsets as a load
reads it, ``[grp, simple, offs]``, and the records that change it. The replay and the trace
reader keep it beside the core (the core holds no storage): records of acknowledged writes are
applied, and a LoadPartition again must read back the same value through the core's loader.
"""

from __future__ import annotations

from groupcoord.adapters.tla.values import F, OutOfModel, fn

EMPTY = F(grp=None, simple=False, offs=())


def _offs(st: F) -> dict:
    return dict(st["offs"]) if isinstance(st["offs"], dict) else {}


def stored_of(rec: F | None) -> F:
    """StoredOf: the log an initial group record (LoadPartition's ``group``) stands for."""
    if rec is None:
        return EMPTY
    return F(grp=F({k: v for k, v in rec.items() if k != "offs"}), simple=False,
             offs=rec["offs"] if "offs" in rec else ())


def rec_of(st: F) -> F | None:
    """RecOf: the stored group as a LoadPartition event names it."""
    if st["grp"] is None:
        return None
    return st["grp"].set(offs=st["offs"]) if _offs(st) else st["grp"]


def apply(st: F, r: F) -> F:
    """Apply: one record (in the spec's form) appended to the log."""
    kind = r["type"]
    if kind == "GroupMetadata":
        members = tuple(F(id=m["id"], inst=m["inst"], protos=(((r["pname"] or ""), m["meta"]),), rto=m["rto"],
                          sto=m["sto"], asg=m["asg"]) for m in r["members"])
        return st.set(grp=F(gen=r["gen"], ptype=r["ptype"], pname=r["pname"], leader=r["leader"], members=members),
                      simple=False)
    if kind == "GroupTombstone":
        return EMPTY
    offs = _offs(st)
    if kind == "OffsetCommit":
        offs[r["key"]] = r["off"]
        return st.set(offs=fn(offs), simple=st["simple"] or st["grp"] is None)
    if kind == "OffsetTombstone":
        offs.pop(r["key"], None)
        return st.set(offs=fn(offs))
    raise OutOfModel(f"a record of type {kind} in the log")


def apply_all(st: F, records) -> F:
    for r in records:
        st = apply(st, r)
    return st


def with_writes(st: F, writes, n: int) -> F:
    """ApplyAll(st, RecordsOf(writes, n)): the log once the first ``n`` writes reached it."""
    return apply_all(st, [r for w in writes[:n] for r in w["recs"]])
