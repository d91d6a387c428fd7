"""The bodies of a consumer's group requests, as Kafka's fields of the version sent: what a
member who knows an id and a generation sends. One place builds them for the strategies and
the state machine; fields the version lacks are left out, so any body fits its version."""

from __future__ import annotations

from typing import Iterable

from groupcoord.adapters.client.assignors import leader_assign, make_assignor
from groupcoord.adapters.protocol import schema

GROUP_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch",
              "DescribeGroups", "DeleteGroups")
ADMIN_APIS = ("ListGroups", "DescribeGroups", "DeleteGroups")


def versions(api: str) -> tuple[int, int]:
    """The versions of ``api`` the project's schema speaks."""
    return schema.SUPPORTED_VERSIONS[api]


def fit(api: str, version: int, body: dict) -> dict:
    """``body`` without the fields ``version`` does not have."""
    have = set(schema.request_fields(api, version))
    return {k: v for k, v in body.items() if k in have}


def join(group_id: str, version: int, member, member_id: str, reason: str | None = None) -> dict:
    """A JoinGroup of ``member`` (strategies.Member) under ``member_id`` ("" to get one)."""
    return fit("JoinGroup", version, {
        "group_id": group_id, "session_timeout_ms": member.session_timeout_ms,
        "rebalance_timeout_ms": member.rebalance_timeout_ms, "member_id": member_id,
        "group_instance_id": member.group_instance_id if version >= 5 else None,
        "protocol_type": member.protocol_type, "reason": reason,
        "protocols": [{"name": n, "metadata": m} for n, m in member.protocols]})


def assignments(joined: dict, topics: dict[str, int]) -> dict[str, bytes]:
    """What a leader hands out for its JoinGroup answer ``joined`` (the consumer's assignor
    run over the members' subscriptions, as ConsumerCoordinator.onLeaderElected does);
    unparsable subscriptions get nothing."""
    members = [(m["member_id"], m.get("group_instance_id"), m["metadata"]) for m in joined.get("members", ())]
    try:
        return leader_assign(make_assignor(joined.get("protocol_name") or "range"), members, topics)
    except Exception:  # another client's bytes, or an assignor we do not have: empty assignments
        return {m[0]: b"" for m in members}


def sync(group_id: str, version: int, member_id: str, generation: int, instance_id: str | None,
         given: dict[str, bytes], protocol_type: str | None = None, protocol_name: str | None = None) -> dict:
    return fit("SyncGroup", version, {
        "group_id": group_id, "generation_id": generation, "member_id": member_id,
        "group_instance_id": instance_id if version >= 3 else None,
        "protocol_type": protocol_type, "protocol_name": protocol_name,
        "assignments": [{"member_id": m, "assignment": a} for m, a in given.items()]})


def heartbeat(group_id: str, version: int, member_id: str, generation: int, instance_id: str | None) -> dict:
    return fit("Heartbeat", version, {"group_id": group_id, "generation_id": generation, "member_id": member_id,
                                      "group_instance_id": instance_id if version >= 3 else None})


def leave(group_id: str, version: int, who: Iterable[tuple[str, str | None]]) -> dict:
    """A LeaveGroup: v0-2 name one member id (the first), v3+ a batch of (member id, instance)."""
    who = list(who)
    if version < 3:
        return {"group_id": group_id, "member_id": who[0][0] if who else ""}
    return fit("LeaveGroup", version, {"group_id": group_id, "members": [
        fit_member(version, {"member_id": m, "group_instance_id": i, "reason": None}) for m, i in who]})


def fit_member(version: int, entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k != "reason" or version >= 5}


def commit(group_id: str, version: int, member_id: str, generation: int, instance_id: str | None,
           offsets: dict[tuple[str, int], int]) -> dict:
    topics: dict[str, list] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        topics.setdefault(topic, []).append(fit_partition(version, {
            "partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1,
            "commit_timestamp": -1, "committed_metadata": ""}))
    return fit("OffsetCommit", version, {
        "group_id": group_id, "generation_id_or_member_epoch": generation, "member_id": member_id,
        "group_instance_id": instance_id if version >= 7 else None, "retention_time_ms": -1,
        "topics": [{"name": t, "partitions": p} for t, p in topics.items()]})


def fit_partition(version: int, entry: dict) -> dict:
    out = dict(entry)
    if version < 6:
        out.pop("committed_leader_epoch")
    if version != 1:
        out.pop("commit_timestamp")
    return out


def fetch(group_id: str, version: int, topics: dict[str, int] | None) -> dict:
    """An OffsetFetch of ``topics`` (every partition), or of everything (None; v2+)."""
    wanted = None if topics is None and version >= 2 else [
        {"name": t, "partition_indexes": list(range(n))} for t, n in sorted((topics or {}).items())]
    if version >= 8:
        return {"groups": [{"group_id": group_id, "topics": wanted}], "require_stable": False}
    return fit("OffsetFetch", version, {"group_id": group_id, "topics": wanted, "require_stable": False})


def describe(group_id: str, version: int) -> dict:
    return fit("DescribeGroups", version, {"groups": [group_id], "include_authorized_operations": False})


def delete(group_id: str, version: int) -> dict:
    return {"groups_names": [group_id]}


def list_groups(version: int) -> dict:
    return fit("ListGroups", version, {"states_filter": [], "types_filter": []})


# KIP-848's consumer group protocol: what a consumer with ``group.protocol=consumer`` sends
CONSUMER_APIS = ("ConsumerGroupHeartbeat", "ConsumerGroupDescribe")


def consumer_heartbeat(group_id: str, version: int, member_id: str, epoch: int, instance_id: str | None,
                       owned: list | None, *, topics: Iterable[str] | None = None, rebalance_timeout_ms: int = -1,
                       server_assignor: str | None = None) -> dict:
    """A ConsumerGroupHeartbeat: a join (epoch 0: the subscription, ``owned`` empty), a heartbeat
    (``owned``: the partitions held, as the last answer gave them, by topic id; None: not sent),
    a full one (``topics`` given again), or a leave (epoch -1; -2 a static member's)."""
    return fit("ConsumerGroupHeartbeat", version, {
        "group_id": group_id, "member_id": member_id, "member_epoch": epoch, "instance_id": instance_id,
        "rack_id": None, "rebalance_timeout_ms": rebalance_timeout_ms,
        "subscribed_topic_names": None if topics is None else sorted(topics), "subscribed_topic_regex": None,
        "server_assignor": server_assignor, "topic_partitions": owned})


def consumer_describe(group_id: str, version: int) -> dict:
    return {"group_ids": [group_id], "include_authorized_operations": False}
