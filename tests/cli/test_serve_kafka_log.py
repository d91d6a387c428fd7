"""``groupcoord serve --kafka-log FILE``: the groups' changes in Kafka 4.x's own words.

Real clients (kafka-python and confluent-kafka, each in its own process) form a group of
three against ``groupcoord serve``; one is SIGKILLed (its session expires), one leaves
cleanly, then the last. The file must read as a Kafka 4.x broker's server.log: its layout,
the GroupMetadataManager statements in Kafka's order with Kafka's reasons, and
``groupcoord verify --kafka-log`` finding the group conforming.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from server_harness import ServerProcess, Worker, balanced, wait_until

from groupcoord.core.partitioning import partition_for

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GROUP = "kafka-log-told"
SESSION_MS = 2000
PHASE_S = 60
GMM = "org.apache.kafka.coordinator.group.GroupMetadataManager"
# log4j2's "[%d] %p %m (%c)%n" (Kafka's config/log4j2.yaml), the message after the LogContext
# prefix of CoordinatorRuntime: "[GroupCoordinator id=N topic=__consumer_offsets partition=P] "
LINE = re.compile(r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO \[GroupCoordinator id=0 "
                  r"topic=__consumer_offsets partition=(?P<p>\d+)\] (?P<msg>.*) \((?P<logger>[\w.]+)\)$")


@pytest.fixture(scope="module")
def told(tmp_path_factory):
    """The run: returns (the log's path, the member ids by worker name, the server's lines)."""
    path = tmp_path_factory.mktemp("kafka-log") / "server.log"
    server = ServerProcess("--kafka-log", str(path), settings={"group.min.session.timeout.ms": 500})
    workers: list[Worker] = []
    try:
        workers = [Worker("kafka-python", server.bootstrap, GROUP, client_id="kp-0", session_ms=SESSION_MS),
                   Worker("confluent", server.bootstrap, GROUP, client_id="rd-1", session_ms=SESSION_MS),
                   Worker("kafka-python", server.bootstrap, GROUP, client_id="kp-2", session_ms=SESSION_MS)]
        wait_until(lambda: balanced(workers), PHASE_S, lambda: f"2/2/2: {[w.assignment for w in workers]}")
        wait_until(lambda: (server.last_group_state(GROUP) or {}).get("state") == "Stable", 20, "Stable")

        killed, leaver, last = workers[2], workers[1], workers[0]
        killed.kill()  # SIGKILL: no LeaveGroup, no more heartbeats; its session expires
        wait_until(lambda: balanced([last, leaver]) and len(last.assignment) == 3, SESSION_MS / 1000 + PHASE_S,
                   lambda: f"3/3 after the session timeout: {[last.assignment, leaver.assignment]}")

        leaver.close()  # a clean close: LeaveGroup
        wait_until(lambda: last.assignment is not None and len(last.assignment) == 6, PHASE_S,
                   lambda: f"6 partitions for the last member: {last.assignment}")
        last.close()
        wait_until(lambda: (server.last_group_state(GROUP) or {}).get("state") == "Empty", PHASE_S, "Empty")
    finally:
        for w in workers:
            w.stop()
        code = server.stop()
    assert code == 143, server.log_text()  # stopped by SIGTERM
    assert not [row for row in server.lines if row.get("level") == "error"], server.log_text()
    text = path.read_text(encoding="utf-8")
    ids = {}
    for name in ("kp-0", "rd-1", "kp-2"):
        found = re.findall(rf"Pending dynamic member with id ({re.escape(name)}-\S+) joins group", text)
        assert found, f"{name} never joined: {text}"
        ids[name] = found[-1]
    return path, ids, server.lines


def group_messages(path) -> list[str]:
    out = []
    partition = partition_for(GROUP, 50)
    for raw in path.read_text(encoding="utf-8").splitlines():
        m = LINE.match(raw)
        assert m, f"not Kafka's layout: {raw!r}"
        if GROUP in m["msg"]:
            assert int(m["p"]) == partition and m["logger"] == GMM, raw
            out.append(m["msg"])
    return out


def test_every_line_has_kafkas_layout_in_time_order(told):
    path, _, _ = told
    stamps = [LINE.match(row)["ts"] for row in path.read_text(encoding="utf-8").splitlines()]
    assert stamps and stamps == sorted(stamps)


def test_the_group_is_told_as_kafka_4x_tells_it(told):
    """From the SIGKILL on, the statements are fixed: the failure and its rebalance, the
    clean leave and its rebalance, the last leave emptying the group, the unload at shutdown.
    Each leader's assignment is received for the generation just stabilized."""
    path, ids, _ = told
    messages = group_messages(path)
    dead, leaver, last = ids["kp-2"], ids["rd-1"], ids["kp-0"]
    failed = f"Member {dead} in group {GROUP} has failed, removing it from the group."
    assert messages.count(failed) == 1, messages
    at = messages.index(failed)
    before = [m for m in messages[:at] if m.startswith("Stabilized")]
    g = int(re.match(rf"Stabilized group {GROUP} generation (\d+) with 3 members\.$", before[-1])[1])

    tail = [m for m in messages[at:] if not m.startswith("Assignment received")]
    leave_reason = re.search(rf"\[Group {GROUP}\] Member {re.escape(leaver)} has left group through explicit "
                             r"`LeaveGroup` request; client reason: (.*)$", "\n".join(tail), re.M)
    assert leave_reason, tail
    last_reason = re.search(rf"\[Group {GROUP}\] Member {re.escape(last)} has left group through explicit "
                            r"`LeaveGroup` request; client reason: (.*)$", "\n".join(tail), re.M)
    assert last_reason, tail
    assert tail == [
        failed,
        f"Preparing to rebalance group {GROUP} in state PreparingRebalance with old generation {g} "
        f"(reason: removing member {dead} on heartbeat expiration.).",
        f"Stabilized group {GROUP} generation {g + 1} with 2 members.",
        f"[Group {GROUP}] Member {leaver} has left group through explicit `LeaveGroup` request; "
        f"client reason: {leave_reason[1]}",
        f"Preparing to rebalance group {GROUP} in state PreparingRebalance with old generation {g + 1} "
        f"(reason: explicit `LeaveGroup` request for ({leaver}) members.).",
        f"Stabilized group {GROUP} generation {g + 2} with 1 members.",
        f"[Group {GROUP}] Member {last} has left group through explicit `LeaveGroup` request; "
        f"client reason: {last_reason[1]}",
        f"Preparing to rebalance group {GROUP} in state PreparingRebalance with old generation {g + 2} "
        f"(reason: explicit `LeaveGroup` request for ({last}) members.).",
        f"Group {GROUP} with generation {g + 3} is now empty.",
        f"[GroupId={GROUP}] Unloading group metadata for generation {g + 3}.",
    ], "\n".join(messages)

    # before the failure: each member announced (MEMBER_ID_REQUIRED), then added, in Kafka's words
    for member in ids.values():
        assert any(re.fullmatch(rf"Dynamic member with unknown member id joins group {GROUP} in \w+ state\. "
                                rf"Created a new member id {re.escape(member)} and requesting the member to "
                                r"rejoin with this id\.", m) for m in messages[:at]), member
    first = messages.index(next(m for m in messages if m.startswith("Preparing")))
    assert re.fullmatch(rf"Preparing to rebalance group {GROUP} in state PreparingRebalance with old generation 0 "
                        rf"\(reason: Adding new member \S+ with group instance id null; client reason: .*\)\.",
                        messages[first]), messages[first]

    # every generation stabilized with members gets its leader's assignment, counted alike
    for i, m in enumerate(messages):
        s = re.fullmatch(rf"Stabilized group {GROUP} generation (\d+) with (\d+) members\.", m)
        if s:
            following = next((n for n in messages[i + 1:] if n.startswith(("Assignment", "Preparing"))), "")
            assert re.fullmatch(rf"Assignment received from leader \S+ for group {GROUP} for generation {s[1]}\. "
                                rf"The group has {s[2]} members, 0 of which are static\.", following), (m, following)


