"""Worker processes that end with the run, however it ends (tests/test_workers.py).

Grain starts a pipeline's decoding workers itself (spawned processes); this module
makes them die with the run and stops them in order, in bounded time:

- In each worker, grain's `worker_init_fn` hook (`_worker_init`) ignores SIGINT (a
  terminal's Ctrl-C reaches every process of the group; the run, which takes it,
  closes its workers), and asks Linux to
  SIGKILL it when its parent ends (prctl PR_SET_PDEATHSIG, through the host wing's
  native floor, native/prctl.py): a SIGKILLed run (the OOM
  killer, a preempted VM's agent) or one that ends in `os._exit` (the stall watchdog,
  the grace period of app/run/signals.py) takes its workers with it, stopped ones
  included. The hook then checks that the parent is still there (it may have died
  while the worker was importing, before the request existed).
  Trap: the "parent" of PR_SET_PDEATHSIG is the *thread* that forked the worker.
  Grain forks each worker from that worker's own reader thread
  (`grain-thread-prefetch`, interleave.py's ThreadPrefetchDatasetIterator), which
  lives exactly as long as the worker's stream is read: it ends when the stream
  ends, fails or is closed, all of which stop the worker anyway. Its `set_state` on a
  running stream would end it too (killing the worker: "Worker process was terminated
  unexpectedly"), so grain_stream never restores a running stream in place: it
  builds a new one.
- Each worker writes its pid into its slot of a small file its pipeline owns
  (`Workers`), so the pipeline knows its own workers among the process's children
  (a worker still starting has not: `processes()` says how it is found).
- `Workers.close()` runs grain's own shutdown and sees it end within STOP_SECONDS
  (within app/run/signals.py's 25 s grace): POLITE_SECONDS for grain's, then SIGTERM
  to the workers still alive, then SIGKILL after KILL_AFTER_SECONDS. Grain's own
  close waits 25 s for each worker in turn (process_prefetch.py), 35 s measured
  with stopped workers.
- At exit, every open pipeline is closed before multiprocessing's exit handler runs
  its finalizers: those close the pipeline's queues first (a queue's finalizer has a
  higher priority than grain's), and grain's late close then ended in four
  `OSError: handle is closed` tracebacks after a resumed run's closing lines.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import multiprocessing
import multiprocessing.util  # noqa: F401 - its exit handler is registered before ours
import os
import signal
import struct
import sys
import tempfile
import threading
import time
import weakref

from preprocessing.host.native import prctl

POLITE_SECONDS = 2.0  # grain's own shutdown: the workers end their loop and exit
KILL_AFTER_SECONDS = 5.0  # after SIGTERM
STOP_SECONDS = 10.0  # the most close() takes (its steps above, then grain's end)
_PID = struct.Struct("<q")


def _worker_init(parent: int, path: str, index: int, count: int) -> None:
    """Grain's worker_init_fn, in worker `index` of `count`: ignore Ctrl-C, die with
    `parent`."""
    del count
    # A terminal's Ctrl-C goes to the whole process group: each worker printed a
    # KeyboardInterrupt traceback from grain's queue while the run saved its checkpoint
    # and ended well (exit 75). The run decides: it closes its workers (`Workers.close`).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if prctl.supported():
        prctl.set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent:  # the run ended before the request was made
        os.kill(os.getpid(), signal.SIGKILL)
    handle = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(handle, _PID.pack(os.getpid()), index * _PID.size)
    finally:
        os.close(handle)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


class Workers:
    """The worker processes of one pipeline: started by grain, stopped here.

    Args:
        count: the pipeline's worker processes (grain's `num_workers`); 0 for none.
    """

    def __init__(self, count: int):
        self.count = count
        handle, self._path = tempfile.mkstemp(prefix="grain-workers-", suffix=".pids")
        os.ftruncate(handle, max(1, count) * _PID.size)
        os.close(handle)
        weakref.finalize(self, _remove, self._path)
        _register_at_exit()  # after weakref.finalize's own exit handler: runs before it
        self._iterator = None
        self._lock = threading.Lock()

    def init_fn(self):
        """The `worker_init_fn` to give grain's `mp_prefetch` (picklable)."""
        return functools.partial(_worker_init, os.getpid(), self._path)

    def attach(self, iterator) -> None:
        """Makes `iterator` (grain's, whose workers these are) the one `close` ends.

        Until then this object is held for the exit handler: a pipeline dropped
        unclosed is closed at exit (grain's iterators live on in reference cycles).
        """
        with self._lock:
            self._iterator = iterator
            _OPEN.add(self)

    def pids(self) -> list[int]:
        """The pids the workers wrote (the latest of each slot; 0 for none yet)."""
        try:
            with open(self._path, "rb") as f:
                data = f.read()
        except OSError:  # removed: this object is being collected
            return []
        return [_PID.unpack_from(data, i * _PID.size)[0]
                for i in range(len(data) // _PID.size)]

    def processes(self) -> list:
        """This pipeline's workers still alive (multiprocessing Process objects): those
        that wrote their pid here and, while some have not, grain's workers that no
        open pipeline has heard from (still starting: their first lines are imports).
        (multiprocessing drops a Process's arguments once started, so nothing else
        tells whose a starting worker is.)"""
        mine = set(self.pids()) - {0}
        children = multiprocessing.active_children()
        found = [p for p in children if p.pid in mine]
        if len(found) < self.count:
            claimed = {pid for other in list(_OPEN) if other is not self
                       for pid in other.pids()}
            found += [p for p in children if p.pid not in mine | claimed
                      and p.name.startswith("grain-process-prefetch")]
        return found

    def close(self) -> None:
        """Closes the attached iterator and ends its workers, within STOP_SECONDS."""
        with self._lock:
            iterator, self._iterator = self._iterator, None
            _OPEN.discard(self)
        if iterator is None or not hasattr(iterator, "close"):
            return
        deadline = time.monotonic() + STOP_SECONDS
        workers = self.processes()
        closing = threading.Thread(target=_quietly, args=(iterator.close,), daemon=True,
                                   name="grain_close")
        closing.start()
        if workers:
            _end(workers, closing)
        # Grain's close ends once its workers have; one that still hangs is left to
        # its daemon thread (and its workers, if any, to PR_SET_PDEATHSIG at exit).
        closing.join(max(0.0, deadline - time.monotonic()))


def _quietly(close) -> None:
    # Closing a stream whose workers were just killed may raise in grain's threads
    # ("Worker process was terminated unexpectedly"): the stream is being closed.
    with contextlib.suppress(Exception):
        close()


def _end(workers: list, closing: threading.Thread) -> None:
    """Waits for grain's close, then SIGTERM, then SIGKILL, for workers still alive."""
    closing.join(POLITE_SECONDS)
    alive = [p for p in workers if p.is_alive()]
    for process in alive:
        with contextlib.suppress(OSError):
            process.terminate()
    deadline = time.monotonic() + KILL_AFTER_SECONDS
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if p.is_alive()]
    for process in alive:
        with contextlib.suppress(OSError):
            process.kill()  # also ends a stopped (SIGSTOP) worker
    for process in alive:
        process.join(0.5)


_OPEN: set = set()  # Workers with an iterator attached
_AT_EXIT = []


def _register_at_exit() -> None:
    """Registers `_close_all` once, after multiprocessing's and weakref.finalize's
    exit handlers (imported or used before): exit handlers run last in, first out."""
    if not _AT_EXIT:
        _AT_EXIT.append(atexit.register(_close_all))


def _close_all() -> None:
    """Closes every open pipeline, together (each within STOP_SECONDS)."""
    closing = [threading.Thread(target=w.close, daemon=True) for w in set(_OPEN)]
    for thread in closing:
        thread.start()
    for thread in closing:
        thread.join(STOP_SECONDS + 1)
    # A worker that had not yet written its pid (still importing) is left to grain's
    # close, which may wait 25 s for it: at exit every grain worker ends now.
    for process in multiprocessing.active_children():
        if process.name.startswith("grain-process-prefetch"):
            process.kill()
