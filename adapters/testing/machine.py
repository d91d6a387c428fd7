"""``CoordinatorStateMachine``: hypothesis drives consumers of one group against a system under
test (``systems``), and every answer is judged by the spec.

Its rules are what clients do: join (alone, or several at once on their own connections),
sync (a leader hands out the assignments its assignor computes), heartbeat, leave (one or a
batch), commit and fetch offsets, crash (forget everything) or pause past the session timeout
while the others heartbeat, replace a static member, and the admin calls (list, describe,
delete). Most requests carry what the member knows; some carry a stale or wrong generation,
an old (fenced) member id, an unknown one or none. After every step the pairs seen so far go
through ``groupcoord verify``'s search (``verify_group``): a divergence fails the step with the
verifier's diagnosis. Where the machine can see the coordinator's groups (the core, an
in-process server), the spec's invariants (``checks.invariants.check_group``) are checked too.

Each example starts a fresh system under test (a fresh group on a shared broker), so
hypothesis can shrink a failure to the shortest sequence that still shows it."""

from __future__ import annotations

import uuid
from typing import Callable

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from groupcoord.adapters.checks import invariants as inv
from groupcoord.adapters.verify import observed
from groupcoord.adapters.verify.findings import is_known, signature
from groupcoord.adapters.verify.run import describe_verdict, signature_of
from groupcoord.adapters.verify.search import CONFORMS, DIVERGES, Settings, Verdict, timing_only, verify_group
from groupcoord.adapters.verify.topics import seen as topics_seen
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.errors import Error
from groupcoord.testing import requests as rq
from groupcoord.testing import strategies as gs
from groupcoord.testing.systems import CoreSystem, Sent, ServerSystem, System

MEMBER_SLOTS = 3  # consumers per example
WHO = st.integers(0, MEMBER_SLOTS - 1)
SEVERAL = st.lists(WHO, min_size=2, max_size=MEMBER_SLOTS, unique=True)
SOME = st.lists(WHO, min_size=1, max_size=MEMBER_SLOTS, unique=True)
# The version asked for, counted down from the highest both sides speak (shrinks to it).
VERSION = st.integers(0, 9)
# What a request names: mostly what the member knows; else an id it had before (fenced when
# static), one no coordinator gave, or none.
IDENTITY = st.sampled_from(("own",) * 5 + ("old", "unknown", "none"))
GENERATION_SKEW = st.sampled_from((0,) * 4 + (-1, 1))
TIME_STEPS_MS = st.sampled_from((1, 100, 1000, 3000))


class Divergence(AssertionError):
    """A broker's answer no execution of the spec gives (or an invariant broken). ``sent``:
    every request of the example with its answer; ``verdict``: the verifier's, when it found it."""

    def __init__(self, message: str, sent: list[Sent], config: CoordinatorConfig, topics: dict,
                 verdict: Verdict | None = None) -> None:
        super().__init__(message)
        self.sent, self.config, self.topics, self.verdict = sent, config, topics, verdict


class Inconclusive(AssertionError):
    """The verifier could not decide (its budget spent, or the broker said its coordinator moved)."""

    def __init__(self, message: str, sent: list[Sent], verdict: Verdict) -> None:
        super().__init__(message)
        self.sent, self.verdict = sent, verdict


@attrs.define
class Consumer:
    """What one consumer knows of its membership."""

    member: gs.Member
    member_id: str = ""
    generation: int = -1
    protocol_name: str | None = None
    joined: dict | None = None  # its JoinGroup answer when it was made leader (the member list)
    old_ids: list = attrs.Factory(list)
    # its membership of the consumer group (KIP-848; the example's other group): member id,
    # epoch, the partitions its last answers gave it (by topic id), and how often it joined
    kip_id: str = ""
    kip_epoch: int = 0
    kip_owned: list = attrs.Factory(list)
    kip_joins: int = 0

    def forget_kip848(self) -> None:
        self.kip_id, self.kip_epoch, self.kip_owned = "", 0, []

    def forget(self) -> None:
        if self.member_id:
            self.old_ids.append(self.member_id)
        self.member_id, self.generation, self.protocol_name, self.joined = "", -1, None, None


