"""Property tests (hypothesis) of the coordinator, run through the Driver.

``CoordinatorMachine`` sends every request kind at any time (stale, unknown and fenced ids,
every supported version, mismatching protocols), moves the clock by any amount, holds / fails /
releases storage writes, and unloads and reloads the coordinator. After every event the
Driver feeds to the coordinator, the invariants of ``adapters/checks/invariants.py`` are checked on the
groups before and after it and on the commands it produced; after every step the harness
checks that no request was answered twice and that every unanswered request is still held
somewhere (a parked join/sync, a pending write, a deferred answer); at the end, writes are
released and time runs on until every request is answered, and the groups and offsets in
memory must be what a new coordinator rebuilds from storage (``memory_vs_log``). After every
event the oracle of ``oracle.py`` also checks that the answers, timers, protocol votes, expiries
and offset retention are Kafka's (``GROUPCOORD_ORACLE=0`` leaves it out, to compare).

``TotalityMachine`` adds malformed-but-schema-valid inputs (weird values, unknown ids, stray
timer firings and write outcomes): the coordinator must never raise.

Core bugs found by these tests have regression tests at the end.

Profiles (tests/conftest.py): ``ci`` by default, ``HYPOTHESIS_PROFILE=deep`` for long runs.
With ``GROUPCOORD_TRACE_DIR`` set, every ``CoordinatorMachine`` example writes its trace there
(``example-NNNNN/``, instance scope) for ``groupcoord replay``.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections import Counter
from pathlib import Path

import attrs
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test
from oracle import KafkaOracle
from paths import SUITE
from scenario_hooks import observe_scenario_drivers

from groupcoord.adapters.checks import emitted
from groupcoord.adapters.checks import invariants as inv
from groupcoord.adapters.protocol.translate import request_event
from groupcoord.adapters.replay.plain_job import plain_replay
from groupcoord.adapters.runtime.driver import Driver
from groupcoord.adapters.scenarios import runner as conformance
from groupcoord.adapters.traces.trace_files import InstanceRecorder
from groupcoord.core import events as ev
from groupcoord.core.classic.model import Group, Member, Parked
from groupcoord.core.classic.states import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE
from groupcoord.core.classic.subscription import encode_subscription
from groupcoord.core.commands import (
    DescribeGroupsResponse,
    ExpirationTimer,
    GroupMetadataRecord,
    HeartbeatTimer,
    InitialDelay,
    JoinGroupResponse,
    JoinTimer,
    LeaveGroupResponse,
    Respond,
    SyncTimer,
    Write,
)
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator
from groupcoord.core.errors import Error
from groupcoord.testing import strategies as gs

# "g" most of the time; with 2 offsets partitions "k" shares g's partition and "h" does not.
GROUP_IDS = st.sampled_from(("g",) * 9 + ("k", "h", ""))
CLIENTS = ("c1", "c2", "c3")
INSTANCES = ("i1", "i2", "i3")
PROTOCOL_NAMES = (("range",),) * 3 + (("range", "roundrobin"),) * 2 + (
    ("roundrobin", "range"), ("roundrobin",), ("sticky",), ())
METADATA = (b"", encode_subscription(["t1"], version=0), encode_subscription(["t1", "t2"], version=0))
PROTOCOL_TYPES = ("consumer",) * 6 + ("connect", "")
# Rebalance timeouts stay well above 0: while static members do not rejoin, the join timer re-arms
# every rebalance timeout (at least 1 ms) until their sessions expire, so a tiny one makes the Driver
# fire it session/rebalance times per time jump (TotalityMachine tries 0 and negative ones).
REBALANCE_TIMEOUTS = (10000, 3000, 500, 30000, 60000, 120000)
TIME_STEPS = st.one_of(
    st.sampled_from((0, 1, 100, 499, 500, 1000, 2999, 3000, 3001, 5000, 10000, 30000, 60000,
                     300000, 600001, 1_800_001, 10**9)),
    st.integers(0, 20_000))
# Raw storage errors (every row of Kafka's translation table, §3.0) and the coordinator settings
# with their edges: groupcoord.testing's strategies.
STORAGE_ERRORS = gs.storage_errors()
CONFIGS = gs.coordinator_configs(fast=False)


# Building a strategy costs more than drawing from it: the rules draw through these caches.
@functools.lru_cache(maxsize=4096)
def choice(options: tuple) -> st.SearchStrategy:
    return st.sampled_from(options)


@functools.lru_cache(maxsize=4096)
def ints(low: int, high: int) -> st.SearchStrategy:
    return st.integers(low, high)


@functools.lru_cache(maxsize=4096)
def some(options: tuple, max_size: int, min_size: int = 0, unique: bool = False) -> st.SearchStrategy:
    return st.lists(st.sampled_from(options), min_size=min_size, max_size=max_size, unique=unique)


BOOLS = st.booleans()
GROUP_LISTS = st.lists(GROUP_IDS, min_size=1, max_size=2)
PARTITION_LISTS = st.lists(st.integers(0, 2), max_size=2)
SMALL_BYTES = st.binary(max_size=3)
FETCH_TOPICS = st.sampled_from(([{"name": "t1", "partition_indexes": [0, 1]}], None,
                                [{"name": "t2", "partition_indexes": [0]}]))


ORACLE = os.environ.get("GROUPCOORD_ORACLE", "1") != "0"


class InvariantObserver:
    """A Driver observer that checks adapters/checks/invariants.py on every event the coordinator handles,
    and Kafka's answers with the oracle (oracle.py) unless ``oracle`` is False.

    It records every request it sees (and its group as it was then), so answers sent later
    (parked joins/syncs, answers held behind writes) are checked too, and it keeps the books the
    harness needs: unanswered requests, requests Kafka drops by design, and per group the join
    phases completed since the group appeared.
    """

    def __init__(self, oracle: bool = ORACLE) -> None:
        self.driver: Driver | None = None
        self.oracle = KafkaOracle() if oracle else None
        self.coordinator = None
        self.groups: dict[str, Group] = {}
        self.requests: dict = {}
        self.request_groups: dict = {}
        self.outstanding: set = set()
        self.dropped: dict = {}  # request id -> why it is never answered (by design)
        self.violations: list[str] = []
        self.seen_ids: dict[str, None] = {}  # member ids seen in answers, in order
        self.base_generation: dict[str, int] = {}
        self.completions: Counter = Counter()
        self.events = 0
        # Whether a write failed in this instance: Kafka does not undo a classic group's state
        # when its record fails to be written, so from then on groups may be ahead of the log.
        self.write_failed = False

    def __call__(self, event, commands) -> None:
        self.events += 1
        coordinator = self.driver.coordinator
        if coordinator is not self.coordinator:  # a new instance: nothing carries over
            self.coordinator, before = coordinator, {}
            self.base_generation.clear()
            self.completions.clear()
            self.write_failed = False
            if self.oracle is not None:
                self.oracle.reset()
        else:
            before = self.groups
        after = self.groups = coordinator.groups()
        self.write_failed |= isinstance(event, ev.WriteFailed)
        if isinstance(event, ev.Request):
            self.requests[event.request_id] = event
            self.outstanding.add(event.request_id)
            gid = getattr(event, "group_id", None)
            self.request_groups[event.request_id] = before.get(gid)

        found: list[str] = []
        for gid in before.keys() | after.keys():
            b, a = before.get(gid), after.get(gid)
            if a is not b:
                if a is not None:
                    found += inv.check_group(a)
                found += inv.check_transition(b, a, event)
        found += emitted.check_commands(before, after, event, commands, requests=self.requests,
                                    request_groups=self.request_groups)

        answered = set()
        for command in commands:
            if isinstance(command, Respond):
                answered.add(command.request_id)
                self.outstanding.discard(command.request_id)
                self._learn_ids(command.response)
        # Requests Kafka drops on purpose (check_commands flags every other drop).
        for gid, b in before.items():
            still = inv.parked_requests(after.get(gid))
            for rid in inv.parked_requests(b):
                if rid not in still and rid not in answered:
                    self.dropped[rid] = f"replaced or left, on {type(event).__name__}"
                    self.outstanding.discard(rid)
        found += self._count_completions(before, after, commands, event)
        if self.oracle is not None:
            found += self.oracle.check(before, after, event, commands, coordinator)
        if found:
            self.violations += [f"after {type(event).__name__} (event #{self.events}): {v}" for v in found]

    def _count_completions(self, before, after, commands, event) -> list[str]:
        """Generation = generation when the group appeared + join phases completed since, where a
        completion is witnessed by a NONE JoinGroup answer or an Empty record carrying a new
        generation (independent of check_transition's reading of the states)."""
        out = []
        for gid in before.keys() - after.keys():
            self.base_generation.pop(gid, None)
            self.completions.pop(gid, None)
        for gid, a in after.items():
            b = before.get(gid)
            if b is None or (a is not b and inv.reverted_recreation(b, a, event)):
                self.base_generation[gid] = a.generation_id
                self.completions[gid] = 0
                continue
            if a is b:
                continue
            new = set()
            for c in commands:
                if isinstance(c, Respond) and isinstance(c.response, JoinGroupResponse) \
                        and c.response.error_code is Error.NONE \
                        and getattr(self.requests.get(c.request_id), "group_id", None) == gid \
                        and c.response.generation_id > b.generation_id:
                    new.add(c.response.generation_id)
                elif isinstance(c, Write):
                    new |= {r.generation_id for r in c.records if isinstance(r, GroupMetadataRecord)
                            and r.group_id == gid and not r.members and r.generation_id > b.generation_id}
            self.completions[gid] += len(new)
            if a.generation_id != self.base_generation[gid] + self.completions[gid]:
                out.append(f"generation_counts_completions: group {gid!r}: generation {a.generation_id}, "
                           f"appeared at {self.base_generation[gid]} + {self.completions[gid]} completions")
        return out

    def _learn_ids(self, response) -> None:
        if isinstance(response, JoinGroupResponse):
            ids = [response.member_id] + [m.member_id for m in response.members]
        elif isinstance(response, LeaveGroupResponse):
            ids = [m.member_id for m in response.members]
        elif isinstance(response, DescribeGroupsResponse):
            ids = [m.member_id for g in response.groups for m in g.members]
        else:
            return
        for mid in ids:
            if mid:
                self.seen_ids[mid] = None

    def held_requests(self) -> set:
        """Request ids the coordinator still holds: parked, riding on a write, or deferred."""
        snap = self.driver.coordinator.snapshot()
        held = set()
        for group in snap.groups.values():
            held |= inv.parked_requests(group).keys()
        for write in snap.writes.values():
            if write.request is not None:
                held.add(write.request.request_id)
        held |= set(snap.pending_deletes)
        held |= {respond.request_id for _, _, respond in snap.deferred}
        return held

    def exclude_outstanding(self, why: str) -> None:
        for rid in self.outstanding:
            self.dropped[rid] = why
        self.outstanding.clear()


class CoordinatorMachine(RuleBasedStateMachine):
    trace_dir: str | None = os.environ.get("GROUPCOORD_TRACE_DIR")
    _examples = itertools.count()

    def __init__(self) -> None:
        super().__init__()
        self.obs = InvariantObserver()
        self.driver: Driver | None = None
        self.recorder: InstanceRecorder | None = None
        self.next_request = 0

    @initialize(config=CONFIGS)
    def start(self, config: CoordinatorConfig) -> None:
        self.config = config
        if self.trace_dir:
            self.recorder = InstanceRecorder(Path(self.trace_dir) / f"example-{next(self._examples):05d}",
                                             config=config)
        self.driver = Driver(config, observer=self.recorder)  # its first loads hold no groups
        self.obs.driver = self.driver
        self.driver.observer = self.obs if self.recorder is None else _both(self.recorder, self.obs)

    # ------------------------------------------------------------------ helpers

    @property
    def coordinator(self):
        return self.driver.coordinator

    def send(self, api: str, version: int, body: dict, client_id: str = "c1"):
        self.next_request += 1
        rid = f"r{self.next_request}"
        event = request_event(api, version, body, request_id=rid, now_ms=self.driver.now_ms,
                              client_id=client_id, new_member_uuid=self.driver.new_uuid())
        self.driver.dispatch(event)
        return rid

    def member_id(self, data, gid: str) -> str:
        """A member id to use with ``gid``: mostly its leader's or a member's; else a pending id,
        an id seen in an answer (stale, or of another group), an unknown one, or ""."""
        group = self.coordinator.group(gid)
        role = data.draw(choice(("leader", "member", "member", "other")), label="role")
        if group is not None and group.members and role != "other":
            if role == "leader":
                return group.leader_id
            return data.draw(choice(tuple(group.members)), label="member")
        pool = sorted(group.pending_members) if group is not None else []
        pool += list(self.obs.seen_ids)[-12:] + ["unknown-member-id", ""]
        return data.draw(choice(tuple(dict.fromkeys(pool))), label="member_id")

    def instance_id(self, data, gid: str, member_id: str):
        """Mostly the member's own instance id (None for a dynamic member); else another one."""
        group = self.coordinator.group(gid)
        own = group.members[member_id].group_instance_id \
            if group is not None and member_id in group.members else None
        return data.draw(choice((own,) * 4 + (None,) + INSTANCES), label="instance")

    def generation(self, data, gid: str) -> int:
        """Mostly the group's generation; else -1, a stale, a future or 0."""
        group = self.coordinator.group(gid)
        current = group.generation_id if group is not None else 0
        return data.draw(choice((current,) * 4 + (-1, current - 1, current + 1, 0)), label="generation")

    def protocols(self, data, gid: str, member_id: str) -> list[dict]:
        """Mostly a member's stored protocols when it rejoins; else a list from PROTOCOL_NAMES."""
        group = self.coordinator.group(gid)
        stored = group.members[member_id].protocols if group is not None and member_id in group.members else None
        if stored is not None and data.draw(choice((True, True, False)), label="same_protocols"):
            return [{"name": n, "metadata": m} for n, m in stored]
        names = data.draw(choice(PROTOCOL_NAMES), label="protocols")
        metadata = data.draw(choice(METADATA), label="metadata")
        return [{"name": n, "metadata": metadata} for n in names]

    # ------------------------------------------------------------------ requests

    @rule(data=st.data())
    def join(self, data) -> None:
        gid = data.draw(GROUP_IDS, label="group")
        version = data.draw(ints(0, 9), label="version")
        instance = data.draw(choice((None,) + INSTANCES), label="instance") if version >= 5 else None
        group = self.coordinator.group(gid)
        own = group.static_members.get(instance) if group is not None and instance is not None else None
        # "": a new member (or a static replacement); own: the instance's member rejoining; else
        # any id: a member's (fenced if it is another instance's), a pending, stale or unknown one.
        which = data.draw(choice(("new", "new", "own", "own", "other")), label="which_id")
        member = "" if which == "new" else own if which == "own" and own else self.member_id(data, gid)
        cfg = self.config
        session = data.draw(choice((10000,) * 4 + (30000, 6000, 45000, cfg.group_min_session_timeout_ms,
                                             cfg.group_max_session_timeout_ms, cfg.group_min_session_timeout_ms - 1,
                                             cfg.group_max_session_timeout_ms + 1)), label="session")
        body = {"group_id": gid, "member_id": member, "session_timeout_ms": session,
                "protocol_type": data.draw(choice(PROTOCOL_TYPES), label="protocol_type"),
                "protocols": self.protocols(data, gid, member)}
        if version >= 1:
            body["rebalance_timeout_ms"] = data.draw(choice(REBALANCE_TIMEOUTS), label="rebalance")
        if version >= 5:
            body["group_instance_id"] = instance
        if version >= 8:
            body["reason"] = data.draw(choice((None, "", "why")), label="reason")
        self.send("JoinGroup", version, body, data.draw(choice(CLIENTS), label="client"))

    @rule(data=st.data())
    def sync(self, data) -> None:
        gid = data.draw(GROUP_IDS, label="group")
        version = data.draw(ints(0, 5), label="version")
        member = self.member_id(data, gid)
        group = self.coordinator.group(gid)
        body = {"group_id": gid, "member_id": member, "generation_id": self.generation(data, gid)}
        if version >= 3:
            body["group_instance_id"] = self.instance_id(data, gid, member)
        if version >= 5:
            body["protocol_type"] = data.draw(choice(
                (group.protocol_type if group else None, None, "connect")), label="protocol_type")
            body["protocol_name"] = data.draw(choice(
                (group.protocol_name if group else None, None, "roundrobin")), label="protocol_name")
        targets = (list(group.members) if group is not None else []) + ["unknown-member-id"]
        assigned = data.draw(some(tuple(targets), 4, unique=True), label="assigned")
        body["assignments"] = [{"member_id": m, "assignment": data.draw(SMALL_BYTES, label="bytes")}
                               for m in assigned]
        self.send("SyncGroup", version, body)

    @rule(data=st.data())
    def heartbeat(self, data) -> None:
        gid = data.draw(GROUP_IDS, label="group")
        version = data.draw(ints(0, 4), label="version")
        member = self.member_id(data, gid)
        body = {"group_id": gid, "member_id": member, "generation_id": self.generation(data, gid)}
        if version >= 3:
            body["group_instance_id"] = self.instance_id(data, gid, member)
        self.send("Heartbeat", version, body)

    @rule(data=st.data())
    def leave(self, data) -> None:
        gid = data.draw(GROUP_IDS, label="group")
        version = data.draw(ints(0, 5), label="version")
        if version < 3:
            body = {"group_id": gid, "member_id": self.member_id(data, gid)}
        else:
            members = []
            for _ in range(data.draw(ints(1, 3), label="batch")):
                member = self.member_id(data, gid)
                identity = {"member_id": member, "group_instance_id": self.instance_id(data, gid, member)}
                if data.draw(BOOLS, label="instance_only"):
                    identity["member_id"] = ""
                if version >= 5:
                    identity["reason"] = data.draw(choice((None, "bye")), label="reason")
                members.append(identity)
            body = {"group_id": gid, "members": members}
        self.send("LeaveGroup", version, body)

    @rule(data=st.data())
    def commit(self, data) -> None:
        gid = data.draw(GROUP_IDS, label="group")
        version = data.draw(ints(2, 9), label="version")
        member = data.draw(choice(("", None)), label="no_member")
        if member is None:
            member = self.member_id(data, gid)
        body = {"group_id": gid, "member_id": member,
                "generation_id_or_member_epoch": data.draw(choice((-1, None)), label="gen-1")}
        if body["generation_id_or_member_epoch"] is None:
            body["generation_id_or_member_epoch"] = self.generation(data, gid)
        if version >= 7:
            body["group_instance_id"] = self.instance_id(data, gid, member)
        if version <= 4:
            body["retention_time_ms"] = data.draw(choice((-1, 0, 1000, 10**7)), label="retention")
        partitions = []
        for p in data.draw(PARTITION_LISTS, label="partitions"):
            part = {"partition_index": p, "committed_offset": data.draw(ints(0, 100), label="offset"),
                    "committed_metadata": data.draw(choice(("", "m", None, "too-long") + self.metadata_edges()),
                                                    label="meta")}
            if version >= 6:
                part["committed_leader_epoch"] = data.draw(choice((-1, 3)), label="epoch")
            partitions.append(part)
        topic = data.draw(choice(("t1", "t2", "t3")), label="topic")
        body["topics"] = [{"name": topic, "partitions": partitions}] if partitions else []
        self.send("OffsetCommit", version, body)

    def metadata_edges(self) -> tuple[str, ...]:
        """Metadata exactly offset.metadata.max.bytes long (in Java chars: "é" is one) and one longer."""
        limit = self.config.offset_metadata_max_bytes
        return "x" * limit, "é" * limit, "x" * (limit + 1)

    @rule(data=st.data())
    def commit_at_expiration_run(self, data) -> None:
        """Commit (generation -1) just as the expiration job runs, retained explicitly for one
        check interval (v2) or not (v8); maybe wait for the next run, which then falls exactly on
        the explicit expiry, and on the retention when it equals the interval."""
        runs = [d for key, (d, _) in self.driver.timers.armed().items() if type(key) is ExpirationTimer]
        if not runs:
            return
        self.driver.advance(min(runs) - self.driver.now_ms)
        interval = self.config.offsets_retention_check_interval_ms
        version = data.draw(choice((2, 8)), label="version")
        body = {"group_id": data.draw(choice(("k", "h", "g", "")), label="group"), "member_id": "",
                "generation_id_or_member_epoch": -1, "topics": [{"name": "t3", "partitions": [
                    {"partition_index": 0, "committed_offset": data.draw(ints(0, 100), label="offset")}]}]}
        if version == 2:
            body["retention_time_ms"] = interval
        self.send("OffsetCommit", version, body)
        if data.draw(BOOLS, label="wait"):
            self.driver.advance(interval)

    @rule(data=st.data())
    def fetch(self, data) -> None:
        version = data.draw(ints(1, 9), label="version")
        topics = data.draw(FETCH_TOPICS, label="topics")
        if version < 2 and topics is None:
            topics = []
        if version < 8:
            body = {"group_id": data.draw(GROUP_IDS, label="group"), "topics": topics}
        else:
            body = {"groups": [{"group_id": gid, "topics": topics}
                               for gid in data.draw(GROUP_LISTS, label="groups")]}
        if version >= 7:
            body["require_stable"] = data.draw(BOOLS, label="require_stable")
        self.send("OffsetFetch", version, body)

    @rule(data=st.data())
    def admin(self, data) -> None:
        """DescribeGroups, ListGroups, DeleteGroups, OffsetDelete, FindCoordinator."""
        api = data.draw(choice(("DescribeGroups", "ListGroups", "DeleteGroups", "DeleteGroups",
                                         "OffsetDelete", "FindCoordinator")), label="api")
        ids = data.draw(GROUP_LISTS, label="groups")
        if api == "DescribeGroups":
            self.send(api, data.draw(ints(0, 5), label="version"), {"groups": ids})
        elif api == "ListGroups":
            version = data.draw(ints(0, 5), label="version")
            body = {}
            if version >= 4:
                body["states_filter"] = data.draw(some(
                    ("Empty", "stable", "PreparingRebalance", "CompletingRebalance", "Dead"), 2))
            if version >= 5:
                body["types_filter"] = data.draw(some(("classic", "consumer"), 1))
            self.send(api, version, body)
        elif api == "DeleteGroups":
            self.send(api, data.draw(ints(0, 2), label="version"), {"groups_names": ids})
        elif api == "OffsetDelete":
            topics = [{"name": t, "partitions": [{"partition_index": 0}, {"partition_index": 1}]}
                      for t in data.draw(some(("t1", "t2", "t3"), 2))]
            self.send(api, 0, {"group_id": ids[0], "topics": topics})
        else:
            version = data.draw(ints(0, 6), label="version")
            self.send(api, version, {"key": ids[0]} if version < 4 else {"coordinator_keys": ids})

    @rule(data=st.data())
    def cooperate(self, data) -> None:
        """What a well-behaved client of a group would send next (rejoin while the group
        rebalances, sync in the sync phase, heartbeat or commit when settled), so that groups
        get through whole rebalances between the random inputs of the other rules."""
        gid = data.draw(GROUP_IDS, label="group")
        group = self.coordinator.group(gid)
        ids = (list(group.members) + sorted(group.pending_members)) if group is not None else []
        if not ids or data.draw(choice((False, False, False, True)), label="newcomer"):
            # A new consumer: dynamic (v3), static, or a static one restarted (its instance id is in
            # the group: a replacement). A session longer than the rebalance timeout lets a member
            # that does not rejoin outlive the join phase.
            instance = data.draw(choice((None,) + INSTANCES), label="instance")
            if instance is not None and group is not None and instance in group.static_members \
                    and data.draw(BOOLS, label="fresh_instance"):
                instance = None
            body = {"group_id": gid, "member_id": "",
                    "session_timeout_ms": data.draw(choice((10000, 30000)), label="session"),
                    "rebalance_timeout_ms": data.draw(choice((10000, 3000)), label="rebalance"),
                    "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": METADATA[1]},
                                                               {"name": "roundrobin", "metadata": METADATA[1]}]}
            if instance is not None:
                body["group_instance_id"] = instance
            self.send("JoinGroup", 5 if instance else 3, body, data.draw(choice(CLIENTS), label="client"))
            return
        if data.draw(BOOLS, label="whole_group"):
            # Up to three rounds in which every member takes its next step, in a random order:
            # enough for a whole rebalance (rejoin, sync, heartbeat).
            for _ in range(data.draw(ints(1, 3), label="rounds")):
                group = self.coordinator.group(gid)
                if group is None:
                    break
                ids = list(group.members) + sorted(group.pending_members)
                for mid in data.draw(st.permutations(ids), label="order"):
                    self.step_of(data, gid, mid)
        else:
            self.step_of(data, gid, data.draw(choice(tuple(ids)), label="member"))

    def step_of(self, data, gid: str, mid: str) -> None:
        """The next request of a well-behaved client ``mid`` of ``gid``."""
        group = self.coordinator.group(gid)
        if group is None or (mid not in group.members and mid not in group.pending_members):
            return
        member = group.members.get(mid)
        if member is None:  # a pending member completes its join
            self.send("JoinGroup", data.draw(ints(4, 9), label="version"), {
                "group_id": gid, "member_id": mid, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                "protocol_type": group.protocol_type or "consumer",
                "protocols": [{"name": "range", "metadata": b""}]}, mid.split("-")[0])
            return
        inst = member.group_instance_id
        if group.state is PREPARING_REBALANCE and member.awaiting_join is None:
            body = {"group_id": gid, "member_id": mid, "session_timeout_ms": member.session_timeout_ms,
                    "rebalance_timeout_ms": member.rebalance_timeout_ms, "protocol_type": member.protocol_type,
                    "protocols": [{"name": n, "metadata": m} for n, m in member.protocols]}
            version = data.draw(ints(5 if inst else 1, 9), label="version")
            if version >= 5:
                body["group_instance_id"] = inst
            self.send("JoinGroup", version, body, member.client_id)
        elif (group.state is COMPLETING_REBALANCE and member.awaiting_sync is None) or mid in group.pending_sync:
            body = {"group_id": gid, "member_id": mid, "generation_id": group.generation_id,
                    "group_instance_id": inst, "assignments": []}
            if mid == group.leader_id:
                body["assignments"] = [{"member_id": m, "assignment": f"{m[:2]}@{group.generation_id}".encode()}
                                       for m in group.members]
            self.send("SyncGroup", data.draw(ints(3, 5), label="version"), body, member.client_id)
        elif data.draw(BOOLS, label="heartbeat"):
            self.send("Heartbeat", data.draw(ints(3, 4), label="version"), {
                "group_id": gid, "member_id": mid, "generation_id": group.generation_id,
                "group_instance_id": inst}, member.client_id)
        else:
            self.send("OffsetCommit", data.draw(ints(7, 9), label="version"), {
                "group_id": gid, "member_id": mid, "generation_id_or_member_epoch": group.generation_id,
                "group_instance_id": inst, "topics": [{"name": "t1", "partitions": [
                    {"partition_index": 0, "committed_offset": data.draw(ints(0, 99), label="offset")}]}]},
                member.client_id)

    @rule(data=st.data())
    def cooperate_again(self, data) -> None:
        self.cooperate(data)

    @rule(data=st.data())
    def cooperate_more(self, data) -> None:
        self.cooperate(data)

    # Hypothesis picks rules uniformly: the most useful inputs get a second rule.
    @rule(data=st.data())
    def join_again(self, data) -> None:
        self.join(data)

    @rule(data=st.data())
    def sync_again(self, data) -> None:
        self.sync(data)

    # ------------------------------------------------------------------ time, storage, failover

    @rule(ms=TIME_STEPS)
    def advance(self, ms: int) -> None:
        self.driver.advance(ms)

    @rule(ms=TIME_STEPS)
    def advance_again(self, ms: int) -> None:
        self.driver.advance(ms)

    @rule(action=choice(("hold", "fail_next", "release", "release_error", "failover")),
          error=STORAGE_ERRORS, failover=choice(("unload_reload", "unload_reload", "reload", "unload")))
    def storage(self, action: str, error: Error, failover: str) -> None:
        """Hold, fail or release storage writes; now and then a failover (rarer: it resets a lot)."""
        if action == "hold":
            self.driver.hold_writes()
        elif action == "fail_next":
            self.driver.fail_next_write(error)
        elif action in ("release", "release_error"):
            self.driver.release_writes(error if action == "release_error" else None)
        elif failover == "unload" and self.coordinator.owned_partitions():
            self.driver.unload()  # from now on every request gets NOT_COORDINATOR, until a reload
        else:
            if failover == "unload_reload":
                self.driver.unload()
            # Requests parked in the old instance are never answered (FORMAT.md, failover).
            self.obs.exclude_outstanding("parked in an instance that was replaced")
            self.driver.reload()

    # ------------------------------------------------------------------ checks

    @invariant()
    def invariants_hold(self) -> None:
        if self.driver is None:
            return
        obs = self.obs
        assert not obs.violations, "\n".join(obs.violations[:8])
        twice = {rid: n for rid, n in self.driver.answer_counts.items() if n > 1}
        assert not twice, f"answered more than once: {twice}"
        lost = sorted(obs.outstanding - obs.held_requests())
        assert not lost, "unanswered and held nowhere: " + ", ".join(
            f"{rid} {type(obs.requests[rid]).__name__}" for rid in lost)
        timers = inv.check_timers(self.coordinator.groups(), self.driver.timers.armed())
        assert not timers, "\n".join(timers)

    def teardown(self) -> None:
        try:
            self._settle()
        finally:
            if self.recorder is not None:
                self.recorder.close()

    def _settle(self) -> None:
        if self.driver is None or self.obs.violations:
            return
        drain(self.driver)
        self.invariants_hold()
        assert not self.obs.outstanding, "never answered: " + ", ".join(
            f"{rid} {self.obs.requests[rid]!r}" for rid in sorted(self.obs.outstanding))
        answered = set(self.driver.answer_counts)
        assert set(self.obs.requests) == answered | set(self.obs.dropped)
        assert all(n == 1 for n in self.driver.answer_counts.values())
        mismatch = memory_vs_log(self.driver, groups=not self.obs.write_failed)
        assert not mismatch, "\n".join(mismatch)


