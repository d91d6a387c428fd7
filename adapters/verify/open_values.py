"""Values the spec leaves open, matched by rule: which member leads a generation and which
protocol wins a tied vote. Kafka picks the leader among the members that joined (its first
pick is the member map's order, a HashMap's) and the protocol by a vote whose ties fall to a
HashMap's order; another broker may pick otherwise and still be right.

When the core's answers open a generation, the broker's answers of that generation (as far as
the trace shows them) say its choice. The choice is taken, by setting the core's state copy to
it and giving the generation's answers as the core makes them for it (the leader's answer lists
the members, the others' do not), when it is allowed: the leader is a member the generation's
JoinGroup answers went to, and the protocol is supported by every member and has the most
votes. The generation is then settled: every later answer follows the state, so a broker that
names another leader or protocol within the generation diverges."""

from __future__ import annotations

from typing import Callable

from groupcoord.adapters.verify.compare import Ids
from groupcoord.core.classic.draft import subscribed_topics
from groupcoord.core.classic.joining import member_list
from groupcoord.core.commands import JoinGroupResponse, Respond
from groupcoord.core.coordinator import CoordinatorState
from groupcoord.core.errors import Error
from groupcoord.core.frozen import evolve


def tied_protocols(group) -> set[str]:
    """The protocols Kafka's vote may pick: supported by every member, with the most votes."""
    size = len(group.members)
    candidates = {name for name, count in group.protocol_counts.items() if count == size}
    votes: dict[str, int] = {}
    for member in group.members.values():
        choice = member.vote(candidates)
        votes[choice] = votes.get(choice, 0) + 1
    most = max(votes.values(), default=0)
    return {name for name, n in votes.items() if n == most}


def settle(state: CoordinatorState, commands: list, group_id: str, observed: Callable[[object], dict | None],
           ids: Ids, settled: int) -> tuple[CoordinatorState, dict, int]:
    """(the state, {request id: the answer as the broker's choice makes it}, the generation
    settled) after a step whose ``commands`` may open a generation newer than ``settled``.
    ``observed(request_id)``: the broker's answer to that request, None when not seen."""
    group = state.groups.get(group_id)
    if group is None:  # deleted or expired: a group made again counts its generations afresh
        return state, {}, 0
    if not hasattr(group, "generation_id"):  # a consumer group (KIP-848): no leader, no protocol vote
        return state, {}, settled
    if group.generation_id <= settled:
        return state, {}, settled
    generation = group.generation_id
    waiting = [r for _p, _w, r in state.deferred]
    answers = [c for c in list(commands) + waiting if isinstance(c, Respond) and _opens(c.response, generation)]
    if not answers:
        return state, {}, settled
    seen = [o for o in map(observed, (c.request_id for c in answers))
            if o is not None and o.get("error_code") == 0 and ids.core_generation(o.get("generation_id")) == generation]
    leaders = {ids.core(o.get("leader", "")) for o in seen}
    protocols = {o.get("protocol_name") for o in seen}
    leader, protocol = group.leader_id, group.protocol_name
    if len(leaders) == 1 and (pick := leaders.pop()) in {c.response.member_id for c in answers}:
        leader = pick
    if len(protocols) == 1 and (pick := protocols.pop()) != protocol and pick in tied_protocols(group):
        protocol = pick
    if (leader, protocol) == (group.leader_id, group.protocol_name):
        return state, {}, generation
    group = evolve(group, leader_id=leader, protocol_name=protocol)
    group = evolve(group, subscribed_topics=subscribed_topics(group))
    members = member_list(group)
    remade = {c.request_id: evolve(c.response, leader=leader, protocol_name=protocol,
                                   members=members if c.response.member_id == leader else ())
              for c in answers}
    deferred = tuple((p, w, Respond(r.request_id, remade[r.request_id]) if r.request_id in remade else r)
                     for p, w, r in state.deferred)
    state = evolve(state, groups={**state.groups, group_id: group}, deferred=deferred)
    return state, remade, generation


def _opens(response, generation: int) -> bool:
    return isinstance(response, JoinGroupResponse) and response.error_code == Error.NONE \
        and response.generation_id == generation
