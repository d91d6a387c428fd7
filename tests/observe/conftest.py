"""Fixtures of the recording proxy's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def started():
    """start(Class, *args) -> a FakeBroker, RecorderProcess or Worker, stopped at the end."""
    things: list = []

    def start(cls, *args, **kwargs):
        thing = cls(*args, **kwargs)
        things.append(thing)
        return thing

    yield start
    for thing in reversed(things):
        thing.stop()
