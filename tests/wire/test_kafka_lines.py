"""``kafka_lines.KafkaGroupLog`` on the core's paths real clients rarely take: static members,
a sync that never comes, a pending member that never rejoins, a leave by instance id, a
failed assignment write, deletion, load and unload. Each step's Kafka 4.x statements, in
GroupMetadataManager's words and order."""

from __future__ import annotations

import io
import re

from groupcoord.adapters.runtime.driver import Driver
from groupcoord.adapters.runtime.runner import CommandRunner
from groupcoord.adapters.wire.kafka_lines import GMM, SHARD, KafkaGroupLog, java_hash_order, log4j_time
from groupcoord.core import events as ev
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator
from groupcoord.core.errors import Error

LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] INFO \[GroupCoordinator id=0 topic=__consumer_offsets "
                  r"partition=0\] (?P<msg>.*) \((?P<logger>[\w.]+)\)$")


class ToldDriver(Driver):
    """The test Driver with every core step told by a KafkaGroupLog, as the server's core loop does."""

    def __init__(self, **config) -> None:
        self.out = io.StringIO()
        self.told = KafkaGroupLog(self.out)
        self.reasons: dict[str, str] = {}
        self._read = 0
        super().__init__(CoordinatorConfig(**{"offsets_topic_num_partitions": 1,
                                              "group_initial_rebalance_delay_ms": 0, **config}))

    def _start(self) -> None:
        coordinator = self.coordinator = Coordinator(self.config)

        def handle(event):
            seen = self.told.before(event, coordinator)
            commands = coordinator.handle(event)
            if seen is not None:
                self.reasons.update(self.told.after(event, coordinator, seen, commands))
            return commands

        self.runner = CommandRunner(coordinator, self._respond, self._store, self._observe, handle=handle)
        self.timers = self.runner.timers
        self.told.reset()
        for partition in range(self.config.offsets_topic_num_partitions):
            self.dispatch(ev.LoadPartition(
                now_ms=self.now_ms, partition=partition, records=self.storage.records(partition)))

    def said(self, logger: str = GMM) -> list[str]:
        """The messages written since the last call (each line checked for Kafka's layout)."""
        lines = self.out.getvalue().splitlines()[self._read:]
        self._read += len(lines)
        out = []
        for raw in lines:
            m = LINE.match(raw)
            assert m, raw
            if m["logger"] == logger:
                out.append(m["msg"])
        return out

    def join(self, member_id="", instance=None, version=5, protocols=(("range", b"m"),), client="c", reason=None,
             session=10_000):
        body = {"group_id": "g", "session_timeout_ms": session, "rebalance_timeout_ms": 20_000,
                "member_id": member_id, "protocol_type": "consumer",
                "protocols": [{"name": n, "metadata": m} for n, m in protocols]}
        if instance is not None:
            body["group_instance_id"] = instance
        if reason is not None:
            body["reason"] = reason
        return self.send("JoinGroup", body, version=version, client_id=client)

    def sync(self, member_id, generation, assignments=(), instance=None):
        body = {"group_id": "g", "generation_id": generation, "member_id": member_id,
                "assignments": [{"member_id": m, "assignment": b""} for m in assignments]}
        if instance is not None:
            body["group_instance_id"] = instance
        return self.send("SyncGroup", body, version=5)

    def stable(self, *instances: str) -> list[str]:
        """Static members ``instances`` form generation 1 and sync; their member ids."""
        joins = [self.join(instance=i, client=i) for i in instances]
        self.advance(0)
        ids = [self.responses[j].member_id for j in joins]
        for mid, instance in zip(ids, instances):
            self.sync(mid, 1, assignments=ids if mid == self.responses[joins[0]].leader else (), instance=instance)
        assert self.coordinator.group("g").state.value == "Stable"
        return ids


def test_static_members_form_a_group_and_one_restarts_without_a_rebalance():
    d = ToldDriver()
    a, b = d.stable("a", "b")
    assert d.said() == [
        f"Static member with groupInstanceId=a and unknown member id joins group g in Empty state. Created a new "
        f"member id {a} for this member and added to the group.",
        f"Preparing to rebalance group g in state PreparingRebalance with old generation 0 (reason: Adding new "
        f"member {a} with group instance id a; client reason: not provided).",
        f"Static member with groupInstanceId=b and unknown member id joins group g in PreparingRebalance state. "
        f"Created a new member id {b} for this member and added to the group.",
        "Stabilized group g generation 1 with 2 members.",
        f"Assignment received from leader {a} for group g for generation 1. The group has 2 members, 2 of which "
        f"are static.",
    ]
    restarted = d.join(instance="b", client="b")
    new_b = d.responses[restarted].member_id
    assert d.said() == [
        f"Static member with groupInstanceId=b and unknown member id joins group g in Stable state. Replacing "
        f"previously mapped member {b} with this groupInstanceId.",
        "Static member which joins during Stable stage and doesn't affect the selected protocol will not trigger "
        "a rebalance.",
    ]
    assert new_b != b

    # the leader rejoins: a rebalance with Kafka's reason, completing at once (a static group)
    d.join(member_id=a, instance="a", client="a", reason="metadata changed", version=9)
    assert d.said()[0] == (f"Preparing to rebalance group g in state PreparingRebalance with old generation 1 "
                           f"(reason: Leader {a} re-joining group during Stable; client reason: metadata changed).")
    assert d.reasons["g"].startswith(f"Leader {a} re-joining")


