"""Real clients of both group protocols against ``groupcoord serve`` (issue #35, point 5).

* librdkafka consumers (confluent-kafka, ``group.protocol=consumer``) on a six-partition topic:
  incremental rebalances when a member is SIGKILLed (after the session timeout), leaves (at once),
  or is static and comes back within the session timeout (its partitions kept for it);
* commits and committed offsets, also read by a member that joined after a rebalance;
* mixed groups: a kafka-python consumer (classic protocol) beside a consumer-protocol member; the
  group downgraded to classic when the last consumer-protocol member leaves, and a classic group
  upgraded when one joins;
* the admin commands (``groupcoord groups list|describe``) and confluent-kafka's AdminClient
  showing consumer groups with their type, state, epochs and members.

What is asserted of ownership: no partition is owned twice, checked at every observed moment over
the consumers in this process (``assignment()`` after each poll) and over the server's own view
(ConsumerGroupDescribe, several times a second). A member in a subprocess reports its assignment
after its own poll, later than the server moved on: its view is compared only once the group
has settled.

The server runs with short consumer-group timeouts (``group.consumer.session.timeout.ms``,
``group.consumer.heartbeat.interval.ms``). Every wait is a bounded poll; every process is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import subprocess
import sys
import time

import pytest
from server_harness import ServerProcess, Worker, wait_until

from groupcoord.adapters.client.kafka_client import KafkaClient

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")
pytest.importorskip("kafka")  # kafka-python, the classic-protocol client

SESSION_MS = 6000
HEARTBEAT_MS = 500
PHASE_S = 60  # the longest any one step may take on a busy machine
ALL = list(range(6))
HB, DESCRIBE, LIST, DESCRIBE_CLASSIC = 68, 69, 16, 15
CONSUMER_TYPE, CLASSIC_TYPE = 1, 0  # ConsumerGroupDescribe v1's MemberType


@pytest.fixture(scope="module")
def server():
    s = ServerProcess(topics=("t6=6",), settings={"group.consumer.session.timeout.ms": SESSION_MS,
                                                  "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS})
    yield s
    code = s.stop()
    assert code == 143, s.log_text()  # stopped by SIGTERM, not crashed
    errors = [row for row in s.lines if row.get("level") == "error"]
    assert not errors, errors


# --- the server's view, asked over the wire --------------------------------------------------------

def _ask(server, api_key: int, fields: dict, version: int) -> dict:
    async def main():
        c = await KafkaClient.connect("127.0.0.1", server.port, client_id="observer")
        try:
            return await c.request(api_key, fields, version)
        finally:
            await c.close()
    return asyncio.run(asyncio.wait_for(main(), 30))


def consumer_group(server, group: str) -> dict:
    (g,) = _ask(server, DESCRIBE, {"group_ids": [group], "include_authorized_operations": False}, 1)["groups"]
    return g


def listed(server, group: str) -> dict | None:
    """ListGroups v5 (types and states): the group's row, or None."""
    rows = _ask(server, LIST, {"states_filter": [], "types_filter": []}, 5)["groups"]
    return next((r for r in rows if r["group_id"] == group), None)


def classic_group(server, group: str) -> dict:
    (g,) = _ask(server, DESCRIBE_CLASSIC, {"groups": [group], "include_authorized_operations": False}, 5)["groups"]
    return g


def server_owned(group: dict) -> dict[str, list[int]]:
    """A described consumer group's current assignment, member id -> t6's partitions."""
    return {m["member_id"]: sorted(p for t in m["assignment"]["topic_partitions"] if t["topic_name"] == "t6"
                                   for p in t["partitions"]) for m in group["members"]}


def disjoint(views: list[list[int]]) -> bool:
    flat = [p for v in views for p in v]
    return len(flat) == len(set(flat))


# --- consumers in this process, watched ------------------------------------------------------------

