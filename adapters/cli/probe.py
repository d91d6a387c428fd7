"""``groupcoord probe``: ``CoordinatorStateMachine`` against a running broker. Exit 0: N examples
ran and every answer was one the spec allows; 1: a divergence (shrunk, printed, written as a
conformance scenario); 2: bad input or a broker that cannot be reached; 3: the checker could
not decide (its budget spent, or the broker said its coordinator moved)."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from groupcoord.adapters.cli import parsing
from groupcoord.adapters.cli.parsing import fail
from groupcoord.adapters.cli.verify import config_from_args
from groupcoord.core.config import KAFKA_NAMES, ConfigError

DEFAULT_TOPIC = "groupcoord-probe"
DEFAULT_PARTITIONS = 3  # a topic probe creates (CreateTopics) when the broker lacks it


def add_probe_command(sub) -> None:
    p = sub.add_parser("probe", help="throw hostile, legal group traffic at a running broker; judge every answer",
                       description="Runs hypothesis's state machine of consumers (several members, wrong and stale "
                                   "generations, unknown and fenced members, joins in flight together, leaves and "
                                   "commits during a rebalance, admin calls in every state) against the broker, a "
                                   "fresh group per example, and checks every answer with verify's search. Give "
                                   "the broker's group settings by their Kafka names (e.g. "
                                   "--group.initial.rebalance.delay.ms 0). Exit 0: N examples without a "
                                   "divergence; 1: a divergence (shrunk; a scenario file in --out); 2: bad input "
                                   "or unreachable; 3: undecided.")
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
                        f"broker lacks is created with {DEFAULT_PARTITIONS} partitions")
    p.add_argument("--timer-tolerance-ms", type=parsing.number(int, 0, "milliseconds, at least 0"), default=1000,
                   help="how far from its deadline the broker may fire a timer (default: %(default)s)")
    p.add_argument("--config", metavar="FILE", help="the broker's settings as a properties file (Kafka names; "
                                                    "flags win)")
    for name in sorted(KAFKA_NAMES):
        p.add_argument("--" + name, dest="kafka:" + name, metavar="VALUE", default=None, help=argparse.SUPPRESS)


def run_probe(args) -> int:
    prog = args.prog
    try:
        config = config_from_args(args)
    except (ConfigError, OSError, ValueError) as e:
        return fail(prog, str(e))
    from groupcoord.testing.probe import ProbeFailed, probe
    from groupcoord.testing.systems import Unreachable

    seed = args.seed if args.seed is not None else int(time.time_ns() % 2**32)
    try:
        topics = asyncio.run(_topics(args.bootstrap, args.topic or [DEFAULT_TOPIC]))
    except Unreachable as e:
        return fail(prog, str(e))
    print(f"probing {args.bootstrap}: {args.examples} examples of up to {args.steps} steps, seed {seed}, "
          f"topics {topics}", flush=True)
    started = time.monotonic()
    try:
        ran = probe(args.bootstrap, config, topics, examples=args.examples, steps=args.steps, seed=seed,
                    timer_tolerance_ms=args.timer_tolerance_ms)
    except Unreachable as e:
        return fail(prog, str(e))
    except ProbeFailed as f:
        print(f.report)
        if f.scenario is not None:
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            path = out / f"probe-{seed}.json"
            path.write_text(json.dumps(f.scenario, indent=1) + "\n")
            print(f"reproduction: {path} (run it: groupcoord scenario {path})")
        print(f"seed {seed}; {time.monotonic() - started:.1f} s")
        return f.exit_code
    print(f"{ran} examples, no divergence ({time.monotonic() - started:.1f} s)")
    return 0


async def _topics(bootstrap: str, names: list[str]) -> dict[str, int]:
    """Each topic's partition count at the broker (created when missing, where it can)."""
    from groupcoord.adapters.client.kafka_client import Cluster, KafkaError
    from groupcoord.testing.systems import Unreachable

    cluster = Cluster(bootstrap, "groupcoord-probe", timeout=5.0)
    try:
        counts = await _counts(cluster, names)
        missing = [n for n in names if counts.get(n) is None]
        if missing:
            client = await cluster.any()
            if 19 not in client.versions:
                raise Unreachable(f"topic {missing[0]} does not exist at {bootstrap}, which cannot create topics: "
                                  f"create it, or name one it has with --topic")
            await client.request(19, {"topics": [{"name": n, "num_partitions": DEFAULT_PARTITIONS,
                                                  "replication_factor": -1, "assignments": [], "configs": []}
                                                 for n in missing], "timeout_ms": 5000, "validate_only": False},
                                 client.version(19), timeout=10)
            counts = await _counts(cluster, names)
        absent = [n for n in names if not counts.get(n)]
        if absent:
            raise Unreachable(f"topic {absent[0]} does not exist at {bootstrap} and could not be created")
        return {n: counts[n] for n in names}
    except (OSError, asyncio.TimeoutError, KafkaError) as e:
        raise Unreachable(f"cannot reach {bootstrap}: {e or type(e).__name__}") from None
    finally:
        await cluster.close()


async def _counts(cluster, names: list[str]) -> dict[str, int | None]:
    meta = await cluster.metadata(names)
    return {t["name"]: (len(t["partitions"]) if t["error_code"] == 0 and t["partitions"] else None)
            for t in meta["topics"]}

