"""The consumer group spec (tla/ConsumerGroup.tla, KIP-848) tied to the core by trace validation
(adapters/tla/consumer_trace.py). TLC on its configurations, the state-graph check, trace
validation of the scenarios and generated runs, and the re-created bugs run in `groupcoord tla
check` and `groupcoord tla mutants` (tests/tla/test_tla.py asserts on them); here: the recorder's
reading of the core, what it refuses, and that trace validation catches the core's mutants."""

from __future__ import annotations

import attrs
import pytest

from groupcoord.adapters.tla import consumer_check, consumer_mutants, consumer_trace, consumer_trace_sources
from groupcoord.adapters.tla.run import TlaSetupError, check_setup
from groupcoord.core import events as ev
from groupcoord.core.commands import RebalanceTimer

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def setup():
    try:
        return check_setup()
    except TlaSetupError as e:
        pytest.fail(str(e))


def _heartbeat(k: int, member: str, epoch: int, **fields) -> ev.ConsumerGroupHeartbeat:
    return ev.ConsumerGroupHeartbeat(request_id=("hb", k), now_ms=k, version=1, group_id="g", member_id=member,
                                     member_epoch=epoch, **fields)


def _start(rec: consumer_trace.ConsumerRecorder) -> None:
    rec.feed(ev.LoadPartition(now_ms=0, partition=rec.part, records=()))
    rec.feed(ev.TopicsChanged(now_ms=0, topics=(("a", "ida", 2),)))


JOIN = dict(rebalance_timeout_ms=5000, subscribed_topic_names=("a",), topic_partitions=())


def test_a_heartbeat_is_one_row_with_the_group_after_it_and_its_answer():
    rec = consumer_trace.ConsumerRecorder("g")
    _start(rec)
    rec.feed(_heartbeat(1, "m1", 0, **JOIN))
    rec.feed(_heartbeat(2, "m1", 1))  # nothing reported: null subscription and partitions
    init, join, again = rec.trace.rows
    assert init["event"]["type"] == "Init" and join["event"]["m"] == "m1"
    assert join["s"]["groupEpoch"] == 1 and join["s"]["members"]["m1"]["masg"] == {"a:0", "a:1"}
    assert join["out"] == {"code": "NONE", "ep": 1, "asg": frozenset({"a:0", "a:1"})}
    # null: the subscription the member has, and every partition (and one of no topic) owned
    assert again["event"]["sub"] == {"a"}
    assert again["event"]["owned"] == {"a:0", "a:1", consumer_trace.NULL_OWNED}
    assert again["out"]["asg"] == {"a:0", "a:1"}  # not sent: unchanged


def test_inputs_the_spec_does_not_see_are_stepped_over_only_when_they_change_nothing():
    rec = consumer_trace.ConsumerRecorder("g")
    _start(rec)
    rec.feed(_heartbeat(1, "m1", 0, **JOIN))
    rec.feed(_heartbeat(2, "", 0, **JOIN))  # INVALID_REQUEST: refused before the spec's checks
    rec.feed(_heartbeat(3, "m2", 0, **JOIN, server_assignor="nope"))  # UNSUPPORTED_ASSIGNOR
    assert len(rec.trace.rows) == 2 and rec.trace.stepped_over >= 2
    with pytest.raises(consumer_trace.OutOfModel, match="regular expression"):
        rec.feed(_heartbeat(4, "m3", 0, rebalance_timeout_ms=5000, subscribed_topic_regex="a.*",
                            topic_partitions=()))


def test_the_trace_stops_at_the_first_input_the_spec_does_not_model():
    part = consumer_trace.ConsumerRecorder("g").part
    events = [ev.LoadPartition(now_ms=0, partition=part, records=()),
              ev.TopicsChanged(now_ms=0, topics=(("a", "ida", 2),)),
              _heartbeat(1, "m1", 0, **JOIN),
              ev.TopicsChanged(now_ms=2, topics=(("a", "ida", 3),)),
              _heartbeat(3, "m1", 1)]
    t = consumer_trace.record(events, "g", complete_writes=True)
    assert t.steps == 1 and t.stopped.startswith("the topics changed while the group lives")


def test_a_rebalance_timer_not_armed_is_refused():
    rec = consumer_trace.ConsumerRecorder("g")
    _start(rec)
    rec.feed(_heartbeat(1, "m1", 0, **JOIN))
    with pytest.raises(consumer_trace.OutOfModel, match="not the one armed"):
        rec.feed(ev.TimerFired(now_ms=5, key=RebalanceTimer(rec.part, "g", "m1"), payload=1))


