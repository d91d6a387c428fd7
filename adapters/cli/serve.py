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
import signal
import sys
from pathlib import Path
from typing import Any

from groupcoord.adapters.cli import parsing, stopping
from groupcoord.adapters.cli.parsing import Parser, fail
from groupcoord.adapters.storage.interface import StorageOpenError
from groupcoord.adapters.wire.settings import KNOWN_NAMES, read_settings
from groupcoord.core.config import ConfigError

# The protocol modules (kio) are imported when a command runs, so that adding these commands to
# the ``groupcoord`` parser costs nothing for the other commands.

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def add_server_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the coordinator as a Kafka-protocol server",
                       description="Serve Kafka's group coordinator APIs on a TCP port. Broker settings go by "
                                   "their Kafka names, from flags (--<kafka.setting> VALUE, the ones listed "
                                   "below) or a properties file (flags win).")
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
    p.add_argument("--kafka-log", metavar="FILE",
                   help="also append the groups' changes to FILE as a Kafka 4.x broker logs them: its INFO "
                        "statements (Preparing to rebalance ... (reason: ...), Stabilized ..., has failed, has "
                        "left, ...) with Kafka's wording, order and reasons, in its log4j layout ([time] INFO "
                        "[GroupCoordinator id=N topic=__consumer_offsets partition=P] ... (logger)); for "
                        "`groupcoord verify --kafka-log FILE` and for tools that read Kafka's server.log")
    p.add_argument("--log-format", choices=["text", "json"], default="text", help="log lines on stderr")
    p.add_argument("--event-loop", choices=["auto", "asyncio", "uvloop"], default="auto",
                   help="auto: uvloop when it is installed (faster), else asyncio's own")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="info")
    for name in KNOWN_NAMES:
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
            q.add_argument("--type", nargs="*", default=None, type=parsing.group_type, metavar="TYPE",
                           help="show each group's type (classic, consumer), as kafka-consumer-groups.sh --list "
                                "--type; with types, only groups of those types")

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
    "auto.create.topics.enable": "a topic a client asks Metadata for that does not exist is created "
                                 "(default true, as Kafka)",
    "num.partitions": "partitions of an auto-created topic (default 1)",
    "group.max.size": "most members a group may have (default 2147483647)",
    "offsets.retention.minutes": "how long offsets of an empty group are kept (default 10080)",
    "offsets.retention.check.interval.ms": "how often expired offsets and groups are removed (default 600000)",
    "offset.metadata.max.bytes": "largest metadata string of a committed offset (default 4096)",
    "offsets.commit.timeout.ms": "Kafka's write timeout for group operations (default 5000)",
    "log.retention.ms": "how long a topic's records are kept, unless its retention.ms says (default 604800000; "
                        "-1: forever)",
    "log.retention.check.interval.ms": "how often retention runs (default 300000)",
    "message.max.bytes": "largest record batch a producer may send (default 1048588)",
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


