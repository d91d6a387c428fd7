"""Storage failures through ``groupcoord serve``: a clear error at start-up (exit code 2, the
``storage_unusable`` log line naming the file and the reason), or on the failing write (the
client gets Kafka's error for a failed append, NOT_COORDINATOR; the server logs why), and never
the loss of a commit that was acknowledged.

Full disk is simulated with the store's quota (``--sqlite-max-bytes``) and, where this sandbox
allows mounting (root with CAP_SYS_ADMIN), with a tiny tmpfs; a read-only filesystem likewise.
Tests run as root, so file permissions stop nothing: an unwritable directory is a path under a
regular file.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from server_harness import ServerProcess, free_port, wait_until

from groupcoord.adapters.client.kafka_client import KafkaClient
from groupcoord.adapters.storage.sqlite import DB_NAME, SqliteStorage
from groupcoord.core.commands import OffsetCommitRecord

CLI = [sys.executable, "-m", "groupcoord.adapters.cli.serve"]


def serve(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``groupcoord serve`` expected to stop by itself (a start-up failure)."""
    return subprocess.run(CLI + ["serve", "--port", "0", "--log-format", "json", *args], capture_output=True,
                          text=True, timeout=timeout)


def unusable(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 2, result.stderr
    lines = [json.loads(row) for row in result.stderr.splitlines() if row.startswith("{")]
    found = [row for row in lines if row["event"] == "storage_unusable"]
    assert found and found[0]["level"] == "error", result.stderr
    assert not any(row["event"] == "listening" for row in lines)
    return found[0]


def make_store(data_dir: Path, rows: int = 200) -> None:
    async def write():
        storage = SqliteStorage(data_dir)
        for n in range(rows):
            await storage.append(n % 3, (OffsetCommitRecord(f"g{n}", "t", 0, n, -1, "x" * 100, 0),))
        await storage.close()

    asyncio.run(write())


# --- start-up --------------------------------------------------------------------------------------

def test_a_data_directory_that_cannot_be_created(tmp_path):
    (tmp_path / "file").write_text("x")
    line = unusable(serve("--data-dir", str(tmp_path / "file" / "data")))
    assert "cannot create data directory" in line["error"] and str(tmp_path / "file" / "data") in line["error"]


def test_a_file_that_is_not_a_database(tmp_path):
    (tmp_path / DB_NAME).write_bytes(b"this is not a database" * 100)
    line = unusable(serve("--data-dir", str(tmp_path)))
    assert "is not a usable groupcoord database" in line["error"] and str(tmp_path / DB_NAME) in line["error"]


def test_a_database_with_damaged_pages(tmp_path):
    make_store(tmp_path)
    path = tmp_path / DB_NAME
    page = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(path.read_bytes())
    assert len(data) > 4 * page
    data[2 * page:3 * page] = b"\xa5" * page  # a b-tree page of the records turns to noise
    path.write_bytes(bytes(data))
    line = unusable(serve("--data-dir", str(tmp_path)))
    assert str(path) in line["error"] and ("corrupt" in line["error"] or "malformed" in line["error"])


def test_a_record_that_cannot_be_read(tmp_path):
    make_store(tmp_path, rows=3)
    db = sqlite3.connect(tmp_path / DB_NAME)
    db.execute("UPDATE records SET value = X'0003000000' WHERE partition = 1")  # a truncated offset value
    db.commit()
    db.close()
    line = unusable(serve("--data-dir", str(tmp_path), "--offsets.topic.num.partitions", "3"))
    assert "unreadable record in partition 1" in line["error"]


def test_an_unreachable_broker(tmp_path):
    line = unusable(serve("--storage", "broker", "--bootstrap-server", f"127.0.0.1:{free_port()}"))
    assert "cannot reach any bootstrap server" in line["error"]


def test_the_broker_storage_needs_a_bootstrap_server():
    result = serve("--storage", "broker")
    assert result.returncode == 2 and "--storage broker needs --bootstrap-server" in result.stderr


# --- a full disk: the quota ------------------------------------------------------------------------

async def commit_until_refused(port: int, limit: int = 400) -> tuple[dict[int, int], int, int]:
    """Commit offsets with 3 kB of metadata each, one partition at a time, until the server
    refuses one. Returns (partition -> acknowledged offset, the refusal's error code, how many
    later commits were refused too)."""
    client = await KafkaClient.connect("127.0.0.1", port)
    acked: dict[int, int] = {}
    refused_code, refused = 0, 0
    try:
        for n in range(limit):
            r = await client.request(8, {"group_id": "fill", "generation_id_or_member_epoch": -1, "member_id": "",
                                         "group_instance_id": None, "retention_time_ms": -1, "topics": [
                                             {"name": "big", "partitions": [
                                                 {"partition_index": n % 100, "committed_offset": n,
                                                  "committed_leader_epoch": -1, "committed_metadata": "m" * 3000}]}]}, 8)
            code = r["topics"][0]["partitions"][0]["error_code"]
            if code == 0 and not refused:
                acked[n % 100] = n
            elif code:
                refused_code = refused_code or code
                refused += 1
                if refused >= 5:
                    break
    finally:
        await client.close()
    return acked, refused_code, refused


async def fetch(port: int) -> dict[int, int]:
    client = await KafkaClient.connect("127.0.0.1", port)
    try:
        r = await client.request(9, {"group_id": "fill", "topics": None}, 7)
        return {p["partition_index"]: p["committed_offset"] for t in r["topics"] for p in t["partitions"]
                if p["committed_offset"] >= 0}
    finally:
        await client.close()


def check_full_disk_then_more_room(data_dir: Path, extra: tuple[str, ...], make_room) -> None:
    server = ServerProcess("--data-dir", str(data_dir), *extra, topics=("big=100",))
    try:
        acked, code, refused = asyncio.run(commit_until_refused(server.port))
        assert acked, "nothing was acknowledged before the disk filled up"
        assert code == 16 and refused >= 5  # KAFKA_STORAGE_ERROR, translated: NOT_COORDINATOR
        # logged before the first refusal was answered; the harness reads the log in its own thread
        wait_until(lambda: server.find("write_failed"), 10, "the failed write in the server's log")
        failures = server.events("write_failed")
        assert failures and failures[0]["level"] == "error" and failures[0]["error"] == "KAFKA_STORAGE_ERROR"
        assert "full" in failures[0]["detail"] and str(data_dir) in failures[0]["detail"]
        assert all(asyncio.run(fetch(server.port)).get(p, -1) >= n for p, n in acked.items())
    finally:
        server.proc.kill()  # no clean shutdown either
        server.proc.wait(10)
    make_room()
    server = ServerProcess("--data-dir", str(data_dir), topics=("big=100",))
    try:
        stored = asyncio.run(fetch(server.port))
        lost = {p: (n, stored.get(p)) for p, n in acked.items() if stored.get(p, -1) < n}
        assert not lost, f"acknowledged commits lost: {lost}"
        more, code, _ = asyncio.run(commit_until_refused(server.port, limit=5))
        assert code == 0 and len(more) == 5  # room again: commits are acknowledged
    finally:
        assert server.stop() == 143


def test_a_full_store_refuses_writes_with_a_storage_error_and_keeps_what_was_acknowledged(tmp_path):
    check_full_disk_then_more_room(tmp_path / "data", ("--sqlite-max-bytes", "131072"), lambda: None)


# --- real filesystems (tmpfs; skipped where mounting is not allowed) ---------------------------------

@pytest.fixture
def tmpfs(tmp_path):
    mounted: list[Path] = []

    def mount(size: str, *options: str) -> Path:
        point = tmp_path / f"mnt{len(mounted)}"
        point.mkdir()
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join((f"size={size}",) + options), "tmpfs",
                                 str(point)], capture_output=True, text=True)
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


def remount(point: Path, *options: str) -> None:
    subprocess.run(["mount", "-o", ",".join(("remount",) + options), str(point)], check=True, capture_output=True)


def test_a_data_directory_on_a_read_only_filesystem(tmpfs):
    point = tmpfs("1m")
    make_store(point / "data", rows=3)
    remount(point, "ro")
    line = unusable(serve("--data-dir", str(point / "data")))
    assert "is not writable" in line["error"]
    line = unusable(serve("--data-dir", str(point / "other")))
    assert "cannot create data directory" in line["error"] and "Read-only file system" in line["error"]


def test_a_full_filesystem_refuses_writes_and_loses_nothing_acknowledged(tmpfs):
    point = tmpfs("384k")
    check_full_disk_then_more_room(point / "data", (), lambda: remount(point, "size=32m"))
    shutil.rmtree(point / "data", ignore_errors=True)
