"""The simulator's consumers as ground truth: ``groupcoord simulate``'s groups (every strategy,
static and dynamic members, commits, crashes, stalls past max.poll.interval, leaves) converted
to what the wire shows (verify.from_trace) all conform, and a fault planted in one answer of a
converted group diverges at that answer."""

from __future__ import annotations

from collections import Counter

import attrs
import pytest

from groupcoord.adapters.protocol.translate import request_body, request_event
from groupcoord.adapters.sim.simulator import simulate
from groupcoord.adapters.traces.records import decode_event
from groupcoord.adapters.traces.trace_files import coordinator_config, read_manifest, read_records
from groupcoord.adapters.verify.from_trace import observed_pairs
from groupcoord.adapters.verify.observed import split
from groupcoord.adapters.verify.search import CONFORMS, DIVERGES, Settings, verify_group
from groupcoord.core import events as ev


@pytest.fixture(scope="module", params=[5, 11])
def simulated(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"sim-{request.param}")
    simulate(out, groups=40, members=3, seed=request.param, duration_ms=40_000, fmt="jsonl", progress=False)
    moved: list[str] = []
    pairs = list(observed_pairs(out, moved))
    return out, pairs, moved, Settings(coordinator_config(read_manifest(out)))


def test_request_body_is_request_events_inverse(simulated):
    out, _, _, _ = simulated
    events = [decode_event(r["type"], __import__("json").dumps(r["data"])) for r in read_records(out)
              if r["dir"] == "in" and r["type"] in ev.REQUEST_TYPES]
    extra = [ev.LeaveGroup(request_id=1, now_ms=0, version=1, group_id="g", members=(ev.MemberIdentity("m"),)),
             ev.OffsetFetch(request_id=2, now_ms=0, version=7, groups=(ev.FetchGroup("g", (("t", (0, 1)),)),)),
             ev.FindCoordinator(request_id=3, now_ms=0, version=3, coordinator_keys=("g",))]
    assert len({type(e) for e in events}) >= 5
    for event in events + extra:
        api, body = request_body(event)
        back = request_event(api, event.version, body, request_id=event.request_id, now_ms=event.now_ms,
                             client_id=event.client_id, client_host=event.client_host,
                             new_member_uuid=getattr(event, "new_member_uuid", ""))
        assert back == event, (api, body)


def test_every_simulated_group_conforms(simulated):
    _, pairs, moved, settings = simulated
    units = split(pairs).units
    assert len(units) + len(moved) == 40 and len(units) >= 30
    verdicts = {g: verify_group(g, unit, settings) for g, unit in units.items()}
    assert {g: v.detail for g, v in verdicts.items() if v.verdict != CONFORMS} == {}
    # the incidents are there: static members, commits, leaves, rebalances seen by heartbeats,
    # and members removed (their next request answered UNKNOWN_MEMBER_ID)
    apis = Counter(o.api for o in pairs)
    assert apis["OffsetCommit"] > 0 and apis["LeaveGroup"] > 0 and apis["SyncGroup"] > 0
    assert any(o.api == "JoinGroup" and o.request.get("group_instance_id") for o in pairs)
    codes = Counter(o.response.get("error_code") for o in pairs if o.response)
    assert codes[27] > 0 and codes[25] + codes[79] > 0  # REBALANCE_IN_PROGRESS; UNKNOWN or MEMBER_ID_REQUIRED


def _plant(unit, pick, change):
    p = next(n for n, o in enumerate(unit) if pick(o))
    out = list(unit)
    out[p] = attrs.evolve(unit[p], response={**unit[p].response, **change(unit[p].response)})
    return out, unit[p].index


@pytest.mark.parametrize("fault", ["heartbeat says rebalance", "assignment changed", "generation skipped"])
def test_a_planted_fault_diverges(simulated, fault):
    _, pairs, _, settings = simulated
    gid, unit = sorted(split(pairs).units.items())[0]
    if fault == "heartbeat says rebalance":
        pick, change = (lambda o: o.api == "Heartbeat" and o.response["error_code"] == 0), \
            (lambda r: {"error_code": 27})
    elif fault == "assignment changed":
        pick, change = (lambda o: o.api == "SyncGroup" and o.response["error_code"] == 0), \
            (lambda r: {"assignment": "00" + r["assignment"]})
    else:
        pick, change = (lambda o: o.api == "JoinGroup" and o.response["error_code"] == 0), \
            (lambda r: {"generation_id": r["generation_id"] + 1})
    planted, line = _plant(unit, pick, change)
    assert verify_group(gid, unit, settings).verdict == CONFORMS
    v = verify_group(gid, planted, settings)
    assert v.verdict == DIVERGES, v.detail
    if fault == "generation skipped":
        # the report names the furthest execution's failure: the other member's answer of that
        # generation, or the SyncGroup the generation's members then send
        assert line <= v.line <= line + 3, v.detail
    else:
        assert v.line == line
    assert f"line {v.line}" in v.detail
