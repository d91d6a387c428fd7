"""``groupcoord bench frames``: the server's own Python path per heartbeat, with few members
and with many, in one process and one run.

``bench load`` measures a heartbeat end to end (sockets, the kernel, asyncio's loop); this
measures only what the server adds: a heartbeat frame handed to ``Connection.data_received``
(the asyncio callback), read, handed to the core, its timer applied and its answer encoded and
written at the loop's next turn, to a transport that only counts what it is given. With 100,000 members the objects a
heartbeat touches (its connection, group, member, timer entry, the dictionaries that hold
them) are spread over a large heap and seldom in the CPU's caches; the ratio against one group
says what that costs.

The groups are formed through the server's core (JoinGroup and SyncGroup events, static
members) and every member then sends its heartbeat, in a shuffled order, over a connection
shared by six members as in ``bench load``. Both servers live in one process and their rounds
alternate, so the machine's drift falls on both alike.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time

from groupcoord.adapters.bench.rows import print_json_rows
from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.storage.memory import MemoryStorage
from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.wire.collector import settle_collector
from groupcoord.adapters.wire.listener import Connection
from groupcoord.adapters.wire.log import Log
from groupcoord.adapters.wire.options import ServerOptions
from groupcoord.adapters.wire.server import GroupServer
from groupcoord.core import events as ev
from groupcoord.core.config import CoordinatorConfig

MEMBERS_PER_CONNECTION = 6
FRAMES_PER_TURN = 16  # connections read in one turn of the loop, whose answers are then written
HEARTBEAT_VERSION = 4


class CountingTransport:
    """Keeps what it is given; the peer address a connection asks for at its start; closed, it
    tells its connection so, as asyncio's transports do."""

    def __init__(self, protocol: Connection) -> None:
        self.protocol = protocol
        self.written = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written += data

    def take_answers(self) -> tuple[int, int]:
        """(answers written since the last call, those with an error code): Heartbeat v4
        answers, each size, correlation id, header tags, throttle time, error code, tags."""
        data, self.written = self.written, bytearray()
        answers = errors = at = 0
        while at < len(data):
            size = int.from_bytes(data[at:at + 4], "big")
            answers += 1
            errors += data[at + 13:at + 15] != b"\x00\x00"
            at += 4 + size
        return answers, errors

    def get_extra_info(self, name: str, default=None):
        return ("127.0.0.1", 40000) if name == "peername" else default

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.protocol.connection_lost(None)

    abort = close


def _form(server: GroupServer, groups: int, members: int) -> list[tuple[str, str, int]]:
    """``groups`` Stable groups of static members, through the server's core: (group, member, generation)."""
    core = server.core
    now = core.clock.now_ms
    for g in range(groups):
        for m in range(members):
            core.dispatch(ev.JoinGroup(
                request_id=("join", g, m), now_ms=now(), version=5, group_id=f"load-{g}", session_timeout_ms=45_000,
                rebalance_timeout_ms=60_000, member_id="", group_instance_id=f"instance-{m}", protocol_type="consumer",
                protocols=(("range", b""),), new_member_uuid=f"{g:08x}-{m:04x}-0000-0000-000000000000"))
    core.fire_due()  # group.initial.rebalance.delay.ms 0: every join completes now
    formed = []
    for g in range(groups):
        group = core.coordinator.group(f"load-{g}")
        ids = list(group.members)
        for mid in ids:
            core.dispatch(ev.SyncGroup(
                request_id=("sync", g, mid), now_ms=now(), version=5, group_id=group.group_id,
                generation_id=group.generation_id, member_id=mid,
                group_instance_id=group.members[mid].group_instance_id,
                assignments=tuple((m, b"\x00") for m in ids) if mid == group.leader_id else ()))
        group = core.coordinator.group(group.group_id)
        if group.state.value != "Stable":
            raise RuntimeError(f"bench frames: {group.group_id} is {group.state.value}, not Stable")
        formed += [(group.group_id, mid, group.generation_id) for mid in ids]
    return formed


