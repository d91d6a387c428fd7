"""Watching the Drivers the scenario runner makes (a test helper)."""

from groupcoord.adapters.runtime.driver import Driver
from groupcoord.adapters.scenarios import runner as conformance


def observe_scenario_drivers(monkeypatch, make_observer) -> list:
    """From now on every Driver the scenario runner makes also feeds ``make_observer(driver)``
    each (event, commands), before the runner's own observer; returns those observers, in the
    order the drivers were made."""
    observers: list = []

    class ObservedDriver(Driver):
        def __init__(self, *args, observer=None, **kwargs):
            watcher = make_observer(self)
            observers.append(watcher)

            def both(event, commands):
                watcher(event, commands)
                if observer is not None:
                    observer(event, commands)
            super().__init__(*args, observer=both, **kwargs)

    monkeypatch.setattr(conformance, "Driver", ObservedDriver)
    return observers