def _both(first, second):
    def observe(event, commands):
        first(event, commands)
        second(event, commands)
    return observe


def drain(driver: Driver, rounds: int = 60) -> None:
    """Let storage finish and time run on until no group timer is left to fire."""
    for _ in range(rounds):
        driver.release_writes()
        deadlines = [d for key, (d, _) in driver.timers.armed().items() if type(key) is not ExpirationTimer]
        if not deadlines and not driver.in_flight:
            return
        driver.advance(max(max(deadlines, default=0) - driver.now_ms, 2_000_000))


def memory_vs_log(driver: Driver, skip=(), groups: bool = True) -> list[str]:
    """With no write in flight, the offsets the coordinator holds are those a new instance
    rebuilds from storage ("memory_matches_log"), and so are its groups, except for what is never
    written: generations reached without a record are ahead of the log, never behind it. After a
    failed write (``groups=False``) only "a group gone from memory is gone from the log" is
    checked: Kafka keeps a classic group's state when its record fails. ``skip``: group ids not
    to compare."""
    coordinator = driver.coordinator
    if coordinator.snapshot().writes or not coordinator.owned_partitions():
        return []
    fresh = Coordinator(driver.config)
    for partition in coordinator.owned_partitions():
        fresh.handle(ev.LoadPartition(now_ms=driver.now_ms, partition=partition,
                                      records=driver.storage.records(partition)))
    out = []
    live, replayed = coordinator.groups(), fresh.groups()
    for gid in sorted((live.keys() | replayed.keys()) - set(skip)):
        a, b = live.get(gid), replayed.get(gid)
        if not groups and a is not None:
            pass  # a record of it may have failed: memory can be ahead of the log, even exist alone
        elif (a is None) != (b is None):
            out.append(f"memory_matches_log: group {gid!r} is {a.state if a else 'absent'} in memory, "
                       f"{b.state if b else 'absent'} in the log")
        elif a is not None and b.generation_id > a.generation_id:
            out.append(f"memory_matches_log: group {gid!r} generation {a.generation_id} in memory, "
                       f"{b.generation_id} in the log")
        if coordinator.offsets(gid) != fresh.offsets(gid):
            out.append(f"memory_matches_log: group {gid!r} offsets {coordinator.offsets(gid)} in memory, "
                       f"{fresh.offsets(gid)} in the log")
    return out


