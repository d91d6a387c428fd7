"""The search for an execution of the core that explains one group's observed pairs.

A node holds the core's state after some inputs, the timers it armed, the time, which observed
requests it was fed and answered, and the id bijection so far. From a node the inputs the trace
allows are tried, depth first: the oldest write acknowledged (or, when the broker answered with
storage errors, failed), a timer due in the tolerance window fired, or the next request fed: any
request whose predecessors in real time are fed (a request answered before another arrived was
handled before it, as in a linearizability checker). Each answer the core gives is compared
with the broker's (compare.py) and must come no later than the broker's plus the tolerance;
a branch whose answer differs, or that leaves a broker's answer unexplained past its time, is
dropped. Nodes already explored (same state, same inputs used) are not explored again. The
group conforms when one branch explains every answer; it diverges when none does (the report
names the answer the branches got furthest to, what the core answered there, and the inputs
that led to it); it is inconclusive when the budget of nodes is spent first."""

from __future__ import annotations

import heapq
import json
from typing import Any, Iterator

import attrs

from groupcoord.adapters.protocol import schema
from groupcoord.adapters.protocol.translate import request_event
from groupcoord.adapters.verify import consumer as consumer_choice
from groupcoord.adapters.verify import topics as topics_image
from groupcoord.adapters.verify.compare import (
    Ids,
    adopt_generation,
    bind_listed,
    bind_own_id,
    core_fields,
    core_view,
    differences,
    observed_view,
)
from groupcoord.adapters.verify.findings import closest_mismatch, main_mismatch, mismatches
from groupcoord.adapters.verify.observed import Obs
from groupcoord.adapters.verify.open_values import settle
from groupcoord.core import events as ev
from groupcoord.core.commands import ExpirationTimer, Respond
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator, CoordinatorState, partition_for
from groupcoord.core.errors import Error
from groupcoord.core.timers import Timers

CONFORMS, DIVERGES, INCONCLUSIVE = "conforms", "diverges", "inconclusive"
# Broker answers a failed write explains, and a storage error that gives each (errors.py's
# translation): with one of them in a unit, writes may fail with that error.
_WRITE_ERROR_FOR = {int(Error.NOT_COORDINATOR): Error.NOT_LEADER_OR_FOLLOWER,
                    int(Error.COORDINATOR_NOT_AVAILABLE): Error.NOT_ENOUGH_REPLICAS,
                    int(Error.UNKNOWN_SERVER_ERROR): Error.RECORD_LIST_TOO_LARGE,
                    int(Error.COORDINATOR_LOAD_IN_PROGRESS): Error.NETWORK_EXCEPTION}
# Answers that say the coordinator moved or its log failed: what the trace cannot show then
# (an unload, a load elsewhere) makes a failed search inconclusive, not a divergence.
_MOVED = frozenset({int(Error.NOT_COORDINATOR), int(Error.COORDINATOR_NOT_AVAILABLE),
                    int(Error.COORDINATOR_LOAD_IN_PROGRESS)})


@attrs.frozen
class Settings:
    config: CoordinatorConfig = attrs.Factory(CoordinatorConfig)
    timer_tolerance_ms: int = 1000  # how late (or, by clock skew, early) a broker may fire a timer
    budget: int = 50_000  # nodes explored per group before saying "inconclusive"
    # the recording holds the group's whole life (a test that made it): a member id no answer
    # gave is one the client made up, not a sign the recording began late
    from_birth: bool = False
    # the recording's topics image (topics.TopicsSeen, from its Metadata answers): what
    # consumer groups are assigned partitions of; None: the recording shows none
    topics: Any = None


@attrs.frozen
class Verdict:
    group_id: str
    verdict: str
    detail: str
    pairs: int
    nodes: int
    line: int | None = None  # the observed pair no execution explains (its line in the trace)
    observed: dict | None = None
    allowed: tuple = ()  # what the core answered there, in any execution tried (JSON text)
    excerpt: tuple = ()  # the lines of the inputs leading there, in the order the core took them
    steps: tuple = ()  # every input of that execution, requests, timers and writes alike, in words
    # what the divergence is, for its signature (findings.py): (api, version, field, spec's value, broker's)
    mismatch: tuple = ()
    # keep_going: the divergences found past this one, each a Verdict (the broker's answer there
    # taken as given, the search going on from the spec's state)
    more: tuple = ()
    # keep_going: the line of the finding this one follows from (its request carries a member id
    # or generation only that finding's diverging answer gave), None for a finding of its own
    follows: int | None = None


