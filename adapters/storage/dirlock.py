"""One owner per data directory: an exclusive ``flock`` on ``DIR/.lock``.

Two processes writing one SQLite store would each acknowledge commits the other does not
serve (split brain). The owner holds the lock from before the database is opened until the
store is closed; the operating system drops it when the process dies, however it dies, so a
killed owner's directory is free at once. The owner writes its process id into the file, so a
refused opener can say who holds the directory. (Kafka locks each log directory the same way.)

``flock`` locks belong to an open file, not to a process: a second opening in the same process
is refused too, and a lock file descriptor is not inherited by child processes (close-on-exec).
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from groupcoord.adapters.storage.interface import StorageOpenError

LOCK_NAME = ".lock"


class DataDirLock:
    """The held lock on ``directory`` (which must exist); ``release()`` gives it up."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory).absolute()
        self.path = self.directory / LOCK_NAME
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise StorageOpenError(f"cannot open the lock file {self.path}: {e.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _owner(fd)
            os.close(fd)
            raise StorageOpenError(in_use_message(self.directory, owner)) from None
        except OSError as e:
            os.close(fd)
            raise StorageOpenError(f"cannot lock {self.path}: {e.strerror}") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as e:
            os.close(fd)
            raise StorageOpenError(f"cannot write the lock file {self.path}: {e.strerror}") from None
        self._file = os.fdopen(fd, "r+b", buffering=0)  # closed (and the lock dropped) with the object too

    def release(self) -> None:
        self._file.close()


def in_use_message(directory: Path, owner: int | None) -> str:
    who = f"process {owner}" if owner is not None else "another process"
    return f"data directory {directory} is in use by {who} (another groupcoord serve); " \
           "stop it or choose another --data-dir"


def _owner(fd: int) -> int | None:
    """The owner's process id from the lock file. The owner writes it just after taking the
    lock, so an empty file is read again for a moment."""
    for _ in range(50):
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text.isdigit():
            return int(text)
        time.sleep(0.01)  # the owner is between taking the lock and writing its id
    return None
