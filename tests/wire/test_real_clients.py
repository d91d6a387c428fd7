"""Real Kafka clients against ``groupcoord serve``: kafka-python, confluent-kafka (librdkafka)
and aiokafka consumers, each in its own process (tests/support/client_worker.py), and the admin clients
of confluent-kafka and kafka-python.

One server subprocess serves the whole module on 127.0.0.1 (a free port); each test uses its
own group. Session timeouts are short and the initial rebalance delay is 0 to keep this fast.
"""

from __future__ import annotations

import time

import pytest
from server_harness import ServerProcess, Worker, balanced, wait_until

# kafka-python's protocol module warns about importlib.resources (admin tests import it here)
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CLIENTS = ["kafka-python", "confluent", "aiokafka"]
ASSIGNORS = {"kafka-python": ["range", "roundrobin", "cooperative-sticky"],
             "confluent": ["range", "roundrobin", "cooperative-sticky"],
             "aiokafka": ["range", "roundrobin"]}  # aiokafka has no cooperative protocol
COMBOS = [(c, a) for c in CLIENTS for a in ASSIGNORS[c]]
PHASE_S = 60  # the longest any phase may take


@pytest.fixture(scope="module")
def server():
    s = ServerProcess(topics=("t6=6", "t2=2"))
    yield s
    code = s.stop()
    assert code == 143, s.log_text()  # stopped by SIGTERM
    errors = [row for row in s.lines if row.get("level") == "error"]
    assert not errors, errors


@pytest.fixture
def workers():
    started: list[Worker] = []

    def start(*args, **kwargs) -> Worker:
        w = Worker(*args, **kwargs)
        started.append(w)
        return w

    yield start
    for w in started:
        w.close(timeout=10)


def generation(server, group) -> int | None:
    state = server.last_group_state(group)
    return state and state.get("generation")


@pytest.mark.parametrize("client, assignor", COMBOS, ids=[f"{c}-{a}" for c, a in COMBOS])
def test_three_consumers_share_six_partitions_through_leave_and_join(server, workers, client, assignor):
    group = f"share-{client}-{assignor}"
    ws = [workers(client, server.bootstrap, group, client_id=f"{client}-{i}", assignor=assignor) for i in range(3)]
    wait_until(lambda: balanced(ws), PHASE_S, f"2/2/2 in {group}: {[w.assignment for w in ws]}")
    assert sorted(len(w.assignment) for w in ws) == [2, 2, 2]
    wait_until(lambda: server.last_group_state(group)["state"] == "Stable", 20, "Stable")
    assert server.last_group_state(group)["protocol"] == assignor

    ws[0].close()  # a clean close: LeaveGroup
    rest = ws[1:]
    wait_until(lambda: balanced(rest) and all(len(w.assignment) == 3 for w in rest), PHASE_S,
               f"3/3 in {group}: {[w.assignment for w in rest]}")

    rest.append(workers(client, server.bootstrap, group, client_id=f"{client}-3", assignor=assignor))
    wait_until(lambda: balanced(rest) and all(len(w.assignment) == 2 for w in rest), PHASE_S,
               f"2/2/2 again in {group}: {[w.assignment for w in rest]}")
    generations = [s["generation"] for s in server.group_states(group) if s["state"] == "Stable"]
    assert generations[0] >= 1 and generations == sorted(generations)  # the first generation is 1, not 0


def test_a_group_of_all_three_clients(server, workers):
    """kafka-python and librdkafka offer range and roundrobin, aiokafka only roundrobin: the vote
    picks roundrobin for the mixed group."""
    group = "mixed"
    ws = [workers(c, server.bootstrap, group, client_id=f"mixed-{c}",
                  assignor="roundrobin" if c == "aiokafka" else "range,roundrobin") for c in CLIENTS]
    wait_until(lambda: balanced(ws) and all(len(w.assignment) == 2 for w in ws), PHASE_S,
               f"2/2/2 in the mixed group: {[w.assignment for w in ws]}")
    assert server.last_group_state(group)["protocol"] == "roundrobin"


