"""``groupcoord serve``, ``groupcoord groups ...``, ``groupcoord offsets ...`` and
``groupcoord bench server``.

``add_server_commands(subparsers)`` adds the first three to the ``groupcoord`` command;
``run_server_command(args)`` runs them. The admin commands speak the Kafka protocol
(``kafka_client``), so they work against any Kafka broker too, in the spirit of
``kafka-consumer-groups.sh``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from groupcoord.core.consumer_protocol import ConsumerProtocolError, decode_assignment, group_by_topic
from groupcoord.core.config import KAFKA_NAMES, ConfigError, CoordinatorConfig

from groupcoord.adapters.storage.interface import StorageOpenError

from groupcoord.adapters.cli import parsing
from groupcoord.adapters.cli.parsing import Parser, fail

from groupcoord.adapters.wire import broker_apis as apis

# The protocol modules (kio) are imported when a command runs, so that adding these commands to
# the ``groupcoord`` parser costs nothing for the other commands.

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
_SERVER_SETTINGS = {"socket.request.max.bytes": "max_request_bytes"}


def add_server_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the coordinator as a Kafka-protocol server",
                       description="Serve Kafka's group coordinator APIs on a TCP port. Broker settings go by "
                                   "their Kafka names, from flags or a properties file (flags win).")
    p.add_argument("--host", type=parsing.host, default=None, help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=parsing.port, default=None, help="port to bind (default 9092; 0 picks a free one)")
    p.add_argument("--topic", action="append", default=[], metavar="NAME=PARTITIONS",
                   help="a topic of the catalog Metadata serves (repeatable)")
    p.add_argument("--config", metavar="FILE",
                   help="a properties file: Kafka setting names (group.initial.rebalance.delay.ms=0, ...), "
                        "listeners=PLAINTEXT://HOST:PORT, topic.NAME=PARTITIONS")
    p.add_argument("--storage", choices=["sqlite", "memory", "broker"], default="sqlite",
                   help="where groups and offsets are kept: sqlite (durable, in --data-dir; the default), "
                        "memory (lost at exit) or broker (a topic on a Kafka-compatible broker, shared by "
                        "several groupcoord serve processes that divide the partitions among themselves)")
    p.add_argument("--data-dir", metavar="DIR", default="groupcoord-data",
                   help="folder of the SQLite store (default ./groupcoord-data)")
    p.add_argument("--sqlite-max-bytes", metavar="BYTES", default=None,
                   type=parsing.number(int, 4096, "a size in bytes of at least 4096"),
                   help="largest size of the SQLite store; writes beyond it fail as on a full disk "
                        "(KAFKA_STORAGE_ERROR, clients see NOT_COORDINATOR)")
    b = p.add_argument_group("broker storage (--storage broker)")
    b.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]", default=None, type=parsing.bootstrap,
                   help="the Kafka-compatible broker holding the records topic")
    b.add_argument("--records-topic", metavar="NAME", default="groupcoord-offsets",
                   help="the compacted topic of groups and offsets, created with offsets.topic.num.partitions "
                        "partitions if missing (default groupcoord-offsets)")
    b.add_argument("--coordinator-group", metavar="NAME", default="groupcoord-coordinators",
                   help="the group on the broker through which the coordinators share the partitions "
                        "(default groupcoord-coordinators)")
    b.add_argument("--coordinator-session-ms", metavar="MS", default=10_000,
                   type=parsing.number(int, 1000, "milliseconds, at least 1000"),
                   help="session timeout in that group: how long until a dead coordinator's partitions "
                        "move to a survivor, and the lease after which a cut-off one stops serving "
                        "(default 10000)")
    p.add_argument("--trace", metavar="PATH",
                   help="record every event and command the coordinator handles (spec/trace-format.md, one "
                        "instance-scoped recording): to PATH itself when it ends in .jsonl (or .parquet, complete "
                        "at shutdown), else to PATH/trace-<start ms>.jsonl (the directory is created; one file "
                        "per run); and meta.json beside it, the trace's manifest (scope 'instance', the "
                        "coordinator settings in force, replaced at each start and at shutdown). Read by "
                        "`groupcoord replay`, `tla validate` and `timeline`, given PATH or its directory")
    p.add_argument("--log-format", choices=["text", "json"], default="text", help="log lines on stderr")
    p.add_argument("--event-loop", choices=["auto", "asyncio", "uvloop"], default="auto",
                   help="auto: uvloop when it is installed (faster), else asyncio's own")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="info")
    for name in sorted(KAFKA_NAMES) + sorted(_SERVER_SETTINGS):
        p.add_argument("--" + name, dest="kafka:" + name, metavar="VALUE", default=None,
                       help=argparse.SUPPRESS if name not in _DOCUMENTED else _DOCUMENTED[name])

    g = sub.add_parser("groups", help="list, describe and delete consumer groups (over the Kafka protocol)")
    gsub = g.add_subparsers(dest="groups_command", required=True)
    for name, text in (("list", "list groups with their states"), ("describe", "members and assignments of a group"),
                       ("delete", "delete groups (they must be empty)")):
        q = gsub.add_parser(name, help=text)
        _add_common(q)
        if name == "describe":
            q.add_argument("group")
        elif name == "delete":
            q.add_argument("group", nargs="+")
        else:
            q.add_argument("--state", action="append", default=[], type=parsing.group_state,
                           help=f"only groups in this state (repeatable; {', '.join(parsing.GROUP_STATES)})")

    o = sub.add_parser("offsets", help="list, reset and delete committed offsets (over the Kafka protocol)")
    osub = o.add_subparsers(dest="offsets_command", required=True)
    q = osub.add_parser("list", help="committed offsets, log-end offsets and lag of a group")
    _add_common(q)
    q.add_argument("group")
    q = osub.add_parser("reset", help="reset a group's committed offsets (the group must be empty)",
                        description="Prints the plan; --execute commits it.")
    _add_common(q)
    q.add_argument("group")
    q.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P...]", type=parsing.topic_partitions,
                   help="topic (and partitions) to reset; default: every topic the group has offsets for")
    how = q.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-offset", type=parsing.number(int, 0, "an offset of at least 0"), metavar="N")
    how.add_argument("--shift-by", type=int, metavar="N")
    q.add_argument("--execute", action="store_true", help="commit the new offsets (default: only show them)")
    q = osub.add_parser("delete", help="delete a group's committed offsets for topics")
    _add_common(q)
    q.add_argument("group")
    q.add_argument("--topic", action="append", required=True, metavar="TOPIC[:P,P...]",
                   type=parsing.topic_partitions)


_DOCUMENTED = {
    "group.initial.rebalance.delay.ms": "delay before a new group's first rebalance (Kafka default 3000)",
    "group.min.session.timeout.ms": "smallest session timeout a member may ask for (default 6000)",
    "group.max.session.timeout.ms": "largest session timeout (default 1800000)",
    "offsets.topic.num.partitions": "partitions of __consumer_offsets, all served here (default 50)",
    "node.id": "this broker's node id (default 0; with --storage broker: the bound port, so that every "
               "process on a host has its own)",
    "advertised.host": "host given to clients in Metadata/FindCoordinator (default: the bound host)",
    "advertised.port": "port given to clients (default: the bound port)",
    "socket.request.max.bytes": "largest request frame accepted (default 104857600)",
    "group.max.size": "most members a group may have (default 2147483647)",
    "offsets.retention.minutes": "how long offsets of an empty group are kept (default 10080)",
    "offsets.retention.check.interval.ms": "how often expired offsets and groups are removed (default 600000)",
    "offset.metadata.max.bytes": "largest metadata string of a committed offset (default 4096)",
    "offsets.commit.timeout.ms": "Kafka's write timeout for group operations (default 5000)",
}


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT[,HOST:PORT]",
                   type=parsing.bootstrap, help=f"a broker to start from (default {DEFAULT_BOOTSTRAP})")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--timeout", type=parsing.seconds, default=15.0, help="seconds per request (default 15)")


# --- serve -----------------------------------------------------------------------------------------

def read_properties(path: str) -> dict[str, str]:
    """KEY=VALUE (or KEY: VALUE) lines, ``#`` and ``!`` comments; ConfigError names the file
    and the line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"--config {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"--config {path}: not a text file (UTF-8)") from None
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        if not sep:
            raise ConfigError(f"{path}:{number}: expected KEY=VALUE, got {raw!r}")
        out[key.strip()] = value.strip()
    return out


