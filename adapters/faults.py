"""Inject faults into a group-scoped trace, each into its own group (tests and demos).

Each fault edits what a broken coordinator (or recorder) would have written; the replay
must flag exactly the groups that got one:

========================  ==================================================  =========================
fault                     edit                                                flagged by
========================  ==================================================  =========================
two_leaders               a follower's JoinGroup answer names itself leader   single_leader
                          and carries the member list
generation_backwards      a JoinGroup answer goes below a generation the      generation_not_backwards
                          instance already announced
assignment_to_non_member  the leader's assignment record assigns to an        assignment_to_member
                          extra, unknown member
success_to_fenced         a heartbeat comes from an unknown member id; the    success_to_fenced_member
                          recorded answer stays NONE
stale_generation          a heartbeat names the previous generation; the      stale_generation_success
                          recorded answer stays NONE
out_of_order              two inputs swap sequence numbers                    time_order
========================  ==================================================  =========================
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from groupcoord.core.replay import TraceColumns

FAULTS = ("two_leaders", "generation_backwards", "assignment_to_non_member", "success_to_fenced",
          "stale_generation", "out_of_order")
EXPECTED_CHECK = {"two_leaders": "single_leader", "generation_backwards": "generation_not_backwards",
                  "assignment_to_non_member": "assignment_to_member", "success_to_fenced": "success_to_fenced_member",
                  "stale_generation": "stale_generation_success", "out_of_order": "time_order"}


def _join_answers(records):
    for i, r in enumerate(records):
        if r["type"] == "Respond" and r["data"]["response"]["type"] == "JoinGroupResponse":
            body = r["data"]["response"]["data"]
            if body["error_code"] == "NONE":
                yield i, body


def two_leaders(records) -> bool:
    for i, body in _join_answers(records):
        if body["member_id"] != body["leader"] and not body["members"]:
            leader_lists = [b["members"] for _, b in _join_answers(records)
                            if b["generation_id"] == body["generation_id"] and b["members"]]
            body["leader"] = body["member_id"]
            body["members"] = leader_lists[0] if leader_lists else [
                {"type": "JoinGroupResponseMember", "data": {"member_id": body["member_id"],
                                                             "group_instance_id": None, "metadata": {"hex": ""}}}]
            return True
    return False


def generation_backwards(records) -> bool:
    seen = -1
    for i, r in enumerate(records):
        if r["type"] == "LoadPartition":
            seen = -1  # a new instance may announce older generations
        if r["type"] == "Respond" and r["data"]["response"]["type"] == "JoinGroupResponse":
            body = r["data"]["response"]["data"]
            if body["error_code"] != "NONE":
                continue
            if seen >= 1 and body["generation_id"] > seen:
                body["generation_id"] = seen - 1
                return True
            seen = max(seen, body["generation_id"])
    return False


def assignment_to_non_member(records) -> bool:
    for r in records:
        if r["type"] != "Write":
            continue
        for rec in r["data"]["records"]:
            if rec["type"] == "GroupMetadataRecord" and rec["data"]["members"]:
                ghost = json.loads(json.dumps(rec["data"]["members"][0]))
                ghost["data"]["member_id"] = "ghost-member-0000"
                ghost["data"]["group_instance_id"] = None
                rec["data"]["members"].append(ghost)
                return True
    return False


def _heartbeat_answered_none(records):
    for i, r in enumerate(records):
        if r["dir"] == "in" and r["type"] == "Heartbeat" and r["data"]["generation_id"] >= 1:
            for out in records[i + 1:]:
                if out["dir"] == "in":
                    break
                resp = out["data"].get("response") if out["type"] == "Respond" else None
                if resp and resp["type"] == "HeartbeatResponse" and resp["data"]["error_code"] == "NONE":
                    yield r
                    break


def success_to_fenced(records) -> bool:
    for r in _heartbeat_answered_none(records):
        r["data"]["member_id"] = "fenced-member-0000"
        r["data"]["group_instance_id"] = None
        return True
    return False


def stale_generation(records) -> bool:
    for r in _heartbeat_answered_none(records):
        if r["data"]["generation_id"] >= 2:
            r["data"]["generation_id"] -= 1
            return True
    return False


def out_of_order(records) -> bool:
    inputs = [i for i, r in enumerate(records) if r["dir"] == "in"]
    for a, b in zip(inputs[5:], inputs[6:]):
        if records[a]["ts_ms"] < records[b]["ts_ms"] and b - a > 1:
            records[a]["seq"], records[b]["seq"] = records[b]["seq"], records[a]["seq"]
            return True
    return False


INJECTORS: dict[str, Callable[[list], bool]] = {f: globals()[f] for f in FAULTS}


def inject(src: str | Path, dst: str | Path, faults=FAULTS, *, skip: int = 0) -> dict[str, str]:
    """Copy the trace ``src`` to ``dst`` with each fault in a different group (the first group,
    after ``skip``, where it applies); returns group id -> fault. Loads the trace in memory:
    meant for test-sized traces."""
    from groupcoord.adapters import trace_io

    src, dst = Path(src), Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    files = trace_io.trace_files(src)
    by_file: dict[Path, dict[str, list]] = {}
    for f in files:
        groups: dict[str, list] = {}
        for r in trace_io.read_records(f):
            groups.setdefault(r["group_id"], []).append(r)
        by_file[f] = groups
    injected: dict[str, str] = {}
    pending = list(faults)
    candidates = [(f, g) for f in files for g in sorted(by_file[f])][skip:]
    for f, gid in candidates:
        if not pending:
            break
        records = by_file[f][gid]
        for fault in list(pending):
            trial = json.loads(json.dumps(records))
            if INJECTORS[fault](trial):
                by_file[f][gid] = trial
                injected[gid] = fault
                pending.remove(fault)
                break
    if pending:
        raise ValueError(f"no group of {src} takes the faults {pending}")
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    for f in files:
        cols = TraceColumns()
        for gid, records in by_file[f].items():
            for r in records:
                cols.append(r["group_id"], r["partition"], r["seq"], r["ts_ms"], r["dir"], r["type"], dumps(r["data"]))
        trace_io.write_columns(dst / f.relative_to(src), cols)
    manifest = src / trace_io.MANIFEST
    if manifest.exists():
        (dst / trace_io.MANIFEST).write_text(manifest.read_text())
    return injected