TestCoordinator = CoordinatorMachine.TestCase


def test_examples_write_traces_the_replay_job_passes(tmp_path, monkeypatch):
    """The property tests' traces (issue 6 §1) replay clean on the plain replay job: every
    recorded output recomputed and every invariant and contract check passed, through storage
    failures, unloads and reloads that the simulator's traces do not have."""
    monkeypatch.setattr(CoordinatorMachine, "trace_dir", str(tmp_path / "traces"))
    run_state_machine_as_test(CoordinatorMachine, settings=settings(
        max_examples=25, stateful_step_count=40, deadline=None, database=None, derandomize=True))
    traces = sorted((tmp_path / "traces").iterdir())
    assert len(traces) >= 10
    inputs = 0
    for trace_dir in traces:
        summary = plain_replay(str(trace_dir), str(tmp_path / "report"))
        assert summary["scope"] == "instance"
        assert summary["units_with_findings"] == 0, (trace_dir, summary["first_findings"])
        inputs += summary["inputs"]
    assert inputs > 25 * 20


# ---------------------------------------------------------------------------- totality

I32 = st.integers(-(2**31), 2**31 - 1)
ODD_STRINGS = st.sampled_from(("", " ", "g", "unknown", "é-ü", "x" * 300, "i1-", "-", "\x00"))
ODD_GROUP_IDS = st.one_of(GROUP_IDS, ODD_STRINGS)
ODD_GROUP_LISTS = st.lists(ODD_GROUP_IDS, max_size=3)
ODD_NAME_LISTS = st.lists(ODD_STRINGS, max_size=3)
ODD_REBALANCE_TIMEOUTS = st.one_of(st.integers(1000, 2**31 - 1), st.sampled_from((0, 1, -1, -(2**31))))
MAYBE_ODD = st.one_of(st.none(), ODD_STRINGS)
INITIAL_PAYLOADS = st.one_of(st.none(), st.builds(InitialDelay, st.integers(0, 10**6), st.integers(0, 10**6)))


