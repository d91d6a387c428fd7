"""``groupcoord record``: a recording proxy between unmodified clients and any Kafka-protocol
broker (``observe.proxy``), writing the group APIs' request/response pairs to an observed
trace (spec/observed-trace.md).

Everything that can be refused is checked before anything is written: the addresses, the
output directory, that the upstream answers a connection, that the listener can be opened.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import sys

from groupcoord.adapters.cli import parsing, stopping
from groupcoord.adapters.cli.extras import needs
from groupcoord.adapters.cli.parsing import fail

REACH_TIMEOUT_S = 5.0


def listen_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` where PORT may be 0 (a free port, printed when listening)."""
    host, sep, port = text.strip().rpartition(":")
    if port == "0" and sep and host:
        return parsing.host_port(f"{host}:1")[0], 0
    return parsing.host_port(text)


def add_record_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("record", help="a recording proxy in front of a Kafka-protocol broker",
                       description="Forward Kafka clients to --upstream and write every request/response pair "
                                   "of the group APIs to --out (spec/observed-trace.md). Metadata and "
                                   "FindCoordinator responses are rewritten so that clients keep coming "
                                   "through the proxy: one listener per broker. Ctrl-C or SIGTERM stops it.")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--upstream", metavar="HOST:PORT", type=parsing.host_port,
                        help="the broker clients would have bootstrapped from")
    source.add_argument("--pcap", metavar="FILE",
                        help="read a packet capture instead (tcpdump -w on a broker host; pcap or pcapng): the "
                             "TCP connections to --port, put back together, become the same trace")
    p.add_argument("--port", type=parsing.port, default=9092,
                   help="with --pcap: the broker's port (default 9092)")
    p.add_argument("--listen", metavar="HOST:PORT", type=listen_address, default=("127.0.0.1", 0),
                   help="where clients bootstrap (default 127.0.0.1:0: a free port, printed); the brokers' "
                        "listeners take free ports on the same host")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="directory of observed.jsonl (or observed.parquet) and meta.json; a recording already "
                        "there is replaced")
    p.add_argument("--format", choices=["jsonl", "parquet"], default="jsonl",
                   help="jsonl (default) or parquet (needs pyarrow; complete at shutdown)")


def out_problem(out: str) -> str | None:
    """Why ``--out`` cannot be a directory written to (checked without creating it)."""
    return parsing.output_problem("--out", out, "dir")


def upstream_problem(host: str, port: int) -> str | None:
    try:
        with socket.create_connection((host, port), timeout=REACH_TIMEOUT_S):
            return None
    except OSError as e:
        return f"cannot reach the upstream {host}:{port}: {e.strerror or e}"


def run_record(args: argparse.Namespace) -> int:
    problem = ((needs(("pyarrow", "Parquet output")) if args.format == "parquet" else None)
               or out_problem(args.out)
               or (upstream_problem(*args.upstream) if args.upstream else None)
               or (needs(("dpkt", "reading packet captures")) if args.pcap else None))
    if problem:
        return fail(args.prog, problem)
    if args.pcap:
        return _from_capture(args)
    return asyncio.run(_record(args))


def _from_capture(args: argparse.Namespace) -> int:
    import time

    from groupcoord.adapters.observe.pairing import counted_pairs
    from groupcoord.adapters.observe.pcap import CaptureError, CaptureReader
    from groupcoord.adapters.observe.trace import FORMAT, JOURNAL, JSONL, META, PARQUET, ObservedWriter, write_meta
    from groupcoord.adapters.traces.stopping import written

    reader = CaptureReader(args.pcap, args.port)
    try:
        records = reader.records()
    except CaptureError as e:
        return fail(args.prog, str(e))
    try:  # the recording whole or not at all (an older one there is replaced)
        with written(args.out, directory=True, stale=lambda name: name in (JSONL, PARQUET, JOURNAL, META)) as into:
            writer = ObservedWriter(into, args.format)
            for r in records:
                writer.write(r)
            writer.close()
            write_meta(into, {"format": FORMAT, "pcap": str(args.pcap), "port": args.port,
                              "started_us": time.time_ns() // 1000, "connections": len(reader.connections),
                              "passed_through": reader.passed_through, "undecoded": reader.undecoded_,
                              "data_plane_pairs": dict(sorted(reader.data_plane_pairs.items())),
                              "problems": reader.problems})
    except OSError as e:
        return fail(args.prog, f"--out {args.out}: {e.strerror or e}")
    for line in reader.problems:
        print(f"{args.prog}: {line}", file=sys.stderr)
    print(f"{len(records)} pairs from {len(reader.connections)} connections of {args.pcap} into {args.out}; "
          f"data-plane pairs counted, not recorded: {counted_pairs(reader.data_plane_pairs)}", file=sys.stderr)
    return 0


async def _record(args: argparse.Namespace) -> int:
    from groupcoord.adapters.observe.pairing import counted_pairs
    from groupcoord.adapters.observe.proxy import RecordingProxy, address
    from groupcoord.adapters.observe.trace import ObservedWriter, write_meta

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    received: list[signal.Signals] = []

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    writer: ObservedWriter | None = None
    lost: list[str] = []  # a write that failed: the recording stops, exit 1

    def saving(write, *what) -> None:
        if lost:
            return
        try:
            write(*what)
        except OSError as e:
            lost.append(f"cannot write to {args.out}: {e.strerror or e}")
            stop.set()

    proxy = RecordingProxy(args.upstream, args.listen, lambda r: saving(writer.write, r),
                           on_brokers=lambda: saving(write_meta, args.out, proxy.meta()))
    try:
        await proxy.bind()
    except OSError as e:
        return fail(args.prog, f"cannot listen on {address(*args.listen)}: {e.strerror or e}")
    try:
        writer = ObservedWriter(args.out, args.format)
        await proxy.serve()
        write_meta(args.out, proxy.meta())
    except OSError as e:
        await proxy.stop()
        return fail(args.prog, f"--out {args.out}: {e.strerror or e}")
    print(f"recording {address(proxy.advertised_host, proxy.port)} -> {address(*args.upstream)} into "
          f"{writer.path.parent}", file=sys.stderr, flush=True)
    await stop.wait()
    await proxy.stop()
    saving(writer.close)
    saving(write_meta, args.out, proxy.meta(stopped=True))
    if lost:
        print(f"{args.prog}: error: {lost[0]}; stopped", file=sys.stderr, flush=True)
        return 1
    print(f"stopped: {writer.count} records in {args.out}; data-plane pairs counted, not recorded: "
          f"{counted_pairs(proxy.data_plane_pairs)}", file=sys.stderr, flush=True)
    # what was recorded is whole (each record a flushed line); then the line every stopped command ends with
    return stopping.interrupted(args.prog, received[0]) if received else 0
