"""Broker addresses in Metadata and FindCoordinator responses, pointed at the proxy.

A client connects to whatever hosts and ports these responses name; for it to keep talking
through the proxy, each broker's address is replaced by the proxy's listener for that node.
The body is decoded and encoded again by kio at the same version, so nothing else changes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Awaitable, Callable

from groupcoord.adapters.protocol import codec

METADATA = codec.API_KEYS["Metadata"]
FIND_COORDINATOR = codec.API_KEYS["FindCoordinator"]
REWRITTEN = frozenset((METADATA, FIND_COORDINATOR))

# (node id, the broker's real host, its real port) -> (host, port) of the proxy's listener for it
Advertise = Callable[[int, str, int], Awaitable[tuple[str, int]]]


async def rewrite(api_key: int, body: Any, advertise: Advertise) -> Any:
    """``body`` with every broker it names replaced by the proxy's listener for that node."""
    if api_key == METADATA:
        return dataclasses.replace(body, brokers=tuple([await _moved(b, advertise) for b in body.brokers]))
    if hasattr(body, "coordinators"):  # FindCoordinator v4+: one per key asked about
        return dataclasses.replace(body, coordinators=tuple(
            [await _moved(c, advertise) if _found(c) else c for c in body.coordinators]))
    return await _moved(body, advertise) if _found(body) else body


def _found(entry: Any) -> bool:
    """A coordinator answer with an address (an error answer has node -1, port -1)."""
    return int(entry.node_id) >= 0 and int(entry.port) > 0 and int(getattr(entry, "error_code", 0)) == 0


async def _moved(entry: Any, advertise: Advertise) -> Any:
    host, port = await advertise(int(entry.node_id), entry.host, int(entry.port))
    return dataclasses.replace(entry, host=host, port=port)
