"""Helpers for tests that run librdkafka consumers with ``group.protocol=consumer``: what a
consumer owns of topic ``t6``, and polling every consumer until a condition holds (bounded)."""

from __future__ import annotations

import time

PHASE_S = 60


def owned(consumer, topic: str = "t6") -> list[int]:
    return sorted(tp.partition for tp in consumer.assignment() if tp.topic == topic)


def poll_until(consumers, condition, what: str, seconds: float = PHASE_S) -> None:
    """Poll each consumer in turn until ``condition()`` holds; AssertionError naming ``what``
    and what each consumer owns after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        for c in consumers:
            c.poll(0.05)
        if condition():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds}s waiting for {what}: {[owned(c) for c in consumers]}")
