"""``groupcoord probe``'s engine: ``CoordinatorStateMachine`` against a broker at an address.
A divergence is shrunk by hypothesis, told in words and written as a conformance scenario.
With ``keep_going`` it is set aside by its signature (adapters/verify/findings.py) and a fresh
search goes on for others, the examples counted over all searches; ``known`` signatures are
set aside from the start. The broker's ApiVersions decides which rules run: one whose API it
does not offer is left out (``ProbeRun.left_out``). A broker that goes away (its connections
closed and no new one taken) ends the run with what was found so far."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Callable

import attrs
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as use_seed
from hypothesis import strategies as st
from hypothesis.errors import Flaky
from hypothesis.stateful import get_state_machine_test, invariant

from groupcoord.adapters.scenarios.runner import hexed
from groupcoord.adapters.traces.progress import Progress
from groupcoord.adapters.verify.findings import at_any_version, is_known, named, pointers, shown
from groupcoord.adapters.verify.run import signature_of
from groupcoord.core.config import CoordinatorConfig
from groupcoord.testing.machine import CoordinatorStateMachine, Divergence, Inconclusive
from groupcoord.testing.reproduce import scenario
from groupcoord.testing.requests import ADMIN_APIS, CONSUMER_APIS, GROUP_APIS
from groupcoord.testing.systems import BrokerSystem, ConnectionClosed, Sent, Unreachable

PROBED_APIS = tuple(dict.fromkeys(GROUP_APIS + ADMIN_APIS + CONSUMER_APIS))


class BrokerWentAway(BaseException):
    """The broker closed its connections and takes no new one (it crashed or was stopped).
    Not an Exception: hypothesis must not shrink it (every replay would meet a closed port);
    it ends the search at once. ``sent``: the example's requests and answers so far."""

    def __init__(self, message: str, sent: list[Sent]) -> None:
        super().__init__(message)
        self.sent = sent


class ProbeFailed(Exception):
    """A divergence (``exit_code`` 1) or an undecided check (3): ``report`` says it in words,
    ``scenario`` reproduces it (None when there is nothing to write)."""

    def __init__(self, report: str, scenario: dict | None, exit_code: int, signature: str | None = None) -> None:
        super().__init__(report)
        self.report, self.scenario, self.exit_code, self.signature = report, scenario, exit_code, signature


@attrs.define
class ProbeRun:
    """What ``probe_all`` found: ``examples`` drawn (shrinking's replays not counted), each
    distinct divergence (a ProbeFailed, exit code 1, in the order found), the known signatures
    met and set aside, and what could not be decided (a ProbeFailed, exit code 3, or None)."""

    examples: int = 0
    findings: list = attrs.Factory(list)
    known_met: set = attrs.Factory(set)
    undecided: ProbeFailed | None = None
    left_out: list = attrs.Factory(list)  # the APIs the broker does not offer (their rules left out)
    # a finding met again at another version (set aside as the same divergence): its signatures
    also: dict = attrs.Factory(dict)
    gone: str | None = None  # why the run ended early: the broker went away


def probe(bootstrap: str, config: CoordinatorConfig, topics: dict[str, int], *, examples: int, steps: int,
          seed: int, timer_tolerance_ms: int = 1000,
          machine: type[CoordinatorStateMachine] = CoordinatorStateMachine) -> int:
    """Run ``examples`` examples of ``machine`` (a subclass adds or leaves out rules) against
    the broker; the number run, or ProbeFailed at the first divergence."""
    run = probe_all(bootstrap, config, topics, examples=examples, steps=steps, seed=seed,
                    timer_tolerance_ms=timer_tolerance_ms, machine=machine, keep_going=False)
    if run.findings:
        raise run.findings[0]
    if run.undecided is not None:
        raise run.undecided
    return run.examples


