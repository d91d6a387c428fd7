"""Idempotent producers: the producer ids InitProducerId hands out, and per (producer id,
partition) the state a partition keeps to check the sequence numbers of the batches appended
to it, as Kafka's ``ProducerStateManager``, ``ProducerStateEntry`` and ``ProducerAppendInfo``
(storage/src/main/java/org/apache/kafka/storage/internals/log/) do for a client's append:

* a batch whose epoch is below the producer's last one is refused INVALID_PRODUCER_EPOCH
  (``checkProducerEpoch``: since Kafka 2.7 a produce gets that, not PRODUCER_FENCED);
* a batch of a new epoch must start at sequence 0 unless the producer has no epoch yet;
* in the same epoch its first sequence must follow the last one (``inSequence``, wrapping
  after 2**31 - 1), unless the partition knows no epoch of the producer (its batches were
  removed by retention or DeleteRecords): then any sequence is taken;
* a batch with the same epoch, first and last sequence as one of the producer's last five
  (``NUM_BATCHES_TO_RETAIN``) is a duplicate: it is not appended again and its answer is the
  first one's offsets (``findDuplicateBatch``, checked before the rules above).
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

NO_PRODUCER_EPOCH = -1
NUM_BATCHES_TO_RETAIN = 5
_SEQ_WRAP = 2147483647  # Integer.MAX_VALUE

# error codes of the checks (Kafka's Errors)
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ProducerEntry:
    """What a partition remembers of one producer: its epoch and its last batches."""

    __slots__ = ("epoch", "batches")

    def __init__(self) -> None:
        self.epoch = NO_PRODUCER_EPOCH
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def duplicate_of(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def add(self, epoch: int, batch: BatchMetadata) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()
        self.batches.append(batch)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _SEQ_WRAP)


def check_append(entry: ProducerEntry | None, producer_id: int, epoch: int, first_seq: int) -> tuple[int, str] | None:
    """(error code, message) when a client's batch of ``producer_id`` may not be appended
    after ``entry`` (None: the partition knows nothing of it), else None."""
    current = entry.epoch if entry is not None else NO_PRODUCER_EPOCH
    if epoch < current:
        return INVALID_PRODUCER_EPOCH, (f"epoch of producer {producer_id} is {epoch}, which is smaller than the last "
                                        f"seen epoch {current}")
    if epoch != current:
        if first_seq != 0 and current != NO_PRODUCER_EPOCH:
            return OUT_OF_ORDER_SEQUENCE_NUMBER, (f"invalid sequence number {first_seq} for new epoch {epoch} of "
                                                  f"producer {producer_id} (current epoch {current})")
        return None
    if current == NO_PRODUCER_EPOCH:
        return None
    last = entry.last_seq if entry is not None else -1
    if not _in_sequence(last, first_seq):
        return OUT_OF_ORDER_SEQUENCE_NUMBER, (f"out of order sequence number for producer {producer_id}: {first_seq} "
                                              f"(incoming), {last} (current end)")
    return None


class ProducerIds:
    """Producer ids for InitProducerId, from 0 up; a durable backend reserves them in blocks
    (as Kafka's controller hands brokers blocks of 1000), so none is handed out twice across a
    restart. ``reserve(upto)`` is the backend's: it makes ``upto`` the first id not handed out."""

    BLOCK = 1000

    def __init__(self, next_id: int = 0, reserve=None) -> None:
        self.next_id = next_id
        self.reserved = next_id
        self._reserve = reserve

    def allocate(self) -> int:
        if self.next_id >= self.reserved:
            self.reserved = self.next_id + self.BLOCK
            if self._reserve is not None:
                self._reserve(self.reserved)
        pid = self.next_id
        self.next_id += 1
        return pid
