"""Stall watchdog: a run whose training makes no progress for a long time is ended.

An input stream that yields nothing (every image undecodable, storage that hangs)
leaves `fit` blocked inside the framework forever, billing all the while. This
callback notes each finished batch (train or evaluation; O(1), so it stays
`async_safe`), and a daemon thread calls `on_stall(seconds)` when none has
finished for `limit_seconds`. The first step's compilation counts as progress
only once it ends, so the limit must be far above any compile time.
"""

from __future__ import annotations

import threading
import time

import keras


class StallWatchdog(keras.callbacks.Callback):
    """Calls `on_stall(limit_seconds)` from a thread when no batch ends for that long.

    Args:
        limit_seconds: how long without a finished batch is a stall.
        on_stall: fn(seconds); it is expected to end the process (app/run/signals.py).
    """

    async_safe = True

    def __init__(self, limit_seconds: float, on_stall):
        super().__init__()
        if limit_seconds <= 0:
            raise ValueError(f"limit_seconds must be > 0, received {limit_seconds}")
        self.limit_seconds = limit_seconds
        self.on_stall = on_stall
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread = None

    def _progress(self, *_args, **_kwargs):
        self._last = time.monotonic()

    on_train_batch_end = on_test_batch_end = on_epoch_begin = on_epoch_end = _progress

    def on_train_begin(self, logs=None):
        self._progress()
        self._stop.clear()
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._watch, daemon=True, name="stall")
            self._thread.start()

    def _watch(self):
        while not self._stop.wait(min(1.0, self.limit_seconds / 4)):
            if time.monotonic() - self._last > self.limit_seconds:
                self.on_stall(self.limit_seconds)
                return

    def on_train_end(self, logs=None):
        self._stop.set()
