"""The invariants over what one event emits (the commands of one step): each request answered
at most once, no parked request lost, successful answers that tell the truth about the group,
writes from the right source, a completed join phase witnessed (spec/kafka-classic-semantics.md
§7). The invariants' names and the checks of one group, one transition and one answer are in
``invariants``; ``check_commands`` here uses them."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from groupcoord.adapters.checks.invariants import (
    ANSWERED_ONCE_PER_EVENT,
    ASSIGNMENT_WRITE_FROM_LEADER,
    COMPLETION_WITNESSED,
    DYNAMIC_MEMBERS_REJOINED,
    JOIN_OK_CURRENT_GENERATION,
    JOIN_OK_LEADER,
    MEMBER_ID_REQUIRED_IS_PENDING,
    METADATA_WRITE_SOURCE,
    PARKED_REQUEST_NOT_LOST,
    SYNC_OK_CURRENT_ASSIGNMENT,
    check_response,
    parked_requests,
    reverted_recreation,
    violation,
)
from groupcoord.core import events as ev
from groupcoord.core.classic.model import Group, Member
from groupcoord.core.classic.states import COMPLETING_REBALANCE, DEAD, EMPTY, STABLE
from groupcoord.core.commands import (
    GroupMetadataRecord,
    JoinGroupResponse,
    Respond,
    SyncGroupResponse,
    Write,
)
from groupcoord.core.errors import Error

# ------------------------------------------------------------------ check_commands


def check_commands(before_groups: Mapping[str, Group], after_groups: Mapping[str, Group], event: Any,
                   commands: list, *, requests: Mapping[Any, Any] | None = None,
                   request_groups: Mapping[Any, Group | None] | None = None,
                   is_loading: Callable[[str], bool] | None = None) -> list[str]:
    """Violations in the commands one event produced, given the groups before and after it.

    ``requests`` (request id -> request event) lets answers to earlier requests be checked;
    ``request_groups`` (request id -> the request's group when it arrived, None if absent) adds
    ``check_response`` for those answers too (answers to ``event`` itself always get it).
    """
    out: list[str] = []
    own_id = event.request_id if isinstance(event, ev.Request) else _NO_REQUEST
    responds = [c for c in commands if isinstance(c, Respond)]
    answered: set = set()
    for r in responds:
        if r.request_id in answered:
            out.append(f"{ANSWERED_ONCE_PER_EVENT}: request {r.request_id!r} answered twice by "
                       f"{type(event).__name__}")
        answered.add(r.request_id)

    for r in responds:
        request = event if r.request_id == own_id else (requests or {}).get(r.request_id)
        if request is None:
            continue
        gid = getattr(request, "group_id", None)
        if r.request_id == own_id:
            out += check_response(request, before_groups.get(gid), r.response,
                                  loading=bool(is_loading and gid is not None and is_loading(gid)))
        elif request_groups is not None and r.request_id in request_groups:
            out += check_response(request, request_groups[r.request_id], r.response)
        out += _check_answer(request, after_groups.get(gid), event, r.response, r.request_id == own_id)

    answers = {r.request_id: r.response for r in responds}
    for gid, before in before_groups.items():
        out += _check_parked(before, after_groups.get(gid), event, answers)
    out += _check_writes(before_groups, after_groups, event, commands)
    for gid, after in after_groups.items():
        before = before_groups.get(gid)
        if before is not None and after.generation_id == before.generation_id + 1 \
                and not reverted_recreation(before, after, event):
            out += _check_completion(before, after, responds, commands)
    return out


_NO_REQUEST = object()


def _check_answer(request: Any, group: Group | None, event: Any, response: Any, immediate: bool) -> list[str]:
    """Checks of an answer against the group right after the event that sent it."""
    out: list[str] = []
    gid = getattr(request, "group_id", None)
    def bad(name: str, detail: str) -> None:
        where = f"{type(request).__name__} {request.request_id!r} answered on {type(event).__name__}"
        out.append(violation(name, gid, f"{where}: {detail}"))

    if isinstance(response, JoinGroupResponse) and response.error_code is Error.NONE:
        if group is None or group.state in (EMPTY, DEAD):
            bad(JOIN_OK_CURRENT_GENERATION, f"NONE while the group is {group.state if group else 'absent'}")
            return out
        if (response.generation_id != group.generation_id or response.member_id not in group.members
                or not _names_group_protocol(response, group)
                or response.protocol_type != request.protocol_type):
            bad(JOIN_OK_CURRENT_GENERATION, f"NONE {response.member_id!r} gen {response.generation_id} "
                                            f"{response.protocol_type}/{response.protocol_name}; group gen "
                                            f"{group.generation_id} {group.protocol_type}/{group.protocol_name} "
                                            f"members {list(group.members)}")
        # A static replacement answered after its write names, below v9, the leader from before it.
        old_leader_ok = isinstance(event, ev.WriteCompleted) and request.version < 9
        if not old_leader_ok and response.leader != (group.leader_id or ""):
            bad(JOIN_OK_LEADER, f"leader {response.leader!r}, group leader {group.leader_id!r}")
        listed = [m.member_id for m in response.members]
        if listed and (response.member_id != group.leader_id or sorted(listed) != sorted(group.members)):
            bad(JOIN_OK_LEADER, f"member list {listed} sent to {response.member_id!r}; leader "
                                f"{group.leader_id!r}, members {list(group.members)}")
    elif isinstance(response, JoinGroupResponse) and response.error_code is Error.MEMBER_ID_REQUIRED:
        if immediate and (group is None or response.member_id not in group.pending_members):
            bad(MEMBER_ID_REQUIRED_IS_PENDING, f"{response.member_id!r} is not pending")
    elif isinstance(response, SyncGroupResponse) and response.error_code is Error.NONE:
        member = group.members.get(request.member_id) if group is not None else None
        if (member is None or group.state is not STABLE or request.generation_id != group.generation_id
                or response.assignment != member.assignment or not _names_group_protocol(response, group)):
            bad(SYNC_OK_CURRENT_ASSIGNMENT, f"NONE {response.assignment!r} for {request.member_id!r} gen "
                                            f"{request.generation_id}; group "
                                            f"{group.state if group else 'absent'} gen "
                                            f"{group.generation_id if group else None}, stored "
                                            f"{member.assignment if member else None!r}")
    return out


def _names_group_protocol(response: JoinGroupResponse | SyncGroupResponse, group: Group) -> bool:
    """A NONE JoinGroup or SyncGroup answer names the group's protocol type and name."""
    return response.protocol_type == group.protocol_type and response.protocol_name == group.protocol_name


def _check_parked(before: Group, after: Group | None, event: Any, answers: Mapping[Any, Any]) -> list[str]:
    out = []
    parked = parked_requests(before)
    if not parked:
        return out
    still = parked_requests(after)
    for rid, (mid, kind) in parked.items():
        if rid in answers or rid in still:
            continue
        member: Member | None = after.members.get(mid) if after is not None else None
        # Kafka replaces the future of a member that sends another JoinGroup/SyncGroup while
        # one is parked; the older request is never answered (§7 17). The newer one took its
        # place: it is parked by the same member now, or was answered NONE at once (e.g. it
        # completed the join phase).
        request_type = ev.JoinGroup if kind == "join" else ev.SyncGroup
        newer = getattr(event, "request_id", None)
        superseded = (isinstance(event, request_type) and event.group_id == before.group_id
                      and event.member_id == mid
                      and (still.get(newer) == (mid, kind)
                           or getattr(answers.get(newer), "error_code", None) is Error.NONE))
        # Kafka removes a leaving member without completing its parked SyncGroup.
        left = (kind == "sync" and member is None and isinstance(event, ev.LeaveGroup)
                and event.group_id == before.group_id)
        if not (superseded or left):
            out.append(violation(PARKED_REQUEST_NOT_LOST, before.group_id,
                          f"{kind} {rid!r} of member {mid!r} dropped unanswered by {type(event).__name__}; "
                          f"group now {after.state if after else 'absent'}"))
    return out


def _check_writes(before_groups, after_groups, event, commands) -> list[str]:
    out = []
    for command in commands:
        if not isinstance(command, Write):
            continue
        for record in command.records:
            if not isinstance(record, GroupMetadataRecord):
                continue
            gid = record.group_id
            before, after = before_groups.get(gid), after_groups.get(gid)
            if record.members and isinstance(event, ev.SyncGroup) and event.group_id == gid:
                out += _check_assignment_write(before, event, record)
            elif record.members:
                static_replacement = (
                    isinstance(event, ev.JoinGroup) and event.group_id == gid and event.member_id == ""
                    and before is not None and event.group_instance_id in before.static_members
                    and before.state is STABLE and after is not None and after.state is STABLE
                    and record.generation_id == after.generation_id
                    and sorted(m.member_id for m in record.members) == sorted(after.members))
                if not static_replacement:
                    out.append(violation(METADATA_WRITE_SOURCE, gid, f"record with members "
                                  f"{[m.member_id for m in record.members]} gen {record.generation_id} "
                                  f"written on {type(event).__name__}"))
            else:
                created = isinstance(event, ev.JoinGroup) and before is None and record.generation_id == 0
                emptied = (after is not None and after.state is EMPTY and before is not None
                           and record.generation_id == after.generation_id == before.generation_id + 1)
                if not (created or emptied):
                    out.append(violation(METADATA_WRITE_SOURCE, gid, f"empty record gen {record.generation_id} written "
                                  f"on {type(event).__name__}"))
    return out


def _check_assignment_write(before: Group | None, sync: ev.SyncGroup, record: GroupMetadataRecord) -> list[str]:
    gid = sync.group_id
    if before is None or before.state is not COMPLETING_REBALANCE or sync.member_id != before.leader_id \
            or not sync.generation_id == before.generation_id == record.generation_id:
        return [violation(ASSIGNMENT_WRITE_FROM_LEADER, gid, f"SyncGroup {sync.request_id!r} of {sync.member_id!r} gen "
                   f"{sync.generation_id} wrote an assignment; group "
                   f"{before.state if before else 'absent'} leader {before.leader_id if before else None!r} "
                   f"gen {before.generation_id if before else None}")]
    given = dict(sync.assignments)
    expected = {mid: given.get(mid, b"") for mid in before.members}
    written = {m.member_id: m.assignment for m in record.members}
    if written != expected:
        return [violation(ASSIGNMENT_WRITE_FROM_LEADER, gid, f"wrote {written}, leader sent {expected}")]
    return []


def _check_completion(before: Group, after: Group, responds: list, commands: list) -> list[str]:
    """The generation grew by one: the join phase completed in this event (§3.3)."""
    out, gen = [], after.generation_id
    if after.state is COMPLETING_REBALANCE:
        joined = {r.response.member_id: r.response for r in responds if isinstance(r.response, JoinGroupResponse)
                  and r.response.error_code is Error.NONE and r.response.generation_id == gen}
        leader = joined.get(after.leader_id)
        witnessed = leader is not None and bool(leader.members)
        missed = [mid for mid, m in after.members.items() if m.group_instance_id is None and mid not in joined]
        if missed:
            out.append(violation(DYNAMIC_MEMBERS_REJOINED, after.group_id, f"generation {gen} completed without "
                                                                     f"answering dynamic members {missed}"))
    elif after.state is EMPTY:
        witnessed = any(isinstance(rec, GroupMetadataRecord) and rec.group_id == after.group_id
                        and rec.generation_id == gen and not rec.members
                        for c in commands if isinstance(c, Write) for rec in c.records)
    else:
        return out  # reported by check_transition
    if not witnessed:
        out.append(violation(COMPLETION_WITNESSED, after.group_id, f"generation {before.generation_id} -> {gen} "
                                                            f"({after.state}) without the leader's join answer "
                                                            f"/ the Empty record"))
    return out
