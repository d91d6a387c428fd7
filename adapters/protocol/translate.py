"""Between Kafka's message fields (dicts with the schema's snake_case names, at one API
version) and the coordinator's events and response values.

``request_event`` fills schema defaults and builds the event (``request_body`` is its inverse:
an event back into the request Kafka's client sends); ``response_fields`` restructures
a logical response for the version asked (LeaveGroup v0-2 and OffsetFetch v0-7 shapes,
FindCoordinator before v4) and keeps exactly that version's fields.
"""

from __future__ import annotations

import uuid
from typing import Any

import attrs

from groupcoord.adapters.protocol import schema
from groupcoord.core import events as ev
from groupcoord.core.commands import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    FindCoordinatorResponse,
    LeaveGroupResponse,
    OffsetFetchResponse,
)
from groupcoord.core.errors import Error


def request_event(api: str, version: int, body: dict, *, request_id: Any, now_ms: int,
                  client_id: str = "client", client_host: str = "/127.0.0.1",
                  new_member_uuid: str = "") -> ev.Request:
    """The coordinator event for a request; raises schema.SchemaError on a bad body."""
    b = schema.request_with_defaults(api, version, body)
    common = dict(request_id=request_id, now_ms=now_ms, version=version, client_id=client_id,
                  client_host=client_host)
    if api == "JoinGroup":
        rebalance_ms = b["session_timeout_ms"] if version == 0 else b["rebalance_timeout_ms"]
        return ev.JoinGroup(
            **common, group_id=b["group_id"], session_timeout_ms=b["session_timeout_ms"],
            rebalance_timeout_ms=rebalance_ms, member_id=b["member_id"],
            group_instance_id=b.get("group_instance_id"), protocol_type=b["protocol_type"],
            protocols=tuple((p["name"], p["metadata"]) for p in b["protocols"]),
            reason=b.get("reason"), new_member_uuid=new_member_uuid)
    if api == "SyncGroup":
        return ev.SyncGroup(
            **common, group_id=b["group_id"], generation_id=b["generation_id"], member_id=b["member_id"],
            group_instance_id=b.get("group_instance_id"), protocol_type=b.get("protocol_type"),
            protocol_name=b.get("protocol_name"),
            assignments=tuple((a["member_id"], a["assignment"]) for a in b["assignments"]))
    if api == "Heartbeat":
        return ev.Heartbeat(**common, group_id=b["group_id"], generation_id=b["generation_id"],
                            member_id=b["member_id"], group_instance_id=b.get("group_instance_id"))
    if api == "LeaveGroup":
        if version < 3:
            members = (ev.MemberIdentity(b["member_id"]),)
        else:
            members = tuple(ev.MemberIdentity(m["member_id"], m.get("group_instance_id"), m.get("reason"))
                            for m in b["members"])
        return ev.LeaveGroup(**common, group_id=b["group_id"], members=members)
    if api == "OffsetCommit":
        return ev.OffsetCommit(
            **common, group_id=b["group_id"], generation_id=b["generation_id_or_member_epoch"],
            member_id=b["member_id"], group_instance_id=b.get("group_instance_id"),
            retention_time_ms=b.get("retention_time_ms", -1),
            topics=tuple((t["name"], tuple(ev.CommitPartition(
                p["partition_index"], p["committed_offset"], p.get("committed_leader_epoch", -1),
                p["committed_metadata"]) for p in t["partitions"])) for t in b["topics"]))
    if api == "OffsetFetch":
        def topics(ts):
            return None if ts is None else tuple((t["name"], tuple(t["partition_indexes"])) for t in ts)
        if version < 8:
            # v0-1 have no "all topics"; an empty list there means none requested.
            groups = (ev.FetchGroup(b["group_id"], topics(b["topics"])),)
        else:
            groups = tuple(ev.FetchGroup(g["group_id"], topics(g["topics"]), g.get("member_id"),
                                         g.get("member_epoch", -1)) for g in b["groups"])
        return ev.OffsetFetch(**common, groups=groups, require_stable=b.get("require_stable", False))
    if api == "DescribeGroups":
        return ev.DescribeGroups(**common, groups=tuple(b["groups"]),
                                 include_authorized_operations=b.get("include_authorized_operations", False))
    if api == "ListGroups":
        return ev.ListGroups(**common, states_filter=tuple(b.get("states_filter", ())),
                             types_filter=tuple(b.get("types_filter", ())))
    if api == "DeleteGroups":
        return ev.DeleteGroups(**common, groups_names=tuple(b["groups_names"]))
    if api == "OffsetDelete":
        return ev.OffsetDelete(**common, group_id=b["group_id"], topics=tuple(
            (t["name"], tuple(p["partition_index"] for p in t["partitions"])) for t in b["topics"]))
    if api == "FindCoordinator":
        keys = (b["key"],) if version < 4 else tuple(b["coordinator_keys"])
        return ev.FindCoordinator(**common, key_type=b.get("key_type", 0), coordinator_keys=keys)
    if api == "ConsumerGroupHeartbeat":
        names, owned = b["subscribed_topic_names"], b["topic_partitions"]
        return ev.ConsumerGroupHeartbeat(
            **common, group_id=b["group_id"], member_id=b["member_id"], member_epoch=b["member_epoch"],
            instance_id=b["instance_id"], rack_id=b["rack_id"], rebalance_timeout_ms=b["rebalance_timeout_ms"],
            subscribed_topic_names=None if names is None else tuple(names),
            subscribed_topic_regex=b.get("subscribed_topic_regex"), server_assignor=b["server_assignor"],
            topic_partitions=None if owned is None else tuple(
                (str(t["topic_id"]), tuple(t["partitions"])) for t in owned),
            new_member_uuid=new_member_uuid)
    if api == "ConsumerGroupDescribe":
        return ev.ConsumerGroupDescribe(**common, group_ids=tuple(b["group_ids"]),
                                        include_authorized_operations=b["include_authorized_operations"])
    raise schema.SchemaError(f"unknown API {api!r}")


