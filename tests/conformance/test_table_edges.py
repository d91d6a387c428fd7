"""Every edge of the state table (core/classic/states.py) is taken by some conformance scenario, and no
scenario takes a transition the table lacks."""

from paths import SUITE
from scenario_hooks import observe_scenario_drivers

from groupcoord.adapters.runtime.driver import Driver
from groupcoord.adapters.scenarios import runner as conformance
from groupcoord.core import events as ev
from groupcoord.core.classic.states import DEAD, EDGES, edges_between

# Events after which a vanished group has died (moved to Dead and dropped); a group that
# vanishes otherwise is a failed creation reverted (it never existed).
_DEATHS = (ev.UnloadPartition, ev.DeleteGroups, ev.TimerFired)


class EdgeRecorder:
    """A Driver observer: the table edges each step takes, read from the groups' states."""

    def __init__(self) -> None:
        self.driver: Driver | None = None
        self.before: dict = {}
        self.taken: set = set()
        self.illegal: list = []

    def __call__(self, event, commands) -> None:
        now = {gid: g.state for gid, g in self.driver.coordinator.groups().items()}
        for gid, old in self.before.items():
            new = now.get(gid)
            if new is None:
                if isinstance(event, _DEATHS):
                    self.taken.add((old, DEAD))
            elif new is not old:
                edges = edges_between(old, new)
                if edges:
                    self.taken.update(edges)
                else:
                    self.illegal.append((old, new))
        self.before = now


def test_every_table_edge_is_taken_by_a_scenario(monkeypatch):
    def recording(driver):
        recorder = EdgeRecorder()
        recorder.driver = driver
        return recorder

    recorders = observe_scenario_drivers(monkeypatch, recording)
    first: dict = {}
    for path in SUITE:
        start = len(recorders)
        assert conformance.run_file(path).passed, path.name
        for recorder in recorders[start:]:
            assert recorder.illegal == [], f"{path.name}: {recorder.illegal}"
            for edge in recorder.taken:
                first.setdefault(edge, path.name)
    table = set(EDGES)
    for (source, target), name in sorted(first.items(), key=lambda kv: (kv[0][0].value, kv[0][1].value)):
        print(f"{source.value} -> {target.value}: first taken by {name}")
    assert table - set(first) == set(), "table edges no scenario takes"