def test_generated_runs_are_repeatable_and_reach_every_kind_of_step():
    a, b = consumer_trace_sources.client_trace(3), consumer_trace_sources.client_trace(3)
    assert a.rows == b.rows and a.steps > 30
    kinds = {r["event"]["type"] for seed in consumer_check.CLIENT_SEEDS
             for r in consumer_trace_sources.client_trace(seed, consumer_check.CLIENT_STEPS).rows}
    assert kinds == {"Init", "Heartbeat", "Leave", "StaticLeave", "SessionTimeout", "RebalanceTimeout"}


def test_a_corrupted_row_is_rejected_there(setup):
    t = consumer_trace_sources.client_trace(2, 30)
    assert consumer_trace.check([t]).accepted
    rows = list(t.rows)
    s = rows[5]["s"]
    rows[5] = rows[5].set(out=rows[5]["out"], s=s.set(assignEpoch=s["assignEpoch"] + 1))
    r = consumer_trace.check([attrs.evolve(t, rows=rows)])
    assert not r.accepted and r.diverged_at == 6


@pytest.mark.parametrize("mutant", consumer_mutants.CORE_MUTANTS, ids=lambda m: m.name)
def test_trace_validation_catches_the_core_mutants(setup, mutant):
    assert consumer_mutants.run_core_mutant_traces(mutant) is not None


def test_core_mutants_leave_the_core_as_it_was():
    from groupcoord.core.consumer import machine, reconcile

    before = (reconcile._next, machine.ConsumerMachine.rebalance_expired)
    for m in consumer_mutants.CORE_MUTANTS:
        with consumer_mutants.applied(m):
            pass
    assert (reconcile._next, machine.ConsumerMachine.rebalance_expired) == before


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


# --- real clients: librdkafka's consumer-protocol consumers recorded by `serve --trace` -------------

@pytest.fixture(scope="module")
def real_recording(tmp_path_factory):
    """A recording of three confluent-kafka consumers (``group.protocol=consumer``; one static)
    forming a group on six partitions, a third joining (the others revoke for it) and leaving."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    import time

    from kip848_clients import owned, poll_until
    from server_harness import ServerProcess

    trace = tmp_path_factory.mktemp("consumer-trace") / "rec"
    server = ServerProcess("--trace", str(trace), topics=("t6=6",),
                           settings={"group.consumer.session.timeout.ms": 6000,
                                     "group.consumer.heartbeat.interval.ms": 300})
    consumers = []

    def consumer(name: str, **conf):
        c = confluent_kafka.Consumer({"bootstrap.servers": server.bootstrap, "group.id": "real",
                                      "group.protocol": "consumer", "client.id": name, "enable.auto.commit": False,
                                      "broker.address.family": "v4", "log_level": 3, **conf})
        c.subscribe(["t6"])
        consumers.append(c)
        return c

    try:
        a, b = consumer("a"), consumer("b", **{"group.instance.id": "ib"})
        poll_until([a, b], lambda: sorted(owned(a) + owned(b)) == list(range(6)) and len(owned(a)) == 3,
                   "two members with three partitions each")
        c = consumer("c")
        poll_until([a, b, c], lambda: sorted(len(owned(x)) for x in (a, b, c)) == [2, 2, 2],
                   "three members with two partitions each")
        c.close()
        consumers.remove(c)
        poll_until([a, b], lambda: sorted(len(owned(x)) for x in (a, b)) == [3, 3], "two members again")
        deadline = time.monotonic() + 1  # a few more heartbeats in the stable group
        while time.monotonic() < deadline:
            for x in (a, b):
                x.poll(0.05)
    finally:
        for x in consumers:
            x.close()
        assert server.stop() == 143
    return trace


def test_real_clients_runs_validate_against_the_spec(setup, real_recording):
    from groupcoord.adapters.cli import tla as tla_cli

    lines: list[str] = []
    assert tla_cli.run_validate(str(real_recording), out=lines.append) == 0, "\n".join(lines)
    (unit,) = [line for line in lines if line.startswith("trace ")]
    assert ", accepted" in unit and int(unit.split(": ")[1].split(" lines")[0]) >= 20, unit


def test_a_core_fault_is_caught_on_real_clients_runs(setup, real_recording):
    """The same real inputs re-run through a core that assigns a partition before its owner
    released it (the third member's join makes the others revoke): rejected. (The other core
    mutant needs a rebalance timeout, which prompt real clients never reach.)"""
    from groupcoord.adapters.cli import tla as tla_cli

    mutant = next(m for m in consumer_mutants.CORE_MUTANTS if m.name == "core-assign-before-revoked")
    lines: list[str] = []
    with consumer_mutants.applied(mutant):
        code = tla_cli.run_validate(str(real_recording), out=lines.append)
    assert code == 1 and any("REJECTED" in line for line in lines), "\n".join(lines)
