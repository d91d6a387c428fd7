"""``groupcoord probe``'s engine: ``CoordinatorStateMachine`` against a broker at an address,
its first divergence shrunk by hypothesis, told in words and written as a conformance scenario."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, Phase, Verbosity, seed as use_seed, settings, strategies as st
from hypothesis.errors import Flaky
from hypothesis.stateful import get_state_machine_test, invariant

from groupcoord.adapters.conformance.scenarios import hexed
from groupcoord.core.config import CoordinatorConfig
from groupcoord.testing.machine import CoordinatorStateMachine, Divergence, Inconclusive
from groupcoord.testing.reproduce import scenario
from groupcoord.testing.systems import BrokerSystem, Sent


class ProbeFailed(Exception):
    """A divergence (``exit_code`` 1) or an undecided check (3): ``report`` says it in words,
    ``scenario`` reproduces it (None when there is nothing to write)."""

    def __init__(self, report: str, scenario: dict | None, exit_code: int) -> None:
        super().__init__(report)
        self.report, self.scenario, self.exit_code = report, scenario, exit_code


def probe(bootstrap: str, config: CoordinatorConfig, topics: dict[str, int], *, examples: int, steps: int,
          seed: int, timer_tolerance_ms: int = 1000,
          machine: type[CoordinatorStateMachine] = CoordinatorStateMachine) -> int:
    """Run ``examples`` examples of ``machine`` (a subclass adds or leaves out rules) against
    the broker; the number run, or ProbeFailed."""
    ran = [0]
    seen: list = []  # failures as they happened (a replay that differs loses hypothesis's own)

    class Probe(machine):  # type: ignore[valid-type,misc]
        def system(config, group_id, topics):  # noqa: N805 - the class's function, not a method
            return BrokerSystem(bootstrap, group_id, config, timer_tolerance_ms=timer_tolerance_ms)
        configs = st.just(config)
        group_prefix = "probe-"

        def teardown(self) -> None:
            ran[0] += 1
            super().teardown()

        @invariant()
        def answers_are_allowed(self) -> None:
            try:
                super().answers_are_allowed()
            except (Divergence, Inconclusive) as e:
                seen.append(e)
                raise

    Probe.topics = dict(topics)
    test = get_state_machine_test(Probe, settings=settings(
        max_examples=examples, stateful_step_count=steps, deadline=None, database=None,
        suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet, report_multiple_bugs=False,
        phases=(Phase.generate, Phase.shrink)))
    try:
        use_seed(seed)(test)()
    except Divergence as d:
        raise ProbeFailed(_report(d.sent, d.verdict, str(d), "DIVERGES"), _scenario(d, bootstrap, seed), 1) from None
    except Inconclusive as i:
        raise ProbeFailed(_report(i.sent, i.verdict, str(i), "UNDECIDED"), None, 3) from None
    except Flaky as flaky:
        # a broker's timing differed when hypothesis replayed the example: the failure seen
        # first is still one (every answer was judged), shown unshrunk
        if not seen:
            raise ProbeFailed(f"UNDECIDED: an example failed and hypothesis could not replay it (the broker's "
                              f"timing differed between runs): {type(flaky).__name__}: {flaky}", None, 3) from None
        note = "(seen once, not shrunk: it did not happen again when hypothesis replayed the requests)"
        first = seen[0]
        if isinstance(first, Inconclusive):
            raise ProbeFailed(_report(first.sent, first.verdict, f"{first}\n{note}", "UNDECIDED"), None, 3) from None
        raise ProbeFailed(_report(first.sent, first.verdict, f"{first}\n{note}", "DIVERGES"),
                          _scenario(first, bootstrap, seed), 1) from None
    return ran[0]


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


def _report(sent: list[Sent], verdict, diagnosis: str, word: str) -> str:
    lines = [f"{word}: the shortest sequence hypothesis found ({len(sent)} requests):"]
    t0 = min((s.recv_us for s in sent), default=0)
    for s in sorted(sent, key=lambda s: s.recv_us):
        answer = "no answer (waiting)" if s.response is None else _brief(s.response)
        lines.append(f"  #{s.index} +{(s.recv_us - t0) / 1000:.0f} ms conn {s.conn} {s.api} v{s.version} "
                     f"{_brief(s.request)}\n      -> {answer}")
    if verdict is not None and verdict.observed is not None:
        lines.append(f"received (line {verdict.line}): {json.dumps(verdict.observed, sort_keys=True)}")
        for a in verdict.allowed:
            lines.append(f"the spec allows there:  {a}")
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
    return json.dumps(cut(hexed(fields)), sort_keys=True)
