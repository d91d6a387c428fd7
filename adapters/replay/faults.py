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


class FaultError(ValueError):
    """The faults cannot be injected as asked (the command line reports it without a traceback)."""


def inject(src: str | Path, dst: str | Path, faults=FAULTS, *, skip: int = 0) -> dict[str, str]:
    """Copy the trace ``src`` to ``dst`` with each fault in a different group (see ``place``:
    the lowest groups, after ``skip``, first); returns group id -> fault. Loads the trace in
    memory: meant for test-sized traces. Raises ``FaultError`` before writing anything when
    ``dst`` overlaps ``src`` or no placement exists."""
    from groupcoord.adapters.traces import trace_files as trace_io

    src, dst = Path(src), Path(dst)
    _refuse_overlap(src, dst)
    faults = list(dict.fromkeys(faults))
    files = trace_io.trace_files(src)
    by_file: dict[Path, dict[str, list]] = {}
    for f in files:
        groups: dict[str, list] = {}
        for r in trace_io.read_records(f):
            groups.setdefault(r["group_id"], []).append(r)
        by_file[f] = groups
    candidates = [(f, g) for f in files for g in sorted(by_file[f])][skip:]
    takes = _takes(candidates, by_file)
    holder = place(len(candidates), faults, takes)
    stranded = [fault for fault in faults if fault not in holder]
    if stranded:
        raise FaultError(_no_placement(src, stranded, candidates, holder, takes))
    injected: dict[str, str] = {}
    for i, fault in sorted((i, fault) for fault, i in holder.items()):
        f, gid = candidates[i]
        INJECTORS[fault](by_file[f][gid])  # deterministic: the same edit as the trial
        injected[gid] = fault
    _write(src, dst, files, by_file)
    return injected


def _no_placement(src: Path, stranded: list[str], candidates: list, holder: dict, takes) -> str:
    """Why: the groups each stranded fault fits, all needed by the faults placed there."""
    held = {i: f for f, i in holder.items()}
    why = []
    for fault in stranded:
        fits = [i for i in range(len(candidates)) if takes(i, fault)]
        if not fits:
            why.append(f"{fault} fits no group")
            continue
        names = ", ".join(candidates[i][1] for i in fits[:3]) + (", ..." if len(fits) > 3 else "")
        others = ", ".join(sorted({held[i] for i in fits}))
        why.append(f"{fault} fits only {len(fits)} ({names}), needed by {others}")
    return (f"{src}: the faults cannot each get a group of their own: {'; '.join(why)}. Simulate more "
            f"or longer groups, or choose fewer with --faults")


def _refuse_overlap(src: Path, dst: Path) -> None:
    a, b = src.resolve(), dst.resolve()
    if a == b or a.is_relative_to(b) or b.is_relative_to(a):
        raise FaultError(f"--out {dst} overlaps the trace {src}: the copy would overwrite or mix with "
                         f"the source; choose a directory outside it")


def _takes(candidates: list, by_file: dict) -> Callable[[int, str], bool]:
    """Whether candidate group ``i`` takes ``fault`` (tried on a copy, remembered)."""
    seen: dict[tuple[int, str], bool] = {}

    def takes(i: int, fault: str) -> bool:
        if (i, fault) not in seen:
            f, gid = candidates[i]
            seen[i, fault] = INJECTORS[fault](json.loads(json.dumps(by_file[f][gid])))
        return seen[i, fault]

    return takes


def place(n: int, faults: list[str], takes: Callable[[int, str], bool]) -> dict[str, int]:
    """A fault -> group (0..n-1) placement, each fault in its own group: a maximum bipartite
    matching, so it places every fault whenever any placement does.

    First the greedy pass (groups in order, each taking the first pending fault it can), so a
    trace greedy could place comes out as it always did; then each fault it stranded is placed
    along an augmenting path (moving placed faults to other groups, lowest groups first)."""
    holder: dict[str, int] = {}
    for i in range(n):
        if len(holder) == len(faults):
            break
        fault = next((f for f in faults if f not in holder and takes(i, f)), None)
        if fault is not None:
            holder[fault] = i
    for fault in faults:
        if fault not in holder:
            _augment(fault, n, holder, {i: f for f, i in holder.items()}, takes, set())
    return holder


def _augment(fault: str, n: int, holder: dict, held: dict, takes, visited: set) -> bool:
    for i in range(n):
        if i in visited or not takes(i, fault):
            continue
        visited.add(i)
        other = held.get(i)
        if other is None or _augment(other, n, holder, held, takes, visited):
            holder[fault], held[i] = i, fault
            return True
    return False


def _write(src: Path, dst: Path, files: list[Path], by_file: dict) -> None:
    """Write the copy, whole or not at all (``stopping.written``: nothing is left when writing
    fails or the command is stopped)."""
    from groupcoord.adapters.traces import trace_files as trace_io
    from groupcoord.adapters.traces.records import TraceColumns
    from groupcoord.adapters.traces.stopping import written

    with written(dst, directory=True) as into:
        dumps = json.JSONEncoder(separators=(",", ":")).encode
        for f in files:
            cols = TraceColumns()
            for records in by_file[f].values():
                for r in records:
                    cols.append(r["group_id"], r["partition"], r["seq"], r["ts_ms"], r["dir"], r["type"],
                                dumps(r["data"]))
            trace_io.write_columns(into / (f.relative_to(src) if src.is_dir() else f.name), cols)
        manifest = trace_io.manifest_file(src)
        if manifest.exists():
            (into / trace_io.MANIFEST).write_text(manifest.read_text())