class TotalityMachine(CoordinatorMachine):
    """Adds malformed-but-schema-valid inputs; the coordinator must never raise, and the
    invariants still hold (they are about any input, not just well-behaved clients)."""

    @rule(data=st.data())
    def odd_join(self, data) -> None:
        version = data.draw(ints(0, 9), label="version")
        body = {"group_id": data.draw(ODD_GROUP_IDS, label="group"),
                "member_id": data.draw(ODD_STRINGS, label="member"),
                "session_timeout_ms": data.draw(I32, label="session"),
                "protocol_type": data.draw(ODD_STRINGS, label="protocol_type"),
                "protocols": [{"name": n, "metadata": data.draw(SMALL_BYTES)} for n in data.draw(ODD_NAME_LISTS)]}
        if version >= 1:
            body["rebalance_timeout_ms"] = data.draw(ODD_REBALANCE_TIMEOUTS, label="rebalance")
            if body["rebalance_timeout_ms"] < 1000 and data.draw(BOOLS, label="short_session"):
                # While static members do not rejoin, the join timer re-arms every rebalance
                # timeout (>= 1 ms) until their sessions expire: keep that loop short.
                body["session_timeout_ms"] = self.config.group_min_session_timeout_ms
        if version >= 5:
            body["group_instance_id"] = data.draw(MAYBE_ODD, label="instance")
        self.send("JoinGroup", version, body, data.draw(ODD_STRINGS, label="client"))

    @rule(data=st.data())
    def odd_member_request(self, data) -> None:
        api = data.draw(choice(("SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit")), label="api")
        gid = data.draw(ODD_GROUP_IDS, label="group")
        member = self.member_id(data, "g") if data.draw(BOOLS) else data.draw(ODD_STRINGS, label="member")
        generation = data.draw(I32, label="generation")
        if api == "SyncGroup":
            self.send(api, 5, {"group_id": gid, "member_id": member, "generation_id": generation,
                               "group_instance_id": data.draw(MAYBE_ODD),
                               "protocol_type": data.draw(MAYBE_ODD),
                               "protocol_name": data.draw(MAYBE_ODD),
                               "assignments": [{"member_id": member, "assignment": b"x"},
                                               {"member_id": member, "assignment": b"y"}]})
        elif api == "Heartbeat":
            self.send(api, 4, {"group_id": gid, "member_id": member, "generation_id": generation,
                               "group_instance_id": data.draw(MAYBE_ODD)})
        elif api == "LeaveGroup":
            self.send(api, 5, {"group_id": gid, "members": [
                {"member_id": member if data.draw(BOOLS) else data.draw(ODD_STRINGS),
                 "group_instance_id": data.draw(MAYBE_ODD)} for _ in range(data.draw(ints(0, 3)))]})
        else:
            version = data.draw(ints(2, 9), label="version")
            body = {"group_id": gid, "member_id": member, "generation_id_or_member_epoch": generation,
                    "topics": [{"name": data.draw(ODD_STRINGS), "partitions": [
                        {"partition_index": data.draw(I32), "committed_offset": data.draw(ints(-(2**63), 2**63 - 1)),
                         "committed_metadata": data.draw(MAYBE_ODD)}]}]}
            if version <= 4:
                body["retention_time_ms"] = data.draw(ints(-(2**63), 2**40), label="retention")
            self.send(api, version, body)

    @rule(data=st.data())
    def odd_admin(self, data) -> None:
        ids = data.draw(ODD_GROUP_LISTS, label="groups")
        api = data.draw(choice(("DescribeGroups", "DeleteGroups", "OffsetFetch", "ListGroups")))
        if api == "DescribeGroups":
            self.send(api, 5, {"groups": ids})
        elif api == "DeleteGroups":
            self.send(api, 2, {"groups_names": ids + ids})
        elif api == "OffsetFetch":
            self.send(api, 9, {"groups": [{"group_id": gid, "member_id": data.draw(MAYBE_ODD),
                                           "member_epoch": data.draw(I32), "topics": None} for gid in ids],
                               "require_stable": data.draw(BOOLS)})
        else:
            self.send(api, 5, {"states_filter": ids, "types_filter": ids})

    @rule(data=st.data())
    def stray_timer(self, data) -> None:
        """A timer firing the coordinator did not (or no longer) expect: well-formed keys of
        every kind, for existing and unknown groups, members and partitions, stale payloads."""
        kind = data.draw(choice(("heartbeat", "join", "sync", "expire", "unknown-kind")), label="kind")
        partition = data.draw(choice((0, 1, 7)), label="partition")
        gid = data.draw(ODD_GROUP_IDS, label="group")
        if kind == "heartbeat":
            key = HeartbeatTimer(partition, gid, self.member_id(data, gid))
        elif kind == "expire":
            key = ExpirationTimer(partition)
        elif kind == "join":
            key = JoinTimer(partition, gid)
        elif kind == "sync":
            key = SyncTimer(partition, gid)
        else:
            key = (kind, partition, gid)  # not a key the core arms at all
        # Payloads have the shapes the coordinator arms them with (SetTimer's contract).
        if kind == "join":
            payload = data.draw(INITIAL_PAYLOADS, label="payload")
        elif kind == "sync":
            payload = data.draw(ints(-1, 10), label="generation")
        else:
            payload = None
        self.driver.dispatch(ev.TimerFired(now_ms=self.driver.now_ms, key=key, payload=payload))

    @rule(data=st.data())
    def stray_write_outcome(self, data) -> None:
        """WriteCompleted/WriteFailed for unknown (or already finished) write ids."""
        snap = self.coordinator.snapshot()
        known = set(snap.writes)
        write_id = data.draw(st.one_of(choice((0, -1, snap.next_write_id, snap.next_write_id + 7)),
                                       ints(1, snap.next_write_id)).filter(lambda w: w not in known),
                             label="write_id")
        if data.draw(BOOLS, label="failed"):
            event = ev.WriteFailed(now_ms=self.driver.now_ms, write_id=write_id, error=data.draw(STORAGE_ERRORS))
        else:
            event = ev.WriteCompleted(now_ms=self.driver.now_ms, write_id=write_id)
        self.driver.dispatch(event)


