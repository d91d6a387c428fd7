"""Re-created consumer group (KIP-848) bugs: each must be caught.

Spec mutants edit a temporary copy of tla/ConsumerGroup.tla and run TLC on ``MCConsumer.cfg``
with the property they name alone (TLC stops at the first property violated: another must not
stand in for it). Core mutants edit a method of the core's consumer machine in memory for the
duration of a replay of the consumer state graph (adapters/tla/consumer_graph.py): caught when
the replay finds the core unsound there.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import sys
import textwrap
import time
from pathlib import Path

import attrs

from groupcoord.adapters.tla import consumer_graph
from groupcoord.adapters.tla.run import TLA_DIR, run_tlc, workers_for_machine

SPEC = "ConsumerGroup.tla"
CONFIG = "MCConsumer.cfg"


@attrs.frozen
class SpecMutant:
    name: str
    bug: str
    source: str
    edits: tuple  # ((old, new), ...) in ConsumerGroup.tla
    expect: str  # the property that must catch it
    config: str = CONFIG  # the configuration it runs on


@attrs.frozen
class CoreMutant:
    name: str
    bug: str
    source: str
    method: str  # a function of core/consumer/reconcile.py or a method of ConsumerMachine
    edits: tuple


SPEC_MUTANTS = (
    SpecMutant(
        "assign-before-revoked",
        "a member assigned a partition before its previous owner revoked it",
        "CurrentAssignmentBuilder (revoke first; KIP-848's partition epochs)",
        (("new == {p \\in wanted \\ kept : p \\notin others \\/ p \\in r.pend}", "new == wanted \\ kept"),),
        "NoDoubleOwnership"),
    SpecMutant(
        "epoch-past-target",
        "a member epoch bumped past the target epoch when it revokes after a subscription change, "
        "before the new target exists (no min(epoch + 1, target))",
        "CurrentAssignmentBuilder's min(memberEpoch + 1, targetAssignmentEpoch)",
        (("NextAssignment(r, Min(r.ep + 1, tEp), tEp", "NextAssignment(r, r.ep + 1, tEp"),),
        "EpochsOrdered", "MCConsumerSubs.cfg"),
    SpecMutant(
        "rebalance-timeout-ignores-epoch",
        "the rebalance timeout fencing a member that already left the epoch it was armed for",
        "GroupMetadataManager's rebalance timeout (memberEpoch check)",
        (("IF m \\in members /\\ mepoch[m] = e", "IF m \\in members"),),
        "RebalanceFencesLaggardsOnly"),
    SpecMutant(
        "last-member-fenced-stable",
        "a group whose last member is fenced left with group epoch > assignment epoch, its state "
        "not updated (still Stable)",
        "KAFKA-20442 analogue",
        (("ae == IF EmptyCatchesUp /\\ rest = {} THEN ge ELSE assignEpoch", "ae == assignEpoch"),
         ("/\\ gstate' = DerivedState(rest, ge, ae, LAMBDA o : mstate[o] = \"stable\" /\\ mepoch[o] = ae)",
          "/\\ gstate' = IF rest = {} THEN gstate\n"
          "               ELSE DerivedState(rest, ge, ae, LAMBDA o : mstate[o] = \"stable\" /\\ mepoch[o] = ae)")),
        "StateAgrees"),
    SpecMutant(
        "static-leave-releases",
        "a static member's -2 leave releasing its partitions at once",
        "KIP-848 static membership (LEAVE_GROUP_STATIC_MEMBER_EPOCH)",
        (("/\\ mpend' = [mpend EXCEPT ![m] = {}]\n            /\\ gstate'",
          "/\\ mpend' = [mpend EXCEPT ![m] = {}]\n            /\\ masg' = [masg EXCEPT ![m] = {}]\n            /\\ gstate'"),
         ("members, mprev, mstate, masg, msub,", "members, mprev, mstate, msub,")),
        "StaticLeaveKeepsPlace"),
)

CORE_MUTANTS = (
    CoreMutant(
        "core-rebalance-timeout-ignores-epoch",
        "the rebalance timeout fencing a member that already left the epoch it was armed for (in the core)",
        "GroupMetadataManager's rebalance timeout (memberEpoch check)",
        "rebalance_expired",
        ((" or member.member_epoch != epoch", ""),)),
    CoreMutant(
        "core-assign-before-revoked",
        "a member assigned a partition before its previous owner revoked it (in the core)",
        "CurrentAssignmentBuilder (revoke first)",
        "_next",
        (("if partition_epochs.get((topic, p), -1) == -1 or p in mine", ""),)),
)


def only_property(cfg: str, prop: str) -> str:
    """``cfg`` with its INVARIANTS and PROPERTIES replaced by ``prop`` alone (as what it is)."""
    head = re.split(r"^(?:INVARIANTS|PROPERTIES|PROPERTY|INVARIANT)\b", cfg, flags=re.M)[0]
    spec = (TLA_DIR / SPEC).read_text()
    temporal = re.search(rf"^{prop} ==\s*\n?\s*(\[\]|<>)", spec, flags=re.M) is not None
    return head.rstrip() + f"\n{'PROPERTY' if temporal else 'INVARIANT'}\n    {prop}\n"


@attrs.define
class MutantOutcome:
    name: str
    bug: str
    source: str
    caught_by: str | None
    expect: str
    seconds: float

    @property
    def passed(self) -> bool:
        return self.caught_by is not None and self.expect in self.caught_by

    def line(self) -> str:
        return (f"{self.name}: {self.bug} [{self.source}]: "
                f"{'caught by ' + self.caught_by if self.caught_by else 'NOT CAUGHT'} ({self.seconds:.1f} s)")


def run_spec_mutant(m: SpecMutant) -> MutantOutcome:
    started = time.monotonic()
    cfg = only_property((TLA_DIR / m.config).read_text(), m.expect)
    r = run_tlc("MCMutant.cfg", "MCConsumer", workers=workers_for_machine(), timeout=300, extra_args=["-deadlock"],
                replace={SPEC: list(m.edits)}, extra_files={"MCMutant.cfg": cfg}, name=m.name)
    v = r.violation()
    hit = re.search(r"(?:Invariant|Action property|Temporal properties were|property) (\w+) (?:is )?violated", v)
    caught = f"TLC: {hit.group(1)} violated" if hit else (f"TLC: {v}" if "violated" in v else None)
    return MutantOutcome(m.name, m.bug, m.source, caught, m.expect, time.monotonic() - started)


@contextlib.contextmanager
def applied(m: CoreMutant):
    """The core mutant in place for the duration (the function's source edited and compiled in
    its module's namespace)."""
    from groupcoord.core.consumer import machine, reconcile

    if m.method in vars(reconcile):
        owner, holder = reconcile, reconcile
        original = vars(reconcile)[m.method]
    else:
        owner = next(c for c in machine.ConsumerMachine.__mro__ if m.method in vars(c))
        holder = owner
        original = vars(owner)[m.method]
    source = textwrap.dedent(inspect.getsource(original))
    for old, new in m.edits:
        if source.count(old) != 1:
            raise ValueError(f"{m.name}: {m.method}: the text to replace occurs {source.count(old)} times")
        source = source.replace(old, new)
    namespace: dict = {}
    exec(compile(source, f"<mutant {m.name}>", "exec"), vars(sys.modules[original.__module__]), namespace)
    setattr(holder, m.method, namespace[m.method])
    try:
        yield
    finally:
        setattr(holder, m.method, original)
        assert owner is not None


def run_core_mutant(m: CoreMutant, dot: Path) -> MutantOutcome:
    started = time.monotonic()
    res = consumer_graph.check_graph(dot, consumer_graph.GRAPH_UNIVERSE, patch=lambda: applied(m))
    caught = f"graph check: unsound {res.unsound}" if res.unsound else None
    if caught and res.examples:
        caught += f" (first: {res.examples[0][:160]})"
    return MutantOutcome(m.name, m.bug, m.source, caught, "graph check", time.monotonic() - started)


def run_core_mutant_traces(m: CoreMutant) -> str | None:
    """Trace validation under the mutant: the generated client runs recorded through the
    mutated core; what rejected them, or None."""
    from groupcoord.adapters.tla import consumer_check, consumer_trace, consumer_trace_sources

    with applied(m):
        traces = [consumer_trace_sources.client_trace(seed, consumer_check.CLIENT_STEPS)
                  for seed in consumer_check.CLIENT_SEEDS]
    for batch in consumer_trace.batches(traces):
        r = consumer_trace.check(batch)
        if not r.accepted:
            return f"{r.name} rejected at row {r.diverged_at}"
    return None


# ------------------------------------------------------------------ in `groupcoord tla mutants`

def catalogue() -> tuple:
    """The consumer mutants as entries of `groupcoord tla mutants`' catalogue."""
    from groupcoord.adapters.tla.mutants import Mutant

    spec = tuple(Mutant(m.name, m.bug, m.source, checks=("consumer-tlc",), expect=m.expect,
                        ids=tuple(re.findall(r"KAFKA-\d+", m.source))) for m in SPEC_MUTANTS)
    core = tuple(Mutant(m.name, m.bug, m.source, checks=("consumer-graph", "consumer-trace"),
                        ids=tuple(re.findall(r"KAFKA-\d+", m.source))) for m in CORE_MUTANTS)
    return spec + core


def run_catalogue(names: list[str] | None = None, out=print, every_check: bool = False) -> list:
    """The consumer mutants (``names``: those among them), as ``tla mutants`` reports them
    (``mutants.MutantResult``); the consumer graph is dumped once for the core mutants."""
    import tempfile

    from groupcoord.adapters.tla.mutants import Catch, MutantResult

    by_name = {m.name: m for m in SPEC_MUTANTS + CORE_MUTANTS}
    results = []
    with tempfile.TemporaryDirectory(prefix="groupcoord-cgm-") as tmp:
        dot = Path(tmp) / "consumer.dot"
        for entry in catalogue():
            if names and entry.name not in names:
                continue
            started = time.monotonic()
            m = by_name[entry.name]
            catches = []
            if isinstance(m, SpecMutant):
                o = run_spec_mutant(m)
                if o.caught_by:
                    catches.append(Catch("consumer-tlc", o.caught_by.removeprefix("TLC: "),
                                         m.expect if o.passed else None, o.caught_by))
            else:
                if not dot.exists():
                    r = consumer_graph.dump_graph(dot)
                    if not r.ok:
                        raise RuntimeError(f"TLC failed on MCConsumerGraph.cfg: {r.violation()}")
                g = run_core_mutant(m, dot)
                if g.caught_by:
                    catches.append(Catch("consumer-graph", g.caught_by.split(" (first")[0], None, g.caught_by))
                if every_check or not catches:
                    t = run_core_mutant_traces(m)
                    if t:
                        catches.append(Catch("consumer-trace", t))
            res = MutantResult(entry, catches, time.monotonic() - started)
            results.append(res)
            shown = res.problem or f"caught by {res.caught.line()}"
            if every_check:
                shown += f" [caught by: {', '.join(res.also) or 'none'} of {', '.join(entry.checks)}]"
            out(f"  {entry.name:42s} {entry.source[:26]:26s} -> {shown} ({res.seconds:.1f} s)")
    return results


def run_all(dot: Path | None = None, out=print) -> list[MutantOutcome]:
    """Every mutant; ``dot``: the consumer graph already dumped (else dumped here)."""
    import tempfile

    results = []
    for m in SPEC_MUTANTS:
        results.append(run_spec_mutant(m))
        out(results[-1].line())
    with tempfile.TemporaryDirectory(prefix="groupcoord-cgm-") as tmp:
        if dot is None:
            dot = Path(tmp) / "consumer.dot"
            r = consumer_graph.dump_graph(dot)
            if not r.ok:
                raise RuntimeError(f"TLC failed on MCConsumerGraph.cfg: {r.violation()}")
        for cm in CORE_MUTANTS:
            results.append(run_core_mutant(cm, dot))
            out(results[-1].line())
    return results