def _listener(value: str, source: str) -> tuple[str, int]:
    """HOST and PORT of the first of Kafka's ``listeners`` (``PLAINTEXT://HOST:PORT,...``)."""
    listener = value.split(",")[0].split("://")[-1]
    h, sep, p = listener.rpartition(":")
    try:
        port = int(p)
    except ValueError:
        port = -1
    if not sep or not 0 <= port <= 65535:
        raise ConfigError(f"{source}: listeners: expected PLAINTEXT://HOST:PORT (a port from 0 to 65535), "
                          f"got {value!r}")
    return (h.strip("[]") or "0.0.0.0"), port


def _check_writable(path: str, flag: str) -> None:
    """``path`` can be created: its nearest existing ancestor is a writable directory."""
    target = Path(path).absolute()
    existing = next((p for p in (target, *target.parents) if p.exists()), None)
    if existing is None:
        return
    if existing != target and not existing.is_dir():
        raise ConfigError(f"{flag} {path}: {existing} is not a directory")
    if existing.is_dir() and not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path}: {existing} is not writable")


def build_server(args: argparse.Namespace, log: Any) -> "Any":
    """The server ``serve`` runs. Every setting is checked (ConfigError) before the store is
    opened, so a refused start writes nothing."""
    from groupcoord.adapters.wire.server import GroupServer, listen_problem
    from groupcoord.adapters.storage.memory import MemoryStorage

    settings: dict[str, str] = {}
    topics: list[str] = []
    ignored: list[str] = []  # logged once everything is checked: a refusal is its one line
    host, port = "127.0.0.1", 9092
    if args.config:
        for key, value in read_properties(args.config).items():
            if key == "listeners":
                host, port = _listener(value, args.config)
            elif key.startswith("topic."):
                topics.append(f"{key[len('topic.'):]}={value}")
            elif key in KAFKA_NAMES or key in _SERVER_SETTINGS:
                settings[key] = value
            else:
                ignored.append(key)
    for name in list(KAFKA_NAMES) + list(_SERVER_SETTINGS):
        value = getattr(args, "kafka:" + name)
        if value is not None:
            settings[name] = value
    host = args.host if args.host is not None else host
    port = args.port if args.port is not None else port
    topics += args.topic
    try:
        catalog = apis.TopicCatalog.parse(topics)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    server_settings = {k: settings.pop(k) for k in list(settings) if k in _SERVER_SETTINGS}
    if "advertised.host" not in settings and host not in ("0.0.0.0", "::", ""):
        settings["advertised.host"] = host
    config = CoordinatorConfig.from_kafka(settings)
    try:
        max_bytes = int(server_settings.get("socket.request.max.bytes", 104_857_600))
    except ValueError:
        raise ConfigError(f"socket.request.max.bytes must be an integer, got "
                          f"{server_settings['socket.request.max.bytes']!r}") from None
    if max_bytes < 1:
        raise ConfigError("socket.request.max.bytes must be at least 1")
    if args.storage == "broker" and not args.bootstrap_server:
        raise ConfigError("--storage broker needs --bootstrap-server HOST:PORT")
    if args.trace:
        _check_writable(args.trace, "--trace")
    problem = listen_problem(host, port)  # before a store is opened: a refusal writes nothing
    if problem:
        raise ConfigError(problem)
    for key in ignored:
        log("warning", "unknown_setting", setting=key, source=args.config, detail="ignored")
    ownership = None
    if args.storage == "broker":
        from groupcoord.adapters.storage.broker import BrokerStorage
        from groupcoord.adapters.wire.ownership import Ownership

        storage = BrokerStorage(args.bootstrap_server, args.records_topic, config.offsets_topic_num_partitions,
                                log=log)
        ownership = Ownership(args.bootstrap_server, config.offsets_topic_num_partitions,
                              group=args.coordinator_group, session_ms=args.coordinator_session_ms, log=log)
        storage.lease = ownership.lease
    elif args.storage == "sqlite":
        from groupcoord.adapters.storage.sqlite import SqliteStorage

        storage = SqliteStorage(args.data_dir, max_bytes=args.sqlite_max_bytes)
    else:
        storage = MemoryStorage()
    return GroupServer(config, catalog, host=host, port=port, storage=storage, trace=args.trace, log=log,
                       max_request_bytes=max_bytes, advertise_bound_port="advertised.port" not in settings,
                       ownership=ownership, node_id_from_port=ownership is not None and "node.id" not in settings)


