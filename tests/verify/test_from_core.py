"""Traces made from the core (verify/from_core.py) fire its timers as every driver does: two
due at the same millisecond in the order they were armed."""

from __future__ import annotations

from groupcoord.adapters.verify import from_core
from groupcoord.core import events as ev
from groupcoord.core.commands import HeartbeatTimer
from groupcoord.core.config import CoordinatorConfig

CONFIG = CoordinatorConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0)
PROTOCOLS = [{"name": "range", "metadata": b"\x00\x01"}]


def _join(group: str) -> dict:
    return {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 20000, "member_id": "",
            "protocol_type": "consumer", "protocols": PROTOCOLS}


def _sync(group: str, member: str) -> dict:
    return {"group_id": group, "generation_id": 1, "member_id": member,
            "assignments": [{"member_id": member, "assignment": b"x"}]}


def _heartbeat(group: str, member: str) -> dict:
    return {"group_id": group, "generation_id": 1, "member_id": member}


def test_timers_due_at_the_same_ms_fire_in_arming_order(monkeypatch):
    """Three one-member groups; at 5 s a's member heartbeats, c's leaves, b's heartbeats: a's
    and b's sessions both end at 15 s, a's armed first. (Numbering timers by the table's size
    gave b's the lower number, c's having left in between, and fired it first.)"""
    fired = []

    class Recording(from_core.Coordinator):
        def handle(self, event):
            if isinstance(event, ev.TimerFired):
                fired.append((event.now_ms, event.key))
            return super().handle(event)

    monkeypatch.setattr(from_core, "Coordinator", Recording)
    reqs = [(1000, n, "JoinGroup", 3, _join(g), f"c{g}") for n, g in enumerate("abc", start=1)]
    reqs += [(1100, n, "SyncGroup", 3, _sync(g, f"c{g}-u{n}"), f"c{g}") for n, g in enumerate("abc", start=1)]
    reqs += [(5000, 1, "Heartbeat", 3, _heartbeat("a", "ca-u1"), "ca"),
             (5000, 3, "LeaveGroup", 4, {"group_id": "c", "members": [{"member_id": "cc-u3"}]}, "cc"),
             (5000, 2, "Heartbeat", 3, _heartbeat("b", "cb-u2"), "cb")]
    pairs = from_core.observe(reqs, CONFIG)
    assert [o.response["error_code"] for o in pairs] == [0] * 9
    assert [(at, key) for at, key in fired if at == 15000] == [
        (15000, HeartbeatTimer(0, "a", "ca-u1")), (15000, HeartbeatTimer(0, "b", "cb-u2"))]
