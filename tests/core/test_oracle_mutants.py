"""The property tests catch each one-line change of ``oracle_mutants.MUTANTS`` (answers Kafka
would not give; issue #16). Hunting them takes a minute or two, so it runs only with
``GROUPCOORD_MUTANTS=1``; that every change still applies to core/ is checked in every run."""

import os

import oracle_mutants
import pytest

SLOW = pytest.mark.skipif(os.environ.get("GROUPCOORD_MUTANTS") != "1",
                          reason="hunting mutants is slow: GROUPCOORD_MUTANTS=1 runs it")
NAMES = [m.name for m in oracle_mutants.MUTANTS]


def test_the_catalogue_has_fifteen_distinct_changes():
    assert len(NAMES) == len(set(NAMES)) >= 15


@pytest.mark.parametrize("mutant", oracle_mutants.MUTANTS, ids=NAMES)
def test_each_change_applies_to_the_core_once(mutant):
    changed = oracle_mutants.mutate(mutant, oracle_mutants.ROOT / "core")
    assert changed != (oracle_mutants.ROOT / "core" / mutant.path).read_text()


@SLOW
def test_the_unchanged_core_passes_the_same_hunt():
    result = oracle_mutants.run(None)
    assert not result.caught, result.caught_by


@SLOW
@pytest.mark.parametrize("mutant", oracle_mutants.MUTANTS, ids=NAMES)
def test_the_property_tests_catch(mutant):
    result = oracle_mutants.run(mutant)
    print(f"{mutant.name}: {result.seconds:.1f} s, {result.caught_by}")
    assert result.caught, f"not caught: {mutant.bug}"
