"""``bench core``'s floor under every step (adapters/bench/step_values.py): each generated
function builds again exactly what its step built and kept, and nothing the step found made."""

from __future__ import annotations

from groupcoord.adapters.bench.core import _heartbeat, run_inputs, simulated_inputs, stable_group
from groupcoord.adapters.bench.step_values import StepValues, builders_by_kind, run_builders
from groupcoord.core import commands as c
from groupcoord.core import events as ev
from groupcoord.core.classic.model import Group
from groupcoord.core.offsets import OffsetEntry
from groupcoord.core.writes import PendingWrite


def test_every_builder_builds_again_what_its_step_built_and_kept():
    config, inputs = simulated_inputs(groups=3, duration_ms=30_000)
    events = [e for group_inputs in inputs for e in group_inputs]
    values = StepValues()
    run_inputs(config, inputs, step=values)
    builders = values.builders()
    assert len(builders) == len(values.values) == len(events)
    assert values.kinds == [type(e).__name__ for e in events]
    for build, expected in zip(builders, values.values):
        assert build() == expected
    # an accepted commit keeps its stored offsets and its pending write, built anew; the
    # request that write holds came in with the event: referenced, not built
    n = next(i for i, kept in enumerate(values.values)
             if type(events[i]) is ev.OffsetCommit and any(type(v) is PendingWrite for v in kept))
    built = builders[n]()
    pending = next(v for v in built if type(v) is PendingWrite)
    original = next(v for v in values.values[n] if type(v) is PendingWrite)
    assert pending == original and pending is not original
    assert pending.request is events[n]
    assert any(type(v) is OffsetEntry for v in built)
    # a join keeps its group's new value
    joins = [i for i, e in enumerate(events) if type(e) is ev.JoinGroup]
    assert any(type(v) is Group for i in joins for v in values.values[i][1:])
    spent = builders_by_kind(builders, values.kinds)
    assert set(spent) == set(values.kinds) and all(s > 0 for s in spent.values())
    assert run_builders(builders) > 0


def test_a_heartbeat_keeps_nothing_new_and_a_response_made_once_is_not_built_again():
    driver, ids, generation = stable_group(10)
    values = StepValues()
    answers = [values(driver.coordinator, _heartbeat(n, n, ids, generation, driver.now_ms)) for n in range(2)]
    assert [len(kept) for kept in values.values] == [1, 1]  # the commands alone
    built = [build() for build in values.builders()]
    respond = next(command for command in answers[1] if type(command) is c.Respond)
    [rebuilt] = [command for command in built[1][0] if type(command) is c.Respond]
    assert rebuilt == respond and rebuilt is not respond
    # the core answers every good heartbeat with one response value made once, at import
    assert rebuilt.response is respond.response is answers[0][-1].response