def new_consumer(server, group: str, name: str, **conf):
    c = confluent_kafka.Consumer({
        "bootstrap.servers": server.bootstrap, "group.id": group, "group.protocol": "consumer",
        "client.id": name, "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "broker.address.family": "v4", "log_level": 3, **conf})
    c.subscribe(["t6"])
    return c


def owned(c) -> list[int]:
    return sorted(tp.partition for tp in c.assignment() if tp.topic == "t6")


class Watch:
    """Polls the consumers of this process and asks the server for the group, checking at each
    observation that no partition is owned twice; ``until`` waits for a condition."""

    def __init__(self, server, group: str, consumers: list, describe: bool = True) -> None:
        self.server, self.group, self.consumers, self.describe = server, group, consumers, describe
        self.observations = 0
        self.last_server: dict | None = None
        self._next_describe = 0.0

    def observe(self) -> None:
        for c in self.consumers:
            c.poll(0.05)
        views = [owned(c) for c in self.consumers]
        assert disjoint(views), f"a partition owned twice by this process's consumers: {views}"
        if self.describe and time.monotonic() >= self._next_describe:
            self._next_describe = time.monotonic() + 0.25
            g = consumer_group(self.server, self.group)
            if g["error_code"] == 0:
                self.last_server = server_owned(g)
                assert disjoint(list(self.last_server.values())), \
                    f"a partition owned twice in the server's view: {self.last_server}"
        self.observations += 1

    def until(self, condition, what: str, timeout: float = PHASE_S):
        deadline = time.monotonic() + timeout
        while True:
            self.observe()
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}: this process's consumers "
                                     f"{[owned(c) for c in self.consumers]}, the server's {self.last_server}")

    def close(self, c) -> None:
        self.consumers.remove(c)
        c.close()

    def close_all(self) -> None:
        while self.consumers:
            self.close(self.consumers[-1])


def covered_by(consumers, sizes: list[int] | None = None) -> bool:
    views = [owned(c) for c in consumers]
    if sorted(p for v in views for p in v) != ALL:
        return False
    return sizes is None or sorted(len(v) for v in views) == sorted(sizes)


# --- a consumer-protocol member in its own process (to be SIGKILLed) --------------------------------

_MEMBER = r"""
import json, sys, time
import confluent_kafka
bootstrap, group, name = sys.argv[1:4]
c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                              "client.id": name, "enable.auto.commit": False, "broker.address.family": "v4",
                              "log_level": 3})
c.subscribe(["t6"])
last, deadline = None, time.monotonic() + 120  # bounded even if nobody kills it
while time.monotonic() < deadline:
    c.poll(0.05)
    now = sorted(tp.partition for tp in c.assignment())
    if now != last:
        last = now
        print(json.dumps(now), flush=True)
c.close()
"""


class MemberProcess:
    def __init__(self, server, group: str, name: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _MEMBER, server.bootstrap, group, name],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        self.assignment: list[int] | None = None
        import threading
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.assignment = json.loads(line)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


# --- 1. incremental rebalances ---------------------------------------------------------------------

def test_killed_member_is_fenced_after_the_session_timeout_and_a_leaving_one_at_once(server):
    group = "kip848-kill"
    w = Watch(server, group, [])
    victim = MemberProcess(server, group, "victim")
    try:
        w.consumers += [new_consumer(server, group, "a"), new_consumer(server, group, "b")]
        a, b = w.consumers

        def three_way():
            views = [owned(a), owned(b), victim.assignment or []]
            return (sorted(p for v in views for p in v) == ALL and all(len(v) == 2 for v in views)
                    and w.last_server is not None and len(w.last_server) == 3
                    and sorted(len(v) for v in w.last_server.values()) == [2, 2, 2])
        w.until(three_way, "three members with two partitions each")
        victims = sorted(victim.assignment)
        assert w.last_server[next(m for m, ps in w.last_server.items() if ps == victims)] == victims

        victim.kill()
        killed_at = time.monotonic()
        w.until(lambda: covered_by([a, b], [3, 3]), "the survivors to own all six")
        took = time.monotonic() - killed_at
        # Fenced by the session timeout (counted from the victim's last heartbeat), not before
        assert took >= (SESSION_MS - HEARTBEAT_MS) / 1000 - 0.5, took
        w.until(lambda: w.last_server is not None and len(w.last_server) == 2
                and sorted(p for v in w.last_server.values() for p in v) == ALL, "the server to drop the victim")

        left = owned(a)
        w.close(a)  # leaves: member epoch -1
        left_at = time.monotonic()
        w.until(lambda: owned(b) == ALL, "the remaining member to own all six")
        assert time.monotonic() - left_at < SESSION_MS / 1000, "the leave was not acted on at once"
        assert left  # it had partitions to give up
        g = consumer_group(server, group)
        assert g["group_state"] == "Stable" and len(g["members"]) == 1 and server_owned(g) == {
            g["members"][0]["member_id"]: ALL}
        assert w.observations > 20
    finally:
        victim.kill()
        w.close_all()


