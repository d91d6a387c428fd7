"""Responses compared by rule: the core's answer (translated to the request's version) against
the broker's. Ids the broker made up are bound to the core's on first sight (``Ids``); fields
that carry no protocol meaning (throttle time, error text, the client host a broker sees) and
list orders the protocol leaves open are not compared."""

from __future__ import annotations

from typing import Any

from groupcoord.adapters.protocol.translate import response_fields
from groupcoord.adapters.verify.findings import error_text, mismatches
from groupcoord.adapters.verify.observed import to_json

_IGNORED = frozenset({"throttle_time_ms", "error_message", "client_host", "authorized_operations"})


class Ids:
    """A bijection between the broker's member ids and the core's, grown as they are seen, and
    how far the core's generations run ahead of the broker's (``shift``: 0 until an answer taken
    as given shows another, as a first generation 0 does; the search goes on from the broker's
    numbering rather than finding every later request of that generation wrong)."""

    __slots__ = ("to_core", "to_obs", "shift")

    def __init__(self, to_core: dict | None = None, to_obs: dict | None = None, shift: int = 0) -> None:
        self.to_core = dict(to_core or {})
        self.to_obs = dict(to_obs or {})
        self.shift = shift

    def copy(self) -> "Ids":
        return Ids(self.to_core, self.to_obs, self.shift)

    def core_generation(self, generation: Any) -> Any:
        return generation + self.shift if isinstance(generation, int) and generation >= 0 else generation

    def obs_generation(self, generation: Any) -> Any:
        if isinstance(generation, int) and generation - self.shift >= 0:
            return generation - self.shift
        return generation

    def bind(self, obs_id: str, core_id: str) -> bool:
        """Bind a pair seen together; False when either is bound to another."""
        if not obs_id or not core_id:
            return obs_id == core_id
        known_core, known_obs = self.to_core.get(obs_id), self.to_obs.get(core_id)
        if known_core is None and known_obs is None:
            self.to_core[obs_id], self.to_obs[core_id] = core_id, obs_id
            return True
        return known_core == core_id and known_obs == obs_id

    def core(self, obs_id: str) -> str:
        return self.to_core.get(obs_id, obs_id)

    def obs(self, core_id: str) -> str:
        # an unbound id is one a request named (the core made up none the broker did not show)
        return self.to_obs.get(core_id, core_id)

    def key(self) -> tuple:
        return self.shift, tuple(sorted(self.to_core.items()))


def core_fields(api: str, version: int, response) -> dict:
    """The core's response as the request's version carries it, as the trace holds fields
    (made once per answer: the bindings and the view below all read it)."""
    return to_json(response_fields(api, version, response))


def core_view(api: str, core: dict, ids: Ids) -> dict:
    """The core's response (``core_fields``) as the broker's would read, in the broker's ids
    and generations."""
    out = _normal(api, core, ids.obs)
    if "generation_id" in out:
        out["generation_id"] = ids.obs_generation(out["generation_id"])
    return out


def adopt_generation(api: str, core: dict, observed: dict | None, ids: Ids) -> None:
    """An answer taken as given that opens a generation numbered otherwise than the core's sets
    the shift between the two numberings."""
    if api != "JoinGroup" or not observed or observed.get("error_code") or core.get("error_code"):
        return
    theirs, mine = observed.get("generation_id"), core.get("generation_id")
    if isinstance(theirs, int) and isinstance(mine, int) and theirs >= 0 and mine >= 0:
        ids.shift = mine - theirs


def observed_view(api: str, response: dict) -> dict:
    return _normal(api, response, lambda m: m)


def bind_own_id(api: str, core: dict, observed: dict | None, ids: Ids) -> bool:
    """A JoinGroup answer names the joining member, as a consumer group's heartbeat answer does
    (v0: the id the broker chose): bind its id (False: bound otherwise)."""
    if api not in ("JoinGroup", "ConsumerGroupHeartbeat") or observed is None:
        return True
    core_id = core.get("member_id") or ""
    obs_id = observed.get("member_id") or ""
    if not core_id or not obs_id:
        return True  # an error answer names no new member; compared with the rest
    return ids.bind(obs_id, core_id)