def request_body(event: ev.Request) -> tuple[str, dict]:
    """(API name, the request's fields at ``event.version``): the body ``request_event`` reads
    back into ``event`` (the version's fields only; schema.SchemaError on a version the schema
    lacks)."""
    api = type(event).__name__
    v = event.version
    if isinstance(event, ev.JoinGroup):
        b = dict(group_id=event.group_id, session_timeout_ms=event.session_timeout_ms,
                 rebalance_timeout_ms=event.rebalance_timeout_ms, member_id=event.member_id,
                 group_instance_id=event.group_instance_id, protocol_type=event.protocol_type,
                 protocols=[{"name": n, "metadata": m} for n, m in event.protocols], reason=event.reason)
    elif isinstance(event, ev.SyncGroup):
        b = dict(group_id=event.group_id, generation_id=event.generation_id, member_id=event.member_id,
                 group_instance_id=event.group_instance_id, protocol_type=event.protocol_type,
                 protocol_name=event.protocol_name,
                 assignments=[{"member_id": m, "assignment": a} for m, a in event.assignments])
    elif isinstance(event, ev.Heartbeat):
        b = dict(group_id=event.group_id, generation_id=event.generation_id, member_id=event.member_id,
                 group_instance_id=event.group_instance_id)
    elif isinstance(event, ev.LeaveGroup):
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "reason": m.reason}
                   for m in event.members]
        b = dict(group_id=event.group_id, members=members)
        if v < 3:  # one member, named at the top
            if len(members) != 1:
                raise schema.SchemaError(f"LeaveGroup v{v} names one member, not {len(members)}")
            b = dict(group_id=event.group_id, member_id=members[0]["member_id"])
    elif isinstance(event, ev.OffsetCommit):
        b = dict(group_id=event.group_id, generation_id_or_member_epoch=event.generation_id,
                 member_id=event.member_id, group_instance_id=event.group_instance_id,
                 retention_time_ms=event.retention_time_ms,
                 topics=[{"name": t, "partitions": [attrs.asdict(p) for p in ps]} for t, ps in event.topics])
    elif isinstance(event, ev.OffsetFetch):
        def topics(ts):
            return None if ts is None else [{"name": t, "partition_indexes": list(ps)} for t, ps in ts]
        if v < 8:
            if len(event.groups) != 1:
                raise schema.SchemaError(f"OffsetFetch v{v} names one group, not {len(event.groups)}")
            g = event.groups[0]
            b = dict(group_id=g.group_id, topics=topics(g.topics), require_stable=event.require_stable)
        else:
            b = dict(groups=[{"group_id": g.group_id, "member_id": g.member_id, "member_epoch": g.member_epoch,
                              "topics": topics(g.topics)} for g in event.groups],
                     require_stable=event.require_stable)
    elif isinstance(event, ev.DescribeGroups):
        b = dict(groups=list(event.groups), include_authorized_operations=event.include_authorized_operations)
    elif isinstance(event, ev.ListGroups):
        b = dict(states_filter=list(event.states_filter), types_filter=list(event.types_filter))
    elif isinstance(event, ev.DeleteGroups):
        b = dict(groups_names=list(event.groups_names))
    elif isinstance(event, ev.OffsetDelete):
        b = dict(group_id=event.group_id, topics=[{"name": t, "partitions": [{"partition_index": p} for p in ps]}
                                                  for t, ps in event.topics])
    elif isinstance(event, ev.FindCoordinator):
        b = dict(key_type=event.key_type, coordinator_keys=list(event.coordinator_keys))
        if v < 4:
            if len(event.coordinator_keys) != 1:
                raise schema.SchemaError(f"FindCoordinator v{v} names one key, not {len(event.coordinator_keys)}")
            b = dict(key_type=event.key_type, key=event.coordinator_keys[0])
    elif isinstance(event, ev.ConsumerGroupHeartbeat):
        b = dict(group_id=event.group_id, member_id=event.member_id, member_epoch=event.member_epoch,
                 instance_id=event.instance_id, rack_id=event.rack_id,
                 rebalance_timeout_ms=event.rebalance_timeout_ms,
                 subscribed_topic_names=(None if event.subscribed_topic_names is None
                                         else list(event.subscribed_topic_names)),
                 server_assignor=event.server_assignor,
                 topic_partitions=None if event.topic_partitions is None else _id_partitions(event.topic_partitions))
        if v >= 1:
            b["subscribed_topic_regex"] = event.subscribed_topic_regex
        elif event.subscribed_topic_regex is not None:
            raise schema.SchemaError(f"ConsumerGroupHeartbeat v{v} has no subscribed_topic_regex")
    elif isinstance(event, ev.ConsumerGroupDescribe):
        b = dict(group_ids=list(event.group_ids), include_authorized_operations=event.include_authorized_operations)
    else:
        raise schema.SchemaError(f"not a request: {api}")
    return api, schema.shape_request(api, v, b)


