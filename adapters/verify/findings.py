"""Findings: a divergence named by its signature, the one name ``verify`` and ``probe`` both
use to count, set aside (``--known FILE``) and point at Kafka's source.

A signature is ``API vN FIELD: SPEC vs BROKER``: the request's API and version, the field
whose value differs (a path, list places written ``[]``) and the two values, the spec's first,
error codes by name and number (``DeleteGroups v2 error_code: GROUP_ID_NOT_FOUND (69) vs NONE
(0)``). Member ids, which differ from run to run, are written ``<id>`` (``""`` when empty). A
divergence of timing rather than content names ``answer`` as its field (``JoinGroup v9 answer:
none (waits) vs given``). A known-findings file holds signatures one a line, as the tools
print them; ``#`` starts a comment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from groupcoord.core.errors import Error

_IDS = frozenset({"member_id", "leader", "group_instance_id"})
_CUT = 60  # characters of a value shown in a signature


def error_text(code: Any) -> str:
    """``NAME (code)`` for a Kafka error code, the code alone when Kafka has no such name here."""
    try:
        return f"{Error(int(code)).name} ({int(code)})"
    except (ValueError, TypeError):
        return str(code)


def named(value: Any) -> Any:
    """``value`` with every ``error_code`` written ``NAME (code)`` (for reports, never compared)."""
    if isinstance(value, dict):
        return {k: (error_text(v) if k == "error_code" and isinstance(v, int) else named(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [named(v) for v in value]
    return value


def shown(value: Any) -> str:
    """JSON text of an answer for a report: keys sorted, error codes named."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(named(value), sort_keys=True)


def value_text(field: str, value: Any) -> str:
    leaf = field.rsplit(".", 1)[-1]
    if leaf == "error_code" and isinstance(value, int):
        return error_text(value)
    if leaf in _IDS and isinstance(value, str):
        return "<id>" if value else '""'
    text = value if field == "answer" else json.dumps(value, sort_keys=True)
    return text if len(text) <= _CUT else text[:_CUT - 1] + "…"