def run_serve(args: argparse.Namespace) -> int:
    from groupcoord.adapters.wire.server import Log

    prog = getattr(args, "prog", "groupcoord serve")
    log = Log(sys.stderr, fmt=args.log_format, level=args.log_level)
    loop_name = "asyncio"
    if args.event_loop in ("auto", "uvloop"):
        try:
            import uvloop  # type: ignore[import-not-found]

            asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
            loop_name = "uvloop"
        except ImportError:
            if args.event_loop == "uvloop":
                return fail(prog, "--event-loop uvloop: needs uvloop: pip install uvloop")
    try:
        server = build_server(args, log)
    except StorageOpenError as e:
        log("error", "storage_unusable", storage=args.storage, error=str(e))
        return 2
    except (ConfigError, ValueError, OSError) as e:
        return fail(prog, e)

    async def main() -> int:
        # Handlers go in before start() logs "listening": a signal right after that line must
        # stop the server cleanly, not kill it. One that comes while starting waits for the start.
        loop = asyncio.get_running_loop()
        early: list[str] = []
        started = False

        def on_signal(sig: signal.Signals) -> None:
            if started:
                loop.create_task(server.shutdown(reason=sig.name))
            else:
                early.append(sig.name)

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal, sig)
        try:
            await server.start()
        except OSError as e:  # checked before the start; the port was taken meanwhile
            log("error", "cannot_listen", host=server.host, port=server.port, error=str(e))
            return 2
        except StorageOpenError as e:
            log("error", "storage_unusable", storage=server.storage.name, error=str(e))
            return 2
        started = True
        if early:
            loop.create_task(server.shutdown(reason=early[0]))
        await server.wait_stopped()
        return 0

    log("info", "event_loop", loop=loop_name)
    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 130


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


