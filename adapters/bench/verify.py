"""``groupcoord bench verify``: ``groupcoord verify`` at scale. The simulator's groups
(``groupcoord simulate``: seeded consumers of every strategy, static and dynamic, committing,
crashing, stalling past max.poll.interval, leaving, restarting) converted to what the wire
shows (``verify.from_trace``), each group checked on its own by the plain engine and by Spark
local[1] and local[2] in one run: groups/s and µs per observed pair, each as a ratio to the
plain engine; then the search's cost per group as the number of members joining at once grows.
Groups whose coordinator failed over are left out (one broker's recording cannot show another
taking over) and counted. Numbers as a table, then one JSON object per line, last."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from groupcoord.adapters.sim.simulator import simulate
from groupcoord.adapters.traces.trace_files import coordinator_config, read_manifest
from groupcoord.adapters.verify.from_core import observe
from groupcoord.adapters.verify.from_trace import observed_pairs
from groupcoord.adapters.verify.observed import dump, split
from groupcoord.adapters.verify.run import verify_plain, verify_spark
from groupcoord.adapters.verify.search import Settings, verify_group
from groupcoord.core.config import CoordinatorConfig

CONFIG = CoordinatorConfig(offsets_topic_num_partitions=1)
PROTOCOLS = [{"name": "range", "metadata": b"\x00\x01"}]
SIM_MEMBERS, SIM_DURATION_MS, SIM_SEED = 3, 30_000, 18


def _join(group: str, mid: str = "") -> dict:
    return {"group_id": group, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 20_000, "member_id": mid,
            "protocol_type": "consumer", "protocols": PROTOCOLS}


def simulated(groups: int, out: Path, seed: int = SIM_SEED) -> tuple[int, list[str], CoordinatorConfig]:
    """The simulator's ``groups`` groups as an observed recording in ``out``: (pairs written, the
    groups left out because their coordinator moved, the coordinator config they ran with)."""
    sim = out.parent / f"{out.name}-simulated"
    simulate(sim, groups=groups, members=SIM_MEMBERS, seed=seed, duration_ms=SIM_DURATION_MS, progress=None)
    moved: list[str] = []
    count = 0

    def counted():
        nonlocal count
        for obs in observed_pairs(sim, moved):
            count += 1
            yield obs

    dump(counted(), out)
    return count, moved, coordinator_config(read_manifest(sim))


def concurrent_joins(members: int) -> list:
    """``members`` consumers joining at once (all in flight together), then syncing."""
    reqs = [(1000, n, "JoinGroup", 3, _join("g"), f"c{n}") for n in range(1, members + 1)]
    return observe(reqs, CONFIG)


def run_verify_bench(quick: bool = False, groups: int | None = None) -> int:
    groups = groups or (200 if quick else 100_000)
    with tempfile.TemporaryDirectory(prefix="groupcoord-bench-verify-") as tmp:
        trace = Path(tmp) / "trace"
        pairs, moved, config = simulated(groups, trace)
        settings = Settings(config)
        checked = groups - len(moved)
        results, undecided = {}, {}
        for engine, master in (("plain", None), ("spark local[1]", "local[1]"), ("spark local[2]", "local[2]")):
            started = time.perf_counter()
            verdicts, _ = verify_plain(str(trace), settings) if master is None else \
                verify_spark(str(trace), settings, master)
            seconds = time.perf_counter() - started
            # the simulator's core is the spec: a divergence is a false alarm; a group the search's
            # budget could not decide is counted (and named), never taken as conforming
            bad = [v for v in verdicts if v.verdict == "diverges"]
            if bad or len(verdicts) != checked:
                print(f"{engine}: {len(bad)} groups diverging, {len(verdicts)} checked: {bad[:1]}")
                return 1
            undecided[engine] = sorted(v.group_id for v in verdicts if v.verdict == "inconclusive")
            results[engine] = (checked / seconds, seconds * 1e6 / pairs)
    print(f"{groups:,} simulated groups ({SIM_MEMBERS} members about, {SIM_DURATION_MS // 1000} s each, seed "
          f"{SIM_SEED}): {checked:,} checked, {len(moved):,} left out (coordinator failed over), "
          f"{pairs:,} observed pairs, none diverging")
    plain = results["plain"][0]
    for engine, (gps, us) in results.items():
        print(f"{engine:<15} {gps:>10,.0f} groups/s  {us:>8.1f} µs per pair  {gps / plain:.2f}x plain  "
              f"{len(undecided[engine])} inconclusive (search budget {settings.budget:,} states)"
              + (f": {', '.join(undecided[engine][:5])}" if undecided[engine] else ""))
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
                          "us_per_pair": round(us, 1), "ratio_to_plain": round(gps / plain, 2),
                          "inconclusive": len(undecided[engine])}))
    for members, nodes, seconds, verdict in cost:
        print(json.dumps({"name": f"verify_joining_{members}", "value": nodes, "unit": "states",
                          "ms": round(seconds * 1000, 1), "verdict": verdict}))
    return 0
