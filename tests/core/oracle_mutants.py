"""One-line changes to core/ that make the coordinator answer what Kafka would not, and the run
that shows the property tests (the hypothesis machines of test_properties.py, with the oracle
of oracle.py) catch each of them.

    PYTHONPATH=<staging> .venv/bin/python tests/core/oracle_mutants.py [--without-oracle] [NAME...]

prints one line per mutant (caught or missed, how long, by which check) and exits 0 only if
every one is caught and the unchanged core passes the same run. ``--without-oracle`` runs the
invariants alone (GROUPCOORD_ORACLE=0), to see what the oracle adds. ``GROUPCOORD_MUTANTS=1
pytest tests/core/test_oracle_mutants.py`` runs the same as tests.

Each mutant is applied to a copy of core/ in a temporary directory (the source tree is never
written), staged as ``groupcoord.core`` beside the real adapters, and a fresh interpreter
(PYTHONHASHSEED=0) runs CoordinatorMachine, then TotalityMachine, derandomized (a fixed seed),
without shrinking, up to ``MAX_EXAMPLES`` examples each, stopping at the first failure: the
same examples every time for the same code.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CORE_TESTS = Path(__file__).resolve().parent
ROOT = CORE_TESTS.parent.parent
MAX_EXAMPLES = 300
STEP_COUNT = 40
TIMEOUT_S = 240


@dataclass(frozen=True)
class Mutant:
    name: str
    bug: str  # what the changed coordinator does that Kafka does not
    path: str  # under core/
    old: str  # occurs exactly once in that file
    new: str


MUTANTS = [
    Mutant("a-vote-fewest", "the protocol vote elects the protocol with the fewest votes",
           "classic/draft.py", "most = max(votes.values())", "most = min(votes.values())"),
    Mutant("b-vote-least-preferred", "a member votes for its least preferred candidate protocol",
           "classic/model.py", "        for name, _ in self.protocols:", "        for name, _ in reversed(self.protocols):"),
    Mutant("c-heartbeat-unknown-member", "Heartbeat of an unknown member id answers ILLEGAL_GENERATION "
           "(Kafka: UNKNOWN_MEMBER_ID)", "classic/membership.py",
           "                error = e.error\n        elif req.generation_id",
           "                error = Error.ILLEGAL_GENERATION if e.error is Error.UNKNOWN_MEMBER_ID else e.error\n"
           "        elif req.generation_id"),
    Mutant("d-expired-member-kept", "a member whose session timeout passed without a heartbeat is not removed",
           "classic/model.py", "return not self.is_new and (self.awaiting_join is not None or self.awaiting_sync is not None)",
           "return not self.is_new"),
    Mutant("e-retention-boundary", "an offset expires only once more than the retention has passed "
           "(Kafka: now - base >= retention)", "offsets.py",
           "gone = ctx.now - base(entry) >= retention_ms", "gone = ctx.now - base(entry) > retention_ms"),
    Mutant("f-session-timer-rebalance", "join completion arms members' session timers with the rebalance "
           "timeout", "classic/joining.py",
           "            s.respond(member.awaiting_join.request_id, response)\n"
           "        s.arm(HeartbeatTimer(g.partition, g.group_id, mid), member.session_timeout_ms)",
           "            s.respond(member.awaiting_join.request_id, response)\n"
           "        s.arm(HeartbeatTimer(g.partition, g.group_id, mid), member.rebalance_timeout_ms)"),
    Mutant("g-metadata-boundary", "metadata exactly offset.metadata.max.bytes long is refused "
           "(Kafka: OFFSET_METADATA_TOO_LARGE only when longer)", "offsets.py",
           "and _java_length(metadata) > limit:", "and _java_length(metadata) >= limit:"),
    Mutant("h-initial-delay-max", "the initial-rebalance delay is extended by max(initial delay, remaining) "
           "(Kafka: min)", "classic/membership.py",
           "new_delay = min(s.config.group_initial_rebalance_delay_ms, remaining)",
           "new_delay = max(s.config.group_initial_rebalance_delay_ms, remaining)"),
    Mutant("i-max-size-boundary", "a Stable/CompletingRebalance group already at group.max.size accepts one "
           "more member", "classic/joining.py",
           "return member is not None or len(g.members) < limit", "return member is not None or len(g.members) <= limit"),
    Mutant("j-new-member-timeout", "a new member's join timeout is 30000 ms (Kafka: 300000)",
           "config.py", "NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000", "NEW_MEMBER_JOIN_TIMEOUT_MS = 30_000"),
    Mutant("k-heartbeat-stale-generation", "Heartbeat at a stale generation answers UNKNOWN_MEMBER_ID "
           "(Kafka: ILLEGAL_GENERATION)", "classic/membership.py",
           "        elif req.generation_id != group.generation_id:\n            error = Error.ILLEGAL_GENERATION",
           "        elif req.generation_id != group.generation_id:\n            error = Error.UNKNOWN_MEMBER_ID"),
    Mutant("l-sync-stale-generation", "SyncGroup at a stale generation answers REBALANCE_IN_PROGRESS "
           "(Kafka: ILLEGAL_GENERATION)", "classic/membership.py",
           "    if req.generation_id != group.generation_id:\n        error = Error.ILLEGAL_GENERATION",
           "    if req.generation_id != group.generation_id:\n        error = Error.REBALANCE_IN_PROGRESS"),
    Mutant("m-commit-stale-generation", "OffsetCommit at a stale generation answers UNKNOWN_MEMBER_ID "
           "(Kafka: ILLEGAL_GENERATION)", "offsets.py",
           "        if req.generation_id != group.generation_id:\n            raise MemberError(Error.ILLEGAL_GENERATION)",
           "        if req.generation_id != group.generation_id:\n            raise MemberError(Error.UNKNOWN_MEMBER_ID)"),
    Mutant("n-leave-pending-member", "LeaveGroup of a pending member id answers UNKNOWN_MEMBER_ID and keeps it "
           "pending (Kafka: NONE, removed)", "classic/membership.py",
           "        elif mid in g.pending_members:", "        elif False:"),
    Mutant("o-rebalance-timeout-min", "the group's rebalance timeout (join and sync timers, initial delay) is "
           "the smallest of the members' (Kafka: the largest)", "classic/model.py",
           "return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)",
           "return min((m.rebalance_timeout_ms for m in self.members.values()), default=0)"),
]


@dataclass(frozen=True)
class Result:
    mutant: Mutant | None  # None: the unchanged core
    caught_by: str | None  # the first failure's first line; None if every example passed
    seconds: float

    @property
    def caught(self) -> bool:
        return self.caught_by is not None


def mutate(mutant: Mutant, core: Path) -> str:
    """The mutated text of ``mutant.path``; ValueError unless ``old`` occurs exactly once."""
    text = (core / mutant.path).read_text()
    if text.count(mutant.old) != 1:
        raise ValueError(f"{mutant.name}: {mutant.old!r} occurs {text.count(mutant.old)} times in core/{mutant.path}")
    return text.replace(mutant.old, mutant.new)


def stage(mutant: Mutant | None, into: Path) -> Path:
    """``into``/groupcoord: a copy of core/ (with ``mutant``) and the real adapters/."""
    package = into / "groupcoord"
    shutil.copytree(ROOT / "core", package / "core", ignore=shutil.ignore_patterns("__pycache__"))
    (package / "adapters").symlink_to(ROOT / "adapters", target_is_directory=True)
    if mutant is not None:
        (package / "core" / mutant.path).write_text(mutate(mutant, ROOT / "core"))
    return into


def run(mutant: Mutant | None, oracle: bool = True, max_examples: int = MAX_EXAMPLES) -> Result:
    """The machines against the core with ``mutant``, in a fresh interpreter."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="oracle-mutant-") as tmp:
        staged = stage(mutant, Path(tmp))
        env = dict(os.environ, PYTHONPATH=str(staged), GROUPCOORD_ORACLE="1" if oracle else "0",
                   PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0")  # set orders too: the same run every time
        env.pop("GROUPCOORD_TRACE_DIR", None)
        proc = subprocess.run([sys.executable, __file__, "--hunt", str(max_examples)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=TIMEOUT_S)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the hunt for {mutant.name if mutant else 'the unchanged core'} broke:\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    verdict = lines[-1]
    return Result(mutant, None if verdict == "PASSED" else verdict, time.monotonic() - start)


def hunt(max_examples: int) -> str:
    """In the staged interpreter: run the machines; the first failure's summary, or PASSED."""
    sys.path[:0] = [str(CORE_TESTS.parent / "support"), str(CORE_TESTS)]
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.stateful import run_state_machine_as_test
    from test_properties import CoordinatorMachine, TotalityMachine

    import groupcoord.core

    assert Path(groupcoord.core.__file__).resolve().parent != (ROOT / "core").resolve(), "core/ not staged"
    hunting = settings(max_examples=max_examples, stateful_step_count=STEP_COUNT, derandomize=True,
                       database=None, deadline=None, phases=(Phase.explicit, Phase.generate),
                       suppress_health_check=list(HealthCheck), print_blob=False)
    for machine in (CoordinatorMachine, TotalityMachine):
        try:
            run_state_machine_as_test(machine, settings=hunting)
        except Exception as failure:
            return f"{machine.__name__}: {_first_finding(failure)}"
    return "PASSED"


def _first_finding(failure: BaseException) -> str:
    text = str(failure)
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("after ") or "oracle_" in line or ": group " in line:
            return line[:300]
    return f"{type(failure).__name__}: {text.splitlines()[0][:300] if text else ''}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (all by default)")
    parser.add_argument("--without-oracle", action="store_true", help="the invariants alone")
    parser.add_argument("--max-examples", type=int, default=MAX_EXAMPLES)
    parser.add_argument("--hunt", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.hunt is not None:
        print(hunt(args.hunt), flush=True)
        return 0
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names or m.name[0] in args.names]
    oracle = not args.without_oracle
    all_caught = True
    baseline = run(None, oracle, args.max_examples)
    print(f"{'unchanged core':32} {'passes' if not baseline.caught else 'FAILS'} ({baseline.seconds:.1f} s)"
          + (f": {baseline.caught_by}" if baseline.caught else ""), flush=True)
    for mutant in chosen:
        result = run(mutant, oracle, args.max_examples)
        all_caught &= result.caught
        print(f"{mutant.name:32} {'caught' if result.caught else 'MISSED'} ({result.seconds:.1f} s)"
              + (f": {result.caught_by}" if result.caught else f": {mutant.bug}"), flush=True)
    return 0 if all_caught and not baseline.caught else 1


if __name__ == "__main__":
    sys.exit(main())
