"""A SQLite data directory has one owner: a second store on it, in the same process, in another
process or as a second ``groupcoord serve``, is refused with the owner's process id; the lock
goes with the store's close, a clean stop or a SIGKILL."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from server_harness import ServerProcess, wait_until

from groupcoord.adapters.cli.admin import commit_offsets, fetch_offsets
from groupcoord.adapters.client.kafka_client import Cluster
from groupcoord.adapters.storage.dirlock import LOCK_NAME
from groupcoord.adapters.storage.sqlite import DB_NAME, SqliteStorage, StorageOpenError


def in_use(directory, pid: int) -> str:
    return f"data directory {directory} is in use by process {pid} (another groupcoord serve); " \
           "stop it or choose another --data-dir"


# --- the store, without a server ---------------------------------------------------------------------

def test_a_second_store_in_the_same_process_is_refused_until_the_first_closes(tmp_path):
    first = SqliteStorage(tmp_path)
    try:
        assert (tmp_path / LOCK_NAME).read_text() == f"{os.getpid()}\n"
        with pytest.raises(StorageOpenError) as refused:
            SqliteStorage(tmp_path)
        assert str(refused.value) == in_use(tmp_path, os.getpid())
    finally:
        asyncio.run(first.close())
    asyncio.run(SqliteStorage(tmp_path).close())  # free again


def test_a_store_held_by_another_process_is_refused_and_free_once_that_process_exits(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom groupcoord.adapters.storage.sqlite import SqliteStorage\n"
                               "s = SqliteStorage(sys.argv[1])\nsys.stdin.read()\n", str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (tmp_path / LOCK_NAME).exists() and (tmp_path / LOCK_NAME).read_text() == f"{holder.pid}\n"
                   or holder.poll() is not None, 30, "the other process to hold the store")
        assert holder.poll() is None, holder.stderr.read()
        with pytest.raises(StorageOpenError) as refused:
            SqliteStorage(tmp_path)
        assert str(refused.value) == in_use(tmp_path, holder.pid)
    finally:
        holder.stdin.close()  # it exits without closing the store: the OS drops the lock
        holder.wait(10)
    asyncio.run(SqliteStorage(tmp_path).close())


def test_a_refused_opening_releases_the_lock(tmp_path):
    (tmp_path / DB_NAME).write_bytes(b"this is not a database" * 100)
    with pytest.raises(StorageOpenError, match="not a usable groupcoord database"):
        SqliteStorage(tmp_path)
    (tmp_path / DB_NAME).unlink()
    asyncio.run(SqliteStorage(tmp_path).close())


def test_the_lock_file_may_hold_a_dead_owners_id(tmp_path):
    (tmp_path / LOCK_NAME).write_text("999999999\n")  # left by a process that died
    s = SqliteStorage(tmp_path)
    try:
        assert (tmp_path / LOCK_NAME).read_text() == f"{os.getpid()}\n"
    finally:
        asyncio.run(s.close())


# --- groupcoord serve --------------------------------------------------------------------------------

def commit(port: int, group: str, offset: int) -> dict:
    async def go():
        cluster = Cluster(f"127.0.0.1:{port}", timeout=10)
        try:
            return await commit_offsets(cluster, group, {("t6", 0): offset})
        finally:
            await cluster.close()
    return asyncio.run(go())


def committed(port: int, group: str) -> int | None:
    async def go():
        cluster = Cluster(f"127.0.0.1:{port}", timeout=10)
        try:
            return (await fetch_offsets(cluster, group)).get(("t6", 0), {}).get("offset")
        finally:
            await cluster.close()
    return asyncio.run(go())


def test_a_second_serve_on_the_directory_exits_at_once_and_the_first_keeps_serving(tmp_path):
    data_dir = tmp_path / "data"
    first = ServerProcess("--data-dir", str(data_dir))
    try:
        started = time.monotonic()
        second = subprocess.run(first.cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
        assert time.monotonic() - started < 10
        assert second.returncode == 2, second.stderr
        lines = second.stderr.splitlines()  # the structured line (the log is JSON), then the refusal
        assert len(lines) == 2 and "Traceback" not in second.stderr, second.stderr
        assert lines[1] == f"groupcoord serve: error: {in_use(data_dir, first.proc.pid)}"
        line = json.loads(lines[0])
        assert line["level"] == "error" and line["event"] == "storage_unusable"
        assert line["error"] == in_use(data_dir, first.proc.pid)
        assert (data_dir / LOCK_NAME).read_text() == f"{first.proc.pid}\n"  # the refused one wrote nothing

        assert commit(first.port, "owned", 42) == {("t6", 0): 0}  # the first still serves, and stores
        assert committed(first.port, "owned") == 42
    finally:
        assert first.stop() == 143
    third = ServerProcess("--data-dir", str(data_dir))  # the lock went with the clean stop
    try:
        assert committed(third.port, "owned") == 42  # what the first acknowledged is there
        assert (data_dir / LOCK_NAME).read_text() == f"{third.proc.pid}\n"
    finally:
        assert third.stop() == 143


def test_a_killed_owner_frees_the_directory_at_once(tmp_path):
    data_dir = tmp_path / "data"
    first = ServerProcess("--data-dir", str(data_dir))
    try:
        assert commit(first.port, "killed", 7) == {("t6", 0): 0}
    finally:
        first.signal(signal.SIGKILL)
        first.proc.wait(10)
        first.stop()
    second = ServerProcess("--data-dir", str(data_dir))
    try:
        assert not second.find("storage_unusable")
        assert committed(second.port, "killed") == 7
        assert (data_dir / LOCK_NAME).read_text() == f"{second.proc.pid}\n"
    finally:
        assert second.stop() == 143