def probe_all(bootstrap: str, config: CoordinatorConfig, topics: dict[str, int], *, examples: int, steps: int,
              seed: int, timer_tolerance_ms: int = 1000,
              machine: type[CoordinatorStateMachine] = CoordinatorStateMachine, keep_going: bool = True,
              known: frozenset = frozenset(), progress: Progress | None = None,
              on_finding: Callable[[ProbeFailed, int], None] | None = None,
              offered: frozenset | None = None) -> ProbeRun:
    """Up to ``examples`` examples in all. Each search (seed ``seed``, then ``seed + 1``, ...)
    stops at a divergence whose signature is neither ``known`` nor found before, and shrinks
    it; with ``keep_going`` the next search sets it aside, until the examples are spent. An
    undecided check ends the run. ``on_finding(finding, n)`` hears of each as it is found.
    ``offered``: the APIs the broker offers (asked of it when None)."""
    run = ProbeRun()
    offered = offered_apis(bootstrap) if offered is None else offered
    run.left_out = [api for api in PROBED_APIS if api not in offered]
    round_ = 0
    while run.examples < examples:
        # a finding is set aside at every version: the same divergence at another version is
        # noted (``also``), not searched for and shrunk again
        set_aside = frozenset(known) | {at_any_version(f.signature) for f in run.findings if f.signature is not None}
        try:
            drawn, failed = _search(bootstrap, config, topics, examples=examples - run.examples, steps=steps,
                                    seed=seed + round_, timer_tolerance_ms=timer_tolerance_ms, machine=machine,
                                    set_aside=set_aside, known=frozenset(known), run=run, progress=progress,
                                    offered=offered)
        except BrokerWentAway as away:
            _went_away(run, away, progress, on_finding)
            break
        run.examples += drawn
        round_ += 1
        if failed is None:
            break
        if failed.exit_code != 1:
            run.undecided = failed
            break
        if failed.signature is not None and is_known(failed.signature, set_aside):
            break  # (cannot happen: a set-aside answer fails nothing) no endless loop all the same
        run.findings.append(failed)
        if on_finding is not None:
            if progress is not None:
                progress.done()
            on_finding(failed, len(run.findings))
        if not keep_going:
            break
    if progress is not None:
        progress.done()
    return run


def offered_apis(bootstrap: str) -> frozenset:
    """The probed APIs the broker offers (its ApiVersions answer)."""
    from groupcoord.adapters.client.kafka_client import Cluster, KafkaError
    from groupcoord.adapters.protocol import schema

    async def ask():
        cluster = Cluster(bootstrap, "groupcoord-probe", timeout=5.0)
        try:
            return dict((await cluster.any()).versions)
        finally:
            await cluster.close()
    try:
        versions = asyncio.run(ask())
    except (OSError, asyncio.TimeoutError, KafkaError) as e:
        raise Unreachable(f"cannot reach {bootstrap}: {e or type(e).__name__}") from None
    return frozenset(api for api in PROBED_APIS if schema.API_KEYS[api] in versions)


def _went_away(run: ProbeRun, away: BrokerWentAway, progress: Progress | None,
               on_finding: Callable[[ProbeFailed, int], None] | None) -> None:
    """The broker went away during an example: a divergence of the requests it left unanswered
    (Kafka answers each), reported once as seen (not shrunk: nothing is left to replay on)."""
    run.examples += 1
    run.gone = str(away)
    open_ = [s for s in away.sent if s.response is None]
    if not open_:
        return
    first = min(open_, key=lambda s: s.recv_us)
    sig = f"{first.api} v{first.version} answer: an answer vs none (the broker went away)"
    if any(f.signature == sig for f in run.findings):
        return
    text = _report(away.sent, None, f"  the broker went away: {away}\n  (seen once, not shrunk: the broker is "
                                    f"gone)", "DIVERGES", sig)
    run.findings.append(ProbeFailed(text, None, 1, sig))
    if on_finding is not None:
        if progress is not None:
            progress.done()
        on_finding(run.findings[-1], len(run.findings))


