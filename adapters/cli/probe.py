"""``groupcoord probe``: ``CoordinatorStateMachine`` against a running broker. Exit 0: N examples
ran and every answer was one the spec allows (or a known finding, ``--known``); 1: divergences
(each distinct one shrunk, printed, written as a conformance scenario; ``--stop-at-first``: the
first only); 2: bad input or a broker that cannot be reached; 3: the checker could not decide
(its budget spent, or the broker said its coordinator moved). Rules whose API the broker does
not offer (ApiVersions) are left out, and said so; a broker that goes away ends the run with
what was found so far (exit 1 with findings, else 2)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from groupcoord.adapters.cli import parsing
from groupcoord.adapters.cli.parsing import fail
from groupcoord.adapters.cli.verify import add_kafka_setting_flags, add_known_flag, config_from_args, read_known_flag
from groupcoord.adapters.traces import progress
from groupcoord.adapters.traces.stopping import written
from groupcoord.core.config import ConfigError

DEFAULT_TOPIC = "groupcoord-probe"
DEFAULT_PARTITIONS = 3  # a topic probe creates with CreateTopics (auto-creation: the broker's count)


def add_probe_command(sub) -> None:
    p = sub.add_parser("probe", help="throw hostile, legal group traffic at a running broker; judge every answer",
                       description="Runs hypothesis's state machine of consumers (several members, wrong and stale "
                                   "generations, unknown and fenced members, joins in flight together, leaves and "
                                   "commits during a rebalance, admin calls in every state) against the broker, a "
                                   "fresh group per example, and checks every answer with verify's search. Give "
                                   "the broker's group settings by their Kafka names (e.g. "
                                   "--group.initial.rebalance.delay.ms 0). Each distinct divergence (by its "
                                   "signature) is shrunk and reported once, and the search goes on past it. Exit "
                                   "0: N examples without a new divergence; 1: divergences (each shrunk; a "
                                   "scenario file each in --out); 2: bad input or unreachable; 3: undecided.")
    p.add_argument("--bootstrap", required=True, type=parsing.bootstrap, metavar="HOST:PORT",
                   help="the broker (its group coordinator is found with FindCoordinator)")
    p.add_argument("--examples", type=parsing.number(int, 1, "a whole number of at least 1"), default=100,
                   help="examples to run (default: %(default)s)")
    p.add_argument("--steps", type=parsing.number(int, 1, "a whole number of at least 1"), default=20,
                   help="client actions per example at most (default: %(default)s)")
    p.add_argument("--seed", type=parsing.number(int, 0, "a whole number of at least 0"), default=None,
                   help="hypothesis's seed (default: a random one, printed)")
    p.add_argument("--out", metavar="DIR", default="groupcoord-probe",
                   help="where a divergence's scenario file goes (default: %(default)s; written only then)")
    p.add_argument("--topic", action="append", default=None, metavar="NAME",
                   help=f"a topic the consumers subscribe to (repeatable; default {DEFAULT_TOPIC}); one the "
                        f"broker lacks is asked for with auto-creation (Metadata), else created with "
                        f"{DEFAULT_PARTITIONS} partitions (CreateTopics)")
    p.add_argument("--timer-tolerance-ms", type=parsing.number(int, 0, "milliseconds, at least 0"), default=1000,
                   help="how far from its deadline the broker may fire a timer (default: %(default)s)")
    p.add_argument("--config", metavar="FILE", help="the broker's settings as a properties file (Kafka names; "
                                                    "flags win)")
    going = p.add_mutually_exclusive_group()
    going.add_argument("--keep-going", dest="keep_going", action="store_true", default=True,
                       help="after a divergence, set its signature aside and search on for others, until "
                            "--examples are drawn (the default)")
    going.add_argument("--stop-at-first", "--no-keep-going", dest="keep_going", action="store_false",
                       help="stop at the first divergence")
    add_known_flag(p)
    progress.add_flag(p)
    add_kafka_setting_flags(p)


def run_probe(args) -> int:
    prog = args.prog
    try:
        config = config_from_args(args)
        known = read_known_flag(args) or frozenset()
    except (ConfigError, OSError, ValueError) as e:
        return fail(prog, str(e))
    problem = parsing.output_problem("--out", args.out, "dir")
    if problem:
        return fail(prog, problem)
    from groupcoord.adapters.traces.progress import Progress
    from groupcoord.adapters.verify.findings import at_any_version
    from groupcoord.adapters.verify.run import findings_text
    from groupcoord.testing.probe import PROBED_APIS, offered_apis, probe_all
    from groupcoord.testing.systems import Unreachable

    seed = args.seed if args.seed is not None else int(time.time_ns() % 2**32)
    try:
        topics = asyncio.run(_topics(args.bootstrap, args.topic or [DEFAULT_TOPIC]))
    except Unreachable as e:
        return fail(prog, str(e))
    print(f"probing {args.bootstrap}: {args.examples} examples of up to {args.steps} steps, seed {seed}, "
          f"topics {topics}", flush=True)
    started = time.monotonic()
    out = Path(args.out)

    def report(f, n: int) -> None:
        print(f.report)
        if f.scenario is not None:
            path = out / (f"probe-{seed}-{n}.json" if args.keep_going else f"probe-{seed}.json")
            with written(path) as tmp:  # whole or not at all
                tmp.write_text(json.dumps(f.scenario, indent=1) + "\n")
            print(f"  reproduction: {path} (run it: groupcoord scenario {path})")
        print(flush=True)
    try:
        offered = offered_apis(args.bootstrap)
        left_out = [api for api in PROBED_APIS if api not in offered]
        if left_out:
            print("left out: " + ", ".join(f"{api} (not offered)" for api in left_out), flush=True)
        run = probe_all(args.bootstrap, config, topics, examples=args.examples, steps=args.steps, seed=seed,
                        timer_tolerance_ms=args.timer_tolerance_ms, keep_going=args.keep_going, known=known,
                        progress=Progress("probe", total=args.examples, unit="examples"),
                        on_finding=report, offered=offered)
    except Unreachable as e:
        return fail(prog, str(e))
    if run.undecided is not None:
        print(run.undecided.report)
    if run.gone is not None:
        print(f"the broker went away after {run.examples} examples: {run.gone}; the findings so far:"
              if run.findings else f"the broker went away after {run.examples} examples: {run.gone}", flush=True)
    took = f"seed {seed}; {time.monotonic() - started:.1f} s"
    if args.keep_going and (run.findings or run.known_met):
        lines = findings_text({f.signature: 1 for f in run.findings}, len(run.known_met),
                              f"in {run.examples} examples")
        for n, f in enumerate(run.findings, start=1):  # met at other versions too: one line for all
            also = run.also.get(f.signature)
            if also:
                versions = sorted(int(s.split(" ", 2)[1][1:]) for s in {*also, f.signature})
                lines[n] = f"  {at_any_version(f.signature)}   # met at " + ", ".join(f"v{v}" for v in versions)
        print("\n".join(lines))
        print(took)
    elif run.findings or run.undecided is not None or run.gone is not None:
        print(took)
    else:
        aside = f", {len(run.known_met)} known findings set aside" if run.known_met else ""
        print(f"{run.examples} examples, no divergence{aside} ({time.monotonic() - started:.1f} s)")
    if run.findings:
        return 1
    if run.gone is not None:
        return 2
    return run.undecided.exit_code if run.undecided is not None else 0


async def _topics(bootstrap: str, names: list[str], wait_s: float = 5.0) -> dict[str, int]:
    """Each topic's partition count at the broker. A missing one is created where the broker
    can: by a Metadata request that allows auto-creation (v4+, as a consumer's does; the broker
    creates it when its settings allow), else by CreateTopics; else one line says so."""
    from groupcoord.adapters.client.kafka_client import Cluster, KafkaError
    from groupcoord.testing.systems import Unreachable

    cluster = Cluster(bootstrap, "groupcoord-probe", timeout=5.0)
    try:
        counts = await _counts(cluster, names)
        missing = [n for n in names if counts.get(n) is None]
        client = await cluster.any() if missing else None
        if missing and client.version(3) >= 4:
            await cluster.metadata(missing, auto_create=True)
            counts = await _settled(cluster, names, wait_s)  # a broker may create it after answering
            missing = [n for n in names if counts.get(n) is None]
        if missing and 19 in client.versions:
            await client.request(19, {"topics": [{"name": n, "num_partitions": DEFAULT_PARTITIONS,
                                                  "replication_factor": -1, "assignments": [], "configs": []}
                                                 for n in missing], "timeout_ms": 5000, "validate_only": False},
                                 client.version(19), timeout=10)
            counts = await _settled(cluster, names, wait_s)
        elif missing:
            raise Unreachable(f"topic {missing[0]} does not exist at {bootstrap}, which created none when asked "
                              f"(Metadata with auto-creation) and has no CreateTopics: create it, or name one it "
                              f"has with --topic")
        absent = [n for n in names if not counts.get(n)]
        if absent:
            raise Unreachable(f"topic {absent[0]} does not exist at {bootstrap} and could not be created")
        return {n: counts[n] for n in names}
    except (OSError, asyncio.TimeoutError, KafkaError) as e:
        raise Unreachable(f"cannot reach {bootstrap}: {e or type(e).__name__}") from None
    finally:
        await cluster.close()


async def _settled(cluster, names: list[str], wait_s: float) -> dict[str, int | None]:
    """The counts once every topic shows (or ``wait_s`` has passed): a broker may create a
    topic after the request asking for it is answered."""
    deadline = time.monotonic() + wait_s
    while True:
        counts = await _counts(cluster, names)
        if all(counts.get(n) for n in names) or time.monotonic() > deadline:
            return counts
        await asyncio.sleep(0.1)


async def _counts(cluster, names: list[str]) -> dict[str, int | None]:
    meta = await cluster.metadata(names)
    return {t["name"]: (len(t["partitions"]) if t["error_code"] == 0 and t["partitions"] else None)
            for t in meta["topics"]}

