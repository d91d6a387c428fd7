"""Scripted client requests for the verifier's tests: member ids are the core's own
(``client-u<n>``, n the request's place), so a script can name them before they exist."""

from __future__ import annotations

import attrs

from groupcoord.core.config import CoordinatorConfig

CONFIG = CoordinatorConfig(offsets_topic_num_partitions=1)
PROTOCOLS = [{"name": "range", "metadata": b"\x00\x01"}]


def join(mid: str = "", inst: str | None = None) -> dict:
    b = {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 20000, "member_id": mid,
         "protocol_type": "consumer", "protocols": PROTOCOLS}
    if inst:
        b["group_instance_id"] = inst
    return b


def sync(mid: str, gen: int, assignments=()) -> dict:
    return {"group_id": "g", "generation_id": gen, "member_id": mid,
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments]}


def heartbeat(mid: str, gen: int) -> dict:
    return {"group_id": "g", "generation_id": gen, "member_id": mid}


def commit(mid: str, gen: int, offset: int) -> dict:
    return {"group_id": "g", "generation_id_or_member_epoch": gen, "member_id": mid,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                     "committed_metadata": ""}]}]}


# Two consumers form a group, commit, one leaves, the other rebalances alone and commits with
# its old generation (fenced).
TWO_MEMBERS = [
    (1000, 1, "JoinGroup", 5, join(), "c1"),
    (1010, 1, "JoinGroup", 5, join("c1-u1"), "c1"),
    (1500, 2, "JoinGroup", 5, join(), "c2"),
    (1510, 2, "JoinGroup", 5, join("c2-u3"), "c2"),
    (9000, 1, "SyncGroup", 5, sync("c1-u1", 1, [("c1-u1", b"a1"), ("c2-u3", b"a2")]), "c1"),
    (9000, 2, "SyncGroup", 5, sync("c2-u3", 1), "c2"),
    (12000, 1, "Heartbeat", 4, heartbeat("c1-u1", 1), "c1"),
    (12001, 2, "Heartbeat", 4, heartbeat("c2-u3", 1), "c2"),
    (12500, 1, "OffsetCommit", 8, commit("c1-u1", 1, 42), "c1"),
    (12600, 3, "OffsetFetch", 7, {"group_id": "g", "topics": None, "require_stable": True}, "admin"),
    (13000, 2, "LeaveGroup", 4, {"group_id": "g", "members": [{"member_id": "c2-u3"}]}, "c2"),
    (14000, 1, "Heartbeat", 4, heartbeat("c1-u1", 1), "c1"),
    (14100, 1, "JoinGroup", 5, join("c1-u1"), "c1"),
    (14200, 1, "SyncGroup", 5, sync("c1-u1", 2, [("c1-u1", b"a1")]), "c1"),
    (20000, 1, "OffsetCommit", 8, commit("c1-u1", 1, 43), "c1"),
]


def planted(pairs: list, line: int, **response) -> list:
    """``pairs`` with the response at ``line`` changed (a planted fault)."""
    return [attrs.evolve(o, response={**o.response, **response}) if o.index == line else o for o in pairs]
