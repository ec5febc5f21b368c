"""The threads and processes behind a stream of batches planned, then decoded.

`Running` is one pass of a stream: a thread that submits batch plans (to the worker
processes) and collects them in order, and one or more threads (lanes) that decode
plans onto the devices at the same time, handing the batches to the consumer in
order, and errors too. What planning and decoding are, it is handed as plain
callables (`Work`). `process_pool` holds the planning processes, shared by every
stream of the training process.
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures
import dataclasses
import functools
import multiprocessing
import os
import queue
import threading
import time
import weakref
from typing import Callable

END = object()  # the end of an evaluation pass


@functools.lru_cache(maxsize=None)
def process_pool(workers: int) -> concurrent.futures.ProcessPoolExecutor:
    """Planning processes, shared by every stream of this process. Spawned, not forked:
    the training process runs JAX's and XLA's threads, which a fork would not copy."""
    pool = concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"),
        initializer=_exit_with_parent, initargs=(os.getpid(),))
    atexit.register(pool.shutdown, wait=False, cancel_futures=True)
    return pool


def _exit_with_parent(parent: int) -> None:
    """In a planning process: exits once the training process is gone. Killed (SIGKILL,
    the OOM killer) it never says so, and the pool's processes, each holding its task
    queue's write end, would wait for tasks forever, and keep multiprocessing's resource
    tracker, which unlinks the shared-memory blocks, from ever cleaning up."""
    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent_watch").start()


@dataclasses.dataclass(frozen=True)
class Work:
    """What a pass plans and decodes, as callables `Running` calls from its threads,
    and how far ahead it works."""

    submit: Callable  # position -> (records, a Future of its slots, its block or None)
    finish: Callable  # (position, records, slots, block) -> a plan (position, parts)
    materialize: Callable  # (parts, lane) -> the batch, or None (dropped: nothing decoded)
    release: Callable  # block -> None: the block may be reused (None: there is none)
    lanes: int  # decoding threads
    prefetch: int  # batches made ahead of the consumer, beside one per lane
    plan_ahead: int  # batches being planned at once


class Running:
    """A pass's threads: one collects plans in order, `work.lanes` decode them.

    Each plan carries its sequence number; the decoding threads (lanes) take plans as
    they come and may finish out of order, so finished batches wait in `done` until
    the consumer reaches them: the stream's order never depends on the threads'
    timing. A lane starts a batch only while it is fewer than `prefetch + lanes`
    batches ahead of the consumer, which bounds the canvases in flight.

    Args:
        positions: an iterator of the pass's batch positions, in order.
        work: what to do with each.
    """

    def __init__(self, positions, work: Work):
        self.positions, self.work = positions, work
        self.ahead = work.prefetch + work.lanes  # batches made before they are taken
        self.plans = queue.Queue(maxsize=self.ahead)
        self.done = {}  # sequence number -> (position, batch) or None (dropped)
        self.taken = 0  # sequence number of the next batch the consumer takes
        self.end = None  # number of plans in a finite pass, once known
        self.failure = None  # the first exception of a background thread
        self.changed = threading.Condition()
        self.stopping = threading.Event()
        _RUNNING.add(self)
        self.threads = [threading.Thread(target=self._guard, args=(self._planning,),
                                         daemon=True, name="jpeg_planning")]
        self.threads += [threading.Thread(target=self._guard, args=(self._decoding, lane),
                                          daemon=True, name=f"jpeg_decoding{lane or ''}")
                         for lane in range(work.lanes)]
        for thread in self.threads:
            thread.start()

    def _put(self, where: queue.Queue, item) -> bool:
        while not self.stopping.is_set():
            try:
                where.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _get(self, where: queue.Queue):
        while not self.stopping.is_set():
            try:
                return where.get(timeout=0.1)
            except queue.Empty:
                continue
        return END

    def _guard(self, fn, *args):
        try:
            fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
            with self.changed:
                if self.failure is None:
                    self.failure = e
                self.changed.notify_all()

    def _planning(self):
        work = self.work
        pending = collections.deque()
        sequence = 0
        try:
            while not self.stopping.is_set():
                while len(pending) < work.plan_ahead:
                    position = next(self.positions, None)
                    if position is None:
                        break
                    pending.append((position, *work.submit(position)))
                if not pending:
                    break
                position, records, future, block = pending[0]
                plan = work.finish(position, records, future.result(), block)
                pending.popleft()
                if not self._put(self.plans, (sequence, plan, block)):
                    work.release(block)
                    break
                sequence += 1
        finally:
            # A plan being written into its block must end before the block is reused.
            for _, _, future, _ in pending:
                future.cancel()
            concurrent.futures.wait([future for _, _, future, _ in pending])
            for _, _, _, block in pending:
                work.release(block)
        if not self.stopping.is_set():
            with self.changed:
                self.end = sequence
                self.changed.notify_all()
        for _ in range(work.lanes):  # one END for each lane
            self._put(self.plans, END)

    def _decoding(self, lane: int):
        while True:
            item = self._get(self.plans)
            if item is END:
                return
            sequence, (position, parts), block = item
            try:
                with self.changed:
                    while sequence >= self.taken + self.ahead and not self.stopping.is_set():
                        self.changed.wait(0.1)
                if self.stopping.is_set():
                    return
                batch = self.work.materialize(parts, lane)
            finally:  # the decode has read the block (it synchronizes its stream)
                self.work.release(block)
            with self.changed:
                self.done[sequence] = None if batch is None else (position, batch)
                self.changed.notify_all()

    def take(self):
        """The next batch in the stream's order (position, batch), or END (the pass is
        over, or the stream was stopped)."""
        with self.changed:
            while True:
                if self.failure is not None:
                    e = self.failure
                    raise RuntimeError(f"the JPEG input pipeline failed: {e!r}") from e
                if self.taken in self.done:
                    item = self.done.pop(self.taken)
                    self.taken += 1
                    self.changed.notify_all()
                    if item is not None:  # None: a batch dropped (no image decoded)
                        return item
                elif (self.end is not None and self.taken >= self.end) or self.stopping.is_set():
                    return END
                else:
                    self.changed.wait(0.1)

    def stop(self):
        self.stopping.set()
        with self.changed:
            self.changed.notify_all()
        for thread in self.threads:
            if thread is not threading.current_thread():
                thread.join(timeout=60)
        if not any(thread.is_alive() for thread in self.threads):
            while True:  # plans no lane took: their blocks are free again
                try:
                    item = self.plans.get_nowait()
                except queue.Empty:
                    break
                if item is not END:
                    self.work.release(item[2])


_RUNNING = weakref.WeakSet()


@atexit.register
def _stop_all():
    """Stops every stream's threads before the interpreter goes (a thread killed
    inside XLA or nvImageCodec at exit aborts the process)."""
    for running in list(_RUNNING):
        running.stop()