def test_a_leave_by_instance_id_names_the_member_and_lists_the_requests_id():
    d = ToldDriver()
    a, b = d.stable("a", "b")
    d.said()
    d.send("LeaveGroup", {"group_id": "g", "members": [{"member_id": "", "group_instance_id": "b", "reason": "bye"}]},
           version=5)
    assert d.said() == [
        f"[Group g] Member {b} has left group through explicit `LeaveGroup` request; client reason: bye",
        "Preparing to rebalance group g in state PreparingRebalance with old generation 1 (reason: explicit "
        "`LeaveGroup` request for () members.).",
    ]


def test_a_member_that_never_syncs_is_removed_on_the_sync_timeout_then_the_join_times_out():
    d = ToldDriver()
    first = d.join(version=3, client="one", session=60_000)
    second = d.join(version=3, client="two", session=60_000)
    d.advance(0)
    one, two = d.responses[first].member_id, d.responses[second].member_id
    assert d.said()[:2] == [
        f"Dynamic member with unknown member id joins group g in state Empty. Created a new member id {one} and "
        f"added the member to the group.",
        f"Preparing to rebalance group g in state PreparingRebalance with old generation 0 (reason: Adding new "
        f"member {one} with group instance id null; client reason: not provided).",
    ]
    d.said()
    d.sync(one, 1, assignments=(one, two))  # the leader syncs, the follower never does
    assert d.said() == [f"Assignment received from leader {one} for group g for generation 1. The group has 2 "
                        f"members, 0 of which are static."]
    d.advance(20_000)  # the sync timeout: the follower goes; the leader must rejoin, and does not
    d.advance(20_000)
    assert d.said() == [
        f"Preparing to rebalance group g in state PreparingRebalance with old generation 1 (reason: Removing "
        f"[{two}] on pending sync request expiration).",
        f"Group g removed dynamic members who haven't joined: [{one}]",
        "Group g with generation 2 is now empty.",
    ]


def test_a_pending_member_that_never_rejoins_expires_and_a_member_fails():
    d = ToldDriver()
    pending = d.join(version=4, client="p")
    pid = d.responses[pending].member_id
    d.advance(10_000)
    assert d.said() == [
        f"Dynamic member with unknown member id joins group g in Empty state. Created a new member id {pid} and "
        f"requesting the member to rejoin with this id.",
        f"Pending member {pid} in group g has been removed after session timeout expiration.",
    ]
    (a,) = d.stable("a")
    d.said()
    d.advance(10_000)  # no heartbeat: a static member's session also expires
    assert d.said() == [
        f"Member {a} in group g has failed, removing it from the group.",
        f"Preparing to rebalance group g in state PreparingRebalance with old generation 1 (reason: removing "
        f"member {a} on heartbeat expiration.).",
        "Group g with generation 2 is now empty.",
    ]


def test_a_failed_assignment_write_is_the_reason_of_the_next_rebalance():
    d = ToldDriver()
    j = d.join(version=3)
    d.advance(0)
    mid = d.responses[j].member_id
    d.said()
    d.fail_next_write(Error.NOT_LEADER_OR_FOLLOWER)
    d.sync(mid, 1, assignments=(mid,))
    assert d.said() == [
        f"Assignment received from leader {mid} for group g for generation 1. The group has 1 members, 0 of which "
        f"are static.",
        # Kafka's own words, its missing space included
        f"Preparing to rebalance group g in state PreparingRebalance with old generation 1 (reason: Error "
        f"NOT_COORDINATOR when storing group assignmentduring SyncGroup (member: {mid}).).",
    ]  # (the leader was told the error: it must rejoin, the join phase waits for it)


def test_load_unload_and_delete_are_told_per_group_and_per_partition():
    d = ToldDriver()
    d.stable("a")
    d.said()
    d.reload()
    assert d.said() == ["Loaded classic group g with 1 members."]
    d.unload()
    assert d.said() == ["[GroupId=g] Unloading group metadata for generation 1."]
    d.reload()
    d.said()
    d.advance(10_000)  # the member expires: the group is Empty, and can be deleted
    d.said()
    d.send("DeleteGroups", {"groups_names": ["g", "nothing"]}, version=2)
    assert d.said(SHARD) == ["The following groups were deleted: g. A total of 0 offsets were removed."]


def test_java_hash_order_is_a_hashmaps_iteration_order():
    # String.hashCode: "q" 113 -> bucket 1, "b" 98 -> bucket 2; "Aa" and "BB" collide (2112): insertion order
    assert java_hash_order(["b", "q"]) == ["q", "b"]
    assert java_hash_order(["BB", "Aa"]) == ["BB", "Aa"]
    ids = [f"m{i}" for i in range(13)]  # 13 > 16 * 0.75: a table of 32
    assert java_hash_order(ids) == sorted(ids, key=lambda s: ((hash_code(s) ^ (hash_code(s) >> 16)) & 31,
                                                            ids.index(s)))


def hash_code(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h


def test_log4j_time_is_log4j2s_default_date():
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", log4j_time(1_700_000_000.5))
    assert log4j_time(1_700_000_000.5).endswith(",500")
