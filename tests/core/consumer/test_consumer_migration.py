"""Where the two protocols meet (Kafka's ``group.consumer.migration.policy``): a classic group
upgraded online by its first consumer-protocol member, classic members living in a consumer
group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timeouts), the group downgraded
when the last consumer-protocol member leaves, and the offline conversions of empty groups."""

from __future__ import annotations

import pytest
from test_consumer_machine import Driver, T

from groupcoord.core import events as ev
from groupcoord.core.classic.subscription import (
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from groupcoord.core.commands import (
    HeartbeatTimer,
    JoinTimer,
    MemberJoinTimer,
    MemberSyncTimer,
    Respond,
    SessionTimer,
    SetTimer,
)
from groupcoord.core.consumer.model import ConsumerGroup
from groupcoord.core.errors import Error

SUB = encode_subscription(["t"])


class Classic:
    """Classic-protocol requests through a Driver."""

    def __init__(self, d: Driver) -> None:
        self.d = d

    def _answer(self, rid, event):
        out = self.d.run(event)
        answers = [c.response for c in out if isinstance(c, Respond) and c.request_id == rid]
        return answers[0] if answers else None

    def join(self, member_id="", version=5, instance=None, metadata=SUB, rid=None):
        self.d.n += 1
        rid = rid or ("j", self.d.n)
        return self._answer(rid, ev.JoinGroup(
            request_id=rid, now_ms=self.d.now, version=version, group_id="g", session_timeout_ms=10_000,
            rebalance_timeout_ms=20_000, member_id=member_id, group_instance_id=instance, protocol_type="consumer",
            protocols=(("range", metadata),), new_member_uuid=f"c{self.d.n}"))

    def sync(self, member_id, generation, assignments=()):
        self.d.n += 1
        rid = ("s", self.d.n)
        return self._answer(rid, ev.SyncGroup(
            request_id=rid, now_ms=self.d.now, version=5, group_id="g", generation_id=generation, member_id=member_id,
            protocol_type="consumer", protocol_name="range", assignments=tuple(assignments)))

    def heartbeat(self, member_id, generation):
        self.d.n += 1
        rid = ("h", self.d.n)
        return self._answer(rid, ev.Heartbeat(request_id=rid, now_ms=self.d.now, version=4, group_id="g",
                                              generation_id=generation, member_id=member_id))

    def leave(self, member_id):
        self.d.n += 1
        rid = ("l", self.d.n)
        return self._answer(rid, ev.LeaveGroup(request_id=rid, now_ms=self.d.now, version=5, group_id="g",
                                               members=(ev.MemberIdentity(member_id=member_id),)))


def stable_classic(d: Driver) -> tuple[Classic, str, int]:
    """A Stable classic group of one member, c, owning partitions 0-5 of t."""
    c = Classic(d)
    first = c.join(version=3, rid="first")
    assert first is None  # parked in the join phase
    d.fire(JoinTimer(0, "g"))
    answer = next(x.response for x in d.last if isinstance(x, Respond) and x.request_id == "first")
    mid, generation = answer.member_id, answer.generation_id
    synced = c.sync(mid, generation, [(mid, encode_assignment([("t", p) for p in range(6)]))])
    assert synced.error_code is Error.NONE and d.c.group("g").state.value == "Stable"
    return c, mid, generation


def test_the_first_consumer_member_upgrades_a_classic_group_online():
    d = Driver(group_initial_rebalance_delay_ms=0)
    c, mid, generation = stable_classic(d)
    a = d.hb("a", 0)
    g = d.group()
    assert isinstance(g, ConsumerGroup) and a.error_code is Error.NONE
    classic = g.members[mid]
    assert classic.classic is not None and classic.member_epoch == generation
    assert g.group_epoch == generation + 1 and set(classic.assigned) == {T}
    assert a.member_epoch == generation + 1 and not a.assignment  # everything is still the classic member's
    kinds = [type(r).__name__ for r in d.writes[-1].records]
    assert kinds[0] == "GroupTombstone" and "ConsumerGroupEpochRecord" in kinds
    # the classic member is told to rejoin, and learns its share when it does
    assert c.heartbeat(mid, generation).error_code is Error.REBALANCE_IN_PROGRESS
    assert any(isinstance(x, SetTimer) and x.key == MemberJoinTimer(0, "g", mid) for x in d.last)
    rejoined = c.join(mid, metadata=encode_subscription(
        Subscription(("t",), owned_partitions=tuple(("t", p) for p in range(6)))))
    assert rejoined.error_code is Error.NONE and rejoined.protocol_name == "range"
    synced = c.sync(mid, rejoined.generation_id)
    kept = {p for _, p in decode_assignment(synced.assignment).partitions}
    assert synced.error_code is Error.NONE and len(kept) == 3, synced
    assert d.hb("a", a.member_epoch, owned=()).member_epoch == g.group_epoch


def test_upgrades_follow_the_policy():
    d = Driver(group_initial_rebalance_delay_ms=0, group_consumer_migration_policy="disabled")
    stable_classic(d)
    a = d.hb("a", 0)
    assert (a.error_code, a.error_message) == (Error.GROUP_ID_NOT_FOUND, "Group g is not a consumer group")


def test_the_last_consumer_member_leaving_downgrades_the_group():
    d = Driver(group_initial_rebalance_delay_ms=0)
    c, mid, generation = stable_classic(d)
    a = d.hb("a", 0)
    epoch = d.group().group_epoch
    left = d.hb("a", -1)
    assert left.error_code is Error.NONE
    g = d.c.group("g")
    assert g.KIND == "classic" and g.generation_id == epoch and list(g.members) == [mid]
    assert g.state.value == "PreparingRebalance"
    assert SetTimer(HeartbeatTimer(0, "g", mid), d.now + 10_000) in d.last
    # the classic member rejoins the classic group as before
    assert c.heartbeat(mid, epoch).error_code is Error.REBALANCE_IN_PROGRESS
    assert a.member_epoch == epoch


def test_downgrades_follow_the_policy():
    d = Driver(group_initial_rebalance_delay_ms=0, group_consumer_migration_policy="upgrade")
    _, mid, _ = stable_classic(d)
    d.hb("a", 0)
    d.hb("a", -1)
    g = d.group()
    assert isinstance(g, ConsumerGroup) and list(g.members) == [mid]


def test_a_classic_member_joins_a_consumer_group():
    d = Driver()
    d.hb("a", 0)
    c = Classic(d)
    required = c.join(version=5)
    assert required.error_code is Error.MEMBER_ID_REQUIRED and required.member_id.startswith("c")
    joined = c.join(required.member_id)
    assert joined.error_code is Error.NONE and joined.generation_id == d.group().group_epoch
    assert SetTimer(MemberSyncTimer(0, "g", required.member_id), d.now + 20_000) in d.last
    assert SetTimer(SessionTimer(0, "g", required.member_id), d.now + 10_000) in d.last
    member = d.group().members[required.member_id]
    assert member.classic.session_timeout_ms == 10_000 and member.subscribed_topic_names == ("t",)
    assert c.sync(required.member_id, joined.generation_id + 1).error_code is Error.ILLEGAL_GENERATION
    assert c.heartbeat("nobody", 1).error_code is Error.UNKNOWN_MEMBER_ID
    assert c.heartbeat("a", 1).error_code is Error.UNKNOWN_MEMBER_ID  # a does not speak the classic protocol
    wrong = Classic(d).join(metadata=SUB, version=3)
    assert wrong.error_code is Error.NONE  # v3 needs no member id
    assert c.leave(required.member_id).members[0].error_code is Error.NONE
    assert required.member_id not in d.group().members


def test_a_classic_member_that_does_not_rejoin_in_time_is_fenced():
    d = Driver(group_initial_rebalance_delay_ms=0)
    c, mid, generation = stable_classic(d)
    d.hb("a", 0)
    assert c.heartbeat(mid, generation).error_code is Error.REBALANCE_IN_PROGRESS
    deadline = d.group().rejoin_deadlines[mid]
    d.now += 1000
    assert c.heartbeat(mid, generation).error_code is Error.REBALANCE_IN_PROGRESS
    assert d.group().rejoin_deadlines[mid] == deadline  # armed once, not pushed back
    d.fire(MemberJoinTimer(0, "g", mid))
    assert mid not in d.group().members


def test_an_empty_consumer_group_gives_way_to_a_classic_join():
    d = Driver(group_initial_rebalance_delay_ms=0)
    d.hb("a", 0)
    d.hb("a", -1)
    assert isinstance(d.group(), ConsumerGroup) and not d.group().members
    c = Classic(d)
    assert c.join(version=3, rid="x") is None  # parked in the new classic group's join phase
    assert d.c.group("g").KIND == "classic"
    kinds = [type(r).__name__ for r in d.writes[-1].records]
    assert kinds[-2:] == ["ConsumerGroupEpochRecord", "GroupMetadataRecord"], kinds
    assert d.writes[-1].records[-2].epoch is None


@pytest.mark.parametrize("policy", ["sideways", ""])
def test_an_unknown_policy_is_refused(policy):
    from groupcoord.core.config import ConfigError, CoordinatorConfig

    with pytest.raises(ConfigError):
        CoordinatorConfig.from_kafka({"group.consumer.migration.policy": policy})


def test_a_classic_member_waiting_for_partitions_is_told_to_rejoin_once_they_are_free():
    d = Driver()
    a = d.hb("a", 0)
    c = Classic(d)
    joined = c.join(version=3)
    mid = joined.member_id
    assert d.group().members[mid].state.value == "unreleased_partitions"
    assert c.heartbeat(mid, joined.generation_id).error_code is Error.NONE  # still a's: nothing to do yet
    a2 = d.hb("a", a.member_epoch, owned=a.assignment)
    d.hb("a", a.member_epoch, owned=a2.assignment)  # a let its three go
    assert c.heartbeat(mid, joined.generation_id).error_code is Error.REBALANCE_IN_PROGRESS


def test_a_downgrade_cancels_every_timer_of_the_consumer_group():
    d = Driver(group_initial_rebalance_delay_ms=0)
    _, mid, _ = stable_classic(d)
    d.hb("a", 0)
    d.hb("a", -1)
    from groupcoord.core.commands import CancelTimer, RebalanceTimer

    for key in (SessionTimer, RebalanceTimer, MemberJoinTimer, MemberSyncTimer):
        assert CancelTimer(key(0, "g", mid)) in d.last, key


def test_a_classic_group_with_malformed_subscriptions_is_not_upgraded():
    d = Driver(group_initial_rebalance_delay_ms=0)
    c = Classic(d)
    assert c.join(version=3, metadata=b"\x00", rid="bad") is None
    a = d.hb("a", 0)
    assert (a.error_code, a.error_message) == (
        Error.GROUP_ID_NOT_FOUND,
        "Cannot upgrade the classic group g to consumer group because the embedded consumer protocol is malformed.")
    assert d.c.group("g").KIND == "classic"


def test_a_downgraded_group_completes_its_join_phase_when_its_members_rejoin():
    """ClassicGroup.fromConsumerGroup adds the members with ClassicGroup.add: the first leads,
    so the join phase ends once they all rejoined."""
    d = Driver(group_initial_rebalance_delay_ms=0)
    c, mid, _ = stable_classic(d)
    d.hb("a", 0)
    d.hb("a", -1)
    assert d.c.group("g").leader_id == mid
    rejoined = c.join(mid)
    assert rejoined is not None and rejoined.error_code is Error.NONE and rejoined.leader == mid
    assert d.c.group("g").state.value == "CompletingRebalance"


def test_an_upgraded_group_reads_back_from_its_records_as_it_was():
    from groupcoord.core import Coordinator, CoordinatorConfig

    d = Driver(group_initial_rebalance_delay_ms=0)
    stable_classic(d)
    d.hb("a", 0)
    records = tuple(r for w in d.writes for r in w.records)
    fresh = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=1))
    fresh.handle(ev.TopicsChanged(now_ms=0, topics=(("t", T, 6),)))
    fresh.handle(ev.LoadPartition(now_ms=0, partition=0, records=records))
    assert fresh.group("g") == d.group()


