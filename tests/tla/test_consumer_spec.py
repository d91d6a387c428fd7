"""The consumer group spec (tla/ConsumerGroup.tla, KIP-848): TLC on its configurations, the
state-graph check of the core against it, and the re-created bugs each caught
(tla/README.md, "The consumer group spec"). About three minutes on two busy cores."""

from __future__ import annotations

import pytest

from groupcoord.adapters.tla import consumer_graph, consumer_mutants
from groupcoord.adapters.tla.run import TlaSetupError, check_setup, run_tlc, workers_for_machine

# Each fixture runs TLC or a whole replay (a minute at most alone, more beside other tests).
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def setup():
    try:
        return check_setup()
    except TlaSetupError as e:
        pytest.fail(str(e))


def tlc(config: str):
    return run_tlc(config, "MCConsumer", workers=workers_for_machine(), timeout=600, extra_args=["-deadlock"])


@pytest.mark.parametrize("config", ["MCConsumer.cfg", "MCConsumerSubs.cfg", "MCConsumerLive.cfg"])
def test_tlc_passes(setup, config):
    r = tlc(config)
    assert r.ok, r.output[-4000:]
    assert r.distinct > 1000 and r.generated > r.distinct


@pytest.fixture(scope="module")
def graph(setup, tmp_path_factory):
    dot = tmp_path_factory.mktemp("consumer") / "consumer.dot"
    r = consumer_graph.dump_graph(dot)
    assert r.ok, r.output[-4000:]
    return dot


def test_core_matches_the_spec_graph(graph):
    res = consumer_graph.check_graph(graph, consumer_graph.GRAPH_UNIVERSE)
    assert res.ok, res.line() + "\n" + "\n".join(res.examples)
    assert res.steps > 1000


@pytest.mark.parametrize("mutant", consumer_mutants.SPEC_MUTANTS, ids=lambda m: m.name)
def test_spec_mutant_caught_by_its_property(setup, mutant):
    out = consumer_mutants.run_spec_mutant(mutant)
    assert out.passed, out.line()


@pytest.mark.parametrize("mutant", consumer_mutants.CORE_MUTANTS, ids=lambda m: m.name)
def test_core_mutant_caught_by_the_graph_check(graph, mutant):
    out = consumer_mutants.run_core_mutant(mutant, graph)
    assert out.passed, out.line()


def test_core_mutants_leave_the_core_as_it_was(graph):
    """A core mutant is undone after its replay: the graph check passes again."""
    consumer_mutants.run_core_mutant(consumer_mutants.CORE_MUTANTS[0], graph)
    assert consumer_graph.check_graph(graph, consumer_graph.GRAPH_UNIVERSE).ok


def test_every_consumer_property_checked_is_listed_and_defined():
    """Each invariant and property an MCConsumer*.cfg checks is in tla/README.md's table of the
    consumer spec's properties and defined in ConsumerGroup.tla (a name checked but undocumented,
    or documented but never checked, is caught)."""
    import re
    from pathlib import Path

    tla = Path(__file__).resolve().parents[2] / "tla"
    checked = set()
    for cfg in tla.glob("MCConsumer*.cfg"):
        section = None
        for line in cfg.read_text().splitlines():
            line = line.split("\\*", 1)[0]
            words = line.split()
            if not words:
                continue
            if line[0] not in " \t":
                section, words = words[0], words[1:]
            if section in ("INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES"):
                checked |= set(words)
    readme = (tla / "README.md").read_text().split("Properties (`MCConsumer*.cfg`):", 1)[1].split("\n\n", 2)[1]
    listed = {n for row in readme.splitlines()[2:] for n in re.findall(r"`(\w+)`", row.split("|")[1])}
    spec = (tla / "ConsumerGroup.tla").read_text() + (tla / "MCConsumer.tla").read_text()
    assert checked and checked <= listed, sorted(checked - listed)
    assert [n for n in listed if not re.search(rf"^{n}\b.*==", spec, re.M)] == []