def test_static_member_restarting_within_the_session_timeout_gets_its_partitions_back(server):
    group = "kip848-static"
    w = Watch(server, group, [new_consumer(server, group, "static", **{"group.instance.id": "s-1"}),
                              new_consumer(server, group, "dynamic")])
    try:
        static, dynamic = w.consumers
        w.until(lambda: covered_by([static, dynamic], [3, 3]), "the two members to share t6")
        mine, theirs = owned(static), owned(dynamic)
        before = {m["instance_id"]: m for m in consumer_group(server, group)["members"]}
        assert set(before) == {"s-1", None}

        w.close(static)  # a static member's leave is temporary (member epoch -2)
        closed_at = time.monotonic()
        g = consumer_group(server, group)
        assert "s-1" in {m["instance_id"] for m in g["members"]}, "the static member was removed on close"
        restarted = new_consumer(server, group, "static-again", **{"group.instance.id": "s-1"})
        w.consumers.insert(0, restarted)
        w.until(lambda: owned(restarted) == mine, "the restarted static member to get its partitions back")
        assert time.monotonic() - closed_at < SESSION_MS / 1000
        assert owned(dynamic) == theirs  # never moved
        g = consumer_group(server, group)
        by_instance = {m["instance_id"]: m for m in g["members"]}
        assert set(by_instance) == {"s-1", None}
        assert by_instance["s-1"]["member_id"] != before["s-1"]["member_id"]  # the new incarnation's id
        assert server_owned(g)[by_instance["s-1"]["member_id"]] == mine
    finally:
        w.close_all()


# --- 2. commits --------------------------------------------------------------------------------------

def test_commits_read_back_by_the_committer_and_by_a_member_after_a_rebalance(server):
    group = "kip848-commits"
    TP = confluent_kafka.TopicPartition
    w = Watch(server, group, [new_consumer(server, group, "a"), new_consumer(server, group, "b")])
    try:
        a, b = w.consumers
        w.until(lambda: covered_by([a, b], [3, 3]), "the two members to share t6")
        mine = owned(a)
        a.commit(offsets=[TP("t6", p, 100 + p) for p in mine], asynchronous=False)
        assert {tp.partition: tp.offset for tp in a.committed([TP("t6", p) for p in mine], timeout=20)} == \
            {p: 100 + p for p in mine}

        c = new_consumer(server, group, "c")
        w.consumers.append(c)
        w.until(lambda: covered_by([a, b, c], [2, 2, 2]), "three members with two partitions each")
        got = {tp.partition: tp.offset for tp in c.committed([TP("t6", p) for p in owned(c)], timeout=20)}
        assert got == {p: (100 + p if p in mine else confluent_kafka.OFFSET_INVALID) for p in owned(c)}
        # the newcomer commits with its own member epoch, after the rebalance
        c.commit(offsets=[TP("t6", p, 200 + p) for p in owned(c)], asynchronous=False)
        theirs = owned(c)

        w.close(c)
        w.until(lambda: covered_by([a, b], [3, 3]), "the two members to share t6 again")
        every = {tp.partition: tp.offset for tp in b.committed([TP("t6", p) for p in ALL], timeout=20)}
        assert every == {p: (200 + p if p in theirs else 100 + p if p in mine else confluent_kafka.OFFSET_INVALID)
                         for p in ALL}
    finally:
        w.close_all()


# --- 3. mixed groups ---------------------------------------------------------------------------------

def _settled(server, group, workers, consumers, types: dict[str, int]) -> bool:
    """The server's view and every client's agree, cover t6 once each; members by type."""
    g = consumer_group(server, group)
    if g["error_code"] or g["group_state"] != "Stable":
        return False
    if sorted(m["member_type"] for m in g["members"]) != sorted(t for t, n in types.items() for _ in range(n)):
        return False
    views = [w.assignment or [] for w in workers] + [owned(c) for c in consumers]
    theirs = server_owned(g)
    return (sorted(p for v in views for p in v) == ALL and disjoint(views)
            and sorted(map(tuple, views)) == sorted(map(tuple, theirs.values())))


