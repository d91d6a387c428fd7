"""``groupcoord bench verify``: ``groupcoord verify`` at scale. Observed traces of many groups
(one group's life as the core answers it, copied under other group ids: each copy is checked
on its own), checked by the plain engine and by Spark local[1] and local[2] in one run:
groups/s and µs per observed pair, each as a ratio to the plain engine; then the search's cost
per group as the number of members joining at once grows. Numbers as a table, then one JSON
object per line, last."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import attrs

from groupcoord.core.config import CoordinatorConfig
from groupcoord.adapters.verify.from_core import observe
from groupcoord.adapters.verify.observed import dump, split
from groupcoord.adapters.verify.run import verify_plain, verify_spark
from groupcoord.adapters.verify.search import Settings, verify_group

CONFIG = CoordinatorConfig(offsets_topic_num_partitions=1)
PROTOCOLS = [{"name": "range", "metadata": b"\x00\x01"}]


def _join(group: str, mid: str = "") -> dict:
    return {"group_id": group, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 20_000, "member_id": mid,
            "protocol_type": "consumer", "protocols": PROTOCOLS}


def life(group: str = "g") -> list[tuple]:
    """Two consumers join, sync, heartbeat, commit, fetch; one leaves, the other rejoins alone."""
    def body(**b):
        return {"group_id": group, **b}

    commit = body(generation_id_or_member_epoch=1, member_id="c1-u1", topics=[
        {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42, "committed_metadata": ""}]}])
    return [
        (1000, 1, "JoinGroup", 5, _join(group), "c1"), (1010, 1, "JoinGroup", 5, _join(group, "c1-u1"), "c1"),
        (1500, 2, "JoinGroup", 5, _join(group), "c2"), (1510, 2, "JoinGroup", 5, _join(group, "c2-u3"), "c2"),
        (9000, 1, "SyncGroup", 5, body(generation_id=1, member_id="c1-u1", assignments=[
            {"member_id": "c1-u1", "assignment": b"a1"}, {"member_id": "c2-u3", "assignment": b"a2"}]), "c1"),
        (9000, 2, "SyncGroup", 5, body(generation_id=1, member_id="c2-u3", assignments=[]), "c2"),
        *[(12000 + 3000 * k, 1 + k % 2, "Heartbeat", 4, body(generation_id=1, member_id=("c1-u1", "c2-u3")[k % 2]),
           ("c1", "c2")[k % 2]) for k in range(6)],
        (30000, 1, "OffsetCommit", 8, commit, "c1"),
        (30100, 1, "OffsetFetch", 7, body(topics=None, require_stable=True), "c1"),
        (31000, 2, "LeaveGroup", 4, body(members=[{"member_id": "c2-u3"}]), "c2"),
        (32000, 1, "JoinGroup", 5, _join(group, "c1-u1"), "c1"),
    ]


def copies(groups: int) -> list:
    """``groups`` copies of one group's pairs, each under its own group id, in time order."""
    template = observe(life("g"), CONFIG)
    out = []
    for i in range(groups):
        gid = f"group-{i:06d}"
        for o in template:
            out.append(attrs.evolve(o, index=len(out) + 1, request={**o.request, "group_id": gid}))
    return sorted(out, key=lambda o: (o.recv_us, o.index))


def concurrent_joins(members: int) -> list:
    """``members`` consumers joining at once (all in flight together), then syncing."""
    reqs = [(1000, n, "JoinGroup", 3, _join("g"), f"c{n}") for n in range(1, members + 1)]
    return observe(reqs, CONFIG)


def run_verify_bench(quick: bool = False, groups: int | None = None) -> int:
    groups = groups or (200 if quick else 100_000)
    settings = Settings(CONFIG)
    with tempfile.TemporaryDirectory(prefix="groupcoord-bench-verify-") as tmp:
        trace = Path(tmp) / "trace"
        pairs = copies(groups)
        dump(pairs, trace)
        results = {}
        for engine, master in (("plain", None), ("spark local[1]", "local[1]"), ("spark local[2]", "local[2]")):
            started = time.perf_counter()
            verdicts, _ = verify_plain(str(trace), settings) if master is None else \
                verify_spark(str(trace), settings, master)
            seconds = time.perf_counter() - started
            bad = [v for v in verdicts if v.verdict != "conforms"]
            if bad or len(verdicts) != groups:
                print(f"{engine}: {len(bad)} groups not conforming, {len(verdicts)} checked: {bad[:1]}")
                return 1
            results[engine] = (groups / seconds, seconds * 1e6 / len(pairs))
    print(f"{groups:,} groups, {len(pairs):,} observed pairs")
    plain = results["plain"][0]
    for engine, (gps, us) in results.items():
        print(f"{engine:<15} {gps:>10,.0f} groups/s  {us:>8.1f} µs per pair  {gps / plain:.2f}x plain")
    print("search cost per group as members join at once:")
    cost = []
    for members in ((2, 5, 10) if quick else (2, 5, 10, 50, 100)):
        unit = split(concurrent_joins(members)).units["g"]
        started = time.perf_counter()
        v = verify_group("g", unit, Settings(CONFIG, budget=1_000_000))
        seconds = time.perf_counter() - started
        cost.append((members, v.nodes, seconds, v.verdict))
        print(f"  {members:>3} members: {v.nodes:>8,} states, {seconds * 1000:>9.1f} ms ({v.verdict})")
    for engine, (gps, us) in results.items():
        print(json.dumps({"name": f"verify_{engine.replace(' ', '_')}", "value": round(gps), "unit": "groups/s",
                          "us_per_pair": round(us, 1), "ratio_to_plain": round(gps / plain, 2)}))
    for members, nodes, seconds, verdict in cost:
        print(json.dumps({"name": f"verify_joining_{members}", "value": nodes, "unit": "states",
                          "ms": round(seconds * 1000, 1), "verdict": verdict}))
    return 0
