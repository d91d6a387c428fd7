"""A conformance scenario seen as a broker's observed trace (spec/observed-trace.md): each
request it sends, with the answer the core gives and the (scenario clock's) times of both, so
``groupcoord verify`` can judge a core, or a mutant of it, the way it judges any broker."""

from __future__ import annotations

from typing import Any

from groupcoord.adapters.protocol.translate import response_fields
from groupcoord.adapters.scenarios.runner import Result, Runner, run_steps
from groupcoord.adapters.verify.observed import Obs, to_json
from groupcoord.core.commands import Respond
from groupcoord.core.config import CoordinatorConfig


class _Observing(Runner):
    def __init__(self) -> None:
        super().__init__(None)
        self.observer = self._observe
        self.requests: dict[str, tuple] = {}  # name -> (api, version, body, client id), in sending order
        self.recv_ms: dict[str, int] = {}
        self.answers: dict[str, tuple[int, Any]] = {}

    def _send(self, step: dict) -> None:
        api, name, version, body = self._read_send(step)
        self.requests[name] = (api, version, body, step.get("client_id", "client"))
        super()._send(step)

    def _observe(self, event, commands) -> None:
        name = getattr(event, "request_id", None)
        if name in self.requests and name not in self.recv_ms:
            self.recv_ms[name] = event.now_ms
        for c in commands:
            if isinstance(c, Respond) and c.request_id in self.requests:
                self.answers[c.request_id] = (event.now_ms, c.response)


def observe_scenario(scenario: dict, path: str = "<scenario>") -> tuple[Result, list[Obs], CoordinatorConfig | None]:
    """The scenario's result, its observed pairs (in sending order, each on its own connection)
    and the coordinator settings it ran with."""
    runner = _Observing()
    result = run_steps(runner, scenario, path)
    pairs = []
    driver = getattr(runner, "driver", None)
    end_ms = driver.now_ms if driver is not None else 0  # the scenario's end: what is unanswered waited until then
    for n, (name, (api, version, body, client_id)) in enumerate(runner.requests.items(), start=1):
        if name not in runner.recv_ms:
            continue  # refused before it reached the core
        answer = runner.answers.get(name)
        pairs.append(Obs(index=n, conn=n, recv_us=runner.recv_ms[name] * 1000,
                         send_us=None if answer is None else answer[0] * 1000, api=api, version=version,
                         client_id=client_id, request=body,
                         response=None if answer is None else to_json(response_fields(api, version, answer[1])),
                         open_until_us=end_ms * 1000 if answer is None else None))
    return result, pairs, None if driver is None else driver.config
