"""Every bug caught: each core mutant of ``groupcoord tla mutants``' catalogue (real coordinator
bugs) answers some requests; ``groupcoord verify`` judges those answers against the true core
and finds the group diverging. A mutant's trace is the first conformance scenario its answers
fail (what the catalogue's ``scenarios`` check runs), or, for bugs no scenario's answers show
in time, a script below. The same traces from the true core do not diverge.

Not here: ``load-drops-offsets`` (a partition loaded again, which these traces have no way to
do); it runs on a reloaded server in test_bugs_on_the_wire.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from verify_scripts import CONFIG, heartbeat, join, sync

from groupcoord.adapters.conformance.observed import observe_scenario
from groupcoord.adapters.conformance.suite import suite_files
from groupcoord.adapters.scenarios.runner import read_scenario
from groupcoord.adapters.tla.mutants import MUTANTS, applied
from groupcoord.adapters.verify.from_core import observe
from groupcoord.adapters.verify.observed import split
from groupcoord.adapters.verify.search import CONFORMS, DIVERGES, Settings, verify_group

ROOT = Path(__file__).resolve().parents[2]
CORE_MUTANTS = [m for m in MUTANTS if m.core and m.name != "load-drops-offsets"]


def _describe() -> dict:
    return {"groups": ["g"], "include_authorized_operations": False}


# (requests, write delay ms) for the bugs whose answers no scenario shows in time.
SCRIPTS = {
    # KoP #380: a member leaving while the group rebalances does not complete the join phase;
    # the rejoined member's JoinGroup waits for the rebalance timeout instead of the leave
    "leave-in-preparing-no-complete": ([
        (1000, 1, "JoinGroup", 3, join(), "c1"), (1010, 2, "JoinGroup", 3, join(), "c2"),
        (8000, 1, "SyncGroup", 5, sync("c1-u1", 1, [("c1-u1", b"a"), ("c2-u2", b"b")]), "c1"),
        (8000, 2, "SyncGroup", 5, sync("c2-u2", 1), "c2"),
        (9000, 1, "JoinGroup", 3, join("c1-u1"), "c1"),
        (9500, 2, "LeaveGroup", 3, {"group_id": "g", "members": [{"member_id": "c2-u2"}]}, "c2"),
        (40000, 1, "Heartbeat", 4, heartbeat("c1-u1", 2), "c1")], 0),
    # KAFKA-9801: a static member replaced in CompletingRebalance starts no rebalance
    "static-join-completing-no-rebalance": ([
        (1000, 1, "JoinGroup", 5, join(inst="i1"), "s1"), (1010, 2, "JoinGroup", 5, join(inst="i2"), "s2"),
        (8000, 3, "JoinGroup", 5, join(inst="i2"), "s2"),
        # the replaced member fenced: the replacement reached the coordinator before the sync
        (8200, 2, "Heartbeat", 4, {**heartbeat("i2-u2", 1), "group_instance_id": "i2"}, "s2"),
        (8500, 1, "SyncGroup", 5, sync("i1-u1", 1, [("i1-u1", b"a"), ("i2-u2", b"b")]), "s1"),
        (40000, 1, "Heartbeat", 4, heartbeat("i1-u1", 1), "s1")], 0),
    # KIP-345 fencing: a member naming another member's instance id is fenced
    "fenced-static-none": ([
        (1000, 1, "JoinGroup", 5, join(inst="i1"), "s1"), (1010, 2, "JoinGroup", 5, join(), "c2"),
        (1020, 2, "JoinGroup", 5, join("c2-u2"), "c2"),
        (8000, 1, "SyncGroup", 5, sync("i1-u1", 1, [("i1-u1", b"a"), ("c2-u2", b"b")]), "s1"),
        (8000, 2, "SyncGroup", 5, sync("c2-u2", 1), "c2"),
        (9000, 2, "Heartbeat", 4, {**heartbeat("c2-u2", 1), "group_instance_id": "i1"}, "c2")], 0),
    # an assignment shown before its write is acknowledged (3 s later here)
    "assignment-before-write": ([
        (1000, 1, "JoinGroup", 3, join(), "c1"), (1010, 2, "JoinGroup", 3, join(), "c2"),
        (8000, 1, "SyncGroup", 5, sync("c1-u1", 1, [("c1-u1", b"a"), ("c2-u2", b"b")]), "c1"),
        (8100, 3, "DescribeGroups", 5, _describe(), "admin"),
        (8200, 2, "SyncGroup", 5, sync("c2-u2", 1), "c2")], 3000),
}


@pytest.fixture(scope="module")
def scenarios():
    return [(f, read_scenario(f)[0]) for f in suite_files(ROOT)]


def _verdicts(pairs, config) -> list:
    # the scenario's clock and the core's are one: no timer fires early, none on a deadline's far side
    return [verify_group(g, unit, Settings(config, budget=5000, timer_tolerance_ms=0))
            for g, unit in split(pairs).units.items()]


def _mutant_traces(mutant, scenarios):
    """(source, the mutant's pairs, config, the true core's pairs) for its script, or for each
    scenario whose answers it fails."""
    if mutant.name in SCRIPTS:
        requests, delay = SCRIPTS[mutant.name]
        with applied(mutant):
            pairs = observe(requests, CONFIG, write_delay_ms=delay)
        yield mutant.name, pairs, CONFIG, observe(requests, CONFIG, write_delay_ms=delay)
        return
    for path, scenario in scenarios:
        with applied(mutant):
            result, pairs, config = observe_scenario(scenario, str(path))
        if not result.passed and config is not None:
            yield path.name, pairs, config, observe_scenario(scenario, str(path))[1]


@pytest.mark.parametrize("mutant", CORE_MUTANTS, ids=lambda m: m.name)
def test_each_bug_of_the_catalogue_diverges(mutant, scenarios):
    tried = []
    for source, faulty, config, true in _mutant_traces(mutant, scenarios):
        verdicts = _verdicts(faulty, config)
        assert DIVERGES not in [v.verdict for v in _verdicts(true, config)], source  # no false alarm
        if mutant.name in SCRIPTS:
            assert {v.verdict for v in _verdicts(true, config)} == {CONFORMS}
        diverging = next((v for v in verdicts if v.verdict == DIVERGES), None)
        if diverging is not None:
            assert diverging.line is not None and diverging.excerpt and diverging.steps
            return
        tried.append((source, [(v.verdict, v.detail) for v in verdicts]))
    raise AssertionError(f"{mutant.name}: no trace of its answers diverges: {tried[:3]}")