def _system_named(name: str) -> Callable[[CoordinatorConfig, str, dict], System]:
    if name == "core":
        return lambda config, group_id, topics: CoreSystem(config)
    if name == "server":
        return lambda config, group_id, topics: ServerSystem(config, topics)
    raise ValueError(f"unknown system {name!r}: 'core', 'server', or a function (config, group_id, topics) -> System")


class CoordinatorStateMachine(RuleBasedStateMachine):
    """Subclass to choose the system under test and settings (class attributes), and to add
    rules and invariants (``self.send`` sends a request; ``self.sut.sent`` holds every pair)."""

    # "core" (the default), "server", or a function (config, group_id, topics) -> System
    system: str | Callable = "core"
    configs: st.SearchStrategy[CoordinatorConfig] = gs.coordinator_configs()
    topics: dict[str, int] = gs.DEFAULT_TOPICS
    group_prefix: str = "g-"
    static_members: bool | None = None  # None: each consumer static or dynamic, drawn
    verify_budget: int = 50_000
    # Signatures of divergences set aside (findings.py): an answer diverging only so is taken as
    # given (``verify_group(keep_going=True)``) and the example goes on; ``aside`` hears of each
    set_aside: frozenset = frozenset()
    # The APIs the system offers (its ApiVersions; None: every one the project speaks): a rule
    # whose API is not among them is left out (its precondition fails, the same in every replay)
    offered: frozenset | None = None

    def offers(self, api: str) -> bool:
        return self.offered is None or api in self.offered

    def __init__(self) -> None:
        super().__init__()
        self.sut: System | None = None
        self.consumers: list[Consumer] = []
        self._owner: dict[int, int] = {}  # request index -> consumer
        self._learned: set[int] = set()
        self._given: set[int] = set()  # lines whose answers diverged only as ``set_aside`` says
        self._given_timing: set[int] = set()  # ... in their timing alone: what they say still compared

    # ------------------------------------------------------------------ set-up

    @initialize(data=st.data())
    def start(self, data) -> None:
        self.config = data.draw(self.configs, label="config")
        drawn = data.draw(gs.group_ids(), label="group")
        system = type(self).system  # a function here is the class's, not a method
        make = _system_named(system) if isinstance(system, str) else system
        shared = not isinstance(system, str)  # a broker others may use too: a group of its own
        self.group_id = self.group_prefix + drawn + (f"-{uuid.uuid4().hex[:8]}" if shared else "")
        self.sut = make(self.config, self.group_id, dict(self.topics))
        # the consumer-protocol members' group (KIP-848), and the topics image it is assigned from
        self.kip_group_id = self.group_id + ".kip848"
        self.image = self.sut.topic_image(dict(self.topics)) if self.offers("ConsumerGroupHeartbeat") else None
        self.consumers = [Consumer(data.draw(gs.members(self.config, self.topics, static=self.static_members,
                                                        index=n + 1), label=f"consumer {n}"))
                          for n in range(MEMBER_SLOTS)]

    def teardown(self) -> None:
        if self.sut is not None:
            self.sut.close()

    # ------------------------------------------------------------------ helpers

    def version(self, api: str, pick: int) -> int:
        lo, hi = self.sut.versions(api)
        return hi - pick % (hi - lo + 1)

    def send(self, api: str, pick: int, build: Callable[[int], dict], who: int | None = None,
             wait: bool = True) -> Sent:
        """Send ``build(version)`` (version ``pick`` counted down from the highest)."""
        v = self.version(api, pick)
        client = self.consumers[who].member.client_id if who is not None else "admin"
        sent = self.sut.send(api, v, build(v), client, wait=wait)
        if who is not None:
            self._owner[sent.index] = who
        return sent

    def identity(self, who: int, how: str) -> str:
        c = self.consumers[who]
        if how == "old" and c.old_ids:
            return c.old_ids[-1]
        if how == "unknown":
            return f"{c.member.client_id}-unknown"
        if how == "none":
            return ""
        return c.member_id

    def settle(self) -> None:
        """Every request handled, and what the consumers learn from the answers."""
        self.sut.settle()
        for sent in self.sut.sent:
            if sent.response is None or sent.index in self._learned:
                continue
            self._learned.add(sent.index)
            if sent.index in self._owner:
                self._learn(self.consumers[self._owner[sent.index]], sent)

    def _learn(self, c: Consumer, sent: Sent) -> None:
        r, code = sent.response, sent.response.get("error_code", 0)
        if sent.api == "JoinGroup":
            if code == 0:
                c.member_id, c.generation, c.protocol_name = r["member_id"], r["generation_id"], r.get("protocol_name")
                c.joined = r if r.get("leader") == r["member_id"] else None
            elif code == Error.MEMBER_ID_REQUIRED:
                c.member_id = r["member_id"]
            elif code in (Error.UNKNOWN_MEMBER_ID, Error.FENCED_INSTANCE_ID):
                c.forget()
        elif sent.api in ("SyncGroup", "Heartbeat") and code in (Error.UNKNOWN_MEMBER_ID, Error.FENCED_INSTANCE_ID):
            c.forget()
        elif sent.api == "ConsumerGroupHeartbeat":
            self._learn_kip848(c, sent, r, code)
        elif sent.api == "LeaveGroup" and code == 0 and sent.version < 3:
            c.forget()
        elif sent.api == "LeaveGroup" and code == 0:
            for m in r.get("members", ()):
                if m.get("error_code") == 0 and m.get("member_id") == c.member_id:
                    c.forget()

    def _learn_kip848(self, c: Consumer, sent: Sent, r: dict, code: int) -> None:
        """What a consumer-protocol member learns from its heartbeat's answer (as librdkafka and
        the Java consumer do): its id and epoch; the partitions given (held from then on, and
        reported); fenced or unknown: it starts again with epoch 0; left: it is out."""
        if sent.request.get("member_epoch", 0) < 0:
            if code == 0 or code in (Error.UNKNOWN_MEMBER_ID, Error.FENCED_MEMBER_EPOCH):
                c.forget_kip848()
            return
        if code == 0:
            c.kip_id, c.kip_epoch = r.get("member_id") or c.kip_id, r["member_epoch"]
            if r.get("assignment") is not None:
                c.kip_owned = [{"topic_id": uuid.UUID(str(t["topic_id"])), "partitions": sorted(t["partitions"])}
                               for t in r["assignment"]["topic_partitions"]]
        elif code in (Error.UNKNOWN_MEMBER_ID, Error.FENCED_MEMBER_EPOCH):
            c.forget_kip848()

    # ------------------------------------------------------------------ client actions

    def _kip848(self, who: int, pick: int, build: Callable[[int, Consumer], dict]) -> None:
        c = self.consumers[who]
        self.send("ConsumerGroupHeartbeat", pick, lambda v: build(v, c), who)
        self.settle()

    @rule(who=WHO, pick=VERSION)
    @precondition(lambda self: self.image is not None)
    def consumer_join(self, who, pick) -> None:
        """A consumer-protocol member joins (epoch 0) with its subscription: from v1 under an id
        of its own, at v0 under the one the coordinator gives."""
        c = self.consumers[who]
        if c.kip_epoch != 0 or c.kip_id and c.kip_owned:
            c.forget_kip848()  # a member rejoining starts from nothing, as a client does
        c.kip_joins += 1

        def build(v: int, c: Consumer) -> dict:
            own = c.kip_id or (f"{c.member.client_id}-kip848-{c.kip_joins}" if v >= 1 else "")
            return rq.consumer_heartbeat(self.kip_group_id, v, own, 0, c.member.group_instance_id, [],
                                         topics=sorted(self.topics), rebalance_timeout_ms=c.member.rebalance_timeout_ms)
        self._kip848(who, pick, build)

    @rule(who=WHO, pick=VERSION, full=st.booleans(), stale=st.sampled_from((0,) * 4 + (-1, 1)))
    @precondition(lambda self: self.image is not None)
    def consumer_heartbeat(self, who, pick, full, stale) -> None:
        """A member's heartbeat with the partitions it holds (``full``: its subscription and
        timeout again, as after a lost answer), its epoch now and then off by one."""
        def build(v: int, c: Consumer) -> dict:
            return rq.consumer_heartbeat(self.kip_group_id, v, c.kip_id, max(c.kip_epoch + stale, 0),
                                         c.member.group_instance_id, list(c.kip_owned),
                                         topics=sorted(self.topics) if full else None,
                                         rebalance_timeout_ms=c.member.rebalance_timeout_ms if full else -1)
        self._kip848(who, pick, build)

    @rule(who=WHO, pick=VERSION, static=st.booleans())
    @precondition(lambda self: self.image is not None)
    def consumer_leave(self, who, pick, static) -> None:
        """A member leaves (epoch -1), or a static member leaves for now (-2, keeping its place)."""
        def build(v: int, c: Consumer) -> dict:
            epoch = -2 if static and c.member.group_instance_id is not None else -1
            return rq.consumer_heartbeat(self.kip_group_id, v, c.kip_id, epoch, c.member.group_instance_id, None)
        self._kip848(who, pick, build)

    @rule(pick=VERSION)
    @precondition(lambda self: self.image is not None and self.offers("ConsumerGroupDescribe"))
    def consumer_describe(self, pick) -> None:
        self.send("ConsumerGroupDescribe", pick, lambda v: rq.consumer_describe(self.kip_group_id, v))
        self.settle()

    def _join(self, who: int, pick: int, how: str, wait: bool = True) -> Sent:
        c = self.consumers[who]
        return self.send("JoinGroup", pick, lambda v: rq.join(self.group_id, v, c.member, self.identity(who, how)),
                         who, wait)

    @rule(who=WHO, pick=VERSION, how=IDENTITY)
    def join(self, who, pick, how) -> None:
        self._join(who, pick, how)
        self.settle()

    @rule(who=SEVERAL, pick=VERSION)
    def join_together(self, who, pick) -> None:
        """Several members join at once, each on its own connection."""
        for w in who:
            self._join(w, pick, "own", wait=False)
        self.settle()

    @rule(who=WHO, pick=VERSION, how=IDENTITY, skew=GENERATION_SKEW)
    @precondition(lambda self: self.offers("SyncGroup"))
    def sync(self, who, pick, how, skew) -> None:
        c = self.consumers[who]
        given = rq.assignments(c.joined, self.topics) if c.joined is not None and how == "own" else {}
        self.send("SyncGroup", pick, lambda v: rq.sync(
            self.group_id, v, self.identity(who, how), c.generation + skew, c.member.group_instance_id, given,
            c.member.protocol_type, c.protocol_name or (c.member.protocols[0][0] if c.member.protocols else None)),
            who)
        self.settle()

    def _heartbeat(self, who: int, pick: int, how: str, skew: int) -> None:
        c = self.consumers[who]
        self.send("Heartbeat", pick, lambda v: rq.heartbeat(
            self.group_id, v, self.identity(who, how), c.generation + skew, c.member.group_instance_id), who)

    @rule(who=WHO, pick=VERSION, how=IDENTITY, skew=GENERATION_SKEW)
    @precondition(lambda self: self.offers("Heartbeat"))
    def heartbeat(self, who, pick, how, skew) -> None:
        self._heartbeat(who, pick, how, skew)
        self.settle()

    @rule(who=SOME, pick=VERSION, how=IDENTITY)
    @precondition(lambda self: self.offers("LeaveGroup"))
    def leave(self, who, pick, how) -> None:
        """One member leaves (v0-2), or a batch of them (v3+, static ones by instance id too)."""
        self.send("LeaveGroup", pick, lambda v: rq.leave(self.group_id, v, [
            (self.identity(w, how), self.consumers[w].member.group_instance_id) for w in who]), who[0])
        self.settle()

    @rule(who=WHO, pick=VERSION, how=IDENTITY, skew=GENERATION_SKEW, offset=st.integers(0, 100),
          simple=st.booleans())
    @precondition(lambda self: self.offers("OffsetCommit"))
    def commit(self, who, pick, how, skew, offset, simple) -> None:
        """A member commits its generation's offsets (or, ``simple``, a commit outside the group
        protocol: no member id, generation -1)."""
        c = self.consumers[who]
        offsets = {(t, p): offset for t, n in self.topics.items() for p in range(n)}
        self.send("OffsetCommit", pick, lambda v: rq.commit(
            self.group_id, v, "" if simple else self.identity(who, how), -1 if simple else c.generation + skew,
            None if simple else c.member.group_instance_id, offsets), who)
        self.settle()

    @rule(pick=VERSION, every=st.booleans())
    @precondition(lambda self: self.offers("OffsetFetch"))
    def fetch(self, pick, every) -> None:
        self.send("OffsetFetch", pick, lambda v: rq.fetch(self.group_id, v, None if every else self.topics))
        self.settle()

    @rule(pick=VERSION)
    @precondition(lambda self: self.offers("DescribeGroups"))
    def describe(self, pick) -> None:
        self.send("DescribeGroups", pick, lambda v: rq.describe(self.group_id, v))
        self.settle()

    @rule(pick=VERSION)
    @precondition(lambda self: self.offers("ListGroups"))
    def list_groups(self, pick) -> None:
        """ListGroups is about every group: sent in every state, its answer not judged
        (``groupcoord verify`` judges requests about one group)."""
        self.send("ListGroups", pick, rq.list_groups)
        self.settle()

    @rule(pick=VERSION)
    @precondition(lambda self: self.offers("DeleteGroups"))
    def delete(self, pick) -> None:
        self.send("DeleteGroups", pick, lambda v: rq.delete(self.group_id, v))
        self.settle()

    @rule(ms=TIME_STEPS_MS)
    def time_passes(self, ms) -> None:
        self.sut.advance(ms)
        self.settle()

    @rule(who=WHO)
    def pause(self, who) -> None:
        """``who`` stops heartbeating past its session timeout; the others go on heartbeating
        (at a third of their own session timeouts)."""
        others = [w for w in range(MEMBER_SLOTS) if w != who and self.consumers[w].member_id]
        step_ms = min((self.consumers[w].member.session_timeout_ms for w in others), default=10**9) // 3
        left_ms = self.consumers[who].member.session_timeout_ms + self.sut.timer_tolerance_ms + 1
        while left_ms > 0:
            ms = max(1, min(step_ms, left_ms))
            self.sut.advance(ms)
            left_ms -= ms
            for w in others:
                if self.consumers[w].member_id:
                    self._heartbeat(w, 0, "own", 0)
            self.settle()

    @rule(who=WHO)
    def crash(self, who) -> None:
        """The consumer's process dies: a new one starts knowing nothing (a static member keeps
        its instance id: its next join replaces the old incarnation)."""
        self.consumers[who].forget()

    # No precondition on what the broker answered: rules enabled by its answers would make
    # hypothesis's draws depend on a broker's timing, which it cannot replay.
    @rule(who=WHO, pick=VERSION)
    def replace_static(self, who, pick) -> None:
        """A static member restarts and rejoins at once under its instance id, with no member
        id: the coordinator fences the old incarnation (its id is kept, for stale requests).
        A dynamic member doing so joins as a new member."""
        self.consumers[who].forget()
        self._join(who, pick, "own")
        self.settle()

    # ------------------------------------------------------------------ checks

    def observed_pairs(self, group_id: str | None = None) -> list:
        """The pairs about this example's group (or ``group_id``), as ``groupcoord verify`` reads them."""
        split = observed.split(s.obs() for s in self.sut.sent)
        return split.units.get(group_id or self.group_id, [])

    @invariant()
    def answers_are_allowed(self) -> None:
        """Every answer so far is one the spec gives to these requests in some execution."""
        if self.sut is None:
            return
        image = None if self.image is None else topics_seen(
            [{"send_us": 0, "all": True, "topics": [{"name": n, "topic_id": tid, "partitions": count, "error_code": 0}
                                                   for n, tid, count in self.image]}])
        settings = Settings(config=self.config, timer_tolerance_ms=self.sut.timer_tolerance_ms,
                            budget=self.verify_budget, from_birth=True, topics=image)
        for group_id in (self.group_id, self.kip_group_id):
            pairs = self.observed_pairs(group_id)
            if not pairs:
                continue
            verdict = judge(group_id, pairs, settings, self.set_aside, self._given, self._given_timing, self.aside)
            if verdict is not None:
                self._report(verdict)

    def _report(self, verdict: Verdict) -> None:
        text = "\n".join(describe_verdict(verdict))
        if verdict.verdict == DIVERGES:
            raise Divergence(text, list(self.sut.sent), self.config, dict(self.topics), verdict)
        raise Inconclusive(text, list(self.sut.sent), verdict)

    def aside(self, signature: str) -> None:
        """An answer diverged with a signature in ``set_aside`` (taken as given)."""

    @invariant()
    def group_invariants_hold(self) -> None:
        """The spec's invariants on the group, where the system shows its groups."""
        group = self.sut.group(self.group_id) if self.sut is not None else None
        if group is None:
            return
        broken = inv.check_group(group)
        if broken:
            raise Divergence("; ".join(broken), list(self.sut.sent), self.config, dict(self.topics))