class StartError(ConfigError):
    """A refused start whose structured log line has its own event (``cannot_listen``,
    ``cannot_write``) rather than ``bad_setting``."""

    def __init__(self, event: str, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.event, self.fields = event, fields


def _check_writable(path: str, flag: str, kind: str) -> None:
    """``path`` can be written as ``kind`` (parsing.output_problem), else StartError."""
    problem = parsing.output_problem(flag, path, kind)
    if problem:
        raise StartError("cannot_write", problem, path=path)


def build_server(args: argparse.Namespace, log: Any) -> "Any":
    """The server ``serve`` runs. Every setting is checked (ConfigError) before the store is
    opened, so a refused start writes nothing."""
    from groupcoord.adapters.storage.memory import MemoryStorage
    from groupcoord.adapters.wire.listener import listen_problem
    from groupcoord.adapters.wire.options import ServerOptions
    from groupcoord.adapters.wire.server import GroupServer

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
            elif key in KNOWN_NAMES:
                settings[key] = value
            else:
                ignored.append(key)
    for name in KNOWN_NAMES:
        value = getattr(args, "kafka:" + name)
        if value is not None:
            settings[name] = value
    host = args.host if args.host is not None else host
    port = args.port if args.port is not None else port
    topics += args.topic
    if "advertised.host" not in settings and host not in ("0.0.0.0", "::", ""):
        settings["advertised.host"] = host
    broker = read_settings(settings, topics)
    config, catalog = broker.config, broker.catalog
    if args.storage == "broker" and not args.bootstrap_server:
        raise ConfigError("--storage broker needs --bootstrap-server HOST:PORT")
    if args.trace:
        from groupcoord.adapters.traces.trace_files import SUFFIXES

        _check_writable(args.trace, "--trace", "file" if Path(args.trace).suffix in SUFFIXES else "dir")
    if args.kafka_log:
        _check_writable(args.kafka_log, "--kafka-log", "file")
    problem = listen_problem(host, port)  # before a store is opened: a refusal writes nothing
    if problem:
        raise StartError("cannot_listen", problem, host=host, port=port)
    for key in ignored:
        log("warning", "unknown_setting", setting=key, source=args.config, detail="ignored")
    ownership = None
    data_backend = None  # the partition log in memory, unless beside SQLite group records
    if args.storage == "broker":
        from groupcoord.adapters.storage.broker import BrokerStorage
        from groupcoord.adapters.wire.ownership import Ownership

        storage = BrokerStorage(args.bootstrap_server, args.records_topic, config.offsets_topic_num_partitions,
                                log=log)
        ownership = Ownership(args.bootstrap_server, config.offsets_topic_num_partitions,
                              group=args.coordinator_group, session_ms=args.coordinator_session_ms, log=log)
        storage.lease = ownership.lease
    elif args.storage == "sqlite":
        from groupcoord.adapters.data.sqlite import SqliteLogBackend
        from groupcoord.adapters.storage.sqlite import SqliteStorage

        storage = SqliteStorage(args.data_dir, max_bytes=args.sqlite_max_bytes)
        # the partition log beside the group records (the directory is the group store's, locked)
        data_backend = SqliteLogBackend(args.data_dir)
    else:
        storage = MemoryStorage()
    options = ServerOptions(host=host, port=port, trace=args.trace, kafka_log=args.kafka_log,
                            max_request_bytes=broker.max_request_bytes,
                            advertise_bound_port="advertised.port" not in settings,
                            node_id_from_port=ownership is not None and "node.id" not in settings)
    return GroupServer(config, catalog, options=options, storage=storage, log=log, ownership=ownership,
                       data_backend=data_backend, data_settings=broker.data)


def run_serve(args: argparse.Namespace) -> int:
    from groupcoord.adapters.wire.log import Log

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
    def refuse(event: str, error: object, fields: dict | None = None) -> int:
        """A start-up error: the structured line for a log read by machines (``--log-format
        json``), then the one refusal line every command gives; exit 2."""
        if args.log_format == "json":
            log("error", event, **(fields or {}), error=parsing.one_line(error))
        return fail(prog, error)

    try:
        server = build_server(args, log)
    except StorageOpenError as e:
        return refuse("storage_unusable", e, {"storage": args.storage})
    except StartError as e:
        return refuse(e.event, e, e.fields)
    except (ConfigError, ValueError) as e:
        return refuse("bad_setting", e)
    except OSError as e:
        return refuse(*_os_error_event(e, args))

    async def main() -> int:
        # Handlers go in before start() logs "listening": a signal right after that line must
        # stop the server cleanly, not kill it. One that comes while starting waits for the start.
        loop = asyncio.get_running_loop()
        received: list[signal.Signals] = []
        started = False

        def on_signal(sig: signal.Signals) -> None:
            received.append(sig)
            if started:
                loop.create_task(server.shutdown(reason=sig.name))

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal, sig)
        try:
            await server.start()
        except StorageOpenError as e:
            return refuse("storage_unusable", e, {"storage": server.storage.name})
        except OSError as e:  # checked before the start; the port was taken, or a file refused, meanwhile
            return refuse(*_os_error_event(e, args, server))
        started = True
        log("info", "event_loop", loop=loop_name)
        from groupcoord.adapters.wire.collector import settle_collector

        settle_collector()  # what the start made lives as long as the server: out of the collector's way
        if received:
            loop.create_task(server.shutdown(reason=received[0].name))
        await server.wait_stopped()
        # stopped by a signal, cleanly: then the one line every stopped command ends with
        return stopping.interrupted(prog, received[0]) if received else 0

    try:
        return asyncio.run(main())
    except KeyboardInterrupt as e:
        return stopping.interrupted(prog, stopping.signal_of(e))


def _os_error_event(e: OSError, args: argparse.Namespace, server: Any = None) -> tuple:
    """(event, error line, fields) for an OSError met while starting: a file that could not be
    written (``--trace`` and the meta.json beside it, ``--kafka-log``, the data directory) is
    named with its flag; anything else is the listener's."""
    if e.filename is not None:
        name = Path(str(e.filename)).absolute()

        def about(value: str | None) -> bool:
            given = Path(value).absolute() if value else None
            return given is not None and (name == given or given in name.parents
                                          or (given.suffix != "" and name.parent == given.parent))

        flag = next((f"{f} {v}: " for f, v in (("--trace", args.trace), ("--kafka-log", args.kafka_log),
                                                 ("--data-dir", args.data_dir)) if about(v)), "")
        return "cannot_write", f"{flag}{e.filename}: {e.strerror or e}", {"path": str(e.filename)}
    host = server.host if server is not None else args.host
    port = server.port if server is not None else args.port
    return "cannot_listen", f"cannot listen on {host}:{port}: {e.strerror or e}", {"host": host, "port": port}


def run_server_command(args: argparse.Namespace) -> int:
    if args.command == "serve":
        return run_serve(args)
    if args.command in ("groups", "offsets"):
        from groupcoord.adapters.cli.admin import run_admin

        return run_admin(args)
    raise ValueError(f"not a server command: {args.command}")


SERVER_COMMANDS = ("serve", "groups", "offsets")


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (``python -m groupcoord.adapters.cli.serve``): the same commands as
    ``groupcoord serve|groups|offsets``."""
    parser = Parser(prog="groupcoord")
    sub = parser.add_subparsers(dest="command", required=True)
    add_server_commands(sub)
    return run_server_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