def test_a_static_classic_member_in_a_consumer_group_heartbeats_by_its_instance():
    d = Driver()
    d.hb("a", 0)
    c = Classic(d)
    joined = c.join(version=5, instance="i")
    assert joined.error_code is Error.NONE
    rid = ("h", "static")
    out = d.run(ev.Heartbeat(request_id=rid, now_ms=d.now, version=4, group_id="g", generation_id=joined.generation_id,
                             member_id=joined.member_id, group_instance_id="i"))
    answer = next(x.response for x in out if isinstance(x, Respond) and x.request_id == rid)
    assert answer.error_code is Error.NONE
    out = d.run(ev.Heartbeat(request_id=rid, now_ms=d.now, version=4, group_id="g", generation_id=joined.generation_id,
                             member_id="someone-else", group_instance_id="i"))
    assert next(x.response for x in out if isinstance(x, Respond)).error_code is Error.FENCED_INSTANCE_ID


def test_a_static_classic_member_in_a_consumer_group_syncs_by_its_instance():
    d = Driver()
    d.hb("a", 0)
    joined = Classic(d).join(version=5, instance="i")

    def sync(member_id):
        rid = ("s", member_id)
        out = d.run(ev.SyncGroup(request_id=rid, now_ms=d.now, version=5, group_id="g",
                                 generation_id=joined.generation_id, member_id=member_id, group_instance_id="i",
                                 protocol_type="consumer", protocol_name="range", assignments=()))
        return next(x.response for x in out if isinstance(x, Respond) and x.request_id == rid)

    assert sync("someone-else").error_code is Error.FENCED_INSTANCE_ID
    assert sync(joined.member_id).error_code is Error.NONE


def test_an_upgrade_arms_each_classic_members_session_timer_by_its_member_id():
    d = Driver(group_initial_rebalance_delay_ms=0)
    _, mid, _ = stable_classic(d)
    d.hb("a", 0)
    armed = [x.key for x in d.last if isinstance(x, SetTimer) and isinstance(x.key, SessionTimer)]
    assert SessionTimer(0, "g", mid) in armed and SessionTimer(0, "g", "a") in armed