def _topic_uuid(topic_id: str) -> uuid.UUID:
    """A core topic id (``str(uuid.UUID)``) as the wire's uuid."""
    return uuid.UUID(topic_id)


def _id_partitions(assignment) -> list:
    """``((topic id, (partition, ...)), ...)`` as the wire's TopicPartitions entries."""
    return [{"topic_id": _topic_uuid(t), "partitions": list(ps)} for t, ps in assignment]


def _described_assignment(topics) -> dict:
    return {"topic_partitions": [{"topic_id": _topic_uuid(t.topic_id), "topic_name": t.topic_name,
                                  "partitions": list(t.partitions)} for t in topics]}


def _consumer_heartbeat_fields(r: ConsumerGroupHeartbeatResponse) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(r.error_code), "error_message": r.error_message,
            "member_id": r.member_id, "member_epoch": r.member_epoch,
            "heartbeat_interval_ms": r.heartbeat_interval_ms,
            # None: the Assignment field is null (unchanged); () is an empty assignment
            "assignment": None if r.assignment is None else {"topic_partitions": _id_partitions(r.assignment)}}


def _consumer_describe_fields(r: ConsumerGroupDescribeResponse) -> dict:
    return {"throttle_time_ms": 0, "groups": [{
        "error_code": int(g.error_code), "error_message": g.error_message, "group_id": g.group_id,
        "group_state": g.group_state, "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
        "assignor_name": g.assignor_name, "authorized_operations": g.authorized_operations,
        "members": [{
            "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
            "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex,
            "assignment": _described_assignment(m.assignment),
            "target_assignment": _described_assignment(m.target_assignment),
            "member_type": m.member_type,
        } for m in g.members],
    } for g in r.groups]}


def response_fields(api: str, version: int, response) -> dict:
    """The response as Kafka's fields at ``version`` (error codes as numbers, bytes as bytes;
    KIP-848's topic ids, ``str(uuid)`` in the core, as ``uuid.UUID``)."""
    if isinstance(response, ConsumerGroupHeartbeatResponse):
        return schema.shape_response(api, version, _consumer_heartbeat_fields(response))
    if isinstance(response, ConsumerGroupDescribeResponse):
        return schema.shape_response(api, version, _consumer_describe_fields(response))
    body = _plain(attrs.asdict(response, recurse=True))
    if isinstance(response, LeaveGroupResponse) and version < 3 and body["error_code"] == 0:
        body["error_code"] = next((m["error_code"] for m in body["members"] if m["error_code"]), 0)
    elif isinstance(response, OffsetFetchResponse) and version < 8:
        group = body["groups"][0] if body["groups"] else {"topics": [], "error_code": 0}
        body = {"topics": group["topics"], "error_code": group["error_code"]}
        if version < 2 and body["error_code"]:
            for topic in body["topics"]:
                for p in topic["partitions"]:
                    p["error_code"] = body["error_code"]
    elif isinstance(response, FindCoordinatorResponse) and version < 4:
        c = body["coordinators"][0]
        body = {k: c[k] for k in ("error_code", "error_message", "node_id", "host", "port")}
    return schema.shape_response(api, version, body)


def _plain(value):
    if isinstance(value, Error):
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
