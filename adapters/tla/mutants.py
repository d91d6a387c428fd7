"""Real coordinator bugs, re-created as mutants of the core (and of the spec), and the check
that catches each (``groupcoord tla mutants``; catalogue in tla/README.md).

A core mutant is applied at run time only: the source of one or more methods of
the group machine (``groupcoord.core.machine.GroupMachine`` and the ``Membership`` and
``Joining`` parts it extends) is edited in memory, compiled in the module's namespace and set on the class; ``applied`` restores the originals.
The source tree is never written. A spec mutant is a text edit of a copy of tla/ (tla_run's
``replace``).

Checks run cheapest first, and a mutant stops at the first check that fails:
``scenarios`` (every conformance scenario through the core), ``graph-check`` (the state-graph
check of MCGraph, dumped once and shared), ``trace`` (trace validation of a hypothesis trace,
with the spec unchanged), ``tlc-mc3`` / ``tlc-live`` (TLC on the mutated spec).
"""

from __future__ import annotations

import contextlib
import inspect
import re
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable

import attrs

from groupcoord.core import machine


@attrs.frozen
class Mutant:
    name: str
    bug: str
    source: str
    core: tuple = ()  # (method name, ((old, new), ...)) pairs on the group machine
    spec: dict | None = None  # tla_run replace= for a spec mutant
    checks: tuple = ("scenarios", "graph-check", "trace")
    ids: tuple = ()  # the bug's ids (KAFKA-8500, KoP-380): --only takes them as well as the name