def test_the_structured_group_line_carries_kafkas_reason(told):
    _, ids, lines = told
    reasons = [row["reason"] for row in lines if row.get("event") == "group" and row.get("group") == GROUP and "reason" in row]
    assert f"removing member {ids['kp-2']} on heartbeat expiration." in reasons
    assert f"explicit `LeaveGroup` request for ({ids['rd-1']}) members." in reasons


def test_verify_kafka_log_finds_the_group_conforming(told, tmp_path):
    path, _, _ = told
    run = subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.main", "verify", "--kafka-log", str(path),
                          "--out", str(tmp_path / "report")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 groups: 1 conform, 0 diverge, 0 inconclusive" in run.stdout, run.stdout


@pytest.mark.parametrize("bad, why", [("{tmp}", "is a directory"), ("{tmp}/no/such/dir/server.log", "no such directory")])
def test_a_kafka_log_that_cannot_be_written_refuses_the_start_in_one_line(tmp_path, bad, why):
    run = subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.serve", "serve", "--port", "0",
                          "--data-dir", str(tmp_path / "data"), "--kafka-log", bad.format(tmp=tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [f"groupcoord serve: error: --kafka-log {bad.format(tmp=tmp_path)}: "
                                               f"{why}" + ("" if why == "is a directory" else
                                                           f": {tmp_path}/no/such/dir")]
    assert not (tmp_path / "data").exists()  # refused before the store was opened
