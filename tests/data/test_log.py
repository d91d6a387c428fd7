"""The partition log (groupcoord.adapters.data.log): offsets assigned by the log, batches kept as
sent, CRC and layout refusals, idempotent producers' sequence checks and duplicates,
DeleteRecords and retention on an injected clock."""

import gzip
import struct

import crc32c
import pytest

from groupcoord.adapters.data.log import Code, DataLog
from groupcoord.adapters.data.producers import INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER
from groupcoord.adapters.storage import batches as fmt


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(values, ts=1_000_000, producer=(-1, -1, -1), key=b"k"):
    return fmt.encode_batch([(key, v) for v in values], ts, producer=producer)


def append(log, data, topic="t", partition=0):
    got = []
    log.append(topic, partition, data, got.append)
    assert len(got) == 1
    return got[0]


def values(log, topic="t", partition=None):
    return [(r.offset, r.value) for r in log.records(topic, partition)]


def test_offsets_are_the_logs_and_batches_are_kept_as_sent():
    log = DataLog(Clock())
    first, second = batch([b"a", b"b"]), batch([b"c"])
    assert append(log, first) == (0, 0, 0, None)
    assert append(log, second) == (0, 2, 0, None)
    assert values(log) == [(0, b"a"), (1, b"b"), (2, b"c")]
    error, data = log.read("t", 0, 0, 1 << 20, True)
    assert error == 0 and data == first[:12] + struct.pack(">i", 0) + first[16:] + fmt.with_base_offset(second, 2, 0)
    # the stored bytes differ from the sent ones only in the base offset and leader epoch
    assert data[len(first) + 16:] == second[16:] and struct.unpack_from(">q", data, len(first))[0] == 2
    assert log.bounds("t", 0) == (0, 3)
    # fetching from the middle of a batch returns that batch whole
    assert log.read("t", 0, 1, 1 << 20, True)[1] == data
    assert log.read("t", 0, 3, 1 << 20, True) == (0, b"")
    assert log.read("t", 0, 4, 1 << 20, True)[0] == Code.OFFSET_OUT_OF_RANGE
    # max bytes: the first batch even if larger (min_one), nothing when it must fit
    assert log.read("t", 0, 0, 1, True)[1] == data[:len(first)]
    assert log.read("t", 0, 0, 1, False)[1] == b""


def test_refusals_have_kafkas_codes():
    log = DataLog(Clock(), max_message_bytes=500)
    good = bytearray(batch([b"x"]))
    bad_crc = bytes(good[:-1]) + bytes([good[-1] ^ 1])
    assert append(log, bad_crc).error == Code.CORRUPT_MESSAGE
    assert append(log, bytes(good[:40])).error == Code.CORRUPT_MESSAGE
    assert append(log, bytes(good[:-3])).error == Code.CORRUPT_MESSAGE
    assert append(log, bytes(good) + bytes(good)).error == Code.INVALID_RECORD
    assert append(log, b"").error == Code.INVALID_RECORD and append(log, None).error == Code.INVALID_RECORD
    assert append(log, batch([b"y" * 600])).error == Code.MESSAGE_TOO_LARGE
    control = fmt.encode_batch([(b"k", b"v")], 1, attributes=fmt.CONTROL_BIT)
    assert append(log, control).error == Code.INVALID_RECORD
    txn = fmt.encode_batch([(b"k", b"v")], 1, attributes=fmt.TRANSACTIONAL_BIT, producer=(1, 0, 0))
    assert append(log, txn).error == Code.INVALID_TXN_STATE
    magic1 = bytearray(good)
    magic1[16] = 1
    assert append(log, bytes(magic1)).error == Code.INVALID_RECORD
    assert log.bounds("t", 0) == (0, 0)


def _compressed(values):
    """A gzip batch as a client builds one: the records' bytes compressed after the header."""
    plain = batch(values)
    body = gzip.compress(plain[fmt.HEADER_SIZE:])
    rest = bytearray(plain[fmt.CRC_START:fmt.HEADER_SIZE] + body)
    rest[0:2] = struct.pack(">h", 1)  # attributes: gzip
    crc = crc32c.crc32c(bytes(rest))
    return struct.pack(">qiibI", 0, len(rest) + 9, -1, 2, crc) + bytes(rest)


def test_compressed_batches_pass_through_and_read_back():
    log = DataLog(Clock())
    append(log, batch([b"a"]))
    sent = _compressed([b"b", b"c", b"d"])
    assert append(log, sent).base_offset == 1
    stored = log.read("t", 0, 1, 1 << 20, True)[1]
    assert stored[16:] == sent[16:]
    assert values(log) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]