def bind_listed(api: str, core: dict, observed: dict | None, ids: Ids) -> None:
    """Member lists (a leader's JoinGroup answer, DescribeGroups) show ids a client may use
    without its own JoinGroup answer in the trace: unbound ones are paired by what else the
    entry shows (client, instance, metadata) when that is unique, else by place."""
    if observed is None or api not in ("JoinGroup", "DescribeGroups", "ConsumerGroupDescribe"):
        return
    if api == "JoinGroup":
        mine, theirs = core.get("members", ()), observed.get("members", ())
    elif api == "ConsumerGroupDescribe":
        mine = [m for g in core.get("groups", ()) for m in g.get("members") or ()]
        theirs = [m for g in observed.get("groups", ()) for m in g.get("members") or ()]
    else:
        mine = [m for g in core.get("groups", ()) for m in g.get("members", ())]
        theirs = [m for g in observed.get("groups", ()) for m in g.get("members", ())]
    mine = [m for m in mine if m.get("member_id") and m["member_id"] not in ids.to_obs]
    theirs = [m for m in theirs if m.get("member_id") and m["member_id"] not in ids.to_core]

    def sig(m: dict) -> tuple:
        return tuple(str(m.get(k)) for k in ("client_id", "group_instance_id", "metadata", "member_metadata",
                                             "instance_id", "subscribed_topic_names", "subscribed_topic_regex"))

    for m in list(mine):
        same = [t for t in theirs if sig(t) == sig(m)]
        if len(same) == 1 and sum(1 for x in mine if sig(x) == sig(m)) == 1:
            ids.bind(same[0]["member_id"], m["member_id"])
            mine.remove(m)
            theirs.remove(same[0])
    for m, t in zip(mine, theirs):
        ids.bind(t["member_id"], m["member_id"])


def _normal(api: str, body: dict, to_obs) -> dict:
    out = {k: v for k, v in body.items() if k not in _IGNORED}
    if api == "JoinGroup" and out.get("error_code") and out.get("protocol_name") == "":
        # an error answer's protocol name: Kafka sends "" (the field's default) on most paths and
        # null where the coordinator sets it (a failed member validation); it means nothing there
        out["protocol_name"] = None
    if api == "JoinGroup":
        out["member_id"] = to_obs(out.get("member_id", ""))
        out["leader"] = to_obs(out.get("leader", ""))
        out["members"] = sorted((_member(m, to_obs) for m in out.get("members", ())), key=_order)
    elif api == "LeaveGroup" and "members" in out:
        out["members"] = [_member(m, to_obs) for m in out["members"]]
    elif api == "DescribeGroups":
        out["groups"] = [{**{k: v for k, v in g.items() if k not in _IGNORED},
                          "members": sorted((_member(m, to_obs) for m in g.get("members", ())), key=_order)}
                         for g in out.get("groups", ())]
    elif api == "ConsumerGroupHeartbeat":
        if out.get("member_id") is not None:
            out["member_id"] = to_obs(out["member_id"])
        if out.get("assignment") is not None:
            out["assignment"] = _assignment(out["assignment"])
    elif api == "ConsumerGroupDescribe":
        out["groups"] = [{**{k: v for k, v in g.items() if k not in _IGNORED},
                          "members": sorted((_consumer_member(m, to_obs) for m in g.get("members") or ()),
                                            key=_order)}
                         for g in out.get("groups", ())]
    elif api == "OffsetFetch":
        if "topics" in out:
            out["topics"] = _sorted_topics(out["topics"])
        if "groups" in out:
            out["groups"] = [{**g, "topics": _sorted_topics(g.get("topics", ()))} for g in out["groups"]]
    return out


def _member(m: dict, to_obs) -> dict:
    return {**{k: v for k, v in m.items() if k not in _IGNORED}, "member_id": to_obs(m.get("member_id", ""))}


def _assignment(a: dict) -> dict:
    """A KIP-848 assignment with its topics and partitions in order (the protocol leaves it open)."""
    topics = sorted(({**t, "partitions": sorted(t.get("partitions") or ())} for t in a.get("topic_partitions") or ()),
                    key=lambda t: str(t.get("topic_id")))
    return {**a, "topic_partitions": topics}


def _consumer_member(m: dict, to_obs) -> dict:
    out = _member(m, to_obs)
    for key in ("assignment", "target_assignment"):
        if isinstance(out.get(key), dict):
            out[key] = _assignment(out[key])
    if isinstance(out.get("subscribed_topic_names"), list):
        out["subscribed_topic_names"] = sorted(out["subscribed_topic_names"])
    return out


def _order(m: dict) -> tuple:
    return (str(m.get("member_id")), str(m.get("group_instance_id")))


def _sorted_topics(topics: Any) -> list | None:
    if topics is None:  # a broker's null list (where the protocol has none) stays null: it differs
        return None
    return sorted(({**t, "partitions": sorted(t.get("partitions", ()), key=lambda p: p.get("partition_index", 0))}
                   for t in topics), key=lambda t: str(t.get("name")))


def differences(expected: dict, got: dict) -> list[str]:
    """Where two views differ, leaf by leaf (``findings.mismatches``), as "field: spec X, broker
    Y" (error codes by name and number; the first few distinct ones)."""
    out: list[str] = []
    for path, a, b in mismatches(expected, got):
        leaf = path.rsplit(".", 1)[-1]
        text = (f"{path}: spec {error_text(a)}, broker {error_text(b)}" if leaf == "error_code"
                else f"{path}: spec {a!r}, broker {b!r}")
        if text not in out:
            out.append(text)
    return out[:5]
