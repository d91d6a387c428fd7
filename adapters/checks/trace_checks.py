"""Trace-level checks: properties of what a coordinator was *seen* doing, across records.

adapters/checks/invariants.py defines what the coordinator must hold at every step; these checks add
the observer's view a trace replay needs, over one coordinator instance's outputs as
recorded (or as replayed, when the trace has no outputs):

* ``single_leader``: one leader per generation: every NONE JoinGroup answer of a generation
  names the same leader, and only that leader gets the member list.
* ``generation_not_backwards``: generations in JoinGroup answers and group records never go
  below one already seen from the same coordinator instance (a failover may legitimately
  reload an older generation from storage, so a new instance starts afresh; a deleted group,
  its tombstone written, starts again at 0).
* ``assignment_to_member``: a group record only assigns to members of the group.
* ``success_to_fenced_member``: no NONE answer to a Heartbeat/SyncGroup/OffsetCommit/
  JoinGroup from a member id the group does not hold (unknown, removed or fenced static).
* ``stale_generation_success``: no NONE answer to a Heartbeat/SyncGroup/OffsetCommit that
  names another generation than the group's.

and the adapter-side contract of the input stream (spec/contract.md rules 4-6):

* ``sequence_order``: a group's records are numbered 0, 1, 2, ... without gaps or repeats.
* ``time_order``: ``ts_ms`` never decreases along the sequence; an input's ``ts_ms`` is its
  event's ``now_ms``; an output carries the time of the input that produced it.
* ``timer_fired_when_armed``: a TimerFired is for the current arming of its key, at or after
  its deadline, with that arming's payload.
* ``write_outcome_order``: a partition's write outcomes come in the order of its writes.
* ``starts_with_load``: a replay unit starts with a LoadPartition (a fresh instance).

Pure functions and small classes; violations are ``"<name>: <detail>"`` strings like the
invariants'.
"""

from __future__ import annotations

from typing import Any, Callable

from groupcoord.adapters.checks.invariants import valid_member as _valid
from groupcoord.adapters.checks.invariants import violation  # one message format for every check
from groupcoord.core import events as ev
from groupcoord.core.classic.model import Group
from groupcoord.core.classic.states import EMPTY
from groupcoord.core.commands import GroupMetadataRecord, GroupTombstone, JoinGroupResponse, Respond, Write
from groupcoord.core.errors import Error

CHECKS: dict[str, str] = {}


def _name(name: str, statement: str) -> str:
    CHECKS[name] = statement
    return name


SINGLE_LEADER = _name("single_leader", "one leader per generation; only the leader gets the member list")
GENERATION_NOT_BACKWARDS = _name(
    "generation_not_backwards", "generations seen from one coordinator instance never decrease")
ASSIGNMENT_TO_MEMBER = _name("assignment_to_member", "a group record assigns only to members of the group")
SUCCESS_TO_FENCED_MEMBER = _name(
    "success_to_fenced_member", "no NONE answer to a member the group does not hold (unknown, removed, fenced)")
STALE_GENERATION_SUCCESS = _name(
    "stale_generation_success", "no NONE answer to a request naming another generation than the group's")
SEQUENCE_ORDER = _name("sequence_order", "a group's records are numbered 0, 1, 2, ... without gaps or repeats")
TIME_ORDER = _name(
    "time_order", "ts_ms never decreases; an input's ts_ms is its now_ms; outputs carry their input's time")
TIMER_FIRED_WHEN_ARMED = _name(
    "timer_fired_when_armed", "TimerFired only for the current arming of a key, at or after its deadline, "
    "with its payload")
WRITE_OUTCOME_ORDER = _name("write_outcome_order", "a partition's write outcomes come in the order of its writes")
STARTS_WITH_LOAD = _name("starts_with_load", "a replay unit starts with a LoadPartition")
OUTPUT_MATCHES_REPLAY = _name("output_matches_replay", "every recorded output equals the replayed core's")
RECORD_WELL_FORMED = _name("record_well_formed", "every record follows trace format v1")
CORE_RAISES_NOTHING = _name("core_raises_nothing", "Coordinator.handle never raises")

_MEMBER_REQUESTS = (ev.Heartbeat, ev.SyncGroup, ev.OffsetCommit)
_ANSWER_CHECKED = (ev.JoinGroup,) + _MEMBER_REQUESTS


