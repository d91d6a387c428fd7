"""The consumer group spec's part of ``groupcoord tla check``: TLC on the MCConsumer*.cfg
configurations, the state-graph check (``consumer_graph``) and trace validation
(``consumer_trace``), each returning its lines and numbers for the command to print and record.
"""

from __future__ import annotations

import time
from pathlib import Path

import attrs

from groupcoord.adapters.tla import consumer_graph, consumer_trace, consumer_trace_sources
from groupcoord.adapters.tla.run import CheckResult, tlc_check

CONFIGS = {"consumer": "MCConsumer.cfg", "consumer-subs": "MCConsumerSubs.cfg",
           "consumer-live": "MCConsumerLive.cfg", "consumer-graph": "MCConsumerGraph.cfg"}
MODULE = "MCConsumer"
# generated client runs validated by `tla check` (fixed seeds: the same traces every run)
CLIENT_SEEDS = tuple(range(1, 9))
CLIENT_STEPS = 80


def run_config(check: str, workers: int, dump: Path | None = None) -> CheckResult:
    """TLC on one configuration (behaviours end when the budget is spent: no deadlock check)."""
    return tlc_check(check, CONFIGS[check], MODULE, workers=workers, dump=dump, extra_args=["-deadlock"])


def run_graph_check(dot: Path) -> CheckResult:
    started = time.monotonic()
    res = consumer_graph.check_graph(dot, consumer_graph.GRAPH_UNIVERSE)
    r = CheckResult("consumer-graph-check", res.ok, time.monotonic() - started)
    r.data.update(nodes=res.nodes, classes=res.classes, edges=res.edges, steps=res.steps, unsound=res.unsound,
                  missing=res.missing, crashed=res.crashed)
    r.lines.append(res.line())
    r.lines.extend("  " + x[:500] for x in res.examples)
    return r


def scenario_paths() -> list[Path]:
    from groupcoord.adapters.conformance.suite import consumer_suite_files

    return consumer_suite_files(Path(__file__).resolve().parents[2])


def traces() -> tuple[list, list, list]:
    """(scenario traces, generated client traces, the scenarios with no step checked: (name, why))."""
    scenario, left_out = consumer_trace_sources.scenario_traces(scenario_paths())
    clients = [consumer_trace_sources.client_trace(seed, CLIENT_STEPS) for seed in CLIENT_SEEDS]
    return scenario, clients, left_out


def corrupt(trace: consumer_trace.ConsumerTrace) -> tuple[consumer_trace.ConsumerTrace, int]:
    """A copy with the group epoch after the middle step one too high: TLC must reject it there."""
    rows = list(trace.rows)
    k = len(rows) // 2
    s = rows[k]["s"]
    rows[k] = rows[k].set(s=s.set(groupEpoch=s["groupEpoch"] + 1))
    return attrs.evolve(trace, name=trace.name + f" (corrupted at row {k + 1})", rows=rows), k + 1


def run_trace_validation() -> CheckResult:
    """Every consumer scenario with a step the spec follows and the generated client runs, in
    batches (one TLC run per set of partitions); the part of each run the spec cannot follow is
    counted as not checked, by reason; a corrupted copy must be rejected at its row."""
    started = time.monotonic()
    scenario, clients, left_out = traces()
    r = CheckResult("consumer-trace", True, 0.0)
    accepted = 0
    for batch in consumer_trace.batches(scenario + clients):
        tr = consumer_trace.check(batch)
        r.lines.append("  " + tr.line())
        r.ok &= tr.accepted
        accepted += len(batch) if tr.accepted else 0
    bad, row = corrupt(clients[0])
    rejected = consumer_trace.check([bad])
    r.lines.append("  " + rejected.line() + f" (must be rejected at row {row})")
    r.ok &= not rejected.accepted and rejected.diverged_at == row
    stopped: dict[str, int] = {}
    for t in scenario + clients:
        if t.stopped:
            why = t.stopped.split(" (event")[0]
            stopped[why] = stopped.get(why, 0) + 1
    n = len(scenario) + len(clients)
    steps = sum(t.steps for t in scenario + clients)
    r.data.update(accepted=accepted, traces=n, scenario_traces=len(scenario), client_traces=len(clients),
                  client_steps=CLIENT_STEPS, steps=steps, no_step=len(left_out), stopped=stopped,
                  corrupted_row=row, rejected_at=rejected.diverged_at)
    r.seconds = time.monotonic() - started
    r.lines.insert(0, f"consumer trace validation: {accepted}/{n} traces accepted ({len(scenario)} consumer "
                      f"scenarios, {len(clients)} generated client runs; {steps} steps), {len(left_out)} scenarios "
                      f"with no step the spec follows; corrupted copy "
                      f"{'rejected at row ' + str(rejected.diverged_at) if not rejected.accepted else 'ACCEPTED'} "
                      f"({r.seconds:.1f} s)")
    if left_out:
        r.lines.append(f"  no step the spec follows: {len(left_out)} scenarios ("
                       + ", ".join(name.removesuffix(".json") for name, _ in left_out) + ")")
    if stopped:
        r.lines.append("  stopped short (the rest of the run not checked), by reason: "
                       + "; ".join(f"{why}: {k}" for why, k in sorted(stopped.items(), key=lambda kv: -kv[1])))
    return r
