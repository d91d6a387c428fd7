"""``groupcoord groups`` and ``groupcoord offsets``: admin over the wire, like Kafka's
kafka-consumer-groups.sh (they work against any Kafka-protocol broker). ``serve`` parses their
arguments (``add_server_commands``); this module carries them out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from groupcoord.adapters.cli.parsing import fail
from groupcoord.core.classic.subscription import ConsumerProtocolError, decode_assignment, group_by_topic

# --- tables ------------------------------------------------------------------------------------------

def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    for r in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return "\n".join(lines)


def _emit(args: argparse.Namespace, data: Any, headers: list[str], rows: list[list[Any]], empty: str) -> None:
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
    elif not rows:
        print(empty)
    else:
        print(table(headers, rows))


# --- groups ---------------------------------------------------------------------------------------------

def _client():
    from groupcoord.adapters.client import kafka_client

    return kafka_client


async def list_groups(cluster: Any, states: list[str] | None = None, types: list[str] | None = None) -> list[dict]:
    """Every broker's groups; ``types`` (classic, consumer, ...): only those (ListGroups v5's filter;
    a broker below v5 lists classic groups only, and says no type)."""
    meta = await cluster.metadata([])
    groups: dict[str, dict] = {}
    for node_id in sorted(b["node_id"] for b in meta["brokers"]):
        client = await cluster.broker(node_id)
        v = client.version(16)
        fields: dict[str, Any] = {"states_filter": list(states or [])}
        if v >= 5:
            fields["types_filter"] = list(types or [])
        response = await client.request(16, fields, v)
        if response["error_code"]:
            raise _client().KafkaError(f"ListGroups on broker {node_id}: {_client().error_name(response['error_code'])}")
        for g in response["groups"]:
            state = g.get("group_state") or ""
            if states and v < 4 and state.lower() not in {s.lower() for s in states}:
                continue
            if types and v < 5 and "classic" not in types:
                continue
            groups[g["group_id"]] = {"group": g["group_id"], "state": state or None,
                                     "protocol_type": g.get("protocol_type") or "",
                                     "type": g.get("group_type") or None, "coordinator": node_id}
    return [groups[k] for k in sorted(groups)]


def _by_topic(topic_partitions: list[dict]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t in topic_partitions:
        out.setdefault(t["topic_name"] or str(t["topic_id"]), []).extend(t["partitions"])
    return {t: sorted(ps) for t, ps in sorted(out.items())}


_MEMBER_TYPES = {0: "classic", 1: "consumer"}  # ConsumerGroupDescribe v1's MemberType (-1: unknown)


async def describe_consumer_group(client: Any, group: str) -> dict | None:
    """ConsumerGroupDescribe (KIP-848): the group, or None when it is not a consumer group (or
    does not exist): GROUP_ID_NOT_FOUND."""
    KafkaError, error_name = _client().KafkaError, _client().error_name
    v = client.version(69)
    response = await client.request(69, {"group_ids": [group], "include_authorized_operations": False}, v)
    g = response["groups"][0]
    if g["error_code"] == 69:  # GROUP_ID_NOT_FOUND
        return None
    if g["error_code"]:
        raise KafkaError(f"ConsumerGroupDescribe({group}): {error_name(g['error_code'])}", g["error_code"])
    members = []
    for m in g["members"]:
        members.append({"member_id": m["member_id"], "group_instance_id": m.get("instance_id"),
                        "client_id": m["client_id"], "host": m["client_host"],
                        # v0 has no member type: every member there speaks the consumer protocol
                        "member_type": _MEMBER_TYPES.get(m.get("member_type", 1), "unknown"),
                        "member_epoch": m["member_epoch"], "rack_id": m.get("rack_id"),
                        "subscribed_topics": sorted(m.get("subscribed_topic_names") or []),
                        "subscribed_topic_regex": m.get("subscribed_topic_regex"),
                        "assignment": _by_topic(m["assignment"]["topic_partitions"]),
                        "target_assignment": _by_topic(m["target_assignment"]["topic_partitions"])})
    return {"group": group, "type": "consumer", "state": g["group_state"], "group_epoch": g["group_epoch"],
            "assignment_epoch": g["assignment_epoch"], "protocol_type": "consumer", "protocol": g["assignor_name"],
            "coordinator": f"{client.host}:{client.port}", "members": members}


async def describe_group(cluster: Any, group: str) -> dict:
    """A consumer group (KIP-848) as ConsumerGroupDescribe shows it, where the broker serves it;
    else, or for a classic group, as DescribeGroups does."""
    KafkaError, error_name = _client().KafkaError, _client().error_name
    client = await cluster.coordinator(group)
    if 69 in client.versions:
        described = await describe_consumer_group(client, group)
        if described is not None:
            return described
    v = client.version(15)
    response = await client.request(15, {"groups": [group], "include_authorized_operations": False}, v)
    g = response["groups"][0]
    if g["error_code"]:
        raise KafkaError(f"DescribeGroups({group}): {error_name(g['error_code'])}", g["error_code"])
    members = []
    for m in g["members"]:
        raw = m["member_assignment"]
        try:
            assignment = group_by_topic(decode_assignment(raw).partitions) \
                if g["protocol_type"] == "consumer" and raw else {}
        except ConsumerProtocolError:
            assignment = {}
        members.append({"member_id": m["member_id"], "group_instance_id": m.get("group_instance_id"),
                        "client_id": m["client_id"], "host": m["client_host"],
                        "assignment": assignment})
    return {"group": group, "type": "classic", "state": g["group_state"], "protocol_type": g["protocol_type"],
            "protocol": g["protocol_data"], "coordinator": f"{client.host}:{client.port}", "members": members}


async def delete_groups(cluster: Any, groups: list[str]) -> dict[str, int]:
    results: dict[str, int] = {}
    for group in groups:
        client = await cluster.coordinator(group)
        response = await client.request(42, {"groups_names": [group]}, client.version(42))
        for r in response["results"]:
            results[r["group_id"]] = r["error_code"]
    return results


# --- offsets ---------------------------------------------------------------------------------------------

async def fetch_offsets(cluster: Any, group: str) -> dict[tuple[str, int], dict]:
    KafkaError, error_name = _client().KafkaError, _client().error_name
    client = await cluster.coordinator(group)
    v = client.version(9)
    if v >= 8:
        fields = {"groups": [{"group_id": group, "topics": None}], "require_stable": False}
    else:
        fields = {"group_id": group, "topics": None, "require_stable": False}
    response = await client.request(9, fields, v)
    if v >= 8:
        entry = response["groups"][0]
        code, topics = entry["error_code"], entry["topics"]
    else:
        code, topics = response.get("error_code", 0), response["topics"]
    if code:
        raise KafkaError(f"OffsetFetch({group}): {error_name(code)}", code)
    out = {}
    for t in topics:
        for p in t["partitions"]:
            if p["error_code"] == 0 and p["committed_offset"] >= 0:
                out[(t["name"], p["partition_index"])] = {"offset": p["committed_offset"],
                                                          "metadata": p.get("metadata") or ""}
    return out


async def log_offsets(cluster: Any, partitions: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int | None]:
    """The offset for ``timestamp`` (-1 latest, -2 earliest) of each partition, asked of its leader."""
    topics = sorted({t for t, _ in partitions})
    meta = await cluster.metadata(topics)
    leaders: dict[int, list[tuple[str, int]]] = {}
    known = {}
    for t in meta["topics"]:
        for p in t["partitions"] if t["error_code"] == 0 else []:
            known[(t["name"], p["partition_index"])] = p["leader_id"]
    out: dict[tuple[str, int], int | None] = {}
    for tp in partitions:
        if tp in known:
            leaders.setdefault(known[tp], []).append(tp)
        else:
            out[tp] = None
    for leader, tps in leaders.items():
        client = await cluster.broker(leader)
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        response = await client.request(2, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": t, "partitions": [{"partition_index": p, "timestamp": timestamp, "current_leader_epoch": -1,
                                        "max_num_offsets": 1} for p in ps]} for t, ps in by_topic.items()]},
            client.version(2))
        for t in response["topics"]:
            for p in t["partitions"]:
                out[(t["name"], p["partition_index"])] = p["offset"] if p["error_code"] == 0 else None
    return out


async def commit_offsets(cluster: Any, group: str, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    client = await cluster.coordinator(group)
    by_topic: dict[str, list] = {}
    for (t, p), offset in sorted(offsets.items()):
        by_topic.setdefault(t, []).append({"partition_index": p, "committed_offset": offset,
                                           "committed_leader_epoch": -1, "committed_metadata": ""})
    response = await client.request(8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                                        "group_instance_id": None, "retention_time_ms": -1,
                                        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]},
                                    client.version(8))
    return {(t["name"], p["partition_index"]): p["error_code"] for t in response["topics"] for p in t["partitions"]}


async def delete_offsets(cluster: Any, group: str, partitions: list[tuple[str, int]]) -> tuple[int, dict]:
    client = await cluster.coordinator(group)
    by_topic: dict[str, list] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append({"partition_index": p})
    response = await client.request(47, {"group_id": group, "topics": [
        {"name": t, "partitions": ps} for t, ps in by_topic.items()]}, client.version(47))
    return response["error_code"], {(t["name"], p["partition_index"]): p["error_code"]
                                    for t in response["topics"] for p in t["partitions"]}


async def _topic_partitions(cluster: Any, specs: list[str]) -> list[tuple[str, int]]:
    """``TOPIC`` (every partition, from Metadata) or ``TOPIC:P,P``."""
    KafkaError, error_name = _client().KafkaError, _client().error_name
    out: list[tuple[str, int]] = []
    whole = []
    for spec in specs:
        name, sep, parts = spec.partition(":")
        if sep:
            out.extend((name, int(p)) for p in parts.split(",") if p.strip())
        else:
            whole.append(name)
    if whole:
        meta = await cluster.metadata(whole)
        for t in meta["topics"]:
            if t["error_code"]:
                raise KafkaError(f"topic {t['name']}: {error_name(t['error_code'])}", t["error_code"])
            out.extend((t["name"], p["partition_index"]) for p in t["partitions"])
    return sorted(set(out))


async def _groups_command(args: argparse.Namespace, cluster: Any) -> int:
    error_name = _client().error_name
    if args.groups_command == "list":
        types = getattr(args, "type", None)
        groups = await list_groups(cluster, args.state, types)
        if types is None:
            _emit(args, groups, ["GROUP", "STATE", "PROTOCOL-TYPE", "COORDINATOR"],
                  [[g["group"], g["state"], g["protocol_type"] or "-", g["coordinator"]] for g in groups], "no groups")
        else:  # --type: the type column too, as kafka-consumer-groups.sh --list --type
            _emit(args, groups, ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE", "COORDINATOR"],
                  [[g["group"], g["type"], g["state"], g["protocol_type"] or "-", g["coordinator"]] for g in groups],
                  "no groups")
        return 0
    if args.groups_command == "describe":
        info = await describe_group(cluster, args.group)
        if info["state"] == "Dead" and not info["members"]:
            _error(args, f"consumer group {args.group!r} does not exist")
            return 1
        if args.json:
            print(json.dumps(info, indent=2, sort_keys=True))
            return 0
        if info["type"] == "consumer":
            print(f"group {info['group']}: type consumer, state {info['state']}, group epoch {info['group_epoch']}, "
                  f"assignment epoch {info['assignment_epoch']}, assignor {info['protocol'] or '-'}, "
                  f"coordinator {info['coordinator']}, {len(info['members'])} member(s)")
            headers = ["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "TYPE", "EPOCH", "ASSIGNMENT",
                       "TARGET-ASSIGNMENT"]
            rows = [[m["member_id"], m["group_instance_id"], m["client_id"], m["host"], m["member_type"],
                     m["member_epoch"], _assigned(m["assignment"]), _assigned(m["target_assignment"])]
                    for m in info["members"]]
        else:
            print(f"group {info['group']}: type classic, state {info['state']}, "
                  f"protocol type {info['protocol_type'] or '-'}, assignor {info['protocol'] or '-'}, "
                  f"coordinator {info['coordinator']}, {len(info['members'])} member(s)")
            headers = ["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"]
            rows = [[m["member_id"], m["group_instance_id"], m["client_id"], m["host"], _assigned(m["assignment"])]
                    for m in info["members"]]
        if rows:
            print()
            print(table(headers, rows))
        return 0
    results = await delete_groups(cluster, args.group)
    if args.json:
        print(json.dumps({g: error_name(c) for g, c in results.items()}, indent=2, sort_keys=True))
    else:
        print(table(["GROUP", "RESULT"], [[g, "deleted" if c == 0 else error_name(c)] for g, c in results.items()]))
    return 0 if all(c == 0 for c in results.values()) else 1


def _assigned(assignment: dict[str, list[int]]) -> str:
    return "; ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(assignment.items())) or "-"


async def _offsets_command(args: argparse.Namespace, cluster: Any) -> int:
    KafkaError, error_name = _client().KafkaError, _client().error_name
    group = args.group
    if args.offsets_command == "list":
        committed = await fetch_offsets(cluster, group)
        owners: dict[tuple[str, int], dict] = {}
        try:
            info = await describe_group(cluster, group)
            for m in info["members"]:
                for t, ps in m["assignment"].items():
                    for p in ps:
                        owners[(t, p)] = m
        except KafkaError:
            info = None
        partitions = sorted(set(committed) | set(owners))
        ends = await log_offsets(cluster, partitions, -1) if partitions else {}
        rows, data = [], []
        for tp in partitions:
            c = committed.get(tp, {}).get("offset")
            end = ends.get(tp)
            lag = None if c is None or end is None else max(end - c, 0)
            m = owners.get(tp)
            data.append({"topic": tp[0], "partition": tp[1], "committed": c, "log_end": end, "lag": lag,
                         "member_id": m and m["member_id"], "host": m and m["host"], "client_id": m and m["client_id"]})
            rows.append([group, tp[0], tp[1], c, end, lag, m and m["member_id"], m and m["host"], m and m["client_id"]])
        _emit(args, data, ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                           "HOST", "CLIENT-ID"], rows, f"group {group} has no committed offsets")
        return 0
    if args.offsets_command == "delete":
        partitions = await _topic_partitions(cluster, args.topic)
        code, results = await delete_offsets(cluster, group, partitions)
        if code:
            _error(args, f"OffsetDelete({group}): {error_name(code)}")
            return 1
        _emit(args, {f"{t}:{p}": error_name(c) for (t, p), c in results.items()}, ["TOPIC", "PARTITION", "RESULT"],
              [[t, p, "deleted" if c == 0 else error_name(c)] for (t, p), c in sorted(results.items())], "nothing deleted")
        return 0 if all(c == 0 for c in results.values()) else 1
    # reset
    try:
        info = await describe_group(cluster, group)
        state = info["state"]
    except KafkaError:
        state = None
    if args.execute and state not in ("Empty", "Dead", None):
        _error(args, f"group {group} is {state}; stop its consumers first (offsets can only be reset "
                     f"for an empty group)")
        return 1
    committed = await fetch_offsets(cluster, group)
    partitions = await _topic_partitions(cluster, args.topic) if args.topic else sorted(committed)
    if not partitions:
        _error(args, f"group {group} has no committed offsets; name the topics with --topic")
        return 1
    earliest = await log_offsets(cluster, partitions, -2)
    latest = await log_offsets(cluster, partitions, -1)
    plan: dict[tuple[str, int], int] = {}
    for tp in partitions:
        lo, hi = earliest.get(tp), latest.get(tp)
        if lo is None or hi is None:
            _error(args, f"{tp[0]}:{tp[1]} is not a known partition")
            return 1
        if args.to_earliest:
            target = lo
        elif args.to_latest:
            target = hi
        elif args.to_offset is not None:
            target = args.to_offset
        else:
            current = committed.get(tp, {}).get("offset", lo)
            target = current + args.shift_by
        if hi > 0:  # like kafka-consumer-groups.sh: keep the new offset inside the log
            target = min(max(target, lo), hi)
        plan[tp] = max(target, 0)  # (groupcoord's logs are empty stand-ins: nothing to clamp to)
    results = await commit_offsets(cluster, group, plan) if args.execute else {}
    rows = [[group, t, p, committed.get((t, p), {}).get("offset"), plan[(t, p)],
             (error_name(results[(t, p)]) if results.get((t, p)) else "committed") if args.execute else "planned"]
            for (t, p) in sorted(plan)]
    _emit(args, [{"topic": r[1], "partition": r[2], "current": r[3], "new": r[4], "result": r[5]} for r in rows],
          ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "RESULT"], rows, "nothing to reset")
    if not args.execute and not args.json:
        print("\n(dry run: add --execute to commit these offsets)")
    return 0 if all(c == 0 for c in results.values()) else 1


def run_admin(args: argparse.Namespace) -> int:
    kafka_client = _client()

    async def main() -> int:
        cluster = kafka_client.Cluster(args.bootstrap_server, timeout=args.timeout)
        try:
            if args.command == "groups":
                return await _groups_command(args, cluster)
            return await _offsets_command(args, cluster)
        finally:
            await cluster.close()

    try:
        return asyncio.run(main())
    except kafka_client.BootstrapUnreachable as e:  # nothing to ask: bad input, as a bad address is
        return fail(getattr(args, "prog", f"groupcoord {args.command}"), e)
    except (kafka_client.KafkaError, OSError, asyncio.TimeoutError, ValueError) as e:
        _error(args, e or type(e).__name__)
        return 1


def _error(args: argparse.Namespace, message: object) -> None:
    """A failure of an admin command (exit status 1): one line, like a refusal."""
    fail(getattr(args, "prog", f"groupcoord {args.command}"), message)