TestTotality = TotalityMachine.TestCase


# ---------------------------------------------------------------------------- scenarios


def test_invariants_hold_in_every_conformance_scenario(monkeypatch):
    """The invariants are not stricter than Kafka: every public scenario runs clean."""

    def checked(driver):
        obs = InvariantObserver()
        obs.driver = driver
        return obs

    observers = observe_scenario_drivers(monkeypatch, checked)
    files = SUITE
    assert len(files) >= 104
    for path in files:
        result = conformance.run_file(path)
        assert result.passed, result.line()
        assert not observers[-1].violations, f"{path.name}: " + "\n".join(observers[-1].violations)


# ---------------------------------------------------------------------------- the checks can fail


def _member(mid, **kw) -> Member:
    values = dict(member_id=mid, group_instance_id=None, client_id="c", client_host="h",
                  rebalance_timeout_ms=1000, session_timeout_ms=1000, protocol_type="consumer",
                  protocols=(("range", b""),))
    values.update(kw)
    return Member(**values)


def _stable(**kw) -> Group:
    members = {"a": _member("a", group_instance_id="i1"), "b": _member("b")}
    values = dict(group_id="g", partition=0, state=STABLE, generation_id=2, protocol_type="consumer",
                  protocol_name="range", leader_id="a", members=members, static_members={"i1": "a"},
                  protocol_counts={"range": 2})
    values.update(kw)
    return Group(**values)


