"""Throughput: steady-state training images/second, step-time spread, the wall-clock
rate, eval speed.

How it is timed, and why it is honest:
- Keras calls `on_train_batch_end` once per execution (every `steps_per_execution`
  steps) with the index of the last step run, and converts the step's logs to
  Python floats before it calls us, which waits for that step to finish on the
  device. So each call gives a (step index, completion time) mark, and images are
  counted from step indices, never from calls.
- On JAX, Keras runs batch hooks in worker threads when every callback is
  `async_safe`; this one is (O(1) work under a lock), so training keeps
  dispatching ahead and nothing here forces an extra host-device sync.
- Steady state (`images_per_sec`, `step_time_ms`): the marks of callbacks/figures/window.py's
  window, which leaves out compile and warm-up, and ends at each epoch's last step.
  Both figures always cover the same window: an epoch's in its logs, the whole
  run's in the public attributes (and summary.json).
- Wall clock (`images_per_sec_wall`): every image trained from the first window's
  start over the wall-clock seconds since then, evaluation, checkpoints and
  summaries included; what a user waits for, so time-to-train reads from it.
"""

from __future__ import annotations

import threading
import time

import keras

from callbacks.figures.window import (
    steady_state_begins,
    steady_window,
    step_time_spread,
)


class Throughput(keras.callbacks.Callback):
    """Measures steady-state and wall-clock training images per second, and eval speed.

    Publishes into epoch `logs`: `images_per_sec` (this epoch, steady state),
    `images_per_sec_per_device`, `step_time_ms`, `step_time_stderr_ms`,
    `step_time_jitter` (standard deviation / mean), `images_per_sec_wall` (the run
    so far, up to this epoch's end), `eval_images_per_sec`; into batch logs a
    running `images_per_sec` for the progress bar. Public attributes for the whole
    run: `images_per_sec`, `images_per_sec_wall`, `step_time()` (the step-time
    figures of the same window as `images_per_sec`), `epoch_images_per_sec`.

    Args:
        global_batch_size: images per training step over all replicas.
        num_devices: devices over all processes (for the per-device figure).
        warmup_steps: steps of the first epoch not counted; 0 = automatic
            (callbacks/figures/window.py).
        validation_images: images in one validation pass (for eval speed).
    """

    async_safe = True

    def __init__(self, global_batch_size: int, num_devices: int = 1,
                 warmup_steps: int = 0, validation_images: int = 0):
        super().__init__()
        if global_batch_size < 1:
            raise ValueError(f"global_batch_size must be >= 1, received {global_batch_size}")
        if num_devices < 1:
            raise ValueError(f"num_devices must be >= 1, received {num_devices}")
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, received {warmup_steps}")
        self.global_batch_size = global_batch_size
        self.num_devices = num_devices
        self.warmup_steps = warmup_steps
        self.validation_images = validation_images
        self.images_per_sec = self.images_per_sec_wall = self.eval_images_per_sec = None
        self.epoch_images_per_sec = []
        self._gaps = []  # (steps, seconds) between marks of every window of the run
        self._lock = threading.Lock()
        self._first_epoch = True
        self._steps_per_call = 1
        self._wall = [0, 0.0]  # images and seconds of earlier fits (a resumed run)
        self._wall_start = None  # time the first window of this fit started
        self._wall_images = 0  # images trained in this fit since then

    # ------------------------------------------------------------------ train
    def on_train_begin(self, logs=None):
        self._first_epoch = True
        self._wall_start, self._wall_images = None, 0
        # Read once, here: on JAX, `self.model` syncs the training state, which
        # must never happen from the worker threads that run batch hooks.
        self._steps_per_call = getattr(self.model, "steps_per_execution", 1) or 1

    def on_epoch_begin(self, epoch, logs=None):
        with self._lock:
            self._marks = []
            self._start = None  # the first mark that may start the window, as it arrived

    def _rule(self):
        return ((self.params or {}).get("steps"), self._steps_per_call, self._first_epoch,
                self.warmup_steps)

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        with self._lock:
            self._marks.append((batch, now))
            if self._start is None:
                if steady_state_begins(batch, *self._rule()):
                    self._start = (batch, now)
                return
            start_batch, start_time = self._start
            if logs is not None and now > start_time and batch > start_batch:
                logs["images_per_sec"] = (
                    (batch - start_batch) * self.global_batch_size / (now - start_time))

    def on_epoch_end(self, epoch, logs=None):
        now = time.perf_counter()
        with self._lock:
            window = steady_window(self._marks, *self._rule())
            last_step = max((m[0] for m in self._marks), default=-1)
            self._first_epoch = False
        if logs is not None and self.eval_images_per_sec is not None:
            logs["eval_images_per_sec"] = self.eval_images_per_sec
        self._count_wall(window, last_step, now)
        if self.images_per_sec_wall is not None and logs is not None:
            logs["images_per_sec_wall"] = self.images_per_sec_wall
        # Consecutive gaps telescope: their seconds add up to the window's exactly.
        gaps = [(b1 - b0, t1 - t0) for (b0, t0), (b1, t1) in zip(window, window[1:])
                if b1 > b0]
        if not gaps or sum(s for _, s in gaps) <= 0:
            return
        self._gaps += gaps
        epoch_rate = sum(n for n, _ in gaps) * self.global_batch_size / sum(s for _, s in gaps)
        self.images_per_sec = (sum(n for n, _ in self._gaps) * self.global_batch_size
                               / sum(s for _, s in self._gaps))
        self.epoch_images_per_sec.append(epoch_rate)
        if logs is not None:
            logs["images_per_sec"] = epoch_rate
            logs["images_per_sec_per_device"] = epoch_rate / self.num_devices
            logs.update(step_time_spread(gaps))

    def _count_wall(self, window, last_step, now) -> None:
        """Images since this fit's wall clock started (at its first window's start):
        the steps after that mark, then every step of each later epoch."""
        if self._wall_start is None:
            if not window:
                return
            self._wall_start = window[0][1]
            self._wall_images += (last_step - window[0][0]) * self.global_batch_size
        else:
            self._wall_images += (last_step + 1) * self.global_batch_size
        self.images_per_sec_wall = self._wall_rate(now)

    def _wall_rate(self, now: float) -> float | None:
        seconds = self._wall[1] + (now - self._wall_start if self._wall_start else 0.0)
        images = self._wall[0] + self._wall_images
        return images / seconds if seconds > 0 and images else None

    def step_time(self) -> dict:
        """step_time_ms, step_time_stderr_ms, step_time_jitter over the run's windows
        (the window of `images_per_sec`); {} before any was timed."""
        return step_time_spread(self._gaps)

    # ------------------------------------------------------------------- eval
    def on_test_begin(self, logs=None):
        # On JAX, fit dispatches training steps ahead of the device; evaluation
        # starts queued behind them. Wait for training to finish first, or the
        # evaluation clock would time the epoch's last training steps too.
        _wait_for_device(self.model)
        self._test_start = time.perf_counter()

    def on_test_end(self, logs=None):
        for value in (logs or {}).values():  # waits for the last evaluation step
            float(value)
            break
        seconds = time.perf_counter() - getattr(self, "_test_start", time.perf_counter())
        if self.validation_images and seconds > 0:
            self.eval_images_per_sec = self.validation_images / seconds

    def on_train_end(self, logs=None):
        # The last epoch's end work (checkpoint, summaries) is done: close this fit's
        # wall clock, so that a later fit (a resumed run) adds to it.
        if self._wall_start is not None:
            now = time.perf_counter()
            self._wall = [self._wall[0] + self._wall_images,
                          self._wall[1] + (now - self._wall_start)]
            self._wall_start, self._wall_images = None, 0
            self.images_per_sec_wall = self._wall_rate(now)
        if logs is not None and self.images_per_sec is not None:
            logs["images_per_sec"] = self.images_per_sec


def _wait_for_device(model) -> None:
    """Blocks until the device has computed the model's current weights."""
    variables = getattr(model, "trainable_variables", None)
    if variables:
        keras.ops.convert_to_numpy(variables[0].value)
