"""When fit began and when its first training call ended: the start-up timeline's end.

app/engine/startup.py's timeline runs from the process's start to the end of the
first training call; this callback gives its last two marks, by the wall clock
(`time.time()`, as the timeline's other marks): the end of fit's begin hooks and the
end of the first call (`steps_per_execution` steps). Keras converts a call's logs to
Python numbers before its batch hook runs, which waits for the call's steps to finish
on the device: the hook's time is the steps' end (callbacks/throughput.py relies on
the same).

Put it last in the callback list: its begin hook then runs after every other
callback's (theirs are fit's start), and its first batch hook after theirs.
"""

from __future__ import annotations

import threading
import time

import keras


class FirstStep(keras.callbacks.Callback):
    """Records `train_began_at` (fit's begin hooks done) and `first_step_at` (its first
    training call done), `time.time()` each, once: the first of two fits
    (a mid-epoch resume) counts. `steps_in_first_call`: the steps that call ran."""

    async_safe = True  # O(1) under a lock, no device work

    def __init__(self):
        super().__init__()
        self.train_began_at: float | None = None
        self.first_step_at: float | None = None
        self.steps_in_first_call: int | None = None
        self._lock = threading.Lock()
        self._steps_per_call = 1

    def on_train_begin(self, logs=None):
        now = time.time()
        # Read here, on the main thread: on JAX, `self.model` syncs the training state.
        self._steps_per_call = getattr(self.model, "steps_per_execution", 1) or 1
        with self._lock:
            if self.train_began_at is None:
                self.train_began_at = now

    def on_train_batch_end(self, batch, logs=None):
        now = time.time()
        with self._lock:
            if self.first_step_at is None:
                self.first_step_at = now
                # the call's steps: up to steps_per_execution, fewer at an epoch's end
                self.steps_in_first_call = min(batch + 1, self._steps_per_call)