BROKEN_GROUPS = {
    inv.LEADER_IS_MEMBER: _stable(leader_id="zz"),
    inv.EMPTY_HAS_NO_MEMBERS: _stable(state=EMPTY),
    inv.STATIC_MAP_CONSISTENT: _stable(static_members={"i1": "a", "i2": "b"}),
    inv.AWAITING_JOIN_COUNT: _stable(num_awaiting_join=1),
    inv.PROTOCOL_COUNTS: _stable(protocol_counts={"range": 1}),
    inv.PENDING_NOT_MEMBERS: _stable(pending_members=frozenset({"b"})),
    inv.PENDING_SYNC_SUBSET: _stable(state=PREPARING_REBALANCE, pending_sync=frozenset({"a"})),
    inv.SETTLED_GROUP_HAS_PROTOCOL: _stable(protocol_name="roundrobin"),
    inv.PARKED_SYNC_ONLY_COMPLETING: _stable(members={"a": _member("a", group_instance_id="i1"),
                                                      "b": _member("b", awaiting_sync=Parked("r", 0))}),
    inv.PARKED_JOIN_STATE: _stable(state=COMPLETING_REBALANCE, num_awaiting_join=1, members={
        "a": _member("a", group_instance_id="i1"), "b": _member("b", awaiting_join=Parked("r", 0))}),
    inv.NEW_MEMBER_ONLY_PREPARING: _stable(members={"a": _member("a", group_instance_id="i1"),
                                                    "b": _member("b", is_new=True)}),
    inv.MEMBERS_SHARE_PROTOCOL_TYPE: _stable(protocol_type="connect"),
    inv.GENERATION_NON_NEGATIVE: _stable(generation_id=-1),
}


