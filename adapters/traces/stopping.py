"""What a command leaves when it is stopped (Ctrl-C, SIGTERM) or fails: its results whole or
not at all, and no process of its own still running.

``written(target)`` is the one way a command writes a result (a file, or a directory such as a
Parquet dataset or a report): the block writes to ``<target>.tmp-<pid>`` beside the target,
which is renamed onto the target when the block ends normally and removed when it raises (an
error, or the ``KeyboardInterrupt`` a signal becomes: the command line turns SIGINT and
SIGTERM into one, ``cli.stopping``). Temporaries still pending when a command is stopped are
swept by ``remove_unfinished`` (a second signal can cut a block's own clean-up short).

``worker_pool`` and ``pool_results`` are the commands' process pools: Ctrl-C in a terminal reaches
every process of the foreground group, but only the command's main process answers it (it
stops the pool: ``quiet_worker``), and it does so at once, not at the next result.

It lives in ``traces``, below every wing that writes results (trace files, reports, verdicts,
recordings), which all import it from here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path
from typing import Callable, Iterator

_unfinished: set[Path] = set()  # temporaries of the blocks under way
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def stop_behind(e: BaseException | None) -> KeyboardInterrupt | None:
    """The interrupt ``e`` is, or was raised while handling, if any (a library that catches it
    and fails on its own way out, as hypothesis's runner and py4j's sockets do, leaves it in the
    chain)."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def temporary_name(target: Path) -> Path:
    """``<target>.tmp-<pid>``, beside the target (the same file system: the rename is atomic)."""
    return target.with_name(f"{target.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def written(target: str | os.PathLike, *, directory: bool = False,
            stale: Callable[[str], bool] | None = None) -> Iterator[Path]:
    """The temporary to write ``target`` into: renamed onto ``target`` when the block ends
    normally, removed when it raises; folders made for it are removed then too. ``directory``:
    the temporary is created as an empty directory. An existing target directory is replaced
    by the new one, but its entries the new one does not have are kept, except those ``stale``
    names (the command's own files of an earlier run, e.g. part files)."""
    target = Path(target)
    tmp = temporary_name(target)
    made = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
    _remove(tmp)
    target.parent.mkdir(parents=True, exist_ok=True)
    _unfinished.add(tmp)
    try:
        if directory:
            tmp.mkdir()
        yield tmp
        with _signals_held():  # renamed whole: a signal now waits for the rename
            _commit(tmp, target, stale or (lambda name: False))
    except BaseException:
        _remove(tmp)
        for folder in made:  # the innermost first
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    finally:
        _unfinished.discard(tmp)


def remove_unfinished() -> None:
    """Remove every temporary of a block still under way (the command is being stopped)."""
    for tmp in list(_unfinished):
        _remove(tmp)
        _unfinished.discard(tmp)


@contextlib.contextmanager
def worker_pool(processes: int):
    """A pool of ``processes`` forked processes, terminated when the block ends. It is made
    with the stop signals held, so that one arriving meanwhile is answered inside the block
    (a pool half made is never left behind); each worker leaves Ctrl-C to the command and dies
    of the pool's SIGTERM silently (``quiet_worker``)."""
    import multiprocessing as mp

    with _signals_held():
        pool = mp.get_context("fork").Pool(processes, initializer=quiet_worker, initargs=(os.getpid(),))
    with pool:
        yield pool


def pool_results(pool, fn, items) -> Iterator:
    """``pool.imap(fn, items)``, waited for in short steps: a signal is answered in the main
    thread, which a wait without a timeout would hold until the next result comes."""
    import multiprocessing as mp

    it = pool.imap(fn, items)
    while True:
        try:
            yield it.next(timeout=0.2)
        except mp.TimeoutError:
            continue
        except StopIteration:
            return


def quiet_worker(command_pid: int | None = None) -> None:
    """A pool process's initializer: Ctrl-C is the main process's to answer, SIGTERM (the
    pool stopping) ends the worker silently."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # held while the pool was made
    with contextlib.suppress(Exception):  # Linux: a worker the pool missed ends with the command
        import ctypes

        ctypes.CDLL(None).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
        if command_pid is not None and os.getppid() != command_pid:  # the command already gone
            os._exit(0)


def _commit(tmp: Path, target: Path, stale: Callable[[str], bool]) -> None:
    if not (tmp.is_dir() and target.is_dir() and not target.is_symlink()):
        os.replace(tmp, target)
        return
    old = target.with_name(f"{target.name}.old-{os.getpid()}")
    _remove(old)
    os.replace(target, old)
    os.replace(tmp, target)
    for entry in old.iterdir():
        if not stale(entry.name) and not (target / entry.name).exists():
            os.replace(entry, target / entry.name)
    shutil.rmtree(old, ignore_errors=True)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back while the block runs (delivered after it), in the main
    thread; elsewhere nothing to hold (signals are handled in the main thread)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
