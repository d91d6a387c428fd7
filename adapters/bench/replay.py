"""``groupcoord bench replay``: Spark replay against a plain replay of the same trace.

1. A trace of ``--records`` trace records (events and the outputs recorded with them)
   across ``--groups`` groups, made by the simulator (cached in ``--workdir``; the duration
   of each group's life is calibrated on a small run to hit the record count).
2. Four measurements, each in its own process tree pinned with ``taskset`` (so a "core"
   is a core: an unpinned local[1] Spark job also uses a second CPU for its JVM):
   ``plain_1`` (one process: pyarrow read, sort, replay), ``plain_2`` (two processes),
   ``spark_1`` (local[1]) and ``spark_2`` (local[2]); every figure is taken after a small
   replay in the same process (Spark's session up, pyarrow's and the replay's one-off set-up
   done), so it is the cost of the trace's records.
3. JSON lines: one per measurement (seconds, records/s, events/s; ``cpu_seconds`` of the
   measurement's whole process tree, records per CPU-second and ``cores_busy`` = CPU / wall),
   then the ratios against the goals: the plain replay's CPU per record <= 2x the core
   alone's (``plain_vs_core_cpu_per_record``), Spark >= 70 % of plain on the same cores, 1 -> 2 cores
   >= 1.7x, 10 M records in < 30 s on 2 cores. The goals are judged on wall-clock figures;
   the ``*_cpu`` ratios say what the work cost when the machine is shared (a pinned job
   waits for its CPU while another process runs on it, and ``cores_busy`` drops).
4. ``plain_1_split`` (with engine ``plain``): the plain replay on one pinned CPU again,
   its phases timed (``replay/phases.py``: columns, events, core, compare, invariants,
   records), as shares of the run and CPU microseconds per record; the clocks cost some time,
   so ``plain_1``'s own figures are taken without them.
5. ``core_1`` (engine ``core``, one pinned CPU): the coordinator core alone on the inputs of
   the trace's first files (about ``CORE_SAMPLE_RECORDS`` records, decoded before the clock
   starts): no checks, no comparison, no I/O. Its cost per record, halved for two perfect
   cores, is the floor under any replay of this core on 2 cores (``ratios``:
   ``core_alone_2core_seconds_per_10M_records``), so the 30-second goal can be judged
   against what the core itself needs. What any replay pays besides the core is timed too,
   each part alone (``floor_us_per_record_cpu``: the columns read, the inputs decoded, the
   core's outputs serialised for comparison): with the core, ``floor_vs_core_cpu_per_record``
   is a floor under the plain replay's ratio, before any bookkeeping or invariant check.
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
CORE_SAMPLE_RECORDS = 1_000_000  # about 350 k decoded inputs held in memory (~1 GB)


def _emit(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def make_trace(workdir: Path, records: int, groups: int, members: int, seed: int, jobs: int,
               name: str = "trace") -> Path:
    from groupcoord.adapters.sim import simulator

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
    _emit({"name": name, "path": str(path), "records": s["records"], "events": s["totals"]["inputs"],
           "groups": groups, "duration_ms": duration_ms, "simulate_seconds": s["seconds"]})
    return path


def _pinned(cpus: str) -> list[str]:
    return ["taskset", "-c", cpus] if shutil.which("taskset") and len(os.sched_getaffinity(0)) > 1 else []


def tree_cpu_seconds(root: int | None = None) -> float | None:
    """CPU seconds (user + system) used so far by a process and its descendants: the live
    ones' own time plus what each has collected from children it reaped (so pool workers
    and Spark's Python workers count once they exit). None without /proc."""
    root = os.getpid() if root is None else root
    ticks = os.sysconf("SC_CLK_TCK")
    parent, used = {}, {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid = int(name)
        parent[pid] = int(fields[1])
        used[pid] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    total = 0
    for pid, ticks_used in used.items():
        p = pid
        while p not in (root, 0, 1) and p in parent:
            p = parent[p]
        if p == root:
            total += ticks_used
    return total / ticks


def core_alone(trace: str, sample_records: int = CORE_SAMPLE_RECORDS) -> dict:
    """The core alone on the inputs of whole trace files, taken in order until
    ``sample_records`` records: every input decoded first, then only ``Coordinator.handle``
    is timed, one fresh coordinator per group (and per failover, as the replay does). Needs a
    group-scoped trace whose manifest promises that no group spans files."""
    from groupcoord.adapters.bench.core import run_inputs, trace_inputs

    config, inputs, records = trace_inputs(trace, sample_records)
    started, cpu_started = time.perf_counter(), time.process_time()
    run_inputs(config, inputs)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    n_inputs = sum(len(u) for u in inputs)
    return {"records": records, "inputs": n_inputs, "units": len(inputs), "units_with_findings": 0,
            "seconds": round(seconds, 3), "cpu_seconds": cpu_seconds,
            "floor_cpu_seconds": replay_floor_cpu_seconds(trace, records, config, inputs)}


def replay_floor_cpu_seconds(trace: str, records: int, config, inputs: list[list]) -> dict[str, float]:
    """What any replay of these records pays besides the core, each part timed alone: the
    trace files' columns read (``columns``) and every input record made an event
    (``decode``), as the plain replay reads and decodes them, and every output the core gives
    for them serialised for the comparison with its record (``serialise``: the replay's fast
    comparison, without the comparing). No grouping, bookkeeping or check."""
    from groupcoord.adapters.bench.core import run_inputs
    from groupcoord.adapters.replay.partition import json_dumper, json_loader
    from groupcoord.adapters.traces.records import PLAIN_DATA, decode_event, plain_data, plain_default
    from groupcoord.adapters.traces.trace_files import iter_batches, trace_files

    loads, dumps = json_loader(), json_dumper()
    clock = time.process_time
    columns_s = decode_s = 0.0
    read = 0
    for f in trace_files(trace):
        if read >= records:
            break
        started = clock()
        batches = list(iter_batches(f))
        columns_s += clock() - started
        started = clock()
        for cols in batches:
            read += len(cols["seq"])
            for d, tn, data in zip(cols["dir"], cols["type"], cols["data"]):
                if d == "in":
                    decode_event(tn, data, loads)
        decode_s += clock() - started
    outputs: list = []
    run_inputs(config, inputs, emitted=outputs.extend)
    serialise_s = float("nan")
    if dumps is not None:
        started = clock()
        for command in outputs:
            dumps(PLAIN_DATA.get(type(command), plain_data)(command), default=plain_default)
        serialise_s = clock() - started
    return {"columns": columns_s, "decode": decode_s, "serialise": serialise_s}


def measure(kind: str, cores: int, trace: str, warmup: str | None) -> dict:
    """Runs inside the pinned process: one measurement, as a dict. ``cpu_seconds`` is the CPU
    time of the whole process tree (driver, JVM, Python workers) during the measured replay:
    on a shared machine it says what the replay cost where wall time says how long it
    waited for a CPU."""
    from groupcoord.adapters.replay.plain_job import plain_replay
    from groupcoord.adapters.replay.spark_job import spark_replay
    from groupcoord.adapters.traces.spark_session import spark_session

    out = f"{trace}.bench-{kind}-{cores}"
    split = None
    if kind == "split":  # the plain replay on one core, its phases timed (phases.py)
        from groupcoord.adapters.replay.phases import timed_phases

        if warmup:
            plain_replay(warmup, out + "-warmup", processes=1)
        with timed_phases() as clock:
            cpu0 = tree_cpu_seconds()
            s = plain_replay(trace, out, processes=1)
            cpu1 = tree_cpu_seconds()
        split = clock.split(s["seconds"])
    elif kind == "core":
        s = core_alone(trace)
        cpu0, cpu1 = 0.0, s.pop("cpu_seconds")  # the timed loop only, not the decoding before it
        floor_us = {k: v / s["records"] * 1e6 for k, v in s.pop("floor_cpu_seconds").items()}
    elif kind == "plain":
        if warmup:
            plain_replay(warmup, out + "-warmup", processes=1)
        cpu0 = tree_cpu_seconds()
        s = plain_replay(trace, out, processes=cores)
        cpu1 = tree_cpu_seconds()
    else:
        spark = spark_session(f"local[{cores}]", partitions=4 * cores)
        try:
            if warmup:
                spark_replay(spark, warmup, out + "-warmup", partitions=4 * cores)
            cpu0 = tree_cpu_seconds()
            s = spark_replay(spark, trace, out, partitions=4 * cores)
            cpu1 = tree_cpu_seconds()
        finally:
            spark.stop()
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out + "-warmup", ignore_errors=True)
    result = {"name": "plain_1_split" if kind == "split" else f"{kind}_{cores}", "records": s["records"], "events": s["inputs"], "groups": s["units"],
              "findings": s["units_with_findings"], "seconds": s["seconds"],
              "records_per_s": round(s["records"] / s["seconds"]), "events_per_s": round(s["inputs"] / s["seconds"])}
    if cpu0 is not None and cpu1 is not None and cpu1 > cpu0:
        cpu = cpu1 - cpu0
        result.update(cpu_seconds=round(cpu, 2), records_per_cpu_s=round(s["records"] / cpu),
                      us_per_record_cpu=round(cpu / s["records"] * 1e6, 2),
                      cores_busy=round(cpu / s["seconds"], 2))
    if kind == "core":
        result["floor_us_per_record_cpu"] = {k: round(v, 2) for k, v in floor_us.items()}
    if split is not None:
        # each phase's share of the run (clocks in the pinned process), and that share of the
        # run's CPU per record: a CPU shared with other work stretches every phase alike
        share = {k: v / s["seconds"] for k, v in split.items()}
        result["phase_share"] = {k: round(v, 3) for k, v in share.items()}
        if "us_per_record_cpu" in result:
            result["phase_cpu_us_per_record"] = {k: round(v * result["us_per_record_cpu"], 2)
                                                 for k, v in share.items()}
    return result


