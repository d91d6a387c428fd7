"""KIP-848's consumer group in the core: ConsumerGroupHeartbeat's checks, epochs, target
assignment and revoke-first reconciliation, static members, leaves, timers, fencing,
ConsumerGroupDescribe, offsets by member epoch, deletion, and a reload from the records, each
against what Kafka's GroupMetadataManager / CurrentAssignmentBuilder / ConsumerGroup do."""

from __future__ import annotations

import attrs
import pytest

from groupcoord.core import Coordinator, CoordinatorConfig
from groupcoord.core import events as ev
from groupcoord.core.commands import (
    CancelTimer,
    ConsumerGroupHeartbeatResponse,
    RebalanceTimer,
    Respond,
    SessionTimer,
    SetTimer,
    Write,
)
from groupcoord.core.consumer.model import ConsumerGroupState, ConsumerMember, MemberState
from groupcoord.core.consumer.reconcile import Fenced, reconcile
from groupcoord.core.errors import Error

T, U = "00000000-0000-0000-0000-00000000000a", "00000000-0000-0000-0000-00000000000b"


class Driver:
    """A coordinator owning partition 0 with topics t (6 partitions) and u (3); every write
    completes unless ``fail`` says otherwise."""

    def __init__(self, **config) -> None:
        self.c = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=1, **config))
        self.now = 0
        self.n = 0
        self.writes: list = []
        self.c.handle(ev.LoadPartition(now_ms=0, partition=0))
        self.topics((("t", T, 6), ("u", U, 3)))

    def topics(self, topics) -> None:
        self.c.handle(ev.TopicsChanged(now_ms=self.now, topics=tuple(topics)))

    def run(self, event, fail: Error | None = None) -> list:
        out = self.c.handle(event)
        done = list(out)
        for cmd in out:
            if isinstance(cmd, Write):
                self.writes.append(cmd)
                outcome = ev.WriteFailed(now_ms=self.now, write_id=cmd.write_id, error=fail) if fail else \
                    ev.WriteCompleted(now_ms=self.now, write_id=cmd.write_id)
                done += self.c.handle(outcome)
        self.last = done
        return done

    def hb(self, member_id="", epoch=0, topics=("t",), owned=(), version=1, fail=None, full=None,
           **fields) -> ConsumerGroupHeartbeatResponse:
        self.n += 1
        self.now += 1
        join = epoch == 0 if full is None else full
        body = dict(group_id="g", member_id=member_id, member_epoch=epoch,
                    rebalance_timeout_ms=5000 if join else -1,
                    subscribed_topic_names=tuple(topics) if join and topics is not None else None,
                    topic_partitions=tuple(owned) if owned is not None else None,
                    new_member_uuid=f"uuid-{self.n}")
        body.update(fields)
        self.last = self.run(ev.ConsumerGroupHeartbeat(request_id=self.n, now_ms=self.now, version=version, **body),
                             fail)
        answers = [c.response for c in self.last if isinstance(c, Respond) and c.request_id == self.n]
        assert len(answers) == 1, self.last
        return answers[0]

    def fire(self, key, payload=None) -> list:
        return self.run(ev.TimerFired(now_ms=self.now, key=key, payload=payload))

    def group(self):
        return self.c.group("g")

    def settle(self, answers: dict) -> dict:
        """Every member heartbeats with what it owns until nothing moves (at most 6 rounds)."""
        for _ in range(6):
            moved = False
            for mid, a in list(answers.items()):
                b = self.hb(mid, a.member_epoch, owned=a.assignment if a.assignment is not None else None)
                if b.assignment is not None and b.assignment != a.assignment or b.member_epoch != a.member_epoch:
                    moved = True
                answers[mid] = attrs.evolve(b, assignment=b.assignment if b.assignment is not None else a.assignment)
            if not moved:
                return answers
        raise AssertionError("did not settle")


def parts(answer) -> set:
    return {(t, p) for t, ps in answer.assignment or () for p in ps}