def test_idempotent_producer_duplicates_and_sequence_checks():
    log = DataLog(Clock())
    pid, epoch = log.init_producer_id()
    assert (pid, epoch) == (0, 0) and log.init_producer_id() == (1, 0)
    assert append(log, batch([b"a", b"b"], producer=(pid, 0, 0))).base_offset == 0
    assert append(log, batch([b"c"], producer=(pid, 0, 2))).base_offset == 2
    # a retry of either of the last batches: their first offsets, nothing appended
    assert append(log, batch([b"a", b"b"], producer=(pid, 0, 0))) == (0, 0, 0, None)
    assert append(log, batch([b"c"], producer=(pid, 0, 2))).base_offset == 2
    assert log.bounds("t", 0) == (0, 3)
    # a gap, or a sequence already passed that is not one of the kept batches
    assert append(log, batch([b"e"], producer=(pid, 0, 5))).error == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(log, batch([b"b"], producer=(pid, 0, 1))).error == OUT_OF_ORDER_SEQUENCE_NUMBER
    # a new epoch starts at 0; an older epoch is refused
    assert append(log, batch([b"f"], producer=(pid, 1, 3))).error == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(log, batch([b"f"], producer=(pid, 1, 0))).base_offset == 3
    assert append(log, batch([b"g"], producer=(pid, 0, 3))).error == INVALID_PRODUCER_EPOCH
    # only the last five batches are remembered
    for seq in range(1, 7):
        append(log, batch([b"h"], producer=(pid, 1, seq)))
    assert append(log, batch([b"h"], producer=(pid, 1, 1))).error == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(log, batch([b"h"], producer=(pid, 1, 2))).base_offset == 5
    # sequences are per partition; an unknown producer may start anywhere
    assert append(log, batch([b"x"], producer=(pid, 1, 0)), partition=1).base_offset == 0
    assert append(log, batch([b"x"], producer=(77, 0, 40))).error == 0


def test_delete_records_moves_the_log_start():
    log = DataLog(Clock())
    for v in (b"a", b"b", b"c"):
        append(log, batch([v, v]))
    got = []
    log.delete_records("t", 0, 3, lambda *a: got.append(a))
    assert got == [(0, 3)] and log.bounds("t", 0) == (3, 6)
    assert values(log) == [(3, b"b"), (4, b"c"), (5, b"c")]
    assert log.read("t", 0, 2, 1 << 20, True)[0] == Code.OFFSET_OUT_OF_RANGE
    log.delete_records("t", 0, 7, lambda *a: got.append(a))
    log.delete_records("t", 0, 1, lambda *a: got.append(a))  # below the start: nothing moves
    log.delete_records("t", 0, -1, lambda *a: got.append(a))  # -1: the high watermark
    assert got[1:] == [(Code.OFFSET_OUT_OF_RANGE, -1), (0, 3), (0, 6)]
    assert log.bounds("t", 0) == (6, 6) and values(log) == []
    assert append(log, batch([b"d"])).base_offset == 6


def test_retention_follows_the_injected_clock():
    clock = Clock(0)
    log = DataLog(clock)
    log.create_topic("t", 1, retention_ms=1000)
    log.create_topic("keep", 1, retention_ms=-1)
    append(log, batch([b"old"], ts=0))
    append(log, batch([b"new"], ts=800))
    append(log, batch([b"old"], ts=0), topic="keep")
    clock.now = 1000
    assert log.expire() == 0
    clock.now = 1001
    assert log.expire() == 1 and log.bounds("t", 0) == (1, 2) and values(log) == [(1, b"new")]
    clock.now = 5000
    assert log.expire() == 1 and log.bounds("t", 0) == (2, 2)
    assert values(log, "keep") == [(0, b"old")]


def test_offset_for_timestamp():
    log = DataLog(Clock())
    append(log, fmt.encode_batch([(b"k", b"a")], 100))
    append(log, fmt.encode_batch([(b"k", b"b"), (b"k", b"c")], 200))
    assert log.offset_for_timestamp("t", 0, 150) == (200, 1)
    assert log.offset_for_timestamp("t", 0, 50) == (100, 0)
    assert log.offset_for_timestamp("t", 0, 300) is None
    assert log.offset_for_timestamp("t", 0, -3) == (200, 1)


def test_readers_are_woken_by_durable_data():
    log = DataLog(Clock())
    woken = []
    unwatch = log.watch([("t", 0)], lambda: woken.append(1))
    append(log, batch([b"a"]), partition=1)
    append(log, batch([b"a"]))
    unwatch()
    append(log, batch([b"b"]))
    assert woken == [1]


@pytest.mark.parametrize("bad", [b"\x00" * 61, b"\xff" * 70])
def test_garbage_is_refused_not_raised(bad):
    assert append(DataLog(Clock()), bad).error in (Code.CORRUPT_MESSAGE, Code.INVALID_RECORD)