@pytest.mark.parametrize("client", CLIENTS)
def test_a_static_member_restarting_within_its_session_timeout_causes_no_rebalance(server, workers, client):
    group = f"static-{client}"
    session = 10_000
    ws = [workers(client, server.bootstrap, group, client_id=f"{client}-s{i}", instance_id=f"{client}-i{i}",
                  session_ms=session) for i in range(3)]
    wait_until(lambda: balanced(ws), PHASE_S, f"2/2/2 in {group}")
    wait_until(lambda: server.last_group_state(group)["state"] == "Stable", 10, "Stable")
    before = {w.name: list(w.assignment) for w in ws}
    settled = len(server.group_states(group))
    stable_generation = generation(server, group)

    restarted_at = time.monotonic()
    ws[1].close()  # a static member sends no LeaveGroup
    again = workers(client, server.bootstrap, group, client_id=ws[1].name, instance_id=f"{client}-i1",
                    session_ms=session)
    again.wait_event("ready", 30)
    wait_until(lambda: again.assignment == before[ws[1].name], PHASE_S, "the same partitions after the restart")
    assert time.monotonic() - restarted_at < session / 1000  # within the session timeout
    # No rebalance: the group stayed Stable at its generation, and the others kept their partitions.
    later = server.group_states(group)[settled:]
    assert all(s["state"] == "Stable" and s["generation"] == stable_generation for s in later), later
    assert generation(server, group) == stable_generation
    assert [w.assignment for w in (ws[0], ws[2])] == [before[ws[0].name], before[ws[2].name]]
    for w in (ws[0], ws[2]):
        assert [e for e in w.seen if e["event"] == "assignment"][-1]["partitions"] == before[w.name]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_consumer_that_stops_heartbeating_is_removed_after_its_session_timeout(server, workers, client):
    group = f"silent-{client}"
    session = 2000
    ws = [workers(client, server.bootstrap, group, client_id=f"{client}-h{i}", session_ms=session)
          for i in range(3)]
    wait_until(lambda: balanced(ws), PHASE_S, f"2/2/2 in {group}")
    wait_until(lambda: server.last_group_state(group)["state"] == "Stable", 10, "Stable")
    killed_at = time.monotonic()
    ws[2].kill()  # no LeaveGroup, no more heartbeats
    rest = ws[:2]
    wait_until(lambda: balanced(rest) and all(len(w.assignment) == 3 for w in rest), session / 1000 + PHASE_S,
               f"3/3 after the session timeout: {[w.assignment for w in rest]}")
    took = time.monotonic() - killed_at
    assert took >= session / 1000 * 0.7, f"rebalanced after {took:.1f}s: before the session timed out?"


@pytest.mark.parametrize("client", CLIENTS)
def test_committed_offsets_survive_a_consumer_restart(server, workers, client):
    group = f"offsets-{client}"
    first = workers(client, server.bootstrap, group, "t2", client_id=f"{client}-o1")
    wait_until(lambda: first.assignment == [0, 1], PHASE_S, "both partitions")
    first.send(cmd="commit", offsets={"0": 17, "1": 42})
    first.wait_event("committed", 30)
    first.close()

    second = workers(client, server.bootstrap, group, "t2", client_id=f"{client}-o2")
    wait_until(lambda: second.assignment == [0, 1], PHASE_S, "both partitions after the restart")
    second.send(cmd="committed", partitions=[0, 1])
    got = second.wait_event("committed_offsets", 30)["offsets"]
    offsets = {p: (o["offset"] if isinstance(o, dict) else o) for p, o in got.items()}
    offsets = {p: (o[0] if isinstance(o, list) else o) for p, o in offsets.items()}
    assert offsets == {"0": 17, "1": 42}


# --- admin clients ------------------------------------------------------------------------------------------

def _stable_group(server, workers, group, n=2):
    ws = [workers("confluent", server.bootstrap, group, client_id=f"{group}-c{i}") for i in range(n)]
    wait_until(lambda: balanced(ws), PHASE_S, f"balanced {group}")
    wait_until(lambda: server.last_group_state(group)["state"] == "Stable", 10, "Stable")
    ws[0].send(cmd="commit", offsets={str(p): 5 + p for p in ws[0].assignment})
    ws[0].wait_event("committed", 30)
    return ws