def mismatches(spec: Any, broker: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Where two answers differ, leaf by leaf: ``(path, spec's value, broker's value)``; lists
    of the same length are compared place by place (``topics[].partitions[].metadata``)."""
    if spec == broker:
        return []
    if isinstance(spec, dict) and isinstance(broker, dict):
        out: list = []
        for k in sorted(set(spec) | set(broker)):
            out += mismatches(spec.get(k, "<absent>"), broker.get(k, "<absent>"), f"{path}.{k}" if path else k)
        return out
    if isinstance(spec, list) and isinstance(broker, list) and len(spec) == len(broker) and spec:
        out = []
        for a, b in zip(spec, broker):
            out += mismatches(a, b, f"{path}[]")
        return out
    return [(path or "answer", spec, broker)]


def main_mismatch(found: Iterable[tuple[str, Any, Any]]) -> tuple[str, Any, Any] | None:
    """The mismatch a signature names: an error code first (what a client acts on), else the
    first field by name."""
    found = list(found)
    if not found:
        return None
    errors = [m for m in found if m[0].rsplit(".", 1)[-1] == "error_code"]
    return min(errors or found, key=lambda m: (m[0].count("[]"), m[0]))


def closest_mismatch(allowed: Iterable[Any], broker: Any, best: Any = None) -> tuple[str, Any, Any] | None:
    """The mismatch a divergence is named by. ``best``: the spec's answer in the execution that
    explains the most of the recording; it names the divergence when it has the broker's error
    code (what differs is then in the answer's other fields). When it does not, and another
    execution allowed an answer with the broker's error code, the nearest of those names it
    (fewest differing fields; ties by the answer's text): two runs reaching the same fault by
    different orders of requests then name it alike. Else ``best`` names it."""
    def code(answer):
        return answer.get("error_code") if isinstance(answer, dict) else None

    if best is not None and code(best) == code(broker):
        return main_mismatch(mismatches(best, broker))
    same = [a for a in allowed if code(a) == code(broker)]
    if not same:
        return None if best is None else main_mismatch(mismatches(best, broker))
    _, _, found = min(((len(found := mismatches(a, broker)), json.dumps(a, sort_keys=True), found) for a in same),
                      key=lambda t: (t[0], t[1]))
    return main_mismatch(found)


def signature(api: str, version: int, field: str, spec: Any, broker: Any) -> str:
    return f"{api} v{version} {field}: {value_text(field, spec)} vs {value_text(field, broker)}"


def read_known(path: str) -> set[str]:
    """The signatures of a known-findings file (OSError when it cannot be read)."""
    out = set()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.add(" ".join(line.split()))
    return out


def is_known(sig: str, known: set[str]) -> bool:
    """``sig`` is among ``known``, itself or as the same divergence at any version (``v*``)."""
    sig = " ".join(sig.split())
    return sig in known or at_any_version(sig) in known


def at_any_version(sig: str) -> str:
    """The signature with its version written ``v*``: the same divergence at every version."""
    api, _, rest = sig.partition(" ")
    version, _, tail = rest.partition(" ")
    return f"{api} v* {tail}" if version[:1] == "v" and version[1:].isdigit() else sig


# ---------------------------------------------------------------------------------------------------------------
# Where the spec's answer comes from in Kafka (apache/kafka at commit 1eb7644, as spec/peers.md):
# (API, field, the spec's value) first, then (API, field, None), then (API, None, None).

_GMM = "GroupMetadataManager.java"
_OMM = "OffsetMetadataManager.java"
_CG = "ClassicGroup.java"
_SOURCES: dict[tuple, str] = {
    ("JoinGroup", "error_code", "MEMBER_ID_REQUIRED"): f"{_GMM} classicGroupJoinNewDynamicMember, line 4251 "
                                                       f"(a known member id is required from v4)",
    ("JoinGroup", "protocol_type", None): f"{_GMM} classicGroupJoinNewDynamicMember (its MEMBER_ID_REQUIRED answer "
                                          f"sets no protocol type)",
    ("JoinGroup", "generation_id", None): f"{_CG} initNextGeneration, line 1302 (generationId++)",
    ("JoinGroup", None, None): f"{_GMM} classicGroupJoin, line 3991",
    ("SyncGroup", "error_code", "ILLEGAL_GENERATION"): f"{_GMM} validateSyncGroup, line 5459",
    ("SyncGroup", "error_code", "UNKNOWN_MEMBER_ID"): f"{_GMM} classicGroupSync, line 5232 (group not found); "
                                                      f"{_CG} validateMember, lines 799 and 809",
    ("SyncGroup", "error_code", "FENCED_INSTANCE_ID"): f"{_CG} validateMember, line 804",
    ("SyncGroup", "error_code", "REBALANCE_IN_PROGRESS"): f"{_GMM} classicGroupSyncToClassicGroup, line 5278",
    ("SyncGroup", None, None): f"{_GMM} classicGroupSync, line 5222",
    ("Heartbeat", "error_code", "ILLEGAL_GENERATION"): f"{_GMM} validateClassicGroupHeartbeat, line 5599",
    ("Heartbeat", "error_code", "UNKNOWN_MEMBER_ID"): f"{_CG} validateMember, lines 799 and 809",
    ("Heartbeat", "error_code", "FENCED_INSTANCE_ID"): f"{_CG} validateMember, line 804",
    ("Heartbeat", "error_code", "REBALANCE_IN_PROGRESS"): f"{_GMM} classicGroupHeartbeat, line 5552",
    ("Heartbeat", None, None): f"{_GMM} classicGroupHeartbeat, line 5501",
    ("LeaveGroup", "error_code", "UNKNOWN_MEMBER_ID"): f"{_GMM} classicGroupLeave, line 5696 (group not found)",
    ("LeaveGroup", None, None): f"{_GMM} classicGroupLeave, line 5688",
    ("OffsetCommit", "topics[].partitions[].error_code", "GROUP_ID_NOT_FOUND"):
        f"{_OMM} validateOffsetCommit, lines 318 to 322 (from v9)",
    ("OffsetCommit", "topics[].partitions[].error_code", "ILLEGAL_GENERATION"): f"{_CG} validateOffsetCommit, "
                                                                                f"line 845",
    ("OffsetCommit", "topics[].partitions[].error_code", "UNKNOWN_MEMBER_ID"): f"{_CG} validateOffsetCommit, "
                                                                               f"line 852",
    ("OffsetCommit", "topics[].partitions[].error_code", "REBALANCE_IN_PROGRESS"): f"{_CG} validateOffsetCommit, "
                                                                                   f"line 862",
    ("OffsetCommit", "topics[].partitions[].error_code", "FENCED_INSTANCE_ID"): f"{_CG} validateMember, line 804",
    ("OffsetCommit", None, None): f"{_OMM} commitOffset, line 450",
    ("OffsetFetch", "topics[].partitions[].metadata", None): f"{_OMM} fetchOffsets, line 776 (.setMetadata(\"\") "
                                                             f"where no offset is committed)",
    ("OffsetFetch", "groups[].topics[].partitions[].metadata", None): f"{_OMM} fetchOffsets, line 776 "
                                                                      f"(.setMetadata(\"\") where no offset is "
                                                                      f"committed)",
    ("OffsetFetch", None, None): f"{_OMM} fetchOffsets, line 735 (fetchAllOffsets, line 800)",
    ("OffsetDelete", None, None): f"{_OMM} deleteOffsets, line 583",
    ("DescribeGroups", "groups[].group_state", None): f"{_GMM} describeGroups, line 754 (an unknown group is "
                                                      f"Dead)",
    ("DescribeGroups", None, None): f"{_GMM} describeGroups, line 716",
    ("DeleteGroups", "results[].error_code", "GROUP_ID_NOT_FOUND"): f"{_GMM} validateDeleteGroup, line 5977, "
                                                                    f"through group(), line 585",
    ("DeleteGroups", "results[].error_code", "NON_EMPTY_GROUP"): f"{_CG} validateDeleteGroup, line 914",
    ("DeleteGroups", None, None): f"{_GMM} validateDeleteGroup, line 5976",
}


def kafka_source(api: str, field: str, spec: Any) -> str | None:
    """Where in Kafka (commit 1eb7644) the spec's answer for this field comes from."""
    value = Error(spec).name if field.endswith("error_code") and isinstance(spec, int) and spec in _CODES else spec
    value = value if isinstance(value, str) else None
    for key in ((api, field, value), (api, field, None), (api, None, None)):
        if key in _SOURCES:
            return f"Kafka 1eb7644 {_SOURCES[key]}"
    return None


_CODES = frozenset(int(e) for e in Error)

# Findings spec/peers.md lists (by signature, as its "Signatures" list gives them), with the row
# that tells them.
PEERS: dict[str, str] = {
    **{f'JoinGroup v{v} protocol_type: null vs "consumer"': "spec/peers.md, Tansu 0.6.0 row 1" for v in (7, 8, 9)},
    **{f"JoinGroup v{v} generation_id: 1 vs 0": "spec/peers.md, Tansu 0.6.0 row 2" for v in (0, 1, 4, 7, 8, 9)},
    **{f"DeleteGroups v{v} results[].error_code: GROUP_ID_NOT_FOUND (69) vs NONE (0)": "spec/peers.md, Tansu 0.6.0 "
       "row 3" for v in (0, 1, 2)},
    'DescribeGroups v5 groups[].group_state: "Dead" vs "Empty"': "spec/peers.md, Tansu 0.6.0 row 4",
    'OffsetFetch v9 groups[].topics[].partitions[].metadata: "" vs null': "spec/peers.md, Tansu 0.6.0 row 5",
    "SyncGroup v5 error_code: UNKNOWN_MEMBER_ID (25) vs REBALANCE_IN_PROGRESS (27)":
        "spec/peers.md, Tansu 0.6.0 row 6",
    "LeaveGroup v2 error_code: UNKNOWN_MEMBER_ID (25) vs NONE (0)": "spec/peers.md, Tansu 0.6.0 row 7",
    "OffsetCommit v9 topics[].partitions[].error_code: GROUP_ID_NOT_FOUND (69) vs UNKNOWN_MEMBER_ID (25)":
        "spec/peers.md, Tansu 0.6.0 row 8",
    "OffsetCommit v8 topics[].partitions[].error_code: ILLEGAL_GENERATION (22) vs UNKNOWN_MEMBER_ID (25)":
        "spec/peers.md, Tansu 0.6.0 row 8",
    "JoinGroup v3 error_code: NONE (0) vs MEMBER_ID_REQUIRED (79)": "spec/peers.md, Tansu 0.6.0 row 9",
    "OffsetFetch v7 answer: given vs none (waits)": "spec/peers.md, Tansu 0.6.0 row 10",
    "JoinGroup v9 answer: given vs none (waits)": "spec/peers.md, Tansu 0.6.0 row 11",
    "SyncGroup v5 answer: given vs none (waits)": "spec/peers.md, Tansu 0.6.0 row 12",
    "Heartbeat v4 error_code: UNKNOWN_MEMBER_ID (25) vs REBALANCE_IN_PROGRESS (27)": "spec/peers.md, Tansu 0.6.0 "
                                                                                      "row 13",
    **{f"JoinGroup v{v} answer: an answer vs the connection closed": "spec/peers.md, Tansu 0.6.0 row 14"
       for v in (3, 4, 7, 9)},
    'DescribeGroups v5 groups[].group_state: "Empty" vs "Assigning"': "spec/peers.md, Tansu 0.6.0 row 15",
    **{f"OffsetCommit v{v} topics[].partitions[].error_code: NONE (0) vs UNKNOWN_MEMBER_ID (25)": "spec/peers.md, "
       "Tansu 0.6.0 row 16" for v in (5, 7, 8, 9)},
    **{f"JoinGroup v{v} error_code: MEMBER_ID_REQUIRED (79) vs INCONSISTENT_GROUP_PROTOCOL (23)": "spec/peers.md, "
       "Tansu 0.6.0 row 17" for v in (6, 9)},
    "JoinGroup v2 error_code: NONE (0) vs INCONSISTENT_GROUP_PROTOCOL (23)": "spec/peers.md, Tansu 0.6.0 row 17",
    'DescribeGroups v5 groups[].group_state: "CompletingRebalance" vs "Unknown"': "spec/peers.md, Tansu 0.6.0 row 18",
    "Heartbeat v4 answer: an answer vs the connection closed": "spec/peers.md, Tansu 0.6.0 row 19",
    "DeleteGroups v2 results[].error_code: NON_EMPTY_GROUP (68) vs NONE (0)": "spec/peers.md, Tansu 0.6.0 row 20",
    'DescribeGroups v5 groups[].group_state: "Dead" vs "Unknown"': "spec/peers.md, Tansu 0.6.0 row 21",
    "SyncGroup v2 answer: an answer vs the connection closed": "spec/peers.md, Tansu 0.6.0 row 22",
    **{f"OffsetFetch v{v} topics[].partitions[].committed_leader_epoch: -1 vs 0": "spec/peers.md, librdkafka's "
       "mock row 4" for v in (5, 6)},
    'OffsetFetch v4 topics[].partitions[].metadata: "" vs null': "spec/peers.md, librdkafka's mock row 4",
    "JoinGroup v6 answer: an answer vs the connection closed": "spec/peers.md, librdkafka's mock row 11",
    **{f"Heartbeat v{v} error_code: UNKNOWN_MEMBER_ID (25) vs GROUP_ID_NOT_FOUND (69)": "spec/peers.md, "
       "librdkafka's mock row 12" for v in (0, 1, 2, 4)},
    "LeaveGroup v2 error_code: UNKNOWN_MEMBER_ID (25) vs GROUP_ID_NOT_FOUND (69)": "spec/peers.md, librdkafka's "
                                                                                   "mock row 13",
    "LeaveGroup v3 answer: given vs none (waits)": "spec/peers.md, librdkafka's mock row 14",
}


def pointers(api: str, field: str, spec: Any, sig: str) -> list[str]:
    """The lines printed under a finding: Kafka's source, and spec/peers.md when it lists it."""
    out = []
    source = kafka_source(api, field, spec)
    if source:
        out.append(f"Kafka's answer: {source}")
    if sig in PEERS:
        out.append(f"listed in {PEERS[sig]}")
    return out