def run_replay_bench(records: int = 10_000_000, groups: int = 100_000, members: int = 3, seed: int = 7,
                     trace: str | None = None, workdir: str = DEFAULT_WORKDIR, quick: bool = False,
                     engines: tuple[str, ...] = ("plain", "spark", "core"), jobs: int = 2) -> int:
    if quick:
        records, groups = min(records, 40_000), min(groups, 200)  # a smoke run
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    path = Path(trace) if trace else make_trace(work, records, groups, members, seed, jobs)
    warmup = None
    if "spark" in engines or "plain" in engines:
        warmup = str(make_trace(work, 20_000, 100, members, seed + 2, 1, name="warmup_trace"))
    results = {}
    # the plain replay's phases timed on one core, after its own figures (clocks cost time)
    kinds = [k for e in engines for k in ((e, "split") if e == "plain" else (e,))]
    for kind in kinds:
        for cores, cpus in ((1, "0"),) if kind in ("core", "split") else ((1, "0"), (2, "0,1")):
            cmd = [*_pinned(cpus), sys.executable, "-m", "groupcoord.adapters.bench.replay", "--measure", kind,
                   "--cores", str(cores), str(path)] + (["--warmup", warmup] if warmup and kind != "core" else [])
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
    cpu = {k: r["records_per_cpu_s"] for k, r in results.items() if "records_per_cpu_s" in r}
    if {"plain_1", "core_1"} <= cpu.keys():
        # CPU per record of the plain replay (every check) against the core alone (goal <= 2)
        ratios["plain_vs_core_cpu_per_record"] = round(cpu["core_1"] / cpu["plain_1"], 2)
    core = results.get("core_1")
    if core and core.get("us_per_record_cpu"):
        # the core and what any replay pays besides it (the columns read, the inputs decoded, the
        # outputs serialised for comparison), against the core alone: a floor under the plain
        # replay's ratio, before any bookkeeping or check
        ratios["floor_vs_core_cpu_per_record"] = round(
            1 + sum(core["floor_us_per_record_cpu"].values()) / core["us_per_record_cpu"], 2)
    if {"plain_1", "spark_1"} <= cpu.keys():
        ratios["spark_vs_plain_1core_cpu"] = round(cpu["spark_1"] / cpu["plain_1"], 3)
    if {"plain_2", "spark_2"} <= cpu.keys():
        ratios["spark_vs_plain_2core_cpu"] = round(cpu["spark_2"] / cpu["plain_2"], 3)
    if {"spark_1", "spark_2"} <= cpu.keys():
        # records per CPU-second on 2 cores against 1: below 1 is parallel overhead; with the
        # wall-clock scaling it separates "the job does not scale" from "the cores were busy
        # with something else" (cores_busy < cores)
        ratios["spark_cpu_efficiency_2_vs_1"] = round(cpu["spark_2"] / cpu["spark_1"], 3)
    best2 = results.get("spark_2")
    if best2:
        ratios["spark_2core_seconds_per_10M_records"] = round(best2["seconds"] * 10_000_000 / best2["records"], 1)
    if core:
        # two perfect cores, nothing but the core: no replay of this core on 2 cores is faster
        ratios["core_alone_2core_seconds_per_10M_records"] = round(core["seconds"] * 10_000_000 / core["records"] / 2, 1)
    # a goal whose measurements did not run is null, not met or missed
    versus = [v for k, v in ratios.items() if k.startswith("spark_vs") and not k.endswith("_cpu")]
    scaling, per_10m = ratios.get("spark_scaling_1_to_2"), ratios.get("spark_2core_seconds_per_10M_records")
    plain_vs_core = ratios.get("plain_vs_core_cpu_per_record")
    goals = {"plain_at_most_2x_core": plain_vs_core <= 2 if plain_vs_core is not None else None,
             "spark_at_least_70pct_of_plain": all(v >= 0.7 for v in versus) if versus else None,
             "scaling_at_least_1.7x": scaling >= 1.7 if scaling is not None else None,
             "10M_under_30s_on_2_cores": per_10m < 30 if per_10m is not None else None}
    _emit({"name": "ratios", **ratios})
    _emit({"name": "goals", **goals})
    return 0 if results else 1


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="replay_bench")
    p.add_argument("trace")
    p.add_argument("--measure", choices=["plain", "spark", "core", "split"], required=True)
    p.add_argument("--cores", type=int, default=1)
    p.add_argument("--warmup", default=None)
    a = p.parse_args(argv)
    _emit(measure(a.measure, a.cores, a.trace, a.warmup))
    return 0


if __name__ == "__main__":
    sys.exit(main())