@attrs.frozen
class _Node:
    state: CoordinatorState
    timers: Timers  # what the core armed, but the expiration (the search runs it itself)
    now_ms: int
    fed: frozenset
    answered: frozenset
    ids: Ids = attrs.field(eq=False)
    path: tuple  # inputs so far: position fed (int) or what else happened (str)
    settled: int = 0  # the newest generation whose leader and protocol are settled (open_values)
    expired_ms: int | None = None  # when the periodic expiration last ran in this execution
    images: int = 0  # the topics image's changes made so far (topics.TopicsSeen.changes)


class _Failure(Exception):
    def __init__(self, pos: int, why: str, core: dict | None = None, field: str = "answer", spec=None,
                 broker=None) -> None:
        super().__init__(why)
        self.pos, self.why, self.core = pos, why, core
        self.field, self.spec, self.broker = field, spec, broker
        self.undecided: str | None = None  # why this failure decides nothing (an answer not read)
        self.content = False  # the answer came and says something else than the spec's


class _Budget(Exception):
    pass


# keep_going: divergences reported per group at most (each one more search)
MAX_FINDINGS_PER_GROUP = 20


# what a divergence of timing alone says, spec's side then broker's (``mismatch``'s last two)
_TIMING = {("given", "none (waits)"), ("none (waits)", "given"), ("later", "sooner"), ("sooner", "later")}


def timing_only(v: Verdict) -> bool:
    """The divergence is when the answer came, not what it said."""
    return len(v.mismatch) == 5 and v.mismatch[2] == "answer" and tuple(v.mismatch[3:]) in _TIMING


def verify_group(group_id: str, unit: list[Obs], settings: Settings, keep_going: bool = False,
                 given: frozenset = frozenset(), given_timing: frozenset = frozenset()) -> Verdict:
    """The group's verdict. ``given``: trace lines whose answers are taken as given (not
    compared, owed at no time); ``given_timing``: lines whose answers' timing is (owed at no
    time, but what they say compared whenever the spec answers). With ``keep_going``, a
    divergence's answer is then taken as given too (its timing only, for a divergence of timing)
    and the search runs again from the start, until it conforms, is undecided or diverges at an
    answer already taken: the verdict is the first divergence, the later ones in ``more``."""
    positions = {o.index: p for p, o in enumerate(unit)}
    waived = {positions[line] for line in given if line in positions}
    late = {positions[line] for line in given_timing if line in positions} - waived
    verdict = _Search(group_id, unit, settings, frozenset(waived), frozenset(late)).run()
    if not keep_going or verdict.verdict != DIVERGES or verdict.line is None:
        return verdict
    more: list[Verdict] = []
    found = verdict
    while True:
        p = positions[found.line]
        (late if timing_only(found) and p not in late else waived).add(p)
        late -= waived
        if len(more) + 1 >= MAX_FINDINGS_PER_GROUP:
            break
        found = _Search(group_id, unit, settings, frozenset(waived), frozenset(late)).run()
        if found.verdict != DIVERGES or found.line is None or positions[found.line] in waived:
            break
        more.append(found)
    return _consequences(attrs.evolve(verdict, more=tuple(more)), unit, waived)


def _consequences(verdict: Verdict, unit: list[Obs], waived: set[int]) -> Verdict:
    """Each finding past the first that only follows from an earlier one marked so (``follows``):
    its request carries a member id or generation that an earlier finding's diverging answer gave
    (where the spec's answer gave another, or none) and no conforming answer before it gave. The
    spec's state never took that value, so what it answers such a request says nothing new."""
    by_line = {o.index: o for o in unit}
    conforming: dict = {}  # (kind, value) -> when a conforming answer first gave it
    for p, o in enumerate(unit):
        if p not in waived and o.response is not None and o.send_us is not None:
            for value in _given(o.response):
                conforming[value] = min(conforming.get(value, o.send_us), o.send_us)
    found = sorted((verdict, *verdict.more), key=lambda f: by_line[f.line].recv_us)
    introduced: dict = {}  # (kind, value) -> the line of the finding it comes from
    marked: dict[int, int] = {}
    for f in found:
        request = by_line[f.line]
        carried = {c for c in _carried(request.request) & set(introduced)
                   if conforming.get(c, request.recv_us + 1) > request.recv_us}
        root = min((introduced[c] for c in carried), default=None)
        if root is not None:
            marked[f.line] = root
        if timing_only(f):  # what it answered was not found wrong: it hands out nothing new
            continue
        spec = _allowed_first(f)
        adopted = request.api == "JoinGroup" and _opened(spec) and _opened(f.observed)  # adopt_generation's shift
        for value in _given(f.observed or {}):
            if adopted and value[0] == "generation":
                continue  # the search went on in the broker's numbering: requests naming it are judged
            if spec is None or value not in _given(spec):
                introduced.setdefault(value, root if root is not None else f.line)
    if not marked:
        return verdict
    more = tuple(attrs.evolve(f, follows=marked.get(f.line)) for f in verdict.more)
    return attrs.evolve(verdict, more=more, follows=marked.get(verdict.line))


