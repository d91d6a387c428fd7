"""groupcoord.core: Kafka's classic consumer-group coordinator as a deterministic state machine.

Feed events (requests, timer firings, storage outcomes, partition load/unload) to
``Coordinator.handle`` and carry out the commands it returns (responses, writes, timers).
See spec/contract.md.
"""

from . import commands, continuations, events
from .classic.draft import assemble_group
from .classic.model import Group, Member, Parked
from .classic.states import LEGAL_PREVIOUS, GroupState
from .commands import (
    CancelPartitionTimers,
    CancelTimer,
    Respond,
    SetTimer,
    Write,
)
from .config import ConfigError, CoordinatorConfig
from .coordinator import Coordinator, CoordinatorFailed, CoordinatorState
from .errors import Error
from .offsets import OffsetEntry
from .partitioning import java_string_hash, partition_for
from .writes import PendingWrite

__all__ = [
    "CancelPartitionTimers", "CancelTimer", "ConfigError", "Coordinator", "CoordinatorConfig",
    "CoordinatorFailed", "CoordinatorState", "Error", "Group", "GroupState", "LEGAL_PREVIOUS", "Member", "OffsetEntry",
    "Parked", "PendingWrite", "Respond", "SetTimer", "Write", "assemble_group", "commands", "continuations", "events",
    "java_string_hash", "partition_for",
]