def check_answer(request: Any, group: Group | None, response: Any) -> list[str]:
    """A NONE answer to a member request against the group as it was when the request came."""
    if group is None:
        return []
    code = getattr(response, "error_code", None)
    if isinstance(request, ev.OffsetCommit):
        topics = getattr(response, "topics", ())
        code = Error.NONE if any(p.error_code is Error.NONE for t in topics for p in t.partitions) else None
        if request.generation_id < 0 and group.state is EMPTY:
            return []
    if code is not Error.NONE:
        return []
    gid = group.group_id
    what = f"{type(request).__name__} {request.request_id!r}"
    if isinstance(request, ev.JoinGroup):
        if request.member_id and not (request.member_id in group.pending_members
                                      or _valid(group, request.member_id, request.group_instance_id)):
            return [violation(SUCCESS_TO_FENCED_MEMBER, gid, f"{what}: NONE for member {request.member_id!r} "
                                                      f"(instance {request.group_instance_id!r}); members "
                                                      f"{list(group.members)}")]
        return []
    if not isinstance(request, _MEMBER_REQUESTS):
        return []
    if not _valid(group, request.member_id, request.group_instance_id):
        return [violation(SUCCESS_TO_FENCED_MEMBER, gid, f"{what}: NONE for member {request.member_id!r} "
                                                  f"(instance {request.group_instance_id!r}); members "
                                                  f"{list(group.members)}, static {dict(group.static_members)}")]
    if request.generation_id != group.generation_id:
        return [violation(STALE_GENERATION_SUCCESS, gid, f"{what}: NONE for generation {request.generation_id}; "
                                                  f"group at generation {group.generation_id}")]
    return []


class InstanceChecks:
    """The cross-record checks over one coordinator instance's outputs."""

    __slots__ = ("leaders", "list_receivers", "max_generation", "instance_of")

    def __init__(self) -> None:
        self.instance_of: dict[str, str] = {}  # member id -> static instance id (a replaced static
        # member keeps its identity within a generation under a new member id)
        self.leaders: dict[tuple[str, int], str] = {}
        self.list_receivers: dict[tuple[str, int], str] = {}
        self.max_generation: dict[str, int] = {}

    def step(self, event: Any, commands: list, request_of: Callable[[Any], Any],
             group_at_request: Callable[[Any], Group | None],
             group_after: Callable[[str], Group | None]) -> list[str]:
        out: list[str] = []
        for command in commands:
            tc = type(command)
            if tc is Respond:
                response = command.response
                request = request_of(command.request_id)
                if request is None:
                    continue
                if type(response) is JoinGroupResponse and response.error_code is Error.NONE:
                    if request.group_instance_id is not None:
                        self.instance_of[response.member_id] = request.group_instance_id
                    # static members known to the group (e.g. loaded from storage after a failover)
                    for group in (group_at_request(command.request_id), group_after(request.group_id)):
                        if group is not None:
                            for instance, member in group.static_members.items():
                                self.instance_of[member] = instance
                    out += self._join(request.group_id, response)
                if isinstance(request, _ANSWER_CHECKED):
                    out += check_answer(request, group_at_request(command.request_id), response)
            elif tc is Write:
                for record in command.records:
                    if type(record) is GroupMetadataRecord:
                        out += self._record(record, group_after(record.group_id))
                    elif type(record) is GroupTombstone:
                        self._forget(record.group_id)  # deleted: a new group of that id starts at 0
        return out

    def _forget(self, gid: str) -> None:
        self.max_generation.pop(gid, None)
        for table in (self.leaders, self.list_receivers):
            for key in [k for k in table if k[0] == gid]:
                del table[key]

    def _generation(self, gid: str, generation: int, what: str) -> list[str]:
        seen = self.max_generation.get(gid, -1)
        if generation < seen:
            return [violation(GENERATION_NOT_BACKWARDS, gid, f"{what} at generation {generation} after generation {seen}")]
        self.max_generation[gid] = generation
        return []

    def _join(self, gid: str, response: JoinGroupResponse) -> list[str]:
        gen = response.generation_id
        out = self._generation(gid, gen, f"JoinGroup answer to {response.member_id!r}")
        for m in response.members:
            if m.group_instance_id is not None:
                self.instance_of[m.member_id] = m.group_instance_id
        who = self.instance_of.get
        leader = self.leaders.setdefault((gid, gen), response.leader)
        if who(leader, leader) != who(response.leader, response.leader):
            out.append(violation(SINGLE_LEADER, gid, f"generation {gen}: {response.member_id!r} told the leader is "
                                              f"{response.leader!r}, earlier answers said {leader!r}"))
        if response.members:
            if response.member_id != response.leader:
                out.append(violation(SINGLE_LEADER, gid, f"generation {gen}: member list sent to {response.member_id!r}, "
                                                  f"the leader is {response.leader!r}"))
            first = self.list_receivers.setdefault((gid, gen), response.member_id)
            if who(first, first) != who(response.member_id, response.member_id):
                out.append(violation(SINGLE_LEADER, gid, f"generation {gen}: both {first!r} and {response.member_id!r} "
                                                  f"got the member list"))
        return out

    def _record(self, record: GroupMetadataRecord, group: Group | None) -> list[str]:
        gid = record.group_id
        out = self._generation(gid, record.generation_id, "group record")
        if record.members:
            members = set(group.members) if group is not None else set()
            strangers = [m.member_id for m in record.members if m.member_id not in members]
            if strangers:
                out.append(violation(ASSIGNMENT_TO_MEMBER, gid, f"record of generation {record.generation_id} assigns to "
                                                         f"{strangers}, not members of the group ({sorted(members)})"))
        return out
