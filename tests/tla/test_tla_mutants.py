"""`groupcoord tla mutants` (issue 3, and the consumer group spec's of issue 35): every re-created
bug must be caught, through its property. Its own module, so that it runs beside `tla check`
(tests/tla/test_tla.py) on another worker rather than after it; it dumps MCGraph's state graph
itself for the graph check's mutants."""

from __future__ import annotations

import pytest

from groupcoord.adapters.cli import tla as tla_cli
from groupcoord.adapters.tla import consumer_mutants
from groupcoord.adapters.tla.mutants import MUTANTS
from groupcoord.adapters.tla.run import TlaSetupError, check_setup

pytestmark = pytest.mark.timeout(1500)


@pytest.fixture(scope="module")
def mutants():
    try:
        check_setup()
    except TlaSetupError as e:
        pytest.fail(str(e))
    lines: list[str] = []
    ok, results = tla_cli.run_mutants_command(out=lines.append)
    return ok, results, lines


def test_at_least_ten_mutants_all_caught(mutants):
    ok, results, lines = mutants
    assert len(results) == len(tla_cli.ALL_MUTANTS) > len(MUTANTS) >= 10
    assert {r.mutant.name for r in results} >= {m.name for m in consumer_mutants.SPEC_MUTANTS + consumer_mutants.CORE_MUTANTS}
    missed = [r.mutant.name for r in results if not r.passed]
    assert not missed, "\n".join(lines)
    assert ok


def test_named_properties_catch_their_mutants(mutants):
    """The spec-only properties named after a bug each catch that bug written into the spec, and
    the timer-length check a timer armed with the wrong length (issue 17 §7)."""
    by = {r.mutant.name: r for r in mutants[1]}
    expected = {"spec-static-rejoin-keeps-old-id": ("tlc-mc4", "StaticJoinGetsFreshId"),  # KAFKA-8500
                "spec-no-sync-timer": ("tlc-mc4", "SyncTimerWhileAwaitingSync"),  # KAFKA-12890
                "spec-static-replace-answered-before-write": ("tlc-mc4", "ReplacementAnsweredAfterWrite"),  # 10284
                # issue 17 §6: every request answered, a cooperative group reaches Stable
                "spec-leave-drops-parked-join": ("tlc-mc3", "AnsweredExactlyOnce"),
                "spec-static-replace-never-answered": ("tlc-live", "EveryRequestAnswered"),
                "spec-rejoin-not-parked": ("tlc-stable", "ReachesStable"),
                # issue 17 §2, §3: offsets, durability and failover
                "spec-commit-from-stale-generation": ("tlc-offsets", "commit_requires_valid_member"),
                "spec-acked-commit-not-committed": ("tlc-offsets", "AckedCommitReadable"),
                "spec-removed-group-drops-committed": ("tlc-offsets", "committed_counts_writes"),
                "spec-acked-commit-not-in-log": ("tlc-failover", "acknowledged_commit_durable"),
                "spec-reload-drops-offsets": ("tlc-failover", "reload_restores_the_log"),
                "session-timer-rebalance-length": ("graph-check", "out[3].ms")}
    for name, (check, about) in expected.items():
        caught = by[name].caught
        assert caught is not None and (caught.check, caught.about) == (check, about), (name, caught)
    lines = mutants[2]
    assert any("spec-no-sync-timer" in line and "SyncTimerWhileAwaitingSync violated" in line for line in lines)


def test_named_bugs_are_in_the_catalogue(mutants):
    sources = {r.mutant.source for r in mutants[1]}
    for bug in ("KAFKA-8500", "KAFKA-9801", "KoP pull request #380", "Redpanda issue #3300"):
        assert bug in sources