class _Watched(BrokerSystem):
    """A broker whose failures are told apart: a request or connection that fails while the
    broker's port takes no connection is ``BrokerWentAway``; else the failure as it was."""

    def __init__(self, bootstrap: str, group_id: str, config: CoordinatorConfig,
                 on_divergence: Callable[[Divergence], None] = lambda d: None, set_aside: frozenset = frozenset(),
                 aside: Callable[[str], None] = lambda sig: None, **kw) -> None:
        self._bootstrap = bootstrap
        self._on_divergence, self._set_aside, self._aside = on_divergence, set_aside, aside
        self.sent = []
        try:
            super().__init__(bootstrap, group_id, config, **kw)
        except Unreachable as e:
            self._if_gone(e)
            raise

    def _if_gone(self, e: BaseException) -> None:
        host, _, port = self._bootstrap.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
        except OSError as refused:
            raise BrokerWentAway(f"{e} (and {self._bootstrap} takes no connection: {refused.strerror or refused})",
                                 list(self.sent)) from None

    def send(self, *args, **kw) -> Sent:
        try:
            return super().send(*args, **kw)
        except Unreachable as e:
            self._if_gone(e)
            raise

    def settle(self) -> None:
        for _ in range(len(self.sent) + 1):  # each closed connection is met once
            try:
                super().settle()
                return
            except ConnectionClosed as e:
                self._if_gone(e)
                # the broker is up but closed the connection instead of answering: Kafka answers
                # every request of a version it offers (a divergence, shrunk as any other); set
                # aside, the request stays unanswered, which the checker does not judge
                s = e.sent
                sig = f"{s.api} v{s.version} answer: an answer vs the connection closed"
                if is_known(sig, self._set_aside):
                    self._aside(sig)
                    continue
                d = Divergence(f"{sig}\n  {e}", list(self.sent), self.config, {})
                self._on_divergence(d)
                raise d from None
            except Unreachable as e:
                self._if_gone(e)
                raise

    def close(self) -> None:
        try:
            super().close()
        except (OSError, asyncio.TimeoutError, Unreachable):
            pass  # closing the connections of a broker that went away


def _search(bootstrap: str, config: CoordinatorConfig, topics: dict[str, int], *, examples: int, steps: int,
            seed: int, timer_tolerance_ms: int, machine: type[CoordinatorStateMachine], set_aside: frozenset,
            known: frozenset, run: ProbeRun, progress: Progress | None,
            offered: frozenset | None = None) -> tuple[int, ProbeFailed | None]:
    """One hypothesis search: the examples drawn before its failure (or all), and the failure
    shrunk (None when every example passed)."""
    ran = [0]
    drawn: list[int] = []  # examples drawn when the first failure came (later runs are shrinking's)
    seen: list = []  # failures as they happened (a replay that differs loses hypothesis's own)

    def aside(signature: str) -> None:
        if is_known(signature, known):
            run.known_met.add(signature)
            return
        for f in run.findings:
            if f.signature != signature and is_known(signature, {at_any_version(f.signature)}):
                run.also.setdefault(f.signature, set()).add(signature)

    def failed(e: Exception) -> None:
        if not seen:
            drawn.append(ran[0] + 1)
        seen.append(e)

    class Probe(machine):  # type: ignore[valid-type,misc]
        def system(config, group_id, topics):
            return _Watched(bootstrap, group_id, config, timer_tolerance_ms=timer_tolerance_ms, on_divergence=failed,
                            set_aside=set_aside, aside=aside)
        configs = st.just(config)
        group_prefix = "probe-"

        def teardown(self) -> None:
            ran[0] += 1
            if progress is not None:
                done = run.examples + (drawn[0] if drawn else ran[0])
                progress.advance_to(done, f"{len(run.findings)} divergences" + (", shrinking one" if seen else ""))
            super().teardown()

        def aside(self, signature: str) -> None:
            aside(signature)

        @invariant()
        def answers_are_allowed(self) -> None:
            try:
                super().answers_are_allowed()
            except (Divergence, Inconclusive) as e:
                failed(e)
                raise

    Probe.topics = dict(topics)
    Probe.set_aside = set_aside
    Probe.offered = offered
    test = get_state_machine_test(Probe, settings=settings(
        max_examples=examples, stateful_step_count=steps, deadline=None, database=None,
        suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet, report_multiple_bugs=False,
        phases=(Phase.generate, Phase.shrink)))
    try:
        use_seed(seed)(test)()
    except Divergence as d:
        return drawn[0] if drawn else ran[0], _diverges(d, bootstrap, seed)
    except Inconclusive as i:
        return drawn[0] if drawn else ran[0], ProbeFailed(_report(i.sent, i.verdict, str(i), "UNDECIDED"), None, 3)
    except Flaky as flaky:
        # a broker's timing differed when hypothesis replayed the example: the failure seen
        # first is still one (every answer was judged), shown unshrunk
        n = drawn[0] if drawn else ran[0]
        if not seen:
            return n, ProbeFailed(f"UNDECIDED: an example failed and hypothesis could not replay it (the broker's "
                                  f"timing differed between runs): {type(flaky).__name__}: {flaky}", None, 3)
        note = "(seen once, not shrunk: it did not happen again when hypothesis replayed the requests)"
        first = seen[0]
        if isinstance(first, Inconclusive):
            return n, ProbeFailed(_report(first.sent, first.verdict, f"{first}\n{note}", "UNDECIDED"), None, 3)
        return n, _diverges(first, bootstrap, seed, note)
    return min(ran[0], examples), None  # (hypothesis may run a few past its max_examples)