async def _server(groups: int, members: int, heartbeats: int) -> tuple[GroupServer, list, list]:
    """A server holding ``groups`` Stable groups, and one round of their heartbeat frames:
    (the server, [(a connection's data_received, frame)], the connections' transports)."""
    config = CoordinatorConfig(group_initial_rebalance_delay_ms=0, advertised_host="127.0.0.1")
    server = GroupServer(config, apis.TopicCatalog({"bench": members}),
                         options=ServerOptions(host="127.0.0.1", port=0), storage=MemoryStorage(),
                         log=Log(sys.stderr, level="warning"))
    await server.start()
    transports, frames = [], []
    for i, (group_id, member_id, generation) in enumerate(_form(server, groups, members)):
        if i % MEMBERS_PER_CONNECTION == 0:
            conn = Connection(server.listener)
            transports.append(CountingTransport(conn))
            conn.connection_made(transports[-1])
        body = kc.request_body(12, HEARTBEAT_VERSION,
                               {"group_id": group_id, "generation_id": generation, "member_id": member_id})
        frames.append((conn.data_received, bytes(kc.encode_request(12, HEARTBEAT_VERSION, i, "bench-frames", body))))
    random.Random(7).shuffle(frames)
    return server, (frames * (heartbeats // len(frames) + 1))[:heartbeats], transports


async def _round(frames: list) -> float:
    """CPU µs per heartbeat for one round of ``frames``, read ``FRAMES_PER_TURN`` to a turn of
    the event loop (the server writes a turn's answers at the start of the next)."""
    started = time.process_time()
    for i, (data_received, frame) in enumerate(frames, 1):
        data_received(frame)
        if i % FRAMES_PER_TURN == 0:
            await asyncio.sleep(0)
    await asyncio.sleep(0)
    return (time.process_time() - started) / len(frames) * 1e6


async def _measure(groups: int, members: int, heartbeats: int, rounds: int) -> tuple[float, float]:
    """Median CPU µs per heartbeat with one group and with ``groups``, their rounds alternated
    (the machine's drift falls on both alike)."""
    runs = []  # the few members' server, then the many's: each stopped even if the other failed
    try:
        for n in (1, groups):
            runs.append(await _server(n, members, heartbeats))
        settle_collector()  # as `groupcoord serve` does once started
        timings: tuple[list, list] = ([], [])
        for _ in range(rounds):
            for (_, frames, transports), timing in zip(runs, timings):
                timing.append(await _round(frames))
                answered = [t.take_answers() for t in transports]
                answers, errors = sum(a for a, _e in answered), sum(e for _a, e in answered)
                if answers != len(frames) or errors:
                    raise RuntimeError(f"bench frames: {answers} answers ({errors} with an error) "
                                       f"to {len(frames)} heartbeats")
        return statistics.median(timings[0]), statistics.median(timings[1])
    finally:
        for server, _frames, _transports in runs:
            await server.shutdown("bench finished")


def run_frames_bench(groups: int, members: int, heartbeats: int, rounds: int) -> int:
    few_us, many_us = asyncio.run(_measure(groups, members, heartbeats, rounds))
    rows = [(f"server_python_us_per_heartbeat_{members}_members", few_us, "us"),
            (f"server_python_us_per_heartbeat_{groups * members}_members", many_us, "us"),
            ("many_vs_few_members", many_us / few_us, "x")]
    print(f"bench frames: heartbeat frames through Connection.data_received (no sockets), "
          f"{heartbeats} per round, median of {rounds} alternated rounds of CPU time")
    width = max(len(name) for name, _v, _u in rows)
    for name, value, unit in rows:
        print(f"{name:<{width}}  {value:>10,.2f} {unit}")
    print_json_rows(rows, 3)
    return 0
