"""A SQLite data directory has one owner: a second store on it, in the same process or in another
process, is refused with the owner's process id; the lock goes with the store's close or the
owner's exit."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from server_harness import wait_until

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