MUTANTS: list[Mutant] = [
    Mutant("static-rejoin-keeps-old-id",
           "a static member rejoining with an unknown member id outside Stable keeps its old member id",
           "KAFKA-8500", ids=("KAFKA-8500",),
           core=(("_join_new_member", ((
               "                self._replace_static_member(g, req, old_id, new_id)",
               "                if g.state is STABLE:\n"
               "                    self._replace_static_member(g, req, old_id, new_id)\n"
               "                else:\n"
               "                    self._update_member_then_rebalance(g, g.members[old_id], req)"),)),)),
    Mutant("static-join-completing-no-rebalance",
           "a static member joining in CompletingRebalance does not trigger a rebalance, so its new id "
           "gets an empty assignment", "KAFKA-9801", ids=("KAFKA-9801",),
           core=(("_replace_static_member", ((
               "        elif g.state is COMPLETING_REBALANCE:\n            self._prepare_rebalance(g)",
               "        elif g.state is COMPLETING_REBALANCE:\n            pass"),)),)),
    Mutant("leave-in-preparing-no-complete",
           "a member removed while PreparingRebalance does not complete the join phase; the group waits "
           "for the rebalance timeout", "KoP pull request #380", ids=("KoP-380",),
           core=(("_leave", ((
               "            elif g.state is PREPARING_REBALANCE:\n                self._maybe_complete_join(g)",
               "            elif g.state is PREPARING_REBALANCE:\n                pass"),)),)),
    Mutant("disconnected-never-removed",
           "members that disconnect are never removed, and the group stays in PreparingRebalance",
           "Redpanda issue #3300", ids=("Redpanda-3300",),
           core=(("_heartbeat_expired", ((
               "        member = group.members.get(mid)\n",
               "        member = group.members.get(mid)\n        return\n"),)),
                 ("_complete_join", ((
                     "                g.remove(mid)\n                self._cancel(HeartbeatTimer(g.partition, g.group_id, mid))",
                     "                self._arm(JoinTimer(g.partition, g.group_id), g.rebalance_timeout_ms)\n"
                     "                return"),)))),
    Mutant("first-generation-zero", "the first generation is 0 instead of 1", "issue #3 list",
           core=(("_init_next_generation", ((
               "        g.generation_id += 1", "        g.generation_id += 0 if g.generation_id == 0 else 1"),)),)),
    Mutant("heartbeat-empty-none", "heartbeats in Empty answered NONE", "issue #3 list",
           core=(("heartbeat", ((
               "        if group is None:\n            error = Error.UNKNOWN_MEMBER_ID\n        else:",
               "        if group is None:\n            error = Error.UNKNOWN_MEMBER_ID\n"
               "        elif group.state is EMPTY:\n            error = NONE\n        else:"),)),)),
    Mutant("follower-assignment-accepted", "a follower's assignment accepted (written as the group's)",
           "issue #3 list",
           core=(("_sync", ((
               "            if req.member_id == g.leader_id:", "            if True:"),)),)),
    Mutant("assignment-before-write", "an assignment applied before its write succeeds",
           "issue #3 list",
           core=(("_sync", ((
               "                self._append(record, AfterSync(g.group_id, g.generation_id, "
               "tuple(assignments.items())))",
               "                self._append(record, AfterSync(g.group_id, g.generation_id, "
               "tuple(assignments.items())))\n"
               "                for _mid in list(g.members):\n"
               "                    g.put(evolve(g.members[_mid], assignment=assignments.get(_mid, b\"\")))"),)),)),
    Mutant("fenced-static-none", "a fenced static member answered NONE", "issue #3 list (KIP-345 fencing)",
           core=(("heartbeat", ((
               "            if member is None or (instance_id is not None and group.static_members.get(instance_id) != mid):",
               "            if member is None:"),)),)),
    Mutant("generation-bumped-twice", "the generation bumped twice for one join phase", "issue #3 list",
           core=(("_init_next_generation", ((
               "        g.generation_id += 1", "        g.generation_id += 2"),)),)),
    Mutant("no-sync-timer", "no sync timer after the join phase: a member that never syncs blocks the group",
           "KAFKA-12890", ids=("KAFKA-12890",),
           core=(("_complete_join", ((
               "        self._arm(SyncTimer(g.partition, g.group_id), g.rebalance_timeout_ms, g.generation_id)",
               "        pass"),)),)),
    # Spec mutants: the same bugs written into the spec; TLC must find them.
    Mutant("spec-first-generation-zero", "the first generation is 0 instead of 1 (in the spec)", "as above",
           spec={"Coordinator.tla": [("LET G1 == [G EXCEPT !.gen = @ + 1] IN",
                                      "LET G1 == [G EXCEPT !.gen = IF @ = 0 THEN 0 ELSE @ + 1] IN")]},
           checks=("tlc-mc3",)),
    Mutant("spec-generation-bumped-twice", "the generation bumped twice for one join phase (in the spec)", "as above",
           spec={"Coordinator.tla": [("LET G1 == [G EXCEPT !.gen = @ + 1] IN", "LET G1 == [G EXCEPT !.gen = @ + 2] IN")]},
           checks=("tlc-mc3",)),
    Mutant("spec-disconnected-never-removed",
           "members that disconnect are never removed (in the spec): PreparingRebalance is never left",
           "Redpanda issue #3300", ids=("Redpanda-3300",),
           spec={"Coordinator.tla": [
               ("    ELSE IF ~IsMember(G, m) \\/ (~G.mem[m].isNew /\\ (Parked(G, m) \\/ G.mem[m].sync)) THEN G",
                "    ELSE IF TRUE THEN G"),
               ("         DropNotRejoined(IF ~Parked(G, m) /\\ ~IsStatic(G, m)\n"
                "                         THEN Cancel(RemoveFromGroup(G, m), HbKey(m)) ELSE G, Tail(ids))",
                "         DropNotRejoined(G, Tail(ids))"),
               ("    ELSE IF G1.leader = None /\\ G1.members # <<>> THEN Arm(G1, JoinKey, <<>>, RebalanceTimeoutOf(G1))",
                "    ELSE IF G1.leader = None /\\ G1.members # <<>> THEN Arm(G1, JoinKey, <<>>, RebalanceTimeoutOf(G1))\n"
                "    ELSE IF \\E m \\in DOMAIN G1.mem : ~Parked(G1, m) THEN Arm(G1, JoinKey, <<>>, RebalanceTimeoutOf(G1))")]},
           checks=("tlc-live",)),
]


