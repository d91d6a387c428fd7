"""Kafka's own logs as observations (``verify --kafka-log``): a broker's GroupCoordinator lines
(Kafka 4.x's and 2.x's wording, written from the log statements of Kafka's source) and the Java
consumer's, checked against the spec's transition table and generation rules; a planted fault
of each kind diverges at its line; unknown lines are counted and listed."""

from __future__ import annotations

import pytest

from groupcoord.adapters.cli.main import main
from groupcoord.adapters.verify.kafka_log import check_logs, read_logs
from groupcoord.adapters.verify.search import CONFORMS, DIVERGES, INCONCLUSIVE

from paths import TESTS

DATA = TESTS / "verify" / "data"


def _verdicts(*paths):
    return {v.group_id: v for v in check_logs(read_logs(paths))}


def test_a_broker_and_its_consumers_logs_conform():
    read = read_logs([DATA / "broker-4x.log", DATA / "consumer.log"])
    v = _verdicts(DATA / "broker-4x.log", DATA / "consumer.log")["orders"]
    assert v.verdict == CONFORMS and v.nodes >= 8, v
    assert [line for line, _ in read.unknown] == [f"{DATA / 'broker-4x.log'}:11"]  # the partition load line


def test_kafka_2x_wording_conforms():
    vs = _verdicts(DATA / "broker-2x.log")
    assert {g: v.verdict for g, v in vs.items()} == {"billing": CONFORMS, "shipping": CONFORMS}


FAULTS = {
    # the generation bumped twice for one join phase
    "generation skipped": ("Stabilized group orders generation 2 with 1 members",
                           "Stabilized group orders generation 3 with 1 members", "the spec moves it from 1 to 2"),
    # a rebalance started while one was under way, as if its state were lost
    "rebalance from preparing": ("in state Stable with old generation 1",
                                 "in state PreparingRebalance with old generation 1",
                                 "a rebalance prepared from PreparingRebalance"),
    # the leader's assignment taken for an old generation
    "stale assignment": ("for group orders for generation 2.", "for group orders for generation 1.",
                         "an assignment for generation 1"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_planted_fault_diverges_at_its_line(tmp_path, fault):
    old, new, why = FAULTS[fault]
    text = (DATA / "broker-4x.log").read_text()
    assert text.count(old) == 1
    (tmp_path / "broker.log").write_text(text.replace(old, new))
    v = _verdicts(tmp_path / "broker.log")["orders"]
    assert v.verdict == DIVERGES and why in v.detail, v.detail
    line = next(n for n, l in enumerate(text.splitlines(), start=1) if old in l)
    assert v.detail.startswith(f"{tmp_path / 'broker.log'}:{line}:")


def test_a_consumer_in_a_generation_never_stabilized_diverges(tmp_path):
    (tmp_path / "consumer.log").write_text((DATA / "consumer.log").read_text().replace("generationId=2", "generationId=5"))
    v = _verdicts(DATA / "broker-4x.log", tmp_path / "consumer.log")["orders"]
    assert v.verdict == DIVERGES and "which the coordinator never stabilized" in v.detail


def test_consumer_lines_alone_are_inconclusive():
    assert _verdicts(DATA / "consumer.log")["orders"].verdict == INCONCLUSIVE


def test_the_command_reports_logs_and_their_unknown_lines(tmp_path, capsys):
    assert main(["verify", "--kafka-log", str(DATA / "broker-4x.log"), str(DATA / "consumer.log"),
                 "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "1 groups: 1 conform" in out and "not checked: 1 log lines matching no known statement" in out
    assert main(["verify", "--kafka-log", str(tmp_path / "missing.log")]) == 2
    assert main(["verify"]) == 2