def _mixed(server, group: str, w: Watch):
    """A consumer-protocol member, then a kafka-python member joining its consumer group: both get
    partitions, none twice, all covered; the group stays a consumer group. Returns the worker."""
    (modern,) = w.consumers
    w.until(lambda: owned(modern) == ALL, "the consumer-protocol member to own t6")
    assert listed(server, group)["group_type"] == "consumer"
    classic = Worker("kafka-python", server.bootstrap, group, client_id="classic", assignor="range")
    try:
        w.until(lambda: _settled(server, group, [classic], [modern], {CONSUMER_TYPE: 1, CLASSIC_TYPE: 1}),
                "both members to get partitions")
    except BaseException:
        classic.close()
        raise
    assert owned(modern) and classic.assignment
    g = consumer_group(server, group)
    assert {m["client_id"]: m["member_type"] for m in g["members"]} == {"modern": CONSUMER_TYPE,
                                                                        "classic": CLASSIC_TYPE}
    assert listed(server, group)["group_type"] == "consumer"
    assert classic_group(server, group)["group_state"] == "Dead"  # DescribeGroups does not see a consumer group
    return classic


def test_mixed_group_downgraded_to_classic_when_the_consumer_protocol_member_leaves(server):
    group = "kip848-mixed"
    w = Watch(server, group, [new_consumer(server, group, "modern")])
    classic = None
    try:
        classic = _mixed(server, group, w)
        w.close(w.consumers[0])
        wait_until(lambda: (listed(server, group) or {}).get("group_type") == "classic", PHASE_S,
                   lambda: f"the group to be classic again: {listed(server, group)}")
        d = classic_group(server, group)
        assert d["error_code"] == 0 and d["protocol_type"] == "consumer"
        assert [m["client_id"] for m in d["members"]] == ["classic"]
        assert consumer_group(server, group)["error_code"] != 0  # no longer a consumer group
    finally:
        w.close_all()
        if classic is not None:
            classic.kill()  # (stuck in the downgraded group's join phase, it could not leave: see below)


def test_downgraded_group_rebalances_to_its_classic_member(server):
    group = "kip848-downgrade"
    w = Watch(server, group, [new_consumer(server, group, "modern")])
    classic = None
    try:
        classic = _mixed(server, group, w)
        w.close(w.consumers[0])
        # kafka-python rejoins at once (REBALANCE_IN_PROGRESS on its next heartbeat): well within 20 s
        wait_until(lambda: classic.assignment == ALL and classic_group(server, group)["group_state"] == "Stable",
                   20, lambda: f"the classic member to own t6: {classic.assignment}, {classic_group(server, group)}")
        row = listed(server, group)
        assert row["group_type"] == "classic" and row["group_state"] == "Stable"
        d = classic_group(server, group)
        assert d["protocol_data"] == "range" and [m["client_id"] for m in d["members"]] == ["classic"]
    finally:
        w.close_all()
        if classic is not None:
            classic.kill()  # (stuck in the downgraded group's join phase, it could not leave: see below)


def test_classic_group_upgraded_when_a_consumer_protocol_member_joins(server):
    group = "kip848-upgrade"
    workers = [Worker("kafka-python", server.bootstrap, group, client_id=f"old-{i}", assignor="range")
               for i in range(2)]
    w = Watch(server, group, [])
    try:
        wait_until(lambda: sorted(p for x in workers for p in (x.assignment or [])) == ALL
                   and all(x.assignment for x in workers), PHASE_S, "the classic members to share t6")
        wait_until(lambda: (listed(server, group) or {}).get("group_state") == "Stable", PHASE_S, "Stable")
        assert listed(server, group)["group_type"] == "classic"

        modern = new_consumer(server, group, "modern")
        w.consumers.append(modern)
        w.until(lambda: (listed(server, group) or {}).get("group_type") == "consumer", "the group upgraded")
        w.until(lambda: _settled(server, group, workers, [modern], {CONSUMER_TYPE: 1, CLASSIC_TYPE: 2}),
                "the three members to share t6")
        assert owned(modern) and all(x.assignment for x in workers)
        assert classic_group(server, group)["group_state"] == "Dead"  # DescribeGroups does not see it
    finally:
        for x in workers:  # the classic members leave first: the group stays a consumer group
            x.close()
        w.close_all()


# --- 4. the admin commands and confluent-kafka's AdminClient ---------------------------------------

