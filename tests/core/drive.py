"""Driving the core in tests/core: the coordinator with in-memory storage and a manual clock
(adapters/runtime/driver.py), requests as clients send them, a Stable group in one call, held
writes settled one by one, and the records a partition is loaded from."""

from __future__ import annotations

from groupcoord.core import commands as c
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator


def _driver(**config):
    from groupcoord.adapters.runtime.driver import Driver
    from groupcoord.core.config import CoordinatorConfig

    return Driver(CoordinatorConfig(**{"offsets_topic_num_partitions": 1, **config}))


def _join(d, group="g", member_id="", instance=None, version=5, session=10_000, rebalance=20_000,
          protocols=(("range", b"m"),), protocol_type="consumer"):
    body = {"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
            "member_id": member_id, "protocol_type": protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in protocols]}
    if instance is not None:
        body["group_instance_id"] = instance
    return d.send("JoinGroup", body, version=version)


def _sync(d, member_id, generation, group="g", assignments=(), instance=None, version=5):
    body = {"group_id": group, "generation_id": generation, "member_id": member_id,
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments]}
    if instance is not None:
        body["group_instance_id"] = instance
    return d.send("SyncGroup", body, version=version)


def _commit(d, group="g", offsets=(("t", 0, 5),), generation=-1, member_id="", version=8, metadata=""):
    topics = {}
    for topic, partition, offset in offsets:
        topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                             "committed_metadata": metadata})
    return d.send("OffsetCommit", {"group_id": group, "generation_id_or_member_epoch": generation,
                                   "member_id": member_id,
                                   "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
                  version=version)


def _stable(d, group="g", members=1, instance=None):
    """A Stable group of ``members`` dynamic members (the first static if ``instance``), each
    assigned ``b"a-" + member id``; returns (generation, member ids, leader id)."""
    requests = [_join(d, group, instance=instance, version=5) if i == 0 and instance else _join(d, group, version=3)
                for i in range(members)]
    while not all(r in d.responses for r in requests):  # the initial delay, extended per new member
        d.advance(max(1, d.config.group_initial_rebalance_delay_ms))
    joined = [d.responses[r] for r in requests]
    leader = joined[0].leader
    ids = [j.member_id for j in joined]
    generation = joined[0].generation_id
    for j in joined:
        assignments = [(m, b"a-" + m.encode()) for m in ids] if j.member_id == leader else ()
        _sync(d, j.member_id, generation, group, assignments, instance=instance if j.member_id == ids[0] else None)
    assert d.coordinator.group(group).state.value == "Stable"
    return generation, ids, leader


def _settle(d, write, error=None):
    """Complete (error None) or fail one held write of ``d``."""
    from groupcoord.core import events as ev

    d.in_flight.remove(write)
    if error is None:
        d.storage.store(write.partition, write.records)
        return d.dispatch(ev.WriteCompleted(now_ms=d.now_ms, write_id=write.write_id))
    return d.dispatch(ev.WriteFailed(now_ms=d.now_ms, write_id=write.write_id, error=error))


def _empty_group(d, group):
    """Creates ``group`` Empty (a member id handed out with MEMBER_ID_REQUIRED, nothing joined)."""
    _join(d, group, version=4)
    assert d.coordinator.group(group).state.value == "Empty"


def _record(group="g", protocol_type="consumer", members=(), timestamp=1234, generation=3):
    from groupcoord.core import commands as c

    return c.GroupMetadataRecord(group_id=group, protocol_type=protocol_type, generation_id=generation,
                                 protocol_name="range" if members else None,
                                 leader_id=members[0].member_id if members else None,
                                 current_state_timestamp_ms=timestamp, members=tuple(members))


def _offsets_seen(d, request_id):
    """A plain OffsetFetch of group s, as {(topic, partition): offset}."""
    from groupcoord.core import events as ev

    d.dispatch(ev.OffsetFetch(request_id=request_id, now_ms=d.now_ms, version=8, groups=(ev.FetchGroup("s"),)))
    return {(t.name, p.partition_index): p.committed_offset for t in d.responses[request_id].groups[0].topics
            for p in t.partitions}


def _latest(d):
    return {key: entry.offset for key, entry in d.coordinator.offsets("s").items()}


def _delete_offset(d, topic="t", partition=0):
    return d.send("OffsetDelete", {"group_id": "s", "topics": [{"name": topic, "partitions": [
        {"partition_index": partition}]}]}, version=0)


def _commands(d, act):
    """The commands the coordinator emitted while ``act()`` ran."""
    seen = []
    d.observer = lambda event, commands: seen.extend(commands)
    try:
        act()
    finally:
        d.observer = None
    return seen


def _coordinator(**config) -> Coordinator:
    return Coordinator(CoordinatorConfig(**{"offsets_topic_num_partitions": 1, **config}))


def _responses(out) -> dict:
    return {cmd.request_id: cmd.response for cmd in out if isinstance(cmd, c.Respond)}