def _opened(answer: dict | None) -> bool:
    """A JoinGroup answer that opens a generation."""
    return bool(answer) and not answer.get("error_code") and isinstance(answer.get("generation_id"), int) \
        and answer["generation_id"] >= 0


def _given(answer: dict) -> set:
    """The member ids and generation an answer hands out (a JoinGroup's: its member id, leader,
    members; any answer's generation)."""
    out = set()
    if isinstance(answer.get("generation_id"), int) and answer["generation_id"] >= 0:
        out.add(("generation", answer["generation_id"]))
    for key in ("member_id", "leader"):
        if isinstance(answer.get(key), str) and answer[key]:
            out.add(("member", answer[key]))
    for m in answer.get("members") or ():
        if isinstance(m, dict) and isinstance(m.get("member_id"), str) and m["member_id"]:
            out.add(("member", m["member_id"]))
    return out


def _carried(request: dict) -> set:
    """The member ids and generation a request names."""
    out = set()
    for key in ("generation_id", "generation_id_or_member_epoch"):
        if isinstance(request.get(key), int) and request[key] >= 0:
            out.add(("generation", request[key]))
    if isinstance(request.get("member_id"), str) and request["member_id"]:
        out.add(("member", request["member_id"]))
    for m in request.get("members") or request.get("assignments") or ():
        if isinstance(m, dict) and isinstance(m.get("member_id"), str) and m["member_id"]:
            out.add(("member", m["member_id"]))
    return out


def _allowed_first(f: Verdict) -> dict | None:
    """The spec's answer there (its first), in the broker's ids."""
    if not f.allowed:
        return None
    try:
        answer = json.loads(f.allowed[0])
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