def judge(group_id: str, pairs: list, settings: Settings, set_aside: frozenset, given: set[int],
          given_timing: set[int], aside: Callable[[str], None] = lambda sig: None) -> Verdict | None:
    """The verdict on ``pairs`` to report (None: nothing new). With ``set_aside`` (signatures of
    known findings), a finding with one of them, or one that follows from an earlier finding, is
    taken as given from then on (its line added to ``given``, or to ``given_timing`` for a
    finding of timing alone; ``aside`` hears of each) and only the others are reported."""
    while True:
        verdict = verify_group(group_id, pairs, settings, keep_going=bool(set_aside),
                               given=frozenset(given), given_timing=frozenset(given_timing))
        if verdict.verdict == CONFORMS:
            return None
        if verdict.verdict != DIVERGES or not set_aside:
            return verdict
        new, before = [], len(given) + len(given_timing)
        for found in (verdict, *verdict.more):
            sig = signature_of(found)
            if found.follows is not None:  # follows from a finding before it: given, not new
                given.add(found.line)
            elif sig is not None and is_known(sig, set_aside):
                # taken as given in the checks after this one too (a late answer's timing only)
                (given_timing if timing_only(found) else given).add(found.line)
                aside(sig)
            else:
                new.append(found)
        if not new:
            return None
        if len(given) + len(given_timing) > before:
            # The search met the new findings before known ones it had yet to take as given (a
            # late answer earlier in the trace, say): judged again with those given, a new
            # finding that only followed from them goes; one that stays is new.
            continue
        # A request the broker never answered, whose silence is a known finding, may be what the
        # new one stems from: the search can meet a later answer first, in the executions that
        # keep the spec silent too. Judged again with that silence given.
        silent = {}
        for o in pairs:
            if o.response is None and not o.unreadable and o.index not in given | given_timing:
                sig = signature(o.api, o.version, "answer", "given", "none (waits)")
                if is_known(sig, set_aside):
                    silent[o.index] = sig
        if not silent:
            return new[0]
        given_timing.update(silent)
        for sig in set(silent.values()):
            aside(sig)
