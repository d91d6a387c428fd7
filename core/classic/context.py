"""One input's context in the classic group machine: made by ``GroupMachine.step`` for each
input and dropped after it. It holds the time, the group as the input found it, the draft of
its change (made on the first change), and what the input emits: commands in order, and
records to write with the continuation each one runs when its write completes or fails.
Every function of ``joining`` and ``membership`` takes it as its first argument, so what a
step reads and writes is in one visible object rather than on the machine."""

from __future__ import annotations

from typing import Any

from ..config import CoordinatorConfig
from ..context import Context
from ..partitioning import partition_for
from .draft import GroupDraft
from .model import Group


class Step:
    """What one input did to one group."""

    __slots__ = ("group", "commands", "records", "result")

    def __init__(self, group: Group | None, commands: list, records: list, result: Any) -> None:
        self.group = group  # the group after the input (None: there is none); Dead: drop it
        self.commands = commands  # Respond, SetTimer, CancelTimer, in order
        self.records = records  # (record, continuation or None) to write on the group's partition
        self.result = result  # the operation's own response (LeaveGroup), answered behind writes


class StepContext(Context):
    """The coordinator's ``Context`` (time, output: ``respond``, ``arm``, ``cancel``) with the
    group, its draft and the records of one input."""

    __slots__ = ("config", "group", "draft", "records")

    def __init__(self, config: CoordinatorConfig, group: Group | None, now_ms: int) -> None:
        self.config = config
        self.now = now_ms
        self.group = group  # as the input found it, until the draft is made
        self.draft: GroupDraft | None = None
        self.out: list = []
        self.records: list = []

    def finish(self, result: Any) -> Step:
        return Step(self.group if self.draft is None else self.draft.freeze(), self.out, self.records, result)

    # ------------------------------------------------------------------ the group

    def current(self) -> Group | GroupDraft | None:
        return self.group if self.draft is None else self.draft

    def thaw(self) -> GroupDraft:
        if self.draft is None:
            assert self.group is not None  # an input thaws the group it found, or the one it created
            self.draft = GroupDraft(self.group)
        return self.draft

    def create(self, group_id: str) -> Group:
        self.group = Group(group_id=group_id,
                           partition=partition_for(group_id, self.config.offsets_topic_num_partitions))
        return self.group

    # ------------------------------------------------------------------ records

    def append(self, record, continuation=None) -> None:
        self.records.append((record, continuation))