@pytest.mark.parametrize("name", list(BROKEN_GROUPS))
def test_check_group_catches(name):
    assert inv.check_group(_stable()) == []
    assert name in inv.names_of(inv.check_group(BROKEN_GROUPS[name]))


def test_check_transition_catches():
    def names(before, after, event=None):
        return inv.names_of(inv.check_transition(before, after, event))

    done = ev.WriteCompleted(now_ms=0, write_id=1)
    completing = _stable(state=COMPLETING_REBALANCE)
    preparing = _stable(state=PREPARING_REBALANCE)
    assert names(completing, _stable(), done) == set()
    assert names(_stable(), _stable(state=COMPLETING_REBALANCE, generation_id=3), done) == set()
    assert inv.LEGAL_TRANSITION in names(_stable(state=EMPTY, members={}, leader_id=None), _stable(), done)
    assert inv.STABLE_ONLY_ON_WRITE_COMPLETED in names(completing, _stable(), ev.TimerFired(now_ms=0, key=()))
    assert inv.GENERATION_MONOTONIC in names(_stable(), _stable(generation_id=1))
    assert inv.GENERATION_STEP in names(preparing, _stable(state=COMPLETING_REBALANCE, generation_id=4))
    assert inv.GENERATION_BUMP_IFF_JOIN_COMPLETED in names(preparing, _stable(state=COMPLETING_REBALANCE))
    assert inv.GENERATION_BUMP_IFF_JOIN_COMPLETED in names(_stable(), _stable(generation_id=3))
    assert inv.REMOVAL_ALLOWED in names(preparing, None, done)
    assert names(_stable(state=EMPTY, members={}, leader_id=None), None, done) == set()
    assert inv.CREATION_STATE in names(None, _stable(), done)
    assert names(None, _stable(state=EMPTY, members={}, leader_id=None),
                 ev.WriteFailed(now_ms=0, write_id=1, error=Error.NOT_COORDINATOR)) == set()
    dead = _stable(state=DEAD)
    assert inv.DEAD_IS_ABSORBING in names(dead, _stable(state=PREPARING_REBALANCE))


def test_check_response_catches():
    group = _stable()
    hb = ev.Heartbeat(request_id="h", now_ms=0, version=4, group_id="g", generation_id=2, member_id="b",
                      group_instance_id="i1")  # fenced: i1 is a's instance
    from groupcoord.core.commands import HeartbeatResponse, SyncGroupResponse
    assert inv.HEARTBEAT_REQUIRES_VALID_MEMBER in inv.names_of(
        inv.check_response(hb, group, HeartbeatResponse(Error.NONE)))
    assert inv.check_response(hb, group, HeartbeatResponse(Error.FENCED_INSTANCE_ID)) == []
    assert inv.check_response(attrs.evolve(hb, group_instance_id=None), group, HeartbeatResponse(Error.NONE)) == []
    sync = ev.SyncGroup(request_id="s", now_ms=0, version=3, group_id="g", generation_id=1, member_id="b")
    assert inv.SYNC_REQUIRES_VALID_MEMBER in inv.names_of(
        inv.check_response(sync, group, SyncGroupResponse(error_code=Error.NONE)))


def test_invariant_names_are_unique_and_documented():
    assert len(inv.INVARIANT_NAMES) == len(set(inv.INVARIANT_NAMES)) >= 30
    assert all(inv.INVARIANTS[name] for name in inv.INVARIANT_NAMES)


# ---------------------------------------------------------------------------- known core bugs


def _driver(**config):
    driver = Driver(CoordinatorConfig(offsets_topic_num_partitions=1, **config))
    obs = InvariantObserver()
    obs.driver = driver
    driver.observer = obs
    return driver, obs


def _send(driver, rid, api, version, body, client="c1"):
    driver.dispatch(request_event(api, version, body, request_id=rid, now_ms=driver.now_ms, client_id=client,
                                  new_member_uuid=driver.new_uuid()))
    return driver.responses.get(rid)


