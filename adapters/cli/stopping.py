"""How every command stops on Ctrl-C (SIGINT) and SIGTERM: one line on stderr,
``groupcoord <command>: interrupted``, and exit status 130 (143 for SIGTERM), with nothing
half-written left and no process of its own still running.

``take_signals`` (``main`` calls it first) makes SIGTERM end a command as Ctrl-C does: as a
``KeyboardInterrupt`` (``Interrupted``, naming the signal), which unwinds the command, so each
of its blocks stops what it started on the way out (a pool is terminated, TLC's Java process
killed by ``subprocess.run``, the Spark session stopped: ``traces.spark_session``) and a result
being written is removed (``traces.stopping.written``). ``main`` catches it and calls
``interrupted``, which sweeps what a second signal may have left and prints the line.
``serve`` and ``record``, whose normal end is a signal, stop cleanly on their own and end with
the same ``interrupted``.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import signal
import sys
import threading

from groupcoord.adapters.traces.stopping import STOP_SIGNALS, remove_unfinished


class Interrupted(KeyboardInterrupt):
    """The KeyboardInterrupt a stop signal becomes; ``signum`` names the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_collecting = False  # a garbage collection is under way
_deferred: list[int] = []  # a signal that came during one


def _interrupt(signum: int, frame) -> None:
    if _collecting or (frame is not None and frame.f_code in _GC_CALLBACKS):
        # an exception raised now, inside the collection's callbacks or finalizers, would be
        # printed and dropped ("Exception ignored in ..."): the signal is sent again after it
        _deferred.append(signum)
        return
    raise Interrupted(signum)


def _collection_starts(phase: str, _info: dict) -> None:
    global _collecting
    if phase == "start":
        _collecting = True
        if gc.callbacks[-1] is not _collection_ends:  # called after every other callback
            with contextlib.suppress(ValueError):
                gc.callbacks.remove(_collection_ends)
            gc.callbacks.append(_collection_ends)


def _collection_ends(phase: str, _info: dict) -> None:
    global _collecting
    if phase == "stop":
        _collecting = False
        if _deferred:  # sent from another thread: raised here, in a callback, it would be dropped again
            threading.Timer(0.01, signal.pthread_kill, (threading.main_thread().ident, _deferred.pop())).start()


_GC_CALLBACKS = (_collection_starts.__code__, _collection_ends.__code__)  # ours run before the flag is set


def take_signals() -> None:
    """SIGINT and SIGTERM raise ``Interrupted`` in the main thread, never inside a garbage
    collection (a signal that was ignored when the command started, as under ``nohup``, stays
    ignored)."""
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _interrupt)
    if _collection_starts not in gc.callbacks:
        gc.callbacks.insert(0, _collection_starts)
        gc.callbacks.append(_collection_ends)


def signal_of(e: KeyboardInterrupt) -> int:
    """The signal behind a KeyboardInterrupt (SIGINT unless ``Interrupted`` says otherwise)."""
    return getattr(e, "signum", signal.SIGINT)


def interrupted(prog: str, signum: int) -> int:
    """The end of a stopped command: leftovers swept, the one line, 128 + the signal."""
    for sig in STOP_SIGNALS:  # the stop is under way: the same request again changes nothing
        signal.signal(sig, signal.SIG_IGN)
    remove_unfinished()
    # tasks the interrupt ended are reported by asyncio when collected, after the line: not news
    logging.getLogger("asyncio").disabled = True
    with contextlib.suppress(OSError, ValueError):  # a reader gone, or stdout closed
        sys.stdout.flush()
        _bars_closed()
    print(f"{prog}: interrupted", file=sys.stderr, flush=True)
    return 128 + int(signum)


def _bars_closed() -> None:
    """Progress bars the stopped command still shows (``traces.progress``'s tqdm bars) are
    closed, so that the line starts a line of its own: erased on a terminal, ended elsewhere."""
    std = sys.modules.get("tqdm.std")
    # (a bar the signal caught half made has no ``disable`` yet: nothing drawn)
    bars = [bar for bar in list(getattr(std.tqdm, "_instances", ())) if not getattr(bar, "disable", True)] \
        if std else []
    for bar in bars:
        with contextlib.suppress(Exception):
            bar.close()
    if bars and not sys.stderr.isatty():
        sys.stderr.write("\n")
