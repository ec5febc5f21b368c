"""The threads and processes behind a GpuJpegStream.

`Running` is one pass of a stream: a thread that submits batch plans to the worker
processes and collects them in order, and a thread that decodes each plan onto the
devices (GpuJpegStream._materialize), each `prefetch` batches ahead, handing errors
to the consumer. `process_pool` holds the planning processes, shared by every
stream of the training process.
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures
import functools
import multiprocessing
import queue
import threading
import weakref

END = object()  # the end of an evaluation pass


@functools.lru_cache(maxsize=None)
def process_pool(workers: int) -> concurrent.futures.ProcessPoolExecutor:
    """Planning processes, shared by every stream of this process. Spawned, not forked:
    the training process runs JAX's and XLA's threads, which a fork would not copy."""
    pool = concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"))
    atexit.register(pool.shutdown, wait=False, cancel_futures=True)
    return pool


class Running:
    """A stream's two threads: one collects plans in order, one decodes them."""

    def __init__(self, stream, start):
        self.stream, self.start = stream, start
        self.plans = queue.Queue(maxsize=stream.prefetch)
        self.batches = queue.Queue(maxsize=stream.prefetch)
        self.stopping = threading.Event()
        _RUNNING.add(self)
        self.threads = [threading.Thread(target=self._guard, args=(fn,), daemon=True,
                                         name=f"jpeg{fn.__name__}")
                        for fn in (self._planning, self._decoding)]
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

    def _guard(self, fn):
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
            self._put(self.batches, _Error(e))

    def _planning(self):
        stream = self.stream
        ahead = max(2, 2 * stream.workers)  # batches being planned at once
        pending = collections.deque()
        positions = stream._positions(self.start)
        while not self.stopping.is_set():
            while len(pending) < ahead:
                position = next(positions, None)
                if position is None:
                    break
                pending.append((position, *stream._submit(position)))
            if not pending:
                break
            position, records, future = pending.popleft()
            plan = stream._finish(position, records, future.result())
            if not self._put(self.plans, plan):
                break
        for _, _, future in pending:
            future.cancel()
        self._put(self.plans, END)

    def _decoding(self):
        while True:
            plan = self._get(self.plans)
            if plan is END:
                self._put(self.batches, END)
                return
            position, parts = plan
            batch = self.stream._materialize(parts)
            if batch is not None and not self._put(self.batches, (position, batch)):
                return

    def take(self):
        item = self.batches.get()
        if isinstance(item, _Error):
            raise RuntimeError(f"the JPEG input pipeline failed: {item.error!r}") from item.error
        return item

    def stop(self):
        self.stopping.set()
        for thread in self.threads:
            if thread is not threading.current_thread():
                thread.join(timeout=60)


class _Error:
    def __init__(self, error: BaseException):
        self.error = error


_RUNNING = weakref.WeakSet()


@atexit.register
def _stop_all():
    """Stops every stream's threads before the interpreter goes (a thread killed
    inside XLA or nvImageCodec at exit aborts the process)."""
    for running in list(_RUNNING):
        running.stop()
