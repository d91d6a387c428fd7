"""What the checker must not pass or misplace: an answer the recorder could not decode diverges,
and a request
that came after an answer the spec held back blames that answer, not the request."""

from __future__ import annotations

import json

import attrs
from verify_scripts import CONFIG, TWO_MEMBERS

from groupcoord.adapters.verify.from_core import observe
from groupcoord.adapters.verify.run import signature_of
from groupcoord.adapters.verify.search import CONFORMS, DIVERGES, Settings, verify_group


def _undecodable(pairs: list, line: int, raw: str | None) -> list:
    return [attrs.evolve(o, response=None, undecodable=raw) if o.index == line else o for o in pairs]


def test_an_undecodable_answer_diverges_with_its_size():
    pairs = observe(TWO_MEMBERS, CONFIG)
    assert verify_group("g", pairs, Settings(config=CONFIG)).verdict == CONFORMS
    sync = next(o for o in pairs if o.index == 6)
    assert sync.api == "SyncGroup"
    v = verify_group("g", _undecodable(pairs, 6, "14 bytes: 0000000200000000ffff"), Settings(config=CONFIG))
    assert v.verdict == DIVERGES and v.line == 6, v.detail
    assert signature_of(v) == "SyncGroup v5 answer: decodable vs undecodable (14 bytes)"
    assert "0000000200000000ffff" in v.detail


def test_an_undecodable_answer_of_an_old_recording_diverges_too():
    v = verify_group("g", _undecodable(observe(TWO_MEMBERS, CONFIG), 6, ""), Settings(config=CONFIG))
    assert v.verdict == DIVERGES and signature_of(v) == "SyncGroup v5 answer: decodable vs undecodable " \
                                                         "(size not recorded)"


def test_a_request_after_an_answer_held_back_blames_that_answer():
    """The broker answers both JoinGroups at +3000 ms (one delay, the mock's first join phase);
    the spec extends the phase to +6000 ms. Taking the SyncGroup at +3016 ms with the joins
    still owed (within the tolerance) fails on a member id the spec has not handed out: the
    JoinGroup held back is what is blamed."""
    script = [(0, 1, "JoinGroup", 3, _join(), "a"), (9, 2, "JoinGroup", 3, _join(), "b")]
    config = attrs.evolve(CONFIG, group_initial_rebalance_delay_ms=1500)
    pairs = observe(script, config)
    # answered when a 1500 ms delay ends once (two members joined in it: the spec extends it)
    joins = [o for o in pairs if o.api == "JoinGroup"]
    assert all(o.response["error_code"] == 0 for o in joins)
    strict = attrs.evolve(CONFIG, group_initial_rebalance_delay_ms=3000)
    leader = next(o for o in joins if o.response["leader"] == o.response["member_id"])
    sync = attrs.evolve(leader, index=3, conn=leader.conn, recv_us=leader.send_us + 5000, send_us=leader.send_us + 9000,
                        api="SyncGroup", version=3,
                        request={"group_id": "g", "generation_id": 1, "member_id": leader.response["member_id"],
                                 "group_instance_id": None, "assignments": []},
                        response={"throttle_time_ms": 0, "error_code": 0, "assignment": ""})
    v = verify_group("g", pairs + [sync], Settings(config=strict, timer_tolerance_ms=1000))
    assert v.verdict == DIVERGES, v.detail
    assert v.line in {o.index for o in joins} and v.mismatch[0] == "JoinGroup", v.detail
    assert "line 3 (SyncGroup)" in v.detail, v.detail


def _join() -> dict:
    return {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"\x00\x01"}]}


def test_keep_going_goes_on_in_the_brokers_generations_and_tells_what_only_follows_apart():
    """The broker hands out generation 2 where the spec gives 1 (both members' JoinGroup
    answers), and the members go on with 2: the search adopts the broker's numbering there, so
    their SyncGroups and heartbeats (until the rejoin at line 13) are judged as they are and
    conform: neither findings nor consequences of one."""
    from groupcoord.adapters.verify.run import tally

    pairs = observe(TWO_MEMBERS, CONFIG)
    joined = {o.index for o in pairs if o.api == "JoinGroup" and o.response["generation_id"] == 1}
    later = {o.index for o in pairs if o.request.get("generation_id", o.request.get("generation_id_or_member_epoch"))
             == 1}
    assert len(joined) == 2 and len(later) >= 4
    bumped = []
    for o in pairs:
        if o.index in joined:
            o = attrs.evolve(o, response={**o.response, "generation_id": 2})
        if o.index in later:
            key = "generation_id" if "generation_id" in o.request else "generation_id_or_member_epoch"
            o = attrs.evolve(o, request={**o.request, key: 2})
        bumped.append(o)
    v = verify_group("g", bumped, Settings(config=CONFIG), keep_going=True)
    assert v.verdict == DIVERGES and signature_of(v) == "JoinGroup v5 generation_id: 1 vs 2", v.detail
    found = (v, *v.more)
    rejoin = min(x.recv_us for x in pairs if x.index == 13)
    before = {f.line for f in found if next(o for o in pairs if o.index == f.line).recv_us < rejoin}
    assert before <= joined, [(f.line, f.follows, f.detail) for f in found]
    counts, _ = tally([v])
    assert "JoinGroup v5 generation_id: 1 vs 2" in counts


def test_a_finding_whose_request_names_what_only_a_diverging_answer_gave_follows_from_it():
    """A member id that only a diverging answer handed out (the spec's answer there an error):
    a later finding whose request names it follows from that finding (``follows``), and is not
    counted as a finding of its own."""
    from groupcoord.adapters.verify.run import tally
    from groupcoord.adapters.verify.search import Verdict, _consequences

    pairs = observe(TWO_MEMBERS, CONFIG)
    by = {o.index: o for o in pairs}
    join, beat = by[4], by[7]
    admitted = {**join.response, "member_id": "zz", "error_code": 0}
    first = Verdict("g", DIVERGES, "admitted", len(pairs), 1, line=4, observed=admitted,
                    allowed=(json.dumps({**join.response, "error_code": 25, "generation_id": -1}),),
                    mismatch=("JoinGroup", 5, "error_code", 25, 0))
    unit = [attrs.evolve(o, request={**o.request, "member_id": "zz"}) if o.index == 7 else o for o in pairs]
    second = Verdict("g", DIVERGES, "unknown", len(pairs), 1, line=7, observed=beat.response,
                     mismatch=("Heartbeat", 4, "error_code", 25, 0))
    told = _consequences(attrs.evolve(first, more=(second,)), unit, {3, 6})
    assert told.follows is None and told.more[0].follows == 4, told
    counts, _ = tally([told])
    assert list(counts) == ["JoinGroup v5 error_code: UNKNOWN_MEMBER_ID (25) vs NONE (0)"], counts