def test_confluent_admin_client(server, workers):
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    group = "admin-confluent"
    ws = _stable_group(server, workers, group)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})

    listed = admin.list_consumer_groups(request_timeout=15).result(timeout=30)
    states = {g.group_id: g.state for g in listed.valid}
    assert states[group] == ConsumerGroupState.STABLE and not listed.errors

    desc = admin.describe_consumer_groups([group], request_timeout=15)[group].result(timeout=30)
    assert desc.state == ConsumerGroupState.STABLE and desc.partition_assignor == "range"
    assert sorted(m.client_id for m in desc.members) == sorted(w.name for w in ws)
    assert {m.host for m in desc.members} == {"/127.0.0.1"}
    assigned = sorted(tp.partition for m in desc.members for tp in m.assignment.topic_partitions)
    assert assigned == list(range(6))

    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    committed = {tp.partition: tp.offset for tp in offsets.topic_partitions}
    assert committed == {p: 5 + p for p in ws[0].assignment}

    for w in ws:
        w.close()
    wait_until(lambda: server.last_group_state(group)["state"] == "Empty", 20, "Empty")
    altered = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition("t6", 0, 100), TopicPartition("t6", 1, 101)])])[group].result(timeout=30)
    assert {tp.partition: tp.error for tp in altered.topic_partitions} == {0: None, 1: None}
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    assert {tp.partition: tp.offset for tp in offsets.topic_partitions}[0] == 100

    empty = admin.list_consumer_groups(request_timeout=15,
                                       states={ConsumerGroupState.EMPTY}).result(timeout=30)
    assert group in {g.group_id for g in empty.valid}

    admin.delete_consumer_groups([group], request_timeout=15)[group].result(timeout=30)
    listed = admin.list_consumer_groups(request_timeout=15).result(timeout=30)
    assert group not in {g.group_id for g in listed.valid}


def test_kafka_python_admin_client(server, workers):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

    group = "admin-kafka-python"
    ws = _stable_group(server, workers, group)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="kp-admin")
    try:
        groups = {g["group_id"]: g for g in admin.list_groups()}
        assert groups[group]["protocol_type"] == "consumer"
        assert groups[group].get("group_state", "Stable") == "Stable"

        # kafka-python always asks for authorized operations and crashes on a wrong value
        desc = admin.describe_groups([group])[group]
        assert desc["error"] is None and desc["group_state"] == "Stable" and desc["protocol_data"] == "range"
        members = desc["members"]
        assert sorted(m["client_id"] for m in members) == sorted(w.name for w in ws)
        assert {m["client_host"] for m in members} == {"/127.0.0.1"}
        assert desc["authorized_operations"]  # a valid set of ACL operations

        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: om.offset for tp, om in offsets.items()} == {p: 5 + p for p in ws[0].assignment}

        for w in ws:
            w.close()
        wait_until(lambda: server.last_group_state(group)["state"] == "Empty", 20, "Empty")
        assert {g["group_id"]: g for g in admin.list_groups(states_filter=["Empty"])}.get(group)

        admin.alter_group_offsets(group, {TopicPartition("t6", 3): OffsetAndMetadata(300, "", -1),
                                          TopicPartition("t6", 4): OffsetAndMetadata(400, "", -1)})
        offsets = admin.list_group_offsets({group: None})[group]
        got = {tp.partition: om.offset for tp, om in offsets.items()}
        assert got[3] == 300 and got[4] == 400

        admin.delete_group_offsets(group, [TopicPartition("t6", 3)])
        offsets = admin.list_group_offsets({group: None})[group]
        assert 3 not in {tp.partition for tp in offsets} and 4 in {tp.partition for tp in offsets}

        result = dict(admin.delete_groups([group]))
        assert result[group] in ("OK", None) or not result[group]
        assert group not in {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()
