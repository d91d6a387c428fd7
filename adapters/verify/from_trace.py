"""A core trace (trace format v1: ``groupcoord simulate``'s, a server's recording) as the wire
would have shown it: each request event back into the request a client sends
(``translate.request_body``), each Respond into the response (``translate.response_fields``),
received and sent at the trace's times in µs, one connection per client id. What the wire
cannot show (timers firing, writes acknowledged, partitions loaded, the ids a JoinGroup made
up) is left out: ``groupcoord verify`` searches for it.

Records of one time keep their order: the k-th record of a millisecond is put at its k-th µs
(the coordinator handled them one after another, so an answer sent before a request arrived
stays before it)."""

from __future__ import annotations

import os
from typing import Iterable, Iterator

import attrs

from groupcoord.adapters.protocol.translate import request_body, response_fields
from groupcoord.adapters.traces.records import decode_command, decode_event
from groupcoord.adapters.traces.trace_files import TraceError, iter_batches, trace_files
from groupcoord.adapters.verify.observed import Obs, to_json
from groupcoord.core import events as ev
from groupcoord.core.commands import Respond

_PARTITION_EVENTS = ("LoadPartition", "UnloadPartition")


def observed_pairs(path: str | os.PathLike, moved: list | None = None) -> Iterator[Obs]:
    """The observed pairs of every group of the trace at ``path``, file by file (a group's
    records must not span files, as ``simulate`` writes them), numbered from 1 in that order.
    A group whose partition was unloaded or loaded again is left out (its id appended to
    ``moved``): on the wire its coordinator moved to another broker or restarted, which one
    broker's recording does not show."""
    conns: dict[str, int] = {}
    index = 0
    for f in trace_files(path):
        groups: dict = {}
        for cols in iter_batches(f):
            for i in range(len(cols["seq"])):
                groups.setdefault(cols["group_id"][i], []).append(
                    (cols["ts_ms"][i], cols["dir"][i], cols["type"][i], cols["data"][i], cols["file"][i],
                     cols["line"][i]))
        for gid, records in groups.items():
            if sum(1 for r in records if r[1] == "in" and r[2] in _PARTITION_EVENTS) > 1:
                if moved is not None:
                    moved.append(gid)
                continue
            for obs in group_pairs(records, conns, index):
                yield obs
                index = obs.index


def group_pairs(records: Iterable[tuple], conns: dict[str, int], start_index: int = 0) -> list[Obs]:
    """One group's pairs from its records (ts_ms, dir, type, data JSON text, file, line) in
    trace order; ``conns`` numbers client ids (shared across groups so that each is one
    connection). Unanswered requests have no response."""
    pending: dict = {}  # request id -> (recv_us, api, version, client id, body)
    out: list[Obs] = []
    last_ms, k = None, 0
    for ts_ms, direction, type_name, data, f, line in records:
        k = k + 1 if ts_ms == last_ms else 0
        last_ms = ts_ms
        at_us = ts_ms * 1000 + min(k, 999)
        where = f"{f} line {line}" if line is not None else str(f)
        try:
            if direction == "in" and type_name in ev.REQUEST_TYPES:
                event = decode_event(type_name, data)
                api, body = request_body(event)
                pending[event.request_id] = (at_us, api, event.version, event.client_id, body)
            elif direction == "out" and type_name == "Respond":
                respond: Respond = decode_command(type_name, data)
                recv_us, api, version, client, body = pending.pop(respond.request_id)
                out.append(_pair(conns, recv_us, at_us, api, version, client, body,
                                 to_json(response_fields(api, version, respond.response))))
        except (TraceError, ValueError, KeyError) as e:
            raise TraceError(f"{where}: cannot be put as the wire shows it ({e})") from None
    for recv_us, api, version, client, body in pending.values():
        out.append(_pair(conns, recv_us, None, api, version, client, body, None))
    out.sort(key=lambda o: o.recv_us)
    return [attrs.evolve(o, index=start_index + n) for n, o in enumerate(out, start=1)]


def _pair(conns, recv_us, send_us, api, version, client, body, response) -> Obs:
    conn = conns.setdefault(client, len(conns) + 1)
    return Obs(index=0, conn=conn, recv_us=recv_us, send_us=send_us, api=api, version=version, client_id=client,
               request=body, response=response)