# ---------------------------------------------------------------- the service's checks


@pytest.mark.parametrize("fields, version, error, message", [
    (dict(member_id="", member_epoch=1), 1, Error.INVALID_REQUEST, "MemberId can't be empty."),
    (dict(member_id="", member_epoch=0), 1, Error.INVALID_REQUEST, "MemberId can't be empty."),
    (dict(member_id="m", member_epoch=0, rebalance_timeout_ms=-1), 1, Error.INVALID_REQUEST,
     "RebalanceTimeoutMs must be provided in first request."),
    (dict(member_id="m", member_epoch=0, topic_partitions=None), 1, Error.INVALID_REQUEST,
     "TopicPartitions must be empty when (re-)joining."),
    (dict(member_id="m", member_epoch=0, topic_partitions=((T, (0,)),)), 1, Error.INVALID_REQUEST,
     "TopicPartitions must be empty when (re-)joining."),
    (dict(member_id="m", member_epoch=0, subscribed_topic_names=None), 1, Error.INVALID_REQUEST,
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    (dict(member_id="m", member_epoch=-2), 1, Error.INVALID_REQUEST, "InstanceId can't be null."),
    (dict(member_id="m", member_epoch=-3), 1, Error.INVALID_REQUEST, "MemberEpoch is invalid."),
    (dict(member_id="m", member_epoch=0, instance_id=" "), 1, Error.INVALID_REQUEST, "InstanceId can't be empty."),
    (dict(member_id="m", member_epoch=0, rack_id=""), 1, Error.INVALID_REQUEST, "RackId can't be empty."),
    (dict(member_id="m", member_epoch=0, server_assignor="sticky"), 1, Error.UNSUPPORTED_ASSIGNOR,
     "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
    (dict(member_id="m", member_epoch=0, subscribed_topic_regex="(?=t)"), 1, Error.INVALID_REGULAR_EXPRESSION, None),
    (dict(member_id="m", member_epoch=0, subscribed_topic_regex="t["), 1, Error.INVALID_REGULAR_EXPRESSION, None),
])
def test_the_heartbeat_is_checked_before_the_group_is_looked_at(fields, version, error, message):
    d = Driver()
    fields = dict(fields)  # the parameter is shared: a second run in one process must see it whole
    epoch = fields.pop("member_epoch")
    mid = fields.pop("member_id")
    a = d.hb(mid, epoch, version=version, **fields)
    assert a.error_code is error, a
    if message is not None:
        assert a.error_message == message
    assert d.group() is None and not d.writes


def test_v0_lets_the_coordinator_choose_the_member_id():
    d = Driver()
    a = d.hb("", 0, version=0)
    assert a.error_code is Error.NONE and a.member_id == "uuid-1" and a.member_epoch == 1


def test_an_unknown_group_or_member_is_refused():
    d = Driver()
    assert d.hb("m", 1).error_code is Error.GROUP_ID_NOT_FOUND
    assert d.hb("m", -1).error_code is Error.GROUP_ID_NOT_FOUND
    d.hb("a", 0)
    a = d.hb("m", 1)
    assert a.error_code is Error.UNKNOWN_MEMBER_ID and a.error_message == "Member m is not a member of group g."
    assert d.hb("m", -1).error_code is Error.UNKNOWN_MEMBER_ID


def test_the_first_member_gets_every_partition_at_epoch_one():
    d = Driver()
    a = d.hb("a", 0, topics=("t", "u"))
    assert (a.error_code, a.member_id, a.member_epoch, a.heartbeat_interval_ms) == (Error.NONE, "a", 1, 5000)
    assert parts(a) == {(T, p) for p in range(6)} | {(U, p) for p in range(3)}
    g = d.group()
    assert (g.group_epoch, g.assignment_epoch, g.state) == (1, 1, ConsumerGroupState.STABLE)
    assert SetTimer(SessionTimer(0, "g", "a"), d.now + 45_000) in d.last


def test_a_second_member_gets_its_share_only_once_the_first_revoked_it():
    d = Driver()
    a = d.hb("a", 0)
    b = d.hb("b", 0)
    assert b.member_epoch == 2 and parts(b) == set(), b  # everything is still a's
    assert d.group().state is ConsumerGroupState.RECONCILING
    a2 = d.hb("a", 1, owned=a.assignment)
    assert a2.member_epoch == 1 and len(parts(a2)) == 3  # revoke three, stay in epoch 1
    assert d.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert SetTimer(RebalanceTimer(0, "g", "a"), d.now + 5000, 1) in d.last
    b2 = d.hb("b", 2, owned=())
    assert parts(b2) == set() and d.group().members["b"].state is MemberState.UNRELEASED_PARTITIONS
    a3 = d.hb("a", 1, owned=a2.assignment)  # revoked
    assert a3.member_epoch == 2 and CancelTimer(RebalanceTimer(0, "g", "a")) in d.last
    b3 = d.hb("b", 2, owned=())
    assert parts(b3) == {(T, p) for p in range(6)} - parts(a2) == {(T, 3), (T, 4), (T, 5)}
    assert d.group().state is ConsumerGroupState.STABLE


def test_no_partition_is_ever_owned_twice_while_members_come_and_go():
    d = Driver()
    answers = {m: d.hb(m, 0) for m in ("a", "b", "c")}
    for step in range(4):
        answers = d.settle(answers)
        owners: dict = {}
        for mid, m in d.group().members.items():
            for t, ps in m.owns().items():
                for p in ps:
                    assert (t, p) not in owners, (step, t, p, owners)
                    owners[(t, p)] = mid
        if step == 1:
            left = d.hb("c", -1)
            assert left.member_epoch == -1 and "c" not in d.group().members
            del answers["c"]
    assert sorted(len(parts(a)) for a in answers.values()) == [3, 3]


def test_epochs_are_fenced_unless_the_previous_epoch_owns_a_subset():
    d = Driver()
    a = d.hb("a", 0)
    assert d.hb("a", 5, owned=a.assignment).error_code is Error.FENCED_MEMBER_EPOCH
    d.hb("b", 0)
    a2 = d.hb("a", 1, owned=a.assignment)
    a3 = d.hb("a", 1, owned=a2.assignment)
    assert a3.member_epoch == 2
    # the answer moving a to epoch 2 lost: epoch 1 with a subset is taken
    again = d.hb("a", 1, owned=a2.assignment)
    assert again.error_code is Error.NONE and again.member_epoch == 2
    fenced = d.hb("a", 1, owned=a.assignment)  # more than it has now
    assert fenced.error_code is Error.FENCED_MEMBER_EPOCH and "smaller member epoch (1)" in fenced.error_message
    # a member rejoining at epoch 0 under its id is taken back (KAFKA-19233), its partitions too
    rejoined = d.hb("a", 0)
    assert rejoined.error_code is Error.NONE and rejoined.member_epoch == 2 and rejoined.assignment == a2.assignment


def test_a_leave_fences_the_member_and_bumps_the_group_epoch():
    d = Driver()
    d.hb("a", 0)
    d.hb("b", 0)
    before = d.group().group_epoch
    out = d.hb("b", -1)
    assert (out.member_id, out.member_epoch) == ("b", -1)
    g = d.group()
    assert "b" not in g.members and "b" not in g.target and g.group_epoch == before + 1
    assert g.state is ConsumerGroupState.ASSIGNING
    assert CancelTimer(SessionTimer(0, "g", "b")) in d.last and CancelTimer(RebalanceTimer(0, "g", "b")) in d.last


def test_session_timeout_fences_and_a_late_rebalance_timeout_does_nothing():
    d = Driver()
    a = d.hb("a", 0)
    d.hb("b", 0)
    d.hb("a", 1, owned=a.assignment)  # unrevoked, rebalance timer for epoch 1
    epoch = d.group().group_epoch
    d.fire(RebalanceTimer(0, "g", "a"), payload=0)  # an older epoch: ignored
    assert "a" in d.group().members and d.group().group_epoch == epoch
    d.fire(RebalanceTimer(0, "g", "a"), payload=1)
    assert "a" not in d.group().members and d.group().group_epoch == epoch + 1
    d.fire(SessionTimer(0, "g", "b"))
    assert not d.group().members and d.group().state is ConsumerGroupState.EMPTY
    assert d.group().assignment_epoch == d.group().group_epoch  # KAFKA-20442
    d.fire(SessionTimer(0, "g", "b"))  # gone already: nothing
    assert d.hb("b", 2, full=False).error_code is Error.UNKNOWN_MEMBER_ID


def test_a_static_member_leaves_for_a_while_and_comes_back_with_its_partitions():
    d = Driver()
    a = d.hb("a1", 0, instance_id="i")
    d.hb("b", 0)
    a = d.settle({"a1": a})["a1"]
    owned = parts(a)
    epoch = d.group().group_epoch
    left = d.hb("a1", -2, instance_id="i")
    assert left.member_epoch == -2 and d.group().group_epoch == epoch  # no bump
    assert d.group().members["a1"].member_epoch == -2
    back = d.hb("a2", 0, instance_id="i")
    assert back.error_code is Error.NONE and "a1" not in d.group().members
    assert parts(back) == owned and d.group().group_epoch == epoch
    # the instance id is held by a2 now
    taken = d.hb("a3", 0, instance_id="i")
    assert taken.error_code is Error.UNRELEASED_INSTANCE_ID
    assert taken.error_message == ("Static member a3 with instance id i cannot join the group because the instance "
                                   "id is owned by a2 member.")
    assert d.hb("a1", back.member_epoch, instance_id="i", full=False).error_code is Error.FENCED_INSTANCE_ID
    assert d.hb("x", 1, instance_id="j", full=False).error_code is Error.UNKNOWN_MEMBER_ID


def test_a_subscription_change_bumps_the_epoch_and_revokes_the_dropped_topic():
    d = Driver()
    a = d.hb("a", 0, topics=("t", "u"))
    epoch = d.group().group_epoch
    b = d.hb("a", 1, topics=("t",), owned=a.assignment, full=True, rebalance_timeout_ms=5000)
    assert d.group().group_epoch == epoch + 1
    assert {t for t, _ in b.assignment} == {T}
    assert d.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    c = d.hb("a", 1, owned=b.assignment, full=False)
    assert c.member_epoch == 2 and d.group().state is ConsumerGroupState.STABLE


def test_a_new_topic_partition_count_is_seen_at_the_next_heartbeat():
    d = Driver()
    a = d.hb("a", 0)
    d.topics((("t", T, 8), ("u", U, 3)))
    b = d.hb("a", 1, owned=a.assignment, full=False)
    assert b.member_epoch == 2 and len(parts(b)) == 8


def test_a_regular_expression_subscribes_to_the_topics_it_matches():
    d = Driver()
    a = d.hb("a", 0, topics=None, subscribed_topic_regex="[a-v]")
    assert {t for t, _ in a.assignment} == {T, U}
    assert d.group().resolved == {"[a-v]": frozenset({"t", "u"})}
    d.topics((("t", T, 6), ("u", U, 3), ("v", "00000000-0000-0000-0000-00000000000c", 2), ("tt", "x", 1)))
    b = d.hb("a", 1, owned=a.assignment, full=False)
    assert b.member_epoch == 2 and {t for t, _ in b.assignment} == {T, U, "00000000-0000-0000-0000-00000000000c"}


def test_the_group_is_full_for_new_members_only():
    d = Driver(group_consumer_max_size=1)
    a = d.hb("a", 0)
    full = d.hb("b", 0)
    assert full.error_code is Error.GROUP_MAX_SIZE_REACHED
    assert full.error_message == "The consumer group has reached its maximum capacity of 1 members."
    assert d.hb("a", 1, owned=a.assignment, full=False).error_code is Error.NONE


def test_the_assignment_is_sent_on_a_full_request_or_a_change_only():
    d = Driver()
    a = d.hb("a", 0)
    quiet = d.hb("a", 1, owned=None, full=False)
    assert quiet.assignment is None
    full = d.hb("a", 1, owned=a.assignment, full=True, rebalance_timeout_ms=5000)
    assert full.assignment == a.assignment


def test_the_preferred_assignor_is_the_one_most_members_name():
    d = Driver()
    d.hb("a", 0, server_assignor="range")
    assert d.c.handle(ev.ConsumerGroupDescribe(request_id="d", now_ms=d.now, version=0, group_ids=("g",))
                      )[0].response.groups[0].assignor_name == "range"


def test_a_failed_write_leaves_the_group_as_it_was():
    d = Driver()
    a = d.hb("a", 0, fail=Error.NOT_LEADER_OR_FOLLOWER)
    assert a.error_code is Error.NOT_COORDINATOR and d.group() is None
    d.hb("a", 0)
    before = d.group()
    b = d.hb("b", 0, fail=Error.REQUEST_TIMED_OUT)
    # Kafka's translation of a timed-out append
    assert b.error_code is Error.COORDINATOR_NOT_AVAILABLE and d.group() is before


def test_describe_answers_each_group_as_its_kind():
    d = Driver()
    a = d.hb("a", 0, instance_id="i", rack_id="r1")
    d.run(ev.JoinGroup(request_id="j", now_ms=d.now, version=5, group_id="classic", session_timeout_ms=10000,
                       rebalance_timeout_ms=10000, member_id="", protocol_type="consumer",
                       protocols=(("range", b""),), new_member_uuid="u"))
    out = d.c.handle(ev.ConsumerGroupDescribe(request_id="d", now_ms=d.now, version=1,
                                              group_ids=("g", "classic", "nope", "")))
    g, classic, nope, empty = out[0].response.groups
    assert (g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == ("Stable", 1, 1, "uniform")
    m = g.members[0]
    assert (m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.subscribed_topic_names) == \
        ("a", "i", "r1", 1, ("t",))
    assert [(x.topic_id, x.topic_name, x.partitions) for x in m.assignment] == [(T, "t", tuple(range(6)))]
    assert m.target_assignment == m.assignment and len(parts(a)) == 6
    assert classic.error_code is Error.GROUP_ID_NOT_FOUND and classic.error_message == "Group classic is not a consumer group."
    assert nope.error_code is Error.GROUP_ID_NOT_FOUND and nope.error_message == "Group nope not found."
    assert empty.error_code is Error.INVALID_GROUP_ID
    listed = d.c.handle(ev.ListGroups(request_id="l", now_ms=d.now, version=5, types_filter=("consumer",)))
    assert [(x.group_id, x.group_state, x.group_type) for x in listed[0].response.groups] == [("g", "Stable", "consumer")]
    described = d.c.handle(ev.DescribeGroups(request_id="dg", now_ms=d.now, version=5, groups=("g",)))
    assert described[0].response.groups[0].group_state == "Dead"


def test_classic_requests_to_a_consumer_group():
    d = Driver()
    d.hb("a", 0)
    out = d.c.handle(ev.Heartbeat(request_id="h", now_ms=d.now, version=4, group_id="g", generation_id=1,
                                  member_id="a"))
    assert out[0].response.error_code is Error.UNKNOWN_MEMBER_ID
    out = d.c.handle(ev.SyncGroup(request_id="s", now_ms=d.now, version=5, group_id="g", generation_id=1,
                                  member_id="a"))
    assert out[0].response.error_code is Error.UNKNOWN_MEMBER_ID
    out = d.c.handle(ev.LeaveGroup(request_id="l", now_ms=d.now, version=5, group_id="g",
                                   members=(ev.MemberIdentity(member_id="a"),)))
    assert [m.error_code for m in out[0].response.members] == [Error.UNKNOWN_MEMBER_ID]


def test_an_empty_classic_group_becomes_a_consumer_group_and_a_busy_one_does_not_when_upgrades_are_off():
    d = Driver(group_initial_rebalance_delay_ms=0, group_consumer_migration_policy="downgrade")
    d.run(ev.OffsetCommit(request_id="c", now_ms=d.now, version=9, group_id="g", generation_id=-1, member_id="",
                          topics=(("t", (ev.CommitPartition(partition_index=0, committed_offset=7),)),)))
    assert d.c.group("g").KIND == "classic"
    a = d.hb("a", 0)
    assert a.error_code is Error.NONE and d.group().KIND == "consumer"
    assert d.c.offsets("g")[("t", 0)].offset == 7
    d.run(ev.JoinGroup(request_id="j", now_ms=d.now, version=3, group_id="busy", session_timeout_ms=10000,
                       rebalance_timeout_ms=10000, member_id="", protocol_type="consumer",
                       protocols=(("range", b""),), new_member_uuid="u"))
    n = d.n + 1
    d.n = n
    out = d.run(ev.ConsumerGroupHeartbeat(request_id=n, now_ms=d.now, version=1, group_id="busy", member_id="x",
                                          member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=("t",),
                                          topic_partitions=()))
    answer = next(c.response for c in out if isinstance(c, Respond))
    assert answer.error_code is Error.GROUP_ID_NOT_FOUND and answer.error_message == "Group busy is not a consumer group"


def _commit(d, member_id, epoch, version=9):
    out = d.run(ev.OffsetCommit(request_id="c", now_ms=d.now, version=version, group_id="g", generation_id=epoch,
                                member_id=member_id,
                                topics=(("t", (ev.CommitPartition(partition_index=0, committed_offset=3),)),)))
    return out[-1].response.topics[0].partitions[0].error_code


def test_offsets_are_committed_and_fetched_at_the_member_epoch():
    d = Driver()
    d.hb("a", 0)
    assert _commit(d, "a", 1) is Error.NONE
    assert _commit(d, "a", 0) is Error.STALE_MEMBER_EPOCH
    assert _commit(d, "a", 1, version=8) is Error.UNSUPPORTED_VERSION
    assert _commit(d, "zz", 1) is Error.UNKNOWN_MEMBER_ID
    assert _commit(d, "", -1) is Error.UNKNOWN_MEMBER_ID  # an admin commit needs an empty group

    def fetch(member_id, epoch):
        out = d.run(ev.OffsetFetch(request_id="f", now_ms=d.now, version=9, groups=(
            ev.FetchGroup(group_id="g", member_id=member_id, member_epoch=epoch),)))
        return out[-1].response.groups[0]

    assert fetch("a", 1).topics[0].partitions[0].committed_offset == 3
    assert fetch(None, -1).error_code is Error.NONE
    assert fetch("a", 7).error_code is Error.STALE_MEMBER_EPOCH
    assert fetch("zz", 1).error_code is Error.UNKNOWN_MEMBER_ID
    d.hb("a", -1)
    assert _commit(d, "", -1) is Error.NONE


def test_an_empty_consumer_group_is_deleted_with_its_tombstones():
    d = Driver()
    d.hb("a", 0)
    out = d.run(ev.DeleteGroups(request_id="x", now_ms=d.now, version=2, groups_names=("g",)))
    assert out[-1].response.results[0].error_code is Error.NON_EMPTY_GROUP
    d.hb("a", -1)
    out = d.run(ev.DeleteGroups(request_id="y", now_ms=d.now, version=2, groups_names=("g",)))
    assert out[-1].response.results[0].error_code is Error.NONE and d.group() is None
    kinds = [type(r).__name__ for r in d.writes[-1].records]
    assert kinds[-1] == "ConsumerGroupEpochRecord" and d.writes[-1].records[-1].epoch is None


def test_a_reload_from_the_records_gives_the_same_groups():
    d = Driver()
    a = d.hb("a", 0, instance_id="i", topics=None, subscribed_topic_regex="t")
    b = d.hb("b", 0, server_assignor="range")
    d.settle({"a": a, "b": b})
    d.hb("c", 0)
    assert _commit(d, "c", d.group().members["c"].member_epoch) is Error.NONE
    records = tuple(r for w in d.writes for r in w.records)
    fresh = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=1))
    fresh.handle(ev.TopicsChanged(now_ms=0, topics=(("t", T, 6), ("u", U, 3))))
    out = fresh.handle(ev.LoadPartition(now_ms=0, partition=0, records=records))
    assert fresh.group("g") == d.group()
    assert fresh.offsets("g") == d.c.offsets("g")
    assert {c.key for c in out if isinstance(c, SetTimer) and isinstance(c.key, SessionTimer)} == \
        {SessionTimer(0, "g", m) for m in ("a", "b", "c")}


def test_unload_drops_the_group():
    d = Driver()
    d.hb("a", 0)
    d.c.handle(ev.UnloadPartition(now_ms=d.now, partition=0))
    assert d.group() is None


# ---------------------------------------------------------------- CurrentAssignmentBuilder


def member(**kw) -> ConsumerMember:
    return ConsumerMember(member_id="m", subscribed_topic_names=("t",), **kw)


def test_reconcile_stable_to_stable_at_the_new_epoch():
    m = member(member_epoch=10, assigned={T: frozenset({0, 1})})
    n = reconcile(m, 11, {T: frozenset({0, 1})}, frozenset({T}), {}, ((T, (0, 1)),))
    assert (n.state, n.member_epoch, n.previous_member_epoch, dict(n.assigned)) == \
        (MemberState.STABLE, 11, 10, {T: frozenset({0, 1})})


def test_reconcile_waits_for_unreleased_partitions_then_takes_them():
    m = member(member_epoch=10, assigned={T: frozenset({0})})
    n = reconcile(m, 11, {T: frozenset({0, 1})}, frozenset({T}), {(T, 1): 10}, ((T, (0,)),))
    assert (n.state, n.member_epoch, dict(n.assigned)) == (MemberState.UNRELEASED_PARTITIONS, 11, {T: frozenset({0})})
    n2 = reconcile(n, 11, {T: frozenset({0, 1})}, frozenset({T}), {}, ((T, (0,)),))
    assert (n2.state, dict(n2.assigned)) == (MemberState.STABLE, {T: frozenset({0, 1})})


def test_reconcile_revokes_first_and_stays_until_revoked():
    m = member(member_epoch=10, assigned={T: frozenset({0, 1})})
    n = reconcile(m, 11, {T: frozenset({0, 2})}, frozenset({T}), {(T, 2): 10}, ((T, (0, 1)),))
    assert (n.state, n.member_epoch, dict(n.assigned), dict(n.pending_revocation)) == \
        (MemberState.UNREVOKED_PARTITIONS, 10, {T: frozenset({0})}, {T: frozenset({1})})
    assert reconcile(n, 11, {T: frozenset({0, 2})}, frozenset({T}), {(T, 2): 10}, ((T, (0, 1)),)) is n
    assert reconcile(n, 11, {T: frozenset({0, 2})}, frozenset({T}), {(T, 2): 10}, None) is n
    n2 = reconcile(n, 11, {T: frozenset({0, 2})}, frozenset({T}), {(T, 2): 10}, ((T, (0,)),))
    assert (n2.state, n2.member_epoch) == (MemberState.UNRELEASED_PARTITIONS, 11)


def test_reconcile_never_moves_past_the_target_after_a_subscription_change():
    m = member(member_epoch=10, previous_member_epoch=9, state=MemberState.UNREVOKED_PARTITIONS,
               assigned={}, pending_revocation={T: frozenset({0})})
    n = reconcile(m, 10, {}, frozenset(), {}, ())
    assert (n.member_epoch, n.state) == (10, MemberState.STABLE)


def test_reconcile_fences_a_member_in_an_unknown_state_that_owns_partitions():
    m = member(member_epoch=10, state=MemberState.UNKNOWN)
    with pytest.raises(Fenced):
        reconcile(m, 11, {}, frozenset({T}), {}, ((T, (0,)),))
    with pytest.raises(Fenced):
        reconcile(m, 11, {}, frozenset({T}), {}, None)
    assert reconcile(m, 11, {T: frozenset({3})}, frozenset({T}), {}, ()).member_epoch == 11


def test_reconcile_drops_an_unsubscribed_topic_at_once():
    m = member(member_epoch=10, assigned={T: frozenset({0}), U: frozenset({1})})
    n = reconcile(m, 10, {T: frozenset({0}), U: frozenset({1})}, frozenset({T}), {}, ((T, (0,)), (U, (1,))), True)
    assert (n.state, dict(n.assigned), dict(n.pending_revocation)) == \
        (MemberState.UNREVOKED_PARTITIONS, {T: frozenset({0})}, {U: frozenset({1})})
    revoked = reconcile(m, 10, {T: frozenset({0}), U: frozenset({1})}, frozenset({T}), {}, ((T, (0,)),), True)
    assert (revoked.state, dict(revoked.assigned)) == (MemberState.STABLE, {T: frozenset({0})})


def test_a_dynamic_member_rejoining_with_an_instance_id_stays_itself():
    d = Driver()
    a = d.hb("a", 0)
    again = d.hb("a", 0, instance_id="i")
    assert (again.member_epoch, again.assignment) == (a.member_epoch, a.assignment)
    assert d.group().members["a"].instance_id == "i"


def test_a_leave_names_why_the_group_is_not_there():
    d = Driver()
    gone = d.hb("m", -1)
    assert (gone.error_code, gone.error_message) == (Error.GROUP_ID_NOT_FOUND, "Group g not found.")
    d.run(ev.OffsetCommit(request_id="c", now_ms=d.now, version=9, group_id="g", generation_id=-1, member_id="",
                          topics=(("t", (ev.CommitPartition(partition_index=0, committed_offset=7),)),)))
    classic = d.hb("m", -1)
    assert (classic.error_code, classic.error_message) == (Error.GROUP_ID_NOT_FOUND,
                                                           "Group g is not a consumer group.")


def test_an_empty_classic_group_made_a_consumer_group_keeps_its_offsets_after_a_reload():
    """The conversion writes the classic group's tombstone, then the consumer group's records:
    its committed offsets are the consumer group's (Kafka keeps them), also once read back. A
    tombstone that is not a conversion (a deletion) still takes them along."""
    d = Driver(group_initial_rebalance_delay_ms=0)
    assert _commit(d, "", -1) is Error.NONE
    d.hb("a", 0)
    records = tuple(r for w in d.writes for r in w.records)
    fresh = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=1))
    fresh.handle(ev.TopicsChanged(now_ms=0, topics=(("t", T, 6), ("u", U, 3))))
    fresh.handle(ev.LoadPartition(now_ms=0, partition=0, records=records))
    assert fresh.offsets("g") == d.c.offsets("g") and fresh.offsets("g")[("t", 0)].offset == 3
    from groupcoord.core.commands import GroupTombstone, OffsetCommitRecord

    deleted = (OffsetCommitRecord("h", "t", 0, 5, -1, "", 0, None), GroupTombstone("h"),
               OffsetCommitRecord("h2", "t", 0, 6, -1, "", 0, None))
    other = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=1))
    other.handle(ev.LoadPartition(now_ms=0, partition=0, records=deleted))
    assert other.offsets("h") == {} and other.offsets("h2")[("t", 0)].offset == 6