async def list_groups(cluster: Any, states: list[str] | None = None) -> list[dict]:
    meta = await cluster.metadata([])
    groups: dict[str, dict] = {}
    for node_id in sorted(b["node_id"] for b in meta["brokers"]):
        client = await cluster.broker(node_id)
        v = client.version(16)
        fields: dict[str, Any] = {"states_filter": list(states or [])}
        response = await client.request(16, fields, v)
        if response["error_code"]:
            raise _client().KafkaError(f"ListGroups on broker {node_id}: {_client().error_name(response['error_code'])}")
        for g in response["groups"]:
            state = g.get("group_state") or ""
            if states and v < 4 and state.lower() not in {s.lower() for s in states}:
                continue
            groups[g["group_id"]] = {"group": g["group_id"], "state": state or None,
                                     "protocol_type": g.get("protocol_type") or "",
                                     "type": g.get("group_type") or None, "coordinator": node_id}
    return [groups[k] for k in sorted(groups)]


async def describe_group(cluster: Any, group: str) -> dict:
    KafkaError, error_name = _client().KafkaError, _client().error_name
    client = await cluster.coordinator(group)
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
    return {"group": group, "state": g["group_state"], "protocol_type": g["protocol_type"],
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
        groups = await list_groups(cluster, args.state)
        _emit(args, groups, ["GROUP", "STATE", "PROTOCOL-TYPE", "COORDINATOR"],
              [[g["group"], g["state"], g["protocol_type"] or "-", g["coordinator"]] for g in groups], "no groups")
        return 0
    if args.groups_command == "describe":
        info = await describe_group(cluster, args.group)
        if info["state"] == "Dead" and not info["members"]:
            _error(args, f"consumer group {args.group!r} does not exist")
            return 1
        if args.json:
            print(json.dumps(info, indent=2, sort_keys=True))
            return 0
        print(f"group {info['group']}: state {info['state']}, protocol type {info['protocol_type'] or '-'}, "
              f"assignor {info['protocol'] or '-'}, coordinator {info['coordinator']}, "
              f"{len(info['members'])} member(s)")
        rows = []
        for m in info["members"]:
            assigned = "; ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(m["assignment"].items()))
            rows.append([m["member_id"], m["group_instance_id"], m["client_id"], m["host"], assigned or "-"])
        if rows:
            print()
            print(table(["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"], rows))
        return 0
    results = await delete_groups(cluster, args.group)
    if args.json:
        print(json.dumps({g: error_name(c) for g, c in results.items()}, indent=2, sort_keys=True))
    else:
        print(table(["GROUP", "RESULT"], [[g, "deleted" if c == 0 else error_name(c)] for g, c in results.items()]))
    return 0 if all(c == 0 for c in results.values()) else 1


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
    except (kafka_client.KafkaError, OSError, asyncio.TimeoutError, ValueError) as e:
        _error(args, e or type(e).__name__)
        return 1


def _error(args: argparse.Namespace, message: object) -> None:
    """A failure of an admin command (exit status 1): one line, like a refusal."""
    fail(getattr(args, "prog", f"groupcoord {args.command}"), message)


def run_server_command(args: argparse.Namespace) -> int:
    if args.command == "serve":
        return run_serve(args)
    if args.command in ("groups", "offsets"):
        return run_admin(args)
    raise ValueError(f"not a server command: {args.command}")


SERVER_COMMANDS = ("serve", "groups", "offsets")


def run_bench_server(quick: bool = False) -> int:
    from groupcoord.adapters.bench.server import run_server_bench

    return run_server_bench(quick=quick)


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (``python -m groupcoord.adapters.cli.serve``): the same commands as
    ``groupcoord serve|groups|offsets``."""
    parser = Parser(prog="groupcoord")
    sub = parser.add_subparsers(dest="command", required=True)
    add_server_commands(sub)
    return run_server_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
