"""groupcoord.core: Kafka's classic consumer-group coordinator as a deterministic state machine.

Feed events (requests, timer firings, storage outcomes, partition load/unload) to
``Coordinator.handle`` and carry out the commands it returns (responses, writes, timers).
See spec/contract.md.
"""

from .commands import (
    CancelPartitionTimers,
    CancelTimer,
    Respond,
    SetTimer,
    Write,
)
from .config import ConfigError, CoordinatorConfig
from .coordinator import Coordinator, CoordinatorState, partition_for
from .errors import Error
from .states import LEGAL_PREVIOUS, GroupState

__all__ = [
    "CancelPartitionTimers", "CancelTimer", "ConfigError", "Coordinator", "CoordinatorConfig",
    "CoordinatorState", "Error", "GroupState", "LEGAL_PREVIOUS",
    "Respond", "SetTimer", "Write", "partition_for",
]