def _diverges(d: Divergence, bootstrap: str, seed: int, note: str = "") -> ProbeFailed:
    sig = signature_of(d.verdict) if d.verdict is not None else None
    if sig is None:
        sig = str(d).splitlines()[0][:200]  # an invariant broken: its words
    text = _report(d.sent, d.verdict, str(d) if d.verdict is None else "", "DIVERGES", sig)
    return ProbeFailed(text + (f"\n{note}" if note else ""), _scenario(d, bootstrap, seed), 1, sig)


def _scenario(d: Divergence, bootstrap: str, seed: int) -> dict | None:
    group = d.verdict.group_id if d.verdict is not None else None
    if group is None:
        return None
    return scenario([s for s in d.sent if s.api == "ListGroups" or _about(s, group)], group, d.config, d.topics,
                    f"groupcoord probe of {bootstrap} (seed {seed}): {d.verdict.detail}"[:300],
                    "groupcoord probe, shrunk by hypothesis; expectations are the spec's answers (the core)")


def _about(s: Sent, group: str) -> bool:
    from groupcoord.adapters.verify.observed import groups_of

    return group in groups_of(s.obs())


def _report(sent: list[Sent], verdict, diagnosis: str, word: str, sig: str | None = None) -> str:
    """The finding told once: its signature and where Kafka's answer comes from, then the
    shortest sequence hypothesis found, each request with the broker's answer (times from the
    first request), the diverging one marked with what the spec answers there, then why."""
    lines = [f"{word}: {sig}" if sig else f"{word}:"]
    if sig and verdict is not None and len(verdict.mismatch) == 5:
        api, _version, field, spec, _broker = verdict.mismatch
        lines.extend(f"  {line}" for line in pointers(api, field, spec, sig))
    lines.append(f"  the shortest sequence hypothesis found ({len(sent)} requests):")
    t0 = min((s.recv_us for s in sent), default=0)
    at = verdict.line if verdict is not None else None
    for s in sorted(sent, key=lambda s: s.recv_us):
        answer = "no answer (waiting)" if s.response is None else _brief(s.response)
        lines.append(f"    #{s.index} +{(s.recv_us - t0) / 1000:.0f} ms conn {s.conn} {s.api} v{s.version} "
                     f"{_brief(s.request)}\n        -> {answer}")
        if s.index == at:
            lines[-1] += "   <- diverges here"
            lines.extend(f"        the spec answers there: {shown(a)}" for a in verdict.allowed[:3])
    if verdict is not None:
        lines.append(f"  {verdict.detail}")
    if diagnosis:
        lines.append(diagnosis)
    return "\n".join(lines)


def _brief(fields: dict) -> str:
    """Fields as JSON, long byte strings cut (subscriptions say little in a sequence)."""
    def cut(v):
        if isinstance(v, str) and len(v) > 40:
            return v[:24] + "…"
        if isinstance(v, dict):
            return {k: cut(x) for k, x in v.items() if k not in ("throttle_time_ms", "client_host")}
        if isinstance(v, list):
            return [cut(x) for x in v]
        return v
    return json.dumps(named(cut(hexed(fields))), sort_keys=True)
