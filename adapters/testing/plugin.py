"""The pytest plugin (entry point ``pytest11``, active once groupcoord is installed; see
spec/testing.md): fixtures that start a groupcoord server in the test's process on
127.0.0.1 and stop it after the test, or, with ``--groupcoord-bootstrap HOST:PORT``, hand the
tests a broker that is already running instead.

* ``groupcoord_server``: a server (``.bootstrap``, ``.host``, ``.port``; ``str()`` is the
  bootstrap address) with a data plane: clients produce and consume; ``produce(topic, values,
  key=None, partition=None)`` appends straight to its log (returns the offsets) and
  ``records(topic, partition=None)`` reads it back (offset, key, value, headers, timestamp).
* ``groupcoord_server_factory(topics=None, *, manual_clock=False, **settings)``: servers with
  topics (name -> partition count) and Kafka settings as keywords, dots as underscores.
* ``groupcoord_manual_server``: a server on a manual clock: ``advance(ms)`` fires the
  session and rebalance timeouts then due, answers the Fetches whose wait is over and runs
  retention. Skipped under ``--groupcoord-bootstrap`` (a
  running broker keeps its own time).

This module is imported by every pytest run once installed: the servers' modules are
imported only when a fixture is used.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping

import pytest

_OPTION = "--groupcoord-bootstrap"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("groupcoord", "groupcoord server fixtures")
    group.addoption(_OPTION, metavar="HOST:PORT", default=None, dest="groupcoord_bootstrap",
                    help="point the groupcoord_server fixtures at this running broker instead of starting a "
                         "server in the test process (tests using groupcoord_manual_server are skipped)")


def pytest_configure(config: pytest.Config) -> None:
    bootstrap = config.getoption("groupcoord_bootstrap", None)
    if bootstrap is not None:
        from groupcoord.testing.servers import ExistingServer

        try:
            ExistingServer(bootstrap)
        except ValueError as e:  # ConfigError: one line
            raise pytest.UsageError(str(e)) from None


def _existing(config: pytest.Config) -> str | None:
    return config.getoption("groupcoord_bootstrap", None)


@pytest.fixture
def groupcoord_server_factory(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``factory(topics=None, *, manual_clock=False, **settings)``: a started server; each is
    stopped after the test. Under ``--groupcoord-bootstrap``: the running broker, its topics
    checked (a missing one, or one with another partition count, is an error), its settings
    its own (the keywords are only checked for known names)."""
    from groupcoord.testing import servers

    bootstrap = _existing(request.config)
    started: list[servers.InProcessServer] = []

    def factory(topics: Mapping[str, int] | None = None, *, manual_clock: bool = False, **settings: Any):
        if bootstrap is None:
            server = servers.start_server(topics, manual_clock=manual_clock, **settings)
            started.append(server)
            return server
        servers.kafka_settings(settings)
        if manual_clock:
            pytest.skip(f"a manual clock needs an in-process server; {_OPTION} {bootstrap} keeps its own time")
        existing = servers.ExistingServer(bootstrap)
        existing.check_topics(topics)
        return existing

    try:
        yield factory
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def groupcoord_server(groupcoord_server_factory: Callable[..., Any]) -> Any:
    """A server on 127.0.0.1 with Kafka's settings (the first rebalance undelayed), memory
    storage, topics auto-created with one partition; stopped after the test."""
    return groupcoord_server_factory()


@pytest.fixture
def groupcoord_manual_server(groupcoord_server_factory: Callable[..., Any]) -> Any:
    """``groupcoord_server`` on a manual clock: its time moves only by ``advance(ms)``."""
    return groupcoord_server_factory(manual_clock=True)
