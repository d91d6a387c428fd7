"""``groupcoord simulate``: seeded consumers drive the core through a clock and are recorded.

Every group gets its own world (``world``): a coordinator instance serving that group alone
(group scope, spec/trace-format.md), its timers, a storage log for its offsets partition and a
set of consumers that behave like Kafka's Java client (``consumer``). A seeded schedule of
incidents happens to each group (``workload``); the run's summary is ``report``'s.

Everything is a function of (seed, group index), so a run is reproducible. The output is a
trace directory (``part-NNNNN.parquet`` or ``.jsonl`` files, each holding whole groups in
index order, and ``meta.json``) plus ``summary.json``: rebalances, the time groups spent not
Stable, partitions moved, per strategy. ``--jobs`` changes neither the records nor their
order (the part files read in name order), only how many part files they are split into:
about four per process, so that every process has files to write.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from groupcoord.adapters.sim.report import summarize
from groupcoord.adapters.sim.workload import GroupSpec, simulate_group
from groupcoord.adapters.traces.progress import Progress
from groupcoord.adapters.traces.records import TraceColumns
from groupcoord.adapters.traces.stopping import pool_results, worker_pool, written
from groupcoord.core.config import CoordinatorConfig

SUMMARY = "summary.json"
SIM_CONFIG = CoordinatorConfig(offsets_retention_minutes=2, offsets_retention_check_interval_ms=60_000)


def _simulate_file(args) -> tuple[str, dict, list[dict]]:
    path, indexes, seed, members, duration_ms, incidents, config_kafka = args
    from groupcoord.adapters.traces.trace_files import write_columns

    config = CoordinatorConfig.from_kafka(config_kafka)
    columns = TraceColumns()
    per_group = []
    for index in indexes:
        spec = GroupSpec(seed, index, members, duration_ms, incidents)
        stats = simulate_group(spec, config, columns)
        stats["group_id"] = spec.group_id
        per_group.append(stats)
    write_columns(path, columns)
    return path, {"records": len(columns)}, per_group


def simulate(out: str | os.PathLike, *, groups: int, members: int, seed: int, duration_ms: int = 120_000,
             incidents_per_min: float = 2.0, fmt: str = "parquet", groups_per_file: int | None = None,
             jobs: int = 1, config: CoordinatorConfig = SIM_CONFIG, progress: bool | None = None) -> dict:
    """Simulate ``groups`` groups into the trace directory ``out``; returns the summary."""
    _check_sizes(groups=groups, members=members, duration_ms=duration_ms, jobs=jobs)
    if not incidents_per_min >= 0:
        raise ValueError(f"incidents_per_min must be at least 0, not {incidents_per_min}")
    out = Path(out)
    # written whole or not at all: into a temporary beside it, renamed at the end (the old part files go)
    with written(out, directory=True, stale=lambda name: name.startswith("part-")) as into:
        return _simulate_into(into, out, groups=groups, members=members, seed=seed, duration_ms=duration_ms,
                              incidents_per_min=incidents_per_min, fmt=fmt, groups_per_file=groups_per_file,
                              jobs=jobs, config=config, progress=progress)


def _simulate_into(into: Path, out: Path, *, groups: int, members: int, seed: int, duration_ms: int,
                   incidents_per_min: float, fmt: str, groups_per_file: int | None, jobs: int,
                   config: CoordinatorConfig, progress: bool | None) -> dict:
    from groupcoord.adapters.traces.trace_files import write_manifest

    suffix = {"parquet": ".parquet", "jsonl": ".jsonl"}[fmt]
    if groups_per_file is None:
        groups_per_file = max(1, min(5000, -(-groups // max(1, 4 * jobs))))
    config_kafka = {k: v for k, v in config.to_kafka().items() if v != CoordinatorConfig().to_kafka()[k]}
    tasks = []
    for n, start in enumerate(range(0, groups, groups_per_file)):
        indexes = list(range(start, min(groups, start + groups_per_file)))
        tasks.append((str(into / f"part-{n:05d}{suffix}"), indexes, seed, members, duration_ms, incidents_per_min,
                      config_kafka))
    bar = Progress("simulate", total=groups, unit="groups", enabled=progress)
    started = time.perf_counter()
    per_group: list[dict] = []
    records = 0
    if jobs > 1 and len(tasks) > 1:
        with worker_pool(jobs) as pool:
            for path, info, stats in pool_results(pool, _simulate_file, tasks):
                per_group += stats
                records += info["records"]
                bar.advance(len(stats))
    else:
        for task in tasks:
            path, info, stats = _simulate_file(task)
            per_group += stats
            records += info["records"]
            bar.advance(len(stats))
    bar.done()
    elapsed = time.perf_counter() - started
    write_manifest(into, scope="group", outputs=True, config=config, groups_span_files=False,
                   generator={"command": "simulate", "groups": groups, "members": members, "seed": seed,
                              "duration_ms": duration_ms, "incidents_per_min": incidents_per_min})
    summary = summarize(per_group)
    summary.update({"groups": groups, "records": records, "files": len(tasks), "seed": seed,
                    "seconds": round(elapsed, 2), "trace": str(out)})
    (into / SUMMARY).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def _check_sizes(**sizes: int) -> None:
    """Refuse sizes below 1 before anything is written (0 groups would leave an empty trace)."""
    for name, n in sizes.items():
        if n < 1:
            raise ValueError(f"{name} must be at least 1, not {n}")
