"""A request sequence the machine sent, written as a conformance scenario
(spec/conformance/FORMAT.md): the requests about the group in the order the broker got them,
the time between them, and after each step the answers the spec gives there (the core run by
the scenario runner as the file is written). Against a broker that answered otherwise the file
fails at that step; against the spec it passes. Member ids the broker made up become names
bound to what the coordinator answers (``{"bind": "m1"}``, then ``"$m1"``)."""

from __future__ import annotations

from typing import Iterable

from groupcoord.adapters.protocol.translate import response_fields
from groupcoord.adapters.scenarios.runner import Runner, hexed
from groupcoord.core.config import CoordinatorConfig
from groupcoord.testing.systems import Sent

# Settings a scenario may give (the format's: one offsets partition holds every group).
SCENARIO_SETTINGS = ("group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.initial.rebalance.delay.ms",
                     "group.max.size", "offsets.retention.minutes", "offsets.retention.check.interval.ms",
                     "offset.metadata.max.bytes")
_NOT_COMPARED = ("throttle_time_ms", "error_message", "client_host", "authorized_operations")


class _Names:
    """Member ids by name: the broker's (from the pairs) and the spec's (from the runner)."""

    def __init__(self) -> None:
        self.broker: dict[str, str] = {}  # broker's id -> name
        self.core: dict[str, str] = {}  # spec's id -> name (bound in the scenario)

    def request_id(self, member_id: str):
        name = self.broker.get(member_id)
        return f"${name}" if name is not None and name in self.core.values() else member_id

    def answer_id(self, core_id: str, broker_id: str | None, in_list: bool):
        """How the expectation writes a member id the spec answered: its name when bound, a new
        binding at first sight (outside lists: a list matches in any order), else anything."""
        if not core_id:
            return core_id
        name = self.core.get(core_id)
        if name is not None:
            if broker_id and broker_id not in self.broker:
                self.broker[broker_id] = name
            return f"${name}"
        if in_list:
            return {"any": True}
        name = self.broker.get(broker_id or "") or f"m{len(set(self.broker.values()) | set(self.core.values())) + 1}"
        self.core[core_id] = name
        if broker_id:
            self.broker[broker_id] = name
        return {"bind": name}


def scenario(sent: Iterable[Sent], group_id: str, config: CoordinatorConfig, topics: dict[str, int],
             name: str, source: str) -> dict:
    """The conformance scenario of the pairs about ``group_id`` in ``sent``."""
    pairs = sorted((s for s in sent if s.api != "ListGroups"), key=lambda s: s.recv_us)
    settings = {k: v for k, v in config.to_kafka().items() if k in SCENARIO_SETTINGS}
    runner = Runner(None)
    runner.start(settings, topics)
    names = _Names()
    steps: list[dict] = []
    answered: set[str] = set()
    by_name = {f"r{s.index}": s for s in pairs}
    last_ms = pairs[0].recv_us // 1000 if pairs else 0

    def run(step: dict) -> None:
        steps.append(step)
        runner.step(step)
        for label in [n for n in runner.sent if n not in answered and n in runner.driver.responses]:
            answered.add(label)
            expect = {"expect": label, "response": _expected(runner, label, by_name[label], names)}
            steps.append(expect)
            runner.step(expect)

    def owed(until_us: int | None) -> bool:
        """Whether the broker answered, by ``until_us``, a request the spec has not answered yet
        (then time is advanced even by 0 ms: timers due at this millisecond fire first)."""
        return any(p.send_us is not None and (until_us is None or p.send_us <= until_us)
                   and f"r{p.index}" in runner.sent and f"r{p.index}" not in answered for p in pairs)

    for s in pairs:
        at_ms = s.recv_us // 1000
        if at_ms > last_ms or owed(s.recv_us):
            run({"advance_ms": at_ms - last_ms})
            last_ms = at_ms
        run({"send": s.api, "as": f"r{s.index}", "version": s.version, "client_id": s.client_id,
             "request": _request(s, names)})
    ends = [s.send_us // 1000 for s in pairs if s.send_us is not None]
    if ends and (max(ends) > last_ms or owed(None)):
        run({"advance_ms": max(max(ends) - last_ms, 0)})
    return {"name": name, "source": source, "config": settings, "topics": dict(topics), "steps": steps}


def _request(s: Sent, names: _Names) -> dict:
    body = hexed(dict(s.request))
    if isinstance(body.get("member_id"), str):
        body["member_id"] = names.request_id(body["member_id"])
    for key in ("assignments", "members"):
        if isinstance(body.get(key), list):
            body[key] = [{**e, "member_id": names.request_id(e.get("member_id", ""))} for e in body[key]]
    return body


def _expected(runner: Runner, label: str, s: Sent, names: _Names) -> dict:
    """The spec's answer (as the runner shows it), member ids named; the broker's answer to
    the same request names the broker's ids."""
    api, version = runner.sent[label]
    core = hexed(response_fields(api, version, runner.driver.responses[label]))
    theirs = s.response or {}
    out = {k: v for k, v in core.items() if k not in _NOT_COMPARED}
    if api == "JoinGroup":
        mine = theirs.get("member_id") if theirs.get("error_code", 0) == core.get("error_code") else None
        # written first: the runner matches fields in order, and these bind the names used below
        own = {"member_id": names.answer_id(core.get("member_id", ""), mine, False)}
        leader = theirs.get("leader") if theirs.get("leader") == theirs.get("member_id") and mine else None
        own["leader"] = names.answer_id(core.get("leader", ""), leader, False)
        out = {**own, **{k: v for k, v in out.items() if k not in own}}
        out["members"] = [_member(m, names) for m in core.get("members", ())]
    elif api == "LeaveGroup" and "members" in out:
        out["members"] = [_member(m, names) for m in core["members"]]
    elif api == "DescribeGroups":
        out["groups"] = [{**{k: v for k, v in g.items() if k not in _NOT_COMPARED},
                          "members": [_member(m, names) for m in g.get("members", ())]} for g in core["groups"]]
    return out


def _member(m: dict, names: _Names) -> dict:
    return {**{k: v for k, v in m.items() if k not in _NOT_COMPARED},
            "member_id": names.answer_id(m.get("member_id", ""), None, True)}