def admin(server, *args: str) -> tuple[int, str, str]:
    from groupcoord.adapters.cli.serve import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args) + ["--bootstrap-server", server.bootstrap])
    return code, out.getvalue(), err.getvalue()


def test_admin_commands_and_admin_client_show_consumer_and_classic_groups(server):
    group, old = "kip848-admin", "kip848-admin-classic"
    w = Watch(server, group, [new_consumer(server, group, "m-0"), new_consumer(server, group, "m-1")])
    worker = Worker("kafka-python", server.bootstrap, old, client_id="old-0", assignor="range")
    try:
        w.until(lambda: covered_by(w.consumers, [3, 3]), "the consumer group to share t6")
        w.until(lambda: consumer_group(server, group)["group_state"] == "Stable", "Stable")
        wait_until(lambda: worker.assignment == ALL and (listed(server, old) or {}).get("group_state") == "Stable",
                   PHASE_S, "the classic group")
        g = consumer_group(server, group)

        code, out, _ = admin(server, "groups", "list", "--json")
        rows = {r["group"]: r for r in json.loads(out)}
        assert code == 0 and rows[group]["type"] == "consumer" and rows[old]["type"] == "classic"
        code, out, _ = admin(server, "groups", "list", "--type")
        lines = out.splitlines()
        assert code == 0 and lines[0].split() == ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE", "COORDINATOR"]
        assert [group, "consumer", "Stable"] in [row.split()[:3] for row in lines[1:]]
        assert [old, "classic", "Stable", "consumer"] in [row.split()[:4] for row in lines[1:]]
        code, out, _ = admin(server, "groups", "list", "--type", "consumer", "--json")
        assert [r["group"] for r in json.loads(out) if r["group"].startswith("kip848-admin")] == [group]

        code, out, err = admin(server, "groups", "describe", group)
        assert code == 0, err
        assert (f"group {group}: type consumer, state Stable, group epoch {g['group_epoch']}, "
                f"assignment epoch {g['assignment_epoch']}, assignor uniform") in out
        for m in g["members"]:
            row = next(line for line in out.splitlines() if line.startswith(m["member_id"]))
            mine = ",".join(map(str, server_owned(g)[m["member_id"]]))
            assert row.split()[1:] == ["-", m["client_id"], "/127.0.0.1", "consumer", str(m["member_epoch"]),
                                       f"t6:{mine}", f"t6:{mine}"], row
        code, out, _ = admin(server, "groups", "describe", group, "--json")
        info = json.loads(out)
        assert info["type"] == "consumer" and info["state"] == "Stable" and info["group_epoch"] == g["group_epoch"]
        assert sorted(p for m in info["members"] for p in m["assignment"]["t6"]) == ALL
        assert {m["member_type"] for m in info["members"]} == {"consumer"}

        code, out, _ = admin(server, "groups", "describe", old)
        assert code == 0 and f"group {old}: type classic, state Stable" in out and "assignor range" in out
        assert "old-0" in out and "t6:0,1,2,3,4,5" in out

        # confluent-kafka's AdminClient (librdkafka: ListGroups v5, ConsumerGroupDescribe, DescribeGroups)
        client = confluent_admin.AdminClient({"bootstrap.servers": server.bootstrap,
                                                    "broker.address.family": "v4", "log_level": 3})
        result = client.list_consumer_groups(request_timeout=30).result(timeout=60)
        types = {x.group_id: x.type for x in result.valid}
        assert types[group] == confluent_kafka.ConsumerGroupType.CONSUMER, types
        assert types[old] == confluent_kafka.ConsumerGroupType.CLASSIC, types
        futures = client.describe_consumer_groups([group, old], request_timeout=30)
        modern_d, classic_d = futures[group].result(timeout=60), futures[old].result(timeout=60)
        assert modern_d.type == confluent_kafka.ConsumerGroupType.CONSUMER
        assert modern_d.state == confluent_kafka.ConsumerGroupState.STABLE
        assert sorted(tp.partition for m in modern_d.members for tp in m.assignment.topic_partitions) == ALL
        assert {m.member_id for m in modern_d.members} == {m["member_id"] for m in g["members"]}
        assert classic_d.type == confluent_kafka.ConsumerGroupType.CLASSIC
        assert [sorted(tp.partition for tp in m.assignment.topic_partitions) for m in classic_d.members] == [ALL]
    finally:
        w.close_all()
        worker.close()
