"""``groupcoord bench replay``: Spark replay against a plain replay of the same trace.

1. A trace of ``--records`` trace records (events and the outputs recorded with them)
   across ``--groups`` groups, made by the simulator (cached in ``--workdir``; the duration
   of each group's life is calibrated on a small run to hit the record count).
2. Four measurements, each in its own process tree pinned with ``taskset`` (so a "core"
   is a core: an unpinned local[1] Spark job also uses a second CPU for its JVM):
   ``plain_1`` (one process: pyarrow read, sort, replay), ``plain_2`` (two processes),
   ``spark_1`` (local[1]) and ``spark_2`` (local[2]); Spark's figures are taken once the
   session is up and warmed by a small replay.
3. JSON lines: one per measurement (seconds, records/s, events/s), then the ratios against
   the goals: Spark >= 70 % of plain on the same cores, 1 -> 2 cores >= 1.7x, 10 M records
   in < 30 s on 2 cores.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_WORKDIR = os.environ.get("GROUPCOORD_BENCH_DIR", "/tmp/groupcoord-bench")


def _emit(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def make_trace(workdir: Path, records: int, groups: int, members: int, seed: int, jobs: int) -> Path:
    from . import simulator

    path = workdir / f"trace-{records}-{groups}-{members}-{seed}"
    done = path / "summary.json"
    if done.exists():
        return path
    calib = workdir / "calibration"
    probe_groups = min(groups, 200)
    s = simulator.simulate(calib, groups=probe_groups, members=members, seed=seed + 1, duration_ms=60_000,
                           jobs=1, progress=False)
    per_group_second = s["records"] / probe_groups / 60.0
    duration_ms = max(5000, int(records / groups / per_group_second * 1000))
    shutil.rmtree(calib, ignore_errors=True)
    print(f"simulating {groups:,} groups x {duration_ms / 1000:.1f}s (~{records:,} records)...", file=sys.stderr)
    s = simulator.simulate(path, groups=groups, members=members, seed=seed, duration_ms=duration_ms, jobs=jobs,
                           progress=None)
    _emit({"name": "trace", "path": str(path), "records": s["records"], "events": s["totals"]["inputs"],
           "groups": groups, "duration_ms": duration_ms, "simulate_seconds": s["seconds"]})
    return path


def _pinned(cpus: str) -> list[str]:
    return ["taskset", "-c", cpus] if shutil.which("taskset") and len(os.sched_getaffinity(0)) > 1 else []


def measure(kind: str, cores: int, trace: str, warmup: str | None) -> dict:
    """Runs inside the pinned process: one measurement, as a dict."""
    from . import replay_job

    out = f"{trace}.bench-{kind}-{cores}"
    if kind == "plain":
        s = replay_job.plain_replay(trace, out, processes=cores)
    else:
        spark = replay_job.spark_session(f"local[{cores}]", partitions=4 * cores)
        try:
            if warmup:
                replay_job.spark_replay(spark, warmup, out + "-warmup", partitions=4 * cores)
            s = replay_job.spark_replay(spark, trace, out, partitions=4 * cores)
        finally:
            spark.stop()
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out + "-warmup", ignore_errors=True)
    return {"name": f"{kind}_{cores}", "records": s["records"], "events": s["inputs"], "groups": s["units"],
            "findings": s["units_with_findings"], "seconds": s["seconds"],
            "records_per_s": round(s["records"] / s["seconds"]), "events_per_s": round(s["inputs"] / s["seconds"])}


def run_replay_bench(records: int = 10_000_000, groups: int = 100_000, members: int = 3, seed: int = 7,
                     trace: str | None = None, workdir: str = DEFAULT_WORKDIR, quick: bool = False,
                     engines: tuple[str, ...] = ("plain", "spark"), jobs: int = 2) -> int:
    if quick:
        records, groups = min(records, 40_000), min(groups, 200)  # a smoke run
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    path = Path(trace) if trace else make_trace(work, records, groups, members, seed, jobs)
    warmup = None
    if "spark" in engines:
        warmup = str(make_trace(work, 20_000, 100, members, seed + 2, 1))
    results = {}
    for kind in engines:
        for cores, cpus in ((1, "0"), (2, "0,1")):
            cmd = [*_pinned(cpus), sys.executable, "-m", "groupcoord.adapters.replay_bench", "--measure", kind,
                   "--cores", str(cores), str(path)] + (["--warmup", warmup] if warmup and kind == "spark" else [])
            started = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode != 0 or not lines:
                sys.stderr.write(proc.stderr[-4000:])
                _emit({"name": f"{kind}_{cores}", "error": f"exit {proc.returncode}"})
                continue
            result = json.loads(lines[-1])
            result["pinned_cpus"] = cpus if _pinned(cpus) else None
            result["wall_seconds"] = round(time.perf_counter() - started, 1)
            results[result["name"]] = result
            _emit(result)
    ratios = {}
    if {"plain_1", "spark_1"} <= results.keys():
        ratios["spark_vs_plain_1core"] = round(results["spark_1"]["records_per_s"] / results["plain_1"]["records_per_s"], 3)
    if {"plain_2", "spark_2"} <= results.keys():
        ratios["spark_vs_plain_2core"] = round(results["spark_2"]["records_per_s"] / results["plain_2"]["records_per_s"], 3)
    if {"spark_1", "spark_2"} <= results.keys():
        ratios["spark_scaling_1_to_2"] = round(results["spark_2"]["records_per_s"] / results["spark_1"]["records_per_s"], 3)
    if {"plain_1", "plain_2"} <= results.keys():
        ratios["plain_scaling_1_to_2"] = round(results["plain_2"]["records_per_s"] / results["plain_1"]["records_per_s"], 3)
    best2 = results.get("spark_2")
    if best2:
        ratios["spark_2core_seconds_per_10M_records"] = round(best2["seconds"] * 10_000_000 / best2["records"], 1)
    goals = {"spark_at_least_70pct_of_plain": all(v >= 0.7 for k, v in ratios.items() if k.startswith("spark_vs")),
             "scaling_at_least_1.7x": ratios.get("spark_scaling_1_to_2", 0) >= 1.7,
             "10M_under_30s_on_2_cores": ratios.get("spark_2core_seconds_per_10M_records", 1e9) < 30}
    _emit({"name": "ratios", **ratios})
    _emit({"name": "goals", **goals})
    return 0 if results else 1


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="replay_bench")
    p.add_argument("trace")
    p.add_argument("--measure", choices=["plain", "spark"], required=True)
    p.add_argument("--cores", type=int, default=1)
    p.add_argument("--warmup", default=None)
    a = p.parse_args(argv)
    _emit(measure(a.measure, a.cores, a.trace, a.warmup))
    return 0


if __name__ == "__main__":
    sys.exit(main())
