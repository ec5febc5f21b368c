"""Throughput: steady-state training images/second, step-time spread, eval speed.

How it is timed, and why it is honest:
- Keras calls `on_train_batch_end` once per execution (every `steps_per_execution`
  steps) with the index of the last step run, and converts the step's logs to
  Python floats before it calls us, which waits for that step to finish on the
  device. So each call gives a (step index, completion time) mark, and images are
  counted from step indices, never from calls.
- On JAX, Keras runs batch hooks in worker threads when every callback is
  `async_safe`; this one is (O(1) work under a lock), so training keeps
  dispatching ahead and nothing here forces an extra host-device sync.
- Compile and warm-up are excluded: the marks of the first `warmup_steps` of the
  first epoch, and the first execution of every later epoch (the input pipeline
  restarts after evaluation), are not counted.
"""

from __future__ import annotations

import math
import threading
import time

import keras


class Throughput(keras.callbacks.Callback):
    """Measures steady-state training and evaluation images per second.

    Publishes into epoch `logs`: `images_per_sec` (this epoch, steady state),
    `images_per_sec_per_device`, `step_time_ms`, `step_time_stderr_ms`,
    `step_time_jitter` (standard deviation / mean), `eval_images_per_sec`; into
    batch logs a running `images_per_sec` for the progress bar. Public attributes:
    `images_per_sec` (whole job so far), `epoch_images_per_sec`, `step_times_s`.

    Args:
        global_batch_size: images per training step over all replicas.
        num_devices: devices over all processes (for the per-device figure).
        warmup_steps: steps of the first epoch not counted; 0 = automatic
            (max(2 executions, 5% of the epoch)).
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
        self.images_per_sec = None
        self.epoch_images_per_sec = []
        self.step_times_s = []
        self.eval_images_per_sec = None
        self._lock = threading.Lock()
        self._steady_images = 0
        self._steady_seconds = 0.0
        self._first_epoch = True
        self._steps_per_call = 1

    # ------------------------------------------------------------------ train
    def on_train_begin(self, logs=None):
        self._first_epoch = True
        # Read once, here: on JAX, `self.model` syncs the training state, which
        # must never happen from the worker threads that run batch hooks.
        self._steps_per_call = getattr(self.model, "steps_per_execution", 1) or 1

    def on_epoch_begin(self, epoch, logs=None):
        with self._lock:
            self._marks = []
            self._start = None  # (step, time) where steady state begins

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        with self._lock:
            self._marks.append((batch, now))
            if self._start is None:
                if steady_state_begins(batch, len(self._marks), (self.params or {}).get("steps"),
                                       self._steps_per_call, self._first_epoch,
                                       self.warmup_steps):
                    self._start = (batch, now)
                return
            start_batch, start_time = self._start
            if logs is not None and now > start_time and batch > start_batch:
                logs["images_per_sec"] = (
                    (batch - start_batch) * self.global_batch_size / (now - start_time))

    def on_epoch_end(self, epoch, logs=None):
        with self._lock:
            marks = sorted(self._marks)
            start = self._start
            self._first_epoch = False
        if logs is not None and self.eval_images_per_sec is not None:
            logs["eval_images_per_sec"] = self.eval_images_per_sec
        if start is None:
            return
        steady = [m for m in marks if m[0] >= start[0]]
        if len(steady) < 2:
            return
        (first_batch, first_time), (last_batch, last_time) = steady[0], steady[-1]
        images = (last_batch - first_batch) * self.global_batch_size
        seconds = last_time - first_time
        if seconds <= 0:
            return
        self._steady_images += images
        self._steady_seconds += seconds
        self.images_per_sec = self._steady_images / self._steady_seconds
        epoch_rate = images / seconds
        self.epoch_images_per_sec.append(epoch_rate)
        # Per-step times: each gap between marks covers (index difference) steps.
        step_times = [(t1 - t0) / (b1 - b0)
                      for (b0, t0), (b1, t1) in zip(steady, steady[1:]) if b1 > b0]
        self.step_times_s = step_times
        if logs is not None:
            logs["images_per_sec"] = epoch_rate
            logs["images_per_sec_per_device"] = epoch_rate / self.num_devices
            logs.update(_spread_ms(step_times))

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
        if logs is not None and self.images_per_sec is not None:
            logs["images_per_sec"] = self.images_per_sec


def _wait_for_device(model) -> None:
    """Blocks until the device has computed the model's current weights."""
    variables = getattr(model, "trainable_variables", None)
    if variables:
        keras.ops.convert_to_numpy(variables[0].value)


def steady_state_begins(batch: int, calls: int, epoch_steps: int | None, steps_per_call: int,
                        first_epoch: bool, requested: int = 0) -> bool:
    """Whether the execution ending at step `batch` (the `calls`-th of its epoch)
    ends the warm-up, so that the steady-state window starts at its end.

    In the first epoch of a fit, warm-up is `requested` steps, or automatically
    max(2 executions, 5% of the epoch), leaving at least two executions to time.
    In later epochs only the epoch's first execution is warm-up (the input
    pipeline restarts after evaluation). The energy meter uses the same window.
    """
    if not first_epoch:
        return calls > 1
    epoch_steps = epoch_steps or 0
    warmup = requested or max(2 * steps_per_call, math.ceil(0.05 * epoch_steps))
    if epoch_steps:
        warmup = min(warmup, max(0, epoch_steps - 2 * steps_per_call))
    return batch > warmup - 1


def _spread_ms(step_times: list[float]) -> dict:
    """Mean step time, its standard error, and jitter (std / mean)."""
    if not step_times:
        return {}
    n = len(step_times)
    mean = sum(step_times) / n
    var = sum((t - mean) ** 2 for t in step_times) / (n - 1) if n > 1 else 0.0
    std = math.sqrt(var)
    return {"step_time_ms": mean * 1e3, "step_time_stderr_ms": std / math.sqrt(n) * 1e3,
            "step_time_jitter": std / mean if mean > 0 else 0.0}
