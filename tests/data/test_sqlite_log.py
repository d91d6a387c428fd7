"""The partition log's SQLite copy (groupcoord.adapters.data.sqlite): what was acknowledged is
there after a reopen, and after the process was killed with SIGKILL mid-stream."""

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time

from groupcoord.adapters.data.log import DataLog
from groupcoord.adapters.data.sqlite import SqliteLogBackend
from groupcoord.adapters.storage import batches as fmt


def _append(log, topic, partition, data):
    future = asyncio.get_running_loop().create_future()
    log.append(topic, partition, data, future.set_result)
    return future


def test_reopen_keeps_batches_starts_topics_and_producers(tmp_path):
    async def first():
        log = DataLog(lambda: 0, SqliteLogBackend(tmp_path))
        log.create_topic("t", 2, retention_ms=5000)
        pid, _ = log.init_producer_id()
        for seq in range(3):
            result = await _append(log, "t", 1, fmt.encode_batch([(b"k", b"v%d" % seq)], 1, producer=(pid, 0, seq)))
            assert result.error == 0
        done = asyncio.get_running_loop().create_future()
        log.delete_records("t", 1, 1, lambda *a: done.set_result(a))
        assert await done == (0, 1)
        await log.close()
        return pid

    pid = asyncio.run(first())

    async def second():
        log = DataLog(lambda: 0, SqliteLogBackend(tmp_path))
        try:
            assert log.topics["t"] == {"partitions": 2, "retention_ms": 5000}
            assert log.bounds("t", 1) == (1, 3)
            assert [r.value for r in log.records("t", 1)] == [b"v1", b"v2"]
            # the producer's last batches came back: a retry is a duplicate, the next one follows
            dup = await _append(log, "t", 1, fmt.encode_batch([(b"k", b"v2")], 1, producer=(pid, 0, 2)))
            assert dup.base_offset == 2
            nxt = await _append(log, "t", 1, fmt.encode_batch([(b"k", b"v3")], 1, producer=(pid, 0, 3)))
            assert nxt.base_offset == 3
            assert log.init_producer_id()[0] > pid  # no id handed out twice
        finally:
            await log.close()

    asyncio.run(second())


_WRITER = textwrap.dedent("""
    import asyncio, sys
    from groupcoord.adapters.data.log import DataLog
    from groupcoord.adapters.data.sqlite import SqliteLogBackend
    from groupcoord.adapters.storage import batches as fmt

    async def main():
        log = DataLog(lambda: 0, SqliteLogBackend(sys.argv[1]))
        def acked(result, n):
            assert result.error == 0, result
            print(result.base_offset, n, flush=True)
        n = 0
        while True:
            for _ in range(20):
                log.append("t", n % 3, fmt.encode_batch([(b"k", b"%d" % n)], 1), lambda r, n=n: acked(r, n))
                n += 1
            await asyncio.sleep(0)

    asyncio.run(main())
""")


def test_nothing_acknowledged_is_lost_to_sigkill(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    acked = []
    try:
        deadline = time.monotonic() + 30
        while len(acked) < 300 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acked.append(tuple(map(int, line.split())))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
    assert len(acked) >= 300, "the writer acknowledged too little"

    async def reopen():
        log = DataLog(lambda: 0, SqliteLogBackend(tmp_path))
        try:
            return {int(r.value): (r.partition, r.offset) for p in range(3) for r in log.records("t", p)}
        finally:
            await log.close()

    found = asyncio.run(reopen())
    for offset, n in acked:
        assert found.get(n) == (n % 3, offset), n
