"""Observed pairs made by running requests through the core itself (its own answers, with the
times it gave them): a trace that conforms by construction, for tests and benchmarks, and the
base that planted faults are made from."""

from __future__ import annotations

from typing import Iterable

from groupcoord.adapters.protocol.translate import request_event, response_fields
from groupcoord.adapters.verify.observed import Obs, to_json
from groupcoord.core import events as ev
from groupcoord.core.commands import ExpirationTimer, Respond, SetTimer, Write
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator, partition_for
from groupcoord.core.timers import TimerTable


def observe(requests: Iterable[tuple], config: CoordinatorConfig | None = None, *,
            write_delay_ms: int = 0, topics: tuple = (), topic_changes: tuple = ()) -> list[Obs]:
    """``requests``: (time_ms, conn, api, version, body, client_id), in time order; ``topics``:
    the topics image ((name, topic id, partitions), ...) the core has from the start, and
    ``topic_changes`` ((time_ms, image), ...) its later images. Writes are
    acknowledged ``write_delay_ms`` after they are emitted; timers fire at their deadlines, equal
    deadlines in arming order (a write due then is acknowledged first); the periodic expiration
    is not run."""
    config = config or CoordinatorConfig(offsets_topic_num_partitions=1)
    core = Coordinator(config)
    reqs = list(requests)
    groups = {partition_for(g, config.offsets_topic_num_partitions)
              for r in reqs for g in ([r[4]["group_id"]] if "group_id" in r[4] else r[4].get("group_ids") or [""])}
    start = reqs[0][0] if reqs else 0
    timers = TimerTable()
    writes: list[tuple[int, int]] = []  # (due ms, write id)
    pending: dict[int, dict] = {}
    out: list[Obs] = []

    def run(event) -> None:
        for c in core.handle(event):
            if isinstance(c, SetTimer) and isinstance(c.key, ExpirationTimer):
                continue
            if timers.apply(c):
                continue
            if isinstance(c, Write):
                writes.append((event.now_ms + write_delay_ms, c.write_id))
            elif isinstance(c, Respond) and c.request_id in pending:
                r = pending.pop(c.request_id)
                out.append(Obs(index=c.request_id, conn=r["conn"], recv_us=r["t"] * 1000 + 1,
                               send_us=event.now_ms * 1000 + 2, api=r["api"], version=r["v"],
                               client_id=r["client"], request=r["body"],
                               response=to_json(response_fields(r["api"], r["v"], c.response))))

    for p in sorted(groups):
        run(ev.LoadPartition(now_ms=start, partition=p, records=()))
    if topics:
        run(ev.TopicsChanged(now_ms=start, topics=tuple(topics)))

    def advance(until_ms: int) -> None:
        while True:
            due = timers.peek()
            if due is not None and due[0] > until_ms:
                due = None
            done = [w for w in writes if w[0] <= until_ms]
            if done and (due is None or done[0][0] <= due[0]):
                writes.remove(done[0])
                run(ev.WriteCompleted(now_ms=done[0][0], write_id=done[0][1]))
            elif due is not None:
                key, payload = timers.pop_due(due[0])
                run(ev.TimerFired(now_ms=due[0], key=key, payload=payload))
            else:
                return

    changes = sorted(topic_changes)
    for n, (t, conn, api, version, body, client) in enumerate(reqs, start=1):
        while changes and changes[0][0] <= t:
            at, image = changes.pop(0)
            advance(at)
            run(ev.TopicsChanged(now_ms=at, topics=tuple(image)))
        advance(t)
        pending[n] = dict(t=t, conn=conn, api=api, v=version, body=body, client=client)
        run(request_event(api, version, body, request_id=n, now_ms=t, client_id=client or "",
                          new_member_uuid=f"u{n}"))
        advance(t)
    advance(reqs[-1][0] + 3_600_000 if reqs else 0)
    for n, r in pending.items():  # never answered
        out.append(Obs(index=n, conn=r["conn"], recv_us=r["t"] * 1000 + 1, send_us=None, api=r["api"],
                       version=r["v"], client_id=r["client"], request=r["body"], response=None))
    return sorted(out, key=lambda o: o.index)