JOIN = {"group_id": "g", "member_id": "", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
        "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}


def test_join_after_delete_with_write_in_flight_is_answered():
    """Regression (found by CoordinatorMachine): a tombstone applied only when its write
    completed dropped a group rejoined meanwhile, with the parked JoinGroup never answered.
    Kafka replays the tombstone at once, so the join creates a fresh group."""
    driver, obs = _driver()
    assert _send(driver, "r1", "JoinGroup", 4, JOIN).error_code is Error.MEMBER_ID_REQUIRED  # g: Empty
    driver.hold_writes()
    _send(driver, "r2", "DeleteGroups", 2, {"groups_names": ["g"]})  # tombstone in flight
    _send(driver, "r3", "JoinGroup", 3, JOIN)  # parked; Kafka would have created a fresh group
    driver.release_writes()
    drain(driver)
    assert "r3" in driver.responses, obs.violations


def test_commit_in_flight_during_delete_matches_log():
    """Regression (found by CoordinatorMachine's memory_matches_log check). Kafka replays the
    OffsetCommit records at once, so DeleteGroups writes their tombstones and nothing survives;
    the commit's completion used to re-create group g with the offset."""
    driver, obs = _driver()
    assert _send(driver, "r1", "JoinGroup", 4, JOIN).error_code is Error.MEMBER_ID_REQUIRED  # g: Empty
    driver.hold_writes()
    _send(driver, "r2", "OffsetCommit", 8, {"group_id": "g", "generation_id_or_member_epoch": -1, "topics": [
        {"name": "t1", "partitions": [{"partition_index": 0, "committed_offset": 5}]}]})
    _send(driver, "r3", "DeleteGroups", 2, {"groups_names": ["g"]})
    driver.release_writes()
    assert driver.responses["r3"].results[0].error_code is Error.NONE
    assert memory_vs_log(driver) == []


def test_failed_expiry_write_restores_offsets():
    """Regression (found by TotalityMachine's memory_matches_log check). The expiration job
    removes an Empty group's expired offsets and the group itself in one write; when it fails,
    Kafka reverts both. The group used to come back without its offsets."""
    driver, obs = _driver(offsets_retention_minutes=1)
    _send(driver, "r1", "OffsetCommit", 8, {"group_id": "g", "generation_id_or_member_epoch": -1, "topics": [
        {"name": "t1", "partitions": [{"partition_index": 0, "committed_offset": 5}]}]})
    driver.fail_next_write(Error.NOT_LEADER_OR_FOLLOWER)
    driver.advance(600_000)  # the expiration job: offset expired, group Empty; its write fails
    assert driver.coordinator.offsets("g") != {}, memory_vs_log(driver)


def test_failed_delete_and_recreate_restores_group():
    """Found by CoordinatorMachine's memory_matches_log check. With writes in flight, DeleteGroups
    removes g (tombstone in flight) and a JoinGroup re-creates g (its creation record in flight);
    both writes fail. restore_group skips because the new g holds the id, then the new g is rolled
    back: g and its committed offset are gone from memory (OffsetFetch says -1) while the log, and
    the next coordinator, still have them. Kafka reverts both operations: g is back, offsets and all."""
    driver, obs = _driver()
    assert _send(driver, "r1", "JoinGroup", 4, JOIN).error_code is Error.MEMBER_ID_REQUIRED  # g: Empty
    _send(driver, "r2", "OffsetCommit", 8, {"group_id": "g", "generation_id_or_member_epoch": -1, "topics": [
        {"name": "t1", "partitions": [{"partition_index": 0, "committed_offset": 5}]}]})
    driver.hold_writes()
    _send(driver, "r3", "DeleteGroups", 2, {"groups_names": ["g"]})
    _send(driver, "r4", "JoinGroup", 4, JOIN)  # creates a new g
    driver.release_writes(Error.NOT_LEADER_OR_FOLLOWER)
    assert driver.responses["r3"].results[0].error_code is Error.NOT_COORDINATOR  # the delete failed
    assert driver.coordinator.groups()["g"].state.value == "Empty"
    assert memory_vs_log(driver, groups=False) == []
    assert not obs.violations, obs.violations


def test_duplicate_protocol_names_count_once():
    """Regression (found by TotalityMachine): a name listed twice was counted twice, so no
    protocol was listed by "every" member and the join phase's protocol election raised."""
    driver, obs = _driver()
    body = dict(JOIN, protocols=[{"name": "range", "metadata": b""}, {"name": "range", "metadata": b"x"}])
    _send(driver, "r1", "JoinGroup", 3, body)
    driver.advance(3000)  # the join phase completes
    assert driver.responses["r1"].error_code is Error.NONE
    assert driver.responses["r1"].protocol_name == "range"
    assert not obs.violations


class Livelock(Exception):
    pass


def test_zero_rebalance_timeout_does_not_livelock():
    """Regression: with a 0 ms rebalance timeout, a join phase no static member rejoins was
    re-armed at the same instant forever (Driver.advance never returned)."""
    driver, obs = _driver(group_min_session_timeout_ms=10)
    fired = Counter()

    def budget(event, commands):
        obs(event, commands)
        if isinstance(event, ev.TimerFired):
            fired[event.now_ms] += 1
            if fired[event.now_ms] > 1000:
                raise Livelock(f"{fired[event.now_ms]} timer firings at {event.now_ms} ms")

    driver.observer = budget
    static = dict(JOIN, rebalance_timeout_ms=1000)
    _send(driver, "r1", "JoinGroup", 5, dict(static, group_instance_id="i1"))
    _send(driver, "r2", "JoinGroup", 5, dict(static, group_instance_id="i2"))
    driver.advance(3000)
    a, b = driver.responses["r1"], driver.responses["r2"]
    leader = driver.coordinator.group("g").leader_id
    _send(driver, "r3", "SyncGroup", 3, {"group_id": "g", "generation_id": 1, "member_id": leader})
    # Both rejoin with a 0 ms rebalance timeout; the second completes the phase at once.
    _send(driver, "r4", "JoinGroup", 5, dict(static, member_id=a.member_id, group_instance_id="i1",
                                             rebalance_timeout_ms=0))
    _send(driver, "r5", "JoinGroup", 5, dict(static, member_id=b.member_id, group_instance_id="i2",
                                             rebalance_timeout_ms=0))
    leader = driver.coordinator.group("g").leader_id
    _send(driver, "r6", "SyncGroup", 3, {"group_id": "g", "generation_id": 2, "member_id": leader})
    assert driver.coordinator.group("g").state is STABLE
    other, instance = (b.member_id, "i2") if leader == a.member_id else (a.member_id, "i1")
    _send(driver, "r7", "LeaveGroup", 3, {"group_id": "g", "members": [
        {"member_id": other, "group_instance_id": instance}]})
    driver.advance(0)  # the leader does not rejoin: the join phase is re-armed, not re-fired now
    assert driver.coordinator.group("g").state is PREPARING_REBALANCE
    driver.advance(10000)  # its session expires: the phase completes into Empty
    assert driver.coordinator.group("g").state is EMPTY
    assert not obs.violations


@pytest.mark.parametrize("generation", [1, 2])
def test_failed_delete_of_a_used_group_and_failed_recreate_bring_it_back(generation):
    """As above, with the deleted group at generation 1 or 2 and the new one in PreparingRebalance:
    the group that comes back (Empty) replaces a generation-0 group on one WriteFailed, which the
    invariants read as the creation reverted and the deletion reverted (found by the deep profile
    at generation 1: completion_witnessed)."""
    driver, obs = _driver(group_initial_rebalance_delay_ms=0)
    _send(driver, "r1", "JoinGroup", 3, JOIN)  # v3: a member at once; the group waits for the delay
    if generation == 2:
        driver.advance(1)  # the (zero) initial delay: the join phase completes (generation 1)
    member_id = driver.coordinator.groups()["g"].leader_id or next(iter(driver.coordinator.groups()["g"].members))
    _send(driver, "r2", "LeaveGroup", 0, {"group_id": "g", "member_id": member_id})
    driver.advance(1)  # generation 1: the delay ends with no member left
    deleted = driver.coordinator.groups()["g"]
    assert (deleted.state.value, deleted.generation_id) == ("Empty", generation)  # the leave completed a phase
    _send(driver, "r3", "OffsetCommit", 8, {"group_id": "g", "generation_id_or_member_epoch": -1, "topics": [
        {"name": "t1", "partitions": [{"partition_index": 0, "committed_offset": 7}]}]})
    driver.hold_writes()
    _send(driver, "r4", "DeleteGroups", 2, {"groups_names": ["g"]})
    _send(driver, "r5", "JoinGroup", 3, JOIN)  # a new g, PreparingRebalance at generation 0
    assert driver.coordinator.groups()["g"].generation_id == 0
    driver.release_writes(Error.NOT_LEADER_OR_FOLLOWER)
    group = driver.coordinator.groups()["g"]
    assert group == deleted
    assert driver.coordinator.offsets("g") != {}
    assert memory_vs_log(driver, groups=False) == []
    assert not obs.violations, obs.violations
