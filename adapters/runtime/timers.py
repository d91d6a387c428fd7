"""The timer table drivers keep: the core's own (``groupcoord.core.timers``), the one table
every driver, the verifier and the replay use, named here where the runtime's users find it."""

from __future__ import annotations

from groupcoord.core.timers import TimerTable

__all__ = ["TimerTable"]