class _Search:
    def __init__(self, group_id: str, unit: list[Obs], settings: Settings, waived: frozenset = frozenset(),
                 late: frozenset = frozenset()) -> None:
        self.gid, self.unit, self.settings = group_id, unit, settings
        self.waived = waived  # positions whose answers are taken as given (keep_going)
        self.late = late  # positions whose answers' timing is taken as given, what they say compared
        self.tol = settings.timer_tolerance_ms
        self.expiration_interval_ms = max(settings.config.offsets_retention_check_interval_ms - self.tol, 1)
        self.partition = partition_for(group_id, settings.config.offsets_topic_num_partitions)
        self.nodes = 0
        self.seen: set = set()
        self.best: tuple | None = None  # (progress, failure, path)
        self.allowed: dict[int, set] = {}
        self.recv_ms = [o.recv_us // 1000 for o in unit]
        self.send_ms = [None if o.send_us is None else o.send_us // 1000 for o in unit]
        # an answer that came but could not be decoded is owed too: the spec's answer, which
        # always decodes, diverges from it (``_undecodable``)
        self.owed = frozenset(p for p, o in enumerate(unit)
                              if (o.response is not None or o.unreadable) and p not in waived | late)
        self.t0_ms = min(self.recv_ms, default=0)  # times in reports: from the first request
        self.want = [None if o.response is None else observed_view(o.api, o.response) for o in unit]
        codes = set()
        for o in unit:
            _codes(o.response, codes)
        self.write_errors = tuple(_WRITE_ERROR_FOR[c] for c in sorted(codes) if c in _WRITE_ERROR_FOR)
        self.moved = bool(codes & _MOVED)
        # the broker was still up, an unanswered request waiting, until then: its timers due
        # before (and the tolerance) fired
        self.open_end_ms = max((o.open_until_us // 1000 for o in unit if o.response is None and o.open_until_us),
                               default=None)

    # ------------------------------------------------------------------ driving

    def run(self) -> Verdict:
        started = None if self.settings.from_birth else _mid_life(self.unit)
        blind = topics_image.unknown(self.settings.topics, self.unit)
        if blind is not None:
            return Verdict(self.gid, INCONCLUSIVE, f"consumer group: {blind}", len(self.unit), 0)
        if started is not None:
            return Verdict(self.gid, INCONCLUSIVE, f"the recording starts after the group formed: line "
                           f"{started.index} uses member id {started.request.get('member_id')!r}, which no "
                           f"JoinGroup answer in the recording gave", len(self.unit), 0, line=started.index)
        coordinator = Coordinator(self.settings.config)
        t0 = self.recv_ms[0] if self.unit else 0
        commands = coordinator.handle(ev.LoadPartition(now_ms=t0, partition=self.partition, records=()))
        if self.settings.topics is not None:  # the image at the recording's start
            coordinator.handle(ev.TopicsChanged(now_ms=t0, topics=self.settings.topics.image_after(0)))
        root = _Node(coordinator.snapshot(), Timers(), t0, frozenset(), frozenset(), Ids(), ())
        root = self._timers(root, commands)
        try:
            found = self._dfs(root)
        except _Budget:
            return Verdict(self.gid, INCONCLUSIVE, f"search budget of {self.settings.budget} states spent "
                           f"without an execution explaining every answer", len(self.unit), self.nodes)
        if found is not None:
            return Verdict(self.gid, CONFORMS, "every answer explained", len(self.unit), self.nodes,
                           steps=tuple(self._words(p) for p in found.path))
        return self._divergence()

    def _dfs(self, root: _Node) -> _Node | None:
        # Depth first, children made one at a time: the first choice usually explains the
        # trace, and the others are only run when it does not.
        stack: list[tuple[_Node | None, Iterator]] = [(None, iter([lambda: root]))]
        while stack:
            parent, choices = stack[-1]
            make = next(choices, None)
            if make is None:
                stack.pop()
                continue
            try:
                node = make()
            except _Failure as f:
                self._failed(parent, f)
                continue
            key = self._key(node)
            if key in self.seen:
                continue
            self.seen.add(key)
            self.nodes += 1
            if self.nodes > self.settings.budget:
                raise _Budget()
            if len(node.fed) == len(self.unit) and self.owed <= node.answered and not self._timer_owed(node):
                return node
            stack.append((node, iter(self._choices(node))))
        return None

    def _key(self, node: _Node) -> tuple:
        s = node.state
        return (node.fed, node.answered, node.now_ms, node.settled, node.expired_ms, node.images,
                node.timers.places(), node.ids.key(),
                repr(s.groups), repr(s.offsets), tuple(s.writes), repr(s.deferred), repr(s.committed_offsets))

    def _choices(self, node: _Node) -> list:
        """The inputs that may come next, each a function making the child node, first tried first."""
        out = []
        writes = sorted(w for w, pw in node.state.writes.items() if pw.partition == self.partition)
        unfed = [p for p in range(len(self.unit)) if p not in node.fed]
        next_recv = min((self.recv_ms[p] for p in unfed), default=None)
        change = self._change(node)
        # a change of the topics image the broker had made by the next request: made before it
        held = change is not None and next_recv is not None and change.by_ms + self.tol < next_recv
        if writes:  # acknowledged now, or as late as the answer riding on it was sent
            for at in self._write_times(node, next_recv):
                out.append(lambda at=at: self._step(node, ev.WriteCompleted(now_ms=at, write_id=writes[0])))
        due = node.timers.next()
        if due is not None and next_recv is not None and due[0] <= next_recv - self.tol:
            # fired before the next request arrived: on time, or late (a busy broker, or a test
            # clock that moves in steps): as late as that request, or when an owed answer went out
            for at in self._timer_times(node, due[0], next_recv, True):
                out.append(lambda at=at: self._fire(node, due, at))
        else:
            for p in self._ready(node, unfed) if not held else ():
                out.append(lambda p=p: self._feed(node, p))
            horizon = next_recv if next_recv is not None else self._end(node)
            if due is not None and horizon is not None and due[0] <= horizon + self.tol:
                for at in self._timer_times(node, due[0], horizon, False):
                    out.append(lambda at=at: self._fire(node, due, at))
            if self._expirable(node):  # the expiration's phase is the broker's: at once, or just before the next request
                for at in sorted({node.now_ms, max(node.now_ms, next_recv or node.now_ms)}):
                    # it runs every offsets.retention.check.interval.ms: not again sooner
                    if node.expired_ms is None or at >= node.expired_ms + self.expiration_interval_ms:
                        out.append(lambda at=at: self._step(node, ev.TimerFired(
                            now_ms=at, key=ExpirationTimer(self.partition), payload=None)))
        if change is not None and (next_recv is None or change.after_ms <= next_recv):
            # the image changed at a time the recording does not show: before the next request, or after
            out.append(lambda: self._new_image(node, change))
        failures = [lambda w=w, e=e: self._step(node, ev.WriteFailed(now_ms=node.now_ms, write_id=w, error=e))
                    for e in self.write_errors for w in ({writes[0], writes[-1]} if writes else ())]
        # a broker answer a failed write explains is owed: its failure tried first (else every
        # order of the inputs after a completed write is tried before it)
        if failures and any(self.unit[p].response.get("error_code") in _WRITE_ERROR_FOR
                            for p in self.owed & node.fed - node.answered):
            return failures + out
        return out + failures

    def _change(self, node: _Node):
        """The next change of the topics image not yet made in this execution, or None."""
        topics = self.settings.topics
        if topics is None or node.images >= len(topics.changes):
            return None
        return topics.changes[node.images]

    def _new_image(self, node: _Node, change) -> _Node:
        at = max(node.now_ms, change.after_ms)
        what = "gone" if change.value is None else f"id {change.value[0]}, {change.value[1]} partitions"
        child = attrs.evolve(node, images=node.images + 1,
                             path=node.path + (f"topics image: {change.name} {what} at {self._at(at)}",))
        return self._step(child, ev.TopicsChanged(now_ms=at, topics=self.settings.topics.image_after(node.images + 1)))

    def _late_times(self, node: _Node, start: int, limit: int | None) -> set[int]:
        """When an answer still owed went out, past ``start`` and the tolerance, up to ``limit``
        (None: no bound): when a timer or a write it rides on may have been late."""
        return {sent for p in node.fed - node.answered if (sent := self.send_ms[p]) is not None
                and start + self.tol < sent and (limit is None or sent <= limit)}

    def _timer_times(self, node: _Node, deadline: int, limit: int, up_to_limit: bool) -> list[int]:
        """When a timer may fire: at its deadline, or late, until ``limit`` (the next request):
        then, or when an answer still owed went out."""
        start = max(deadline, node.now_ms)
        extra = {limit} if up_to_limit and limit > start else set()
        return sorted({start} | extra | self._late_times(node, start, limit))

    def _write_times(self, node: _Node, next_recv: int | None) -> list[int]:
        """When the oldest write may be acknowledged: now, or when an answer still owed went out
        (answers ride on writes: a leader's SyncGroup, a commit), before the next request."""
        return sorted({node.now_ms} | self._late_times(node, node.now_ms, next_recv))

    def _ready(self, node: _Node, unfed: list[int]) -> list[int]:
        """Requests that may reach the core next: none answered before it arrived is still unfed
        (the two earliest answers still unfed decide it for every request)."""
        first = heapq.nsmallest(2, ((self.unit[q].send_us, q) for q in unfed if self.unit[q].send_us is not None))
        return [p for p in unfed
                if not any(q != p and sent < self.unit[p].recv_us for sent, q in first)]

    def _owed_until(self, node: _Node) -> int | None:
        late = [self.send_ms[p] for p in self.owed - node.answered if self.send_ms[p] is not None]
        return max(late) if late else None

    def _end(self, node: _Node) -> int | None:
        """How far the recording shows the broker after the last request: its last answer, or
        an unanswered request still waiting."""
        ends = [t for t in (self._owed_until(node), self.open_end_ms) if t is not None]
        return max(ends) if ends else None

    def _timer_owed(self, node: _Node) -> bool:
        """A timer due well before the recording's end that has not fired (an execution that
        stops short of it explains nothing past it)."""
        due = node.timers.next()
        return due is not None and self.open_end_ms is not None and due[0] + self.tol < self.open_end_ms

    def _expirable(self, node: _Node) -> bool:
        """The expiration can change something: an Empty group, or offsets to age."""
        group = node.state.groups.get(self.gid)
        return bool(node.state.offsets.get(self.gid)) or (group is not None and group.state.value == "Empty")

    # ------------------------------------------------------------------ one input

    def _feed(self, node: _Node, p: int) -> _Node:
        obs = self.unit[p]
        now = max(node.now_ms, self.recv_ms[p])
        body = _to_core(obs.api, obs.request, node.ids)
        try:
            # a consumer group's member id a v0 broker chose is the core's too: Kafka's assignors
            # order members by id, so the spec's target for those ids is the one to compare
            chosen = (obs.response or {}).get("member_id") if obs.api == "ConsumerGroupHeartbeat" else None
            event = request_event(obs.api, obs.version, body, request_id=p, now_ms=now,
                                  client_id=obs.client_id or "",
                                  new_member_uuid=chosen if chosen and chosen not in node.ids.to_obs
                                  else f"obs{obs.index}")
        except (schema.SchemaError, KeyError, TypeError) as e:
            raise _Failure(p, f"the request cannot be read as {obs.api} v{obs.version}: {e}", spec="unreadable",
                           broker="given") from None
        if p in self.waived and _refused_for_an_id(obs):
            # keep_going: the broker's state is what its refusal says, a member held pending under
            # the id it gave, as a join of v4 or later leaves it (Kafka asks only those for an id)
            event = attrs.evolve(event, version=4)
        child = attrs.evolve(node, fed=node.fed | {p}, path=node.path + (p,))
        return self._step(child, event)

    def _fire(self, node: _Node, timer: tuple, at_ms: int | None = None) -> _Node:
        deadline, _, key, payload = timer
        now = max(node.now_ms, deadline, at_ms or 0)
        child = attrs.evolve(node, timers=node.timers.fired(), path=node.path + (f"{type(key).__name__} at {self._at(now)}",))
        return self._step(child, ev.TimerFired(now_ms=now, key=key, payload=payload))

    def _step(self, node: _Node, event) -> _Node:
        if isinstance(event, (ev.WriteCompleted, ev.WriteFailed)):
            what = "completed" if isinstance(event, ev.WriteCompleted) else f"failed ({Error.parse(event.error).name})"
            node = attrs.evolve(node, path=node.path + (f"write {event.write_id} {what} at {self._at(event.now_ms)}",))
        elif isinstance(event, ev.TimerFired) and isinstance(event.key, ExpirationTimer):
            node = attrs.evolve(node, path=node.path + (f"expiration at {self._at(event.now_ms)}",),
                                expired_ms=event.now_ms)
        coordinator = Coordinator.restore(node.state, self.settings.config)
        commands = coordinator.handle(event)
        snapshot = coordinator.snapshot()
        if isinstance(event, ev.ConsumerGroupHeartbeat) and event.request_id not in self.waived:
            snapshot, commands, node = self._assignment_choice(node, snapshot, commands, event.request_id)
        ids = node.ids.copy()
        answered = set(node.answered)
        responds = [(c.request_id, core_fields(self.unit[c.request_id].api, self.unit[c.request_id].version,
                                                c.response)) for c in commands if isinstance(c, Respond)]
        for p, core in responds:  # own ids first: a leader's member list names members answered in the same step
            if p in self.waived:  # keep_going: the broker's numbering of generations from here on
                adopt_generation(self.unit[p].api, core, self.unit[p].response, ids)
            if not bind_own_id(self.unit[p].api, core, self.unit[p].response, ids) and p not in self.waived:
                raise _Failure(p, "the member id answered is another member's", spec="a new member's id",
                               broker="another member's id")
        # a new generation's leader and protocol: the broker's, where the spec leaves them open
        state, remade, settled = settle(snapshot, commands, self.gid, lambda p: self.unit[p].response,
                                        ids, node.settled)
        if remade:
            responds = [(p, core_fields(self.unit[p].api, self.unit[p].version, remade[p]) if p in remade else core)
                        for p, core in responds]
        for p, core in responds:
            bind_listed(self.unit[p].api, core, self.unit[p].response, ids)
        for p, core in responds:
            obs = self.unit[p]
            got = core_view(obs.api, core, ids)
            self.allowed.setdefault(p, set()).add(json.dumps(got, sort_keys=True))
            if p in self.waived:  # keep_going: the broker's answer taken as given
                answered.add(p)
                continue
            if obs.unreadable:
                raise self._undecodable(p, got)
            if obs.response is None:
                if p not in self.late and obs.open_until_us is not None and \
                        event.now_ms + self.tol < obs.open_until_us // 1000:
                    raise _Failure(p, f"the broker never answered it (still waiting at "
                                      f"{self._at(obs.open_until_us // 1000)}); the spec answers at "
                                      f"{self._at(event.now_ms)}", got, spec="given", broker="none (waits)")
                answered.add(p)
                continue
            want = self.want[p]
            if obs.api == "ConsumerGroupDescribe" and got != want and consumer_choice.target_open(state, self.gid):
                got, want = consumer_choice.without_targets(got), consumer_choice.without_targets(want)
            if got != want:  # what differs first: a wrong answer is wrong whenever it came
                field, spec, broker = main_mismatch(mismatches(got, want)) or ("answer", "", "")
                failure = _Failure(p, "; ".join(differences(got, want)), got, field, spec, broker)
                failure.content = True
                raise failure
            if p in self.late:  # keep_going: its timing taken as given, what it says compared above
                answered.add(p)
                continue
            if event.now_ms > self.send_ms[p] + self.tol:
                raise _Failure(p, f"the spec answers at {self._at(event.now_ms)}, after the broker did "
                                  f"({self._at(self.send_ms[p])})", got, spec="later", broker="sooner")
            throttle_ms = max(0, obs.response.get("throttle_time_ms") or 0)
            if event.now_ms + self.tol + throttle_ms < self.send_ms[p]:
                # an answer goes out when it is made: a broker holding it longer is not the spec
                raise _Failure(p, f"the spec answers at {self._at(event.now_ms)}, the broker only at "
                                  f"{self._at(self.send_ms[p])}", got, spec="sooner", broker="later")
            answered.add(p)
        child = attrs.evolve(node, state=state, now_ms=event.now_ms, ids=ids, answered=frozenset(answered),
                             settled=settled)
        child = self._timers(child, commands)
        for p in self.owed - child.answered:  # broker answers the spec can no longer give in time
            if self.send_ms[p] is not None and self.send_ms[p] + self.tol < child.now_ms:
                if self.unit[p].unreadable:
                    raise self._undecodable(p, None)
                raise _Failure(p, f"the broker answered at {self._at(self.send_ms[p])}; the spec has not by "
                                  f"{self._at(child.now_ms)}", spec="none (waits)", broker="given")
        return child

    def _assignment_choice(self, node: _Node, state: CoordinatorState, commands: list, p: int):
        """A consumer group's heartbeat whose answer differs from the broker's in its assignment
        alone: the broker's taken where the target is its choice (consumer.py), the state and the
        answer (in ``commands`` or waiting for its write) made so; a partition the broker gives
        that another member still owns is a divergence whatever the target."""
        obs = self.unit[p]
        if obs.response is None:
            return state, commands, node
        respond = next((c for c in commands if isinstance(c, Respond) and c.request_id == p), None)
        waiting = next((r for _q, _w, r in state.deferred if r.request_id == p), None)
        riding = next((w for w, pw in state.writes.items() if pw.request is not None and pw.request.request_id == p),
                      None)  # the answer rides on the heartbeat's write
        answer = next((c.response for c in (respond, waiting) if c is not None), None)
        if answer is None and riding is not None:
            answer = state.writes[riding].response
        if answer is None or answer.member_id is None:
            return state, commands, node
        try:
            taken = consumer_choice.adopt(node.state, state, self.gid, answer.member_id, answer, obs.response,
                                          dict(state.topics))
        except consumer_choice.OwnedElsewhere as e:
            got = core_view(obs.api, core_fields(obs.api, obs.version, answer), node.ids)
            self.allowed.setdefault(p, set()).add(json.dumps(got, sort_keys=True))
            raise _Failure(p, str(e).replace(f"member {e.owner}", f"member {node.ids.obs(e.owner)}"), got,
                           consumer_choice.OWNED_FIELD, consumer_choice.OWNED_SPEC,
                           consumer_choice.OWNED_BROKER) from None
        if taken is None:
            return state, commands, node
        state, chosen = taken
        commands = [Respond(p, chosen) if c is respond else c for c in commands]
        deferred = tuple((q, w, Respond(p, chosen) if r is waiting else r) for q, w, r in state.deferred)
        writes = dict(state.writes)
        if riding is not None:
            writes[riding] = attrs.evolve(writes[riding], response=chosen)
        state = attrs.evolve(state, deferred=deferred, writes=writes)
        note = f"line {obs.index}'s assignment: the broker's choice of target taken (no member named an assignor)"
        return state, commands, attrs.evolve(node, path=node.path + (note,))

    def _undecodable(self, p: int, got: dict | None) -> _Failure:
        """The broker's answer to ``p`` came but could not be decoded (the recorder passed it on
        as it was). Where the project's decoder reads the API and version, every answer the spec
        gives decodes: a divergence, whatever the spec answers. Else nothing is known of it."""
        obs = self.unit[p]
        raw = obs.undecodable or ""
        size = raw.split(" ", 1)[0] + " bytes" if raw else "size not recorded"
        lo, hi = schema.SUPPORTED_VERSIONS.get(obs.api, (0, -1))
        why = (f"the broker's answer could not be decoded as {obs.api} v{obs.version} "
               f"({raw or 'its bytes not recorded'}), though every answer the spec gives here decodes")
        f = _Failure(p, why, got, spec="decodable", broker=f"undecodable ({size})")
        if not lo <= obs.version <= hi:
            f.undecided = (f"the broker's answer to {obs.api} v{obs.version} (line {obs.index}) could not be "
                           f"decoded, and the project's decoder does not read that version ({lo} to {hi}): what "
                           f"it answered is unknown")
        return f

    def _timers(self, node: _Node, commands: list) -> _Node:
        timers = node.timers.applied(commands, ignore=ExpirationTimer)
        return node if timers is node.timers else attrs.evolve(node, timers=timers)

    # ------------------------------------------------------------------ the report

    def _failed(self, node: _Node, f: _Failure) -> None:
        # the execution reported is the one that explains the most answers in order: most answers
        # explained (not inputs taken), then the latest answer it fails on (an answer the broker
        # gave before the failing step and the branch never gave counts), then one failing at
        # that oldest owed answer itself over one that went on past it (owed answers held back
        # within the tolerance while later requests, naming what they answered, were taken)
        limit = self.send_ms[f.pos] if self.send_ms[f.pos] is not None else node.now_ms
        behind = [p for p in self.owed - node.answered
                  if p != f.pos and self.send_ms[p] is not None and self.send_ms[p] < limit]
        first = min([f.pos] + behind, key=lambda p: self.unit[p].recv_us)
        progress = (len(node.answered), self.unit[first].recv_us, f.pos == first, f.core is not None,
                    len(node.fed))
        held = self.unit[first]
        if first != f.pos and held.send_us is not None and held.send_us < self.unit[f.pos].recv_us:
            # the failing request came after the broker's answer to ``first``, which this
            # execution held back (within the tolerance): what it names may be what that answer
            # gave, so the answer held back is blamed, the failure told beside it
            f = _Failure(first, f"the broker answered at {self._at(self.send_ms[first])}; the spec had not when "
                                f"line {self.unit[f.pos].index} ({self.unit[f.pos].api}), which came after it, was "
                                f"received at {self._at(self.recv_ms[f.pos])}, and then diverged there: "
                                f"{f.why}", spec="none (waits)", broker="given")
        if self.best is None or progress > self.best[0]:
            self.best = (progress, f, node.path + ((f.pos,) if f.pos not in node.path else ()))

    def _words(self, step) -> str:
        if isinstance(step, str):
            return step
        o = self.unit[step]
        return f"line {o.index}: {o.api} received at {self._at(o.recv_us // 1000)}"

    def _at(self, ms: int) -> str:
        """A time in a report: from the unit's first request."""
        return f"+{ms - self.t0_ms} ms"

    def _divergence(self) -> Verdict:
        if self.best is None:
            return Verdict(self.gid, DIVERGES, "no execution of the spec explains the recording",
                           len(self.unit), self.nodes)
        _, f, path = self.best
        obs = self.unit[f.pos]
        if f.undecided is not None:
            return Verdict(self.gid, INCONCLUSIVE, f.undecided, len(self.unit), self.nodes, line=obs.index)
        detail = f"{obs.api} v{obs.version} (line {obs.index}): {f.why}"
        mismatch = (f.field, f.spec, f.broker)
        if f.content:  # named by an allowed answer with the broker's error code, whichever execution gave it
            closest = closest_mismatch((json.loads(a) for a in self.allowed.get(f.pos, ())), self.want[f.pos],
                                       f.core)
            if closest is not None and closest != mismatch:
                mismatch = closest
                detail += f"; the allowed answer nearest the broker's differs in {closest[0]}"
        if self.moved:
            detail += ("; the broker's answers say its coordinator moved or its log failed, which the trace "
                       "cannot show")
        return Verdict(self.gid, INCONCLUSIVE if self.moved else DIVERGES, detail, len(self.unit), self.nodes,
                       line=obs.index, observed=obs.response, allowed=tuple(sorted(self.allowed.get(f.pos, ()))),
                       excerpt=tuple(self.unit[p].index for p in path if isinstance(p, int)),
                       steps=tuple(self._words(p) for p in path),
                       mismatch=(obs.api, obs.version, *mismatch))


def _refused_for_an_id(obs: Obs) -> bool:
    """A new member's join of v3 or older that the broker answered MEMBER_ID_REQUIRED with an id."""
    answer = obs.response or {}
    return (obs.api == "JoinGroup" and obs.version < 4 and not obs.request.get("member_id")
            and not obs.request.get("group_instance_id")
            and answer.get("error_code") == Error.MEMBER_ID_REQUIRED and bool(answer.get("member_id")))


def _mid_life(unit: list[Obs]) -> Obs | None:
    """The first accepted request naming a member id no JoinGroup answer before it gave (nor a
    consumer group's heartbeat answer: a joining heartbeat, epoch 0, names its own from v1)."""
    issued: list[tuple[int, str]] = []
    for o in unit:
        if o.api in ("JoinGroup", "ConsumerGroupHeartbeat") and o.response and o.response.get("member_id") \
                and o.send_us is not None and (o.api == "JoinGroup" or o.response.get("error_code", 0) == 0):
            issued.append((o.send_us, o.response["member_id"]))
    for o in sorted(unit, key=lambda o: o.recv_us):
        mid = o.request.get("member_id") or ""
        if not mid or o.response is None or o.response.get("error_code", 0) != 0:
            continue
        if o.api == "ConsumerGroupHeartbeat" and o.request.get("member_epoch") == 0:
            continue
        if o.api == "OffsetCommit" and o.request.get("generation_id_or_member_epoch", -1) < 0:
            continue
        if not any(sent <= o.recv_us and m == mid for sent, m in issued):
            return o
    return None


def _to_core(api: str, body: dict, ids: Ids) -> dict:
    """The request with the broker's member ids and generations replaced by the core's."""
    out = dict(body)
    if "member_id" in out and isinstance(out["member_id"], str):
        out["member_id"] = ids.core(out["member_id"])
    for field in ("generation_id", "generation_id_or_member_epoch"):
        if field in out:
            out[field] = ids.core_generation(out[field])
    if api == "SyncGroup":
        out["assignments"] = [{**a, "member_id": ids.core(a["member_id"])} for a in body.get("assignments", ())]
    elif api == "LeaveGroup" and "members" in body:
        out["members"] = [{**m, "member_id": ids.core(m.get("member_id", ""))} for m in body["members"]]
    return out


def _codes(value: Any, into: set) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "error_code" and isinstance(v, int):
                into.add(v)
            else:
                _codes(v, into)
    elif isinstance(value, list):
        for v in value:
            _codes(v, into)