@contextlib.contextmanager
def applied(mutant: Mutant):
    """The core mutant, in place on the group machine for the duration. A method is compiled
    in the namespace of the module that defines it (``joining``, ``membership``, ``machine``)."""
    originals = {}
    try:
        for method, edits in mutant.core:
            owner = next(c for c in machine.GroupMachine.__mro__ if method in vars(c))
            original = vars(owner)[method]
            source = textwrap.dedent(inspect.getsource(original))
            for old, new in edits:
                # The edits are written with the method's indentation inside the class.
                indented = textwrap.indent(source, "    ")
                if indented.count(old) != 1:
                    raise ValueError(f"{mutant.name}: {method}: the text to replace occurs "
                                     f"{indented.count(old)} times")
                source = textwrap.dedent(indented.replace(old, new))
            namespace: dict = {}
            module = sys.modules[owner.__module__]
            exec(compile(source, f"<mutant {mutant.name}: {method}>", "exec"), vars(module), namespace)
            originals[method] = (owner, original)
            setattr(owner, method, namespace[method])
        yield
    finally:
        for method, (owner, original) in originals.items():
            setattr(owner, method, original)


@attrs.define
class MutantResult:
    mutant: Mutant
    caught_by: str | None
    detail: str
    seconds: float
    also: list = attrs.Factory(list)  # every check that caught it (with every_check)


def run_mutants(checks: dict[str, Callable[[Mutant], str | None]], names: list[str] | None = None,
                out=print, every_check: bool = False) -> list[MutantResult]:
    """``checks`` maps a check name to a function that returns why it failed (the mutant is
    caught) or None. With ``every_check``, all of a mutant's checks run and ``also`` lists every
    check that caught it."""
    results = []
    for m in MUTANTS:
        if names and m.name not in names:
            continue
        started = time.monotonic()
        caught, detail = None, ""
        ctx = applied(m) if m.core else contextlib.nullcontext()
        with ctx:
            also = []
            for check in m.checks:
                why = checks[check](m)
                if why:
                    also.append(check)
                    if caught is None:
                        caught, detail = check, why
                    if not every_check:
                        break
        r = MutantResult(m, caught, detail, time.monotonic() - started, also)
        results.append(r)
        shown = caught or "NOT CAUGHT"
        if every_check:
            shown = f"{shown} [caught by: {', '.join(also) or 'none'} of {', '.join(m.checks)}]"
        out(f"  {m.name:40s} {m.source:32s} -> {shown} ({r.seconds:.1f} s)"
            + (f": {detail[:160]}" if detail else ""))
    return results


def mutant_names() -> list[str]:
    return [m.name for m in MUTANTS]


def _key(text: str) -> str:
    """Names and bug ids compared without case or punctuation: ``KoP #380`` is ``kop-380``."""
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))


def select(text: str) -> list[str]:
    """The names of the mutants a comma-separated list of names and bug ids (any case) picks,
    in catalogue order; a bug id picks every mutant re-creating it. ValueError, listing the
    valid names and ids, for one that matches nothing."""
    wanted = [w.strip() for w in text.split(",") if w.strip()]
    if not wanted:
        raise ValueError(f"expected mutant names or bug ids, got {text!r}; choose from {catalogue_line()}")
    picked: set[str] = set()
    for w in wanted:
        found = {m.name for m in MUTANTS if _key(w) in {_key(m.name), *map(_key, m.ids)}}
        if not found:
            raise ValueError(f"unknown mutant {w!r}; choose from {catalogue_line()}")
        picked |= found
    return [m.name for m in MUTANTS if m.name in picked]


def catalogue_line() -> str:
    """Every mutant's name, with its bug ids, on one line."""
    return ", ".join(f"{m.name} ({'/'.join(m.ids)})" if m.ids else m.name for m in MUTANTS)


def catalogue() -> str:
    """The mutants, one a line: name, bug ids, where the bug comes from (for --help)."""
    width = max(len(m.name) for m in MUTANTS) + 2
    ids = max(len("/".join(m.ids)) for m in MUTANTS) + 2

    def source(m: Mutant) -> str:
        return "" if m.source in (*m.ids, "as above") else m.source

    return "\n".join(f"  {m.name:{width}}{'/'.join(m.ids) or '-':{ids}}{source(m)}".rstrip() for m in MUTANTS)


__all__ = ["MUTANTS", "Mutant", "applied", "run_mutants", "mutant_names", "select", "catalogue", "catalogue_line",
           "Path"]
