"""The state machine's consumer-protocol members (KIP-848): joins, heartbeats reporting the
partitions a client holds, leaves and static leaves, all judged by ``verify``'s search against
the core, the in-process server, and ``groupcoord serve --storage memory`` through
``groupcoord probe --bootstrap``."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from server_harness import ServerProcess

from groupcoord.adapters.cli.main import main
from groupcoord.testing.machine import CoordinatorStateMachine

# derandomized: the counts below are the same every run (a random draw may leave out consumer members)
BOUNDED = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=True)
SEEN: dict[str, int] = {"answered": 0, "assigned": 0, "left": 0}


class Counting(CoordinatorStateMachine):
    """Counts what the consumer-protocol members did (a machine that never drew them proves nothing)."""

    def teardown(self) -> None:
        for s in (self.sut.sent if self.sut is not None else ()):
            if s.api != "ConsumerGroupHeartbeat" or not s.response or s.response.get("error_code"):
                continue
            SEEN["answered"] += 1
            SEEN["left"] += s.request["member_epoch"] < 0
            given = (s.response.get("assignment") or {}).get("topic_partitions") or ()
            SEEN["assigned"] += any(t["partitions"] for t in given)
        super().teardown()


class OnServer(Counting):
    system = "server"


def test_consumer_protocol_members_on_the_core_conform():
    SEEN.update(answered=0, assigned=0, left=0)
    run_state_machine_as_test(Counting, settings=settings(max_examples=60, stateful_step_count=25, **BOUNDED))
    assert SEEN["answered"] > 20 and SEEN["assigned"] > 5 and SEEN["left"] > 0, SEEN


def test_consumer_protocol_members_on_the_in_process_server_conform():
    SEEN.update(answered=0, assigned=0, left=0)
    run_state_machine_as_test(OnServer, settings=settings(max_examples=15, stateful_step_count=20, **BOUNDED))
    assert SEEN["answered"] > 0, SEEN


def test_probe_finds_nothing_on_serve_with_memory_storage(capsys):
    server = ServerProcess("--storage", "memory", topics=("groupcoord-probe=3",),
                           settings={"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 500})
    try:
        code = main(["probe", "--bootstrap", server.bootstrap, "--timer-tolerance-ms", "300", "--examples", "8",
                     "--steps", "12", "--seed", "3", "--group.initial.rebalance.delay.ms", "0",
                     "--group.min.session.timeout.ms", "500"])
    finally:
        assert server.stop() == 143
    out = capsys.readouterr().out
    assert code == 0, out
    assert "ConsumerGroupHeartbeat" not in out.split("examples, no divergence")[0].split("left out")[-1] or \
        "left out" not in out, out
