"""Throughput: steady-state training images/second, step-time spread, the wall-clock
rate, eval speed; each epoch's, and the run's over every attempt.

How it is timed, and why it is honest:
- Keras calls `on_train_batch_end` once per execution (every `steps_per_execution`
  steps) with the index of the last step run, and converts the step's logs to
  Python floats before it calls us, which waits for that step to finish on the
  device. So each call gives a (step index, completion time) mark, and images are
  counted from step indices, never from calls.
- On JAX, Keras runs batch hooks in worker threads when every callback is
  `async_safe`; this one is (O(1) work under a lock), so training keeps
  dispatching ahead and nothing here forces an extra host-device sync.
- Steady state: the marks of callbacks/figures/window.py's window, which leaves out
  compile and warm-up, and ends at each epoch's last step. The rate and the step
  time always cover the same window: an epoch's (`epoch_*` in its logs), or the
  run's (the public attributes, and summary.json): every epoch's window of every
  attempt, added up as steps and seconds, so that an epoch of many steps weighs
  more than a short one.
- Wall clock (`images_per_sec_wall`): every image trained from each attempt's
  first window start to where the attempt ended (its last checkpoint, or the end
  of training), over the wall-clock seconds between them, evaluation, checkpoints
  and summaries included; what a user waits for, so time-to-train reads from it.
  One clock per attempt, counted in global steps: a resumed attempt runs two fits
  (the rest of the interrupted epoch, then the others), and the clock runs through
  both, the second's start and first steps included; a checkpoint carries the
  figures to its own step and moment (`state(step)`), so the steps an interrupted
  attempt trained after its last epoch end, which the rerun does not train again,
  count with their seconds. (A digits run stopped by SIGTERM in epoch 3 and rerun
  reported 792.25 images/sec where its images over its attempts' seconds gave 939.6;
  kept per fit and carried from epoch ends, the figure left out both, e.g. 3.6 s
  between a TensorFlow rerun's two fits under a progress bar.)
- A profiled run (`traced`): the steps the profiler traces, and the step after them
  (where it stops and writes the trace: seconds), run slower for the profiler's sake.
  The run's figures keep them (what the run did); `untraced_step_time_ms` leaves out
  every gap of the window that ran one of them, for the breakdown's reconciliation
  with the timed step (callbacks/profiling/timed.py): counted in, one H100's ConvNeXt-T
  profiled run timed 104.0 ms a step where its untraced steps took about 80, and the
  breakdown called 26% of the step idle.
- A resumed attempt continues the run's sums from the checkpoint it resumed from
  (`state()` is saved with each checkpoint, `carried` gives it back): the epochs
  the checkpoint holds are those metrics.jsonl keeps, so the run's figures and
  the per-epoch lines cover the same epochs.
"""

from __future__ import annotations

import threading
import time

import keras

from callbacks.figures.steps import Position
from callbacks.figures.window import (
    add_sums,
    gap_sums,
    spread_of,
    steady_state_begins,
    steady_window,
)

EMPTY_STATE = {"steady": {}, "untraced": {}, "wall_images": 0, "wall_seconds": 0.0,
               "eval_images": 0, "eval_seconds": 0.0}


class Throughput(keras.callbacks.Callback):
    """Measures steady-state and wall-clock training images per second, and eval speed.

    Publishes into epoch `logs`, this epoch's: `epoch_images_per_sec` (steady
    state), `epoch_images_per_sec_per_device`, `epoch_step_time_ms`,
    `epoch_step_time_stderr_ms`, `epoch_step_time_jitter` (standard deviation /
    mean), `epoch_timed_steps` (the steps its window timed), `epoch_eval_images_per_sec`
    (its evaluation pass); and the run's so far, `images_per_sec_wall`. Into batch
    logs, `running_images_per_sec`: this epoch's steady-state rate up to that step
    (for the progress bar). Public attributes, the run's (earlier attempts
    included): `images_per_sec`, `images_per_sec_wall`, `eval_images_per_sec`,
    `step_time()` (the step-time figures of the window of `images_per_sec`);
    `epoch_images_per_sec`: this attempt's epochs' rates; `last_window_gaps`: the
    last epoch's window as (steps, seconds) between its marks (its step series, one
    item per host call); `state()` for a checkpoint.

    Args:
        position: the run's Position (callbacks/figures/steps.py: its global batch,
            the step it resumed from, its epoch's steps), or, for a fit of its own,
            its global batch (images per training step over all replicas).
        num_devices: devices over all processes (for the per-device figure).
        warmup_steps: steps of the first epoch not counted; 0 = automatic
            (callbacks/figures/window.py).
        validation_images: images in one validation pass (for eval speed).
        carried: `state()` of the checkpoint a resumed attempt starts from, or None.
        traced: (first, last) 1-based global steps the profiler traces, or None.

    Example (images/sec of any fit, and its epochs' rates in the history):

    >>> import keras, numpy as np
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    >>> model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(
    ...     from_logits=True), metrics=[keras.metrics.SparseCategoricalAccuracy("top1")])
    >>> x, y = np.random.rand(256, 4), np.random.randint(0, 3, 256)
    >>> from callbacks.throughput import Throughput
    >>> meter = Throughput(16)
    >>> history = model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[meter])
    >>> meter.images_per_sec > 0, len(history.history["epoch_images_per_sec"])
    (True, 2)
    """

    async_safe = True

    def __init__(self, position: Position | int, num_devices: int = 1,
                 warmup_steps: int = 0, validation_images: int = 0,
                 carried: dict | None = None, traced: tuple[int, int] | None = None):
        super().__init__()
        self.position = Position.of(position)
        if num_devices < 1:
            raise ValueError(f"num_devices must be >= 1, received {num_devices}")
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, received {warmup_steps}")
        self.num_devices = num_devices
        self.warmup_steps = warmup_steps
        self.validation_images = validation_images
        carried = {**EMPTY_STATE, **(carried or {})}
        self._steady = dict(carried["steady"])  # gap_sums of every window of the run
        self._untraced = dict(carried["untraced"])  # of their gaps that ran no traced step
        self.traced = traced
        self._epoch = 0
        self._wall = (carried["wall_images"], carried["wall_seconds"])  # earlier attempts
        self._eval = [carried["eval_images"], carried["eval_seconds"]]
        self.epoch_images_per_sec = []
        self.last_window_gaps = []
        self._lock = threading.Lock()
        self._first_epoch = True
        self._steps_per_call = 1
        self._wall_start = None  # (time, global steps done) of this attempt's first window start
        self._steps_done = 0  # global steps done at the latest mark
        self._epoch_eval_rate = None
        self.images_per_sec_wall = self._wall_rate(time.perf_counter())

    # ------------------------------------------------------------- the run's
    @property
    def images_per_sec(self) -> float | None:
        """The run's steady-state rate: every window's images over its seconds."""
        seconds = self._steady.get("seconds", 0.0)
        return self.position.images(self._steady["steps"]) / seconds if seconds > 0 else None

    @property
    def eval_images_per_sec(self) -> float | None:
        """Every evaluation pass's images over their seconds."""
        images, seconds = self._eval
        return images / seconds if seconds > 0 and images else None

    def step_time(self) -> dict:
        """step_time_ms, step_time_stderr_ms, step_time_jitter over the run's windows
        (the window of `images_per_sec`); {} before any was timed."""
        return spread_of(self._steady)

    @property
    def untraced_step_time_ms(self) -> float | None:
        """With `traced`: the step time over the windows' gaps that ran no traced step
        (nor the one after); None without `traced` or before any such gap."""
        if self.traced is None:
            return None
        return spread_of(self._untraced).get("step_time_ms")

    def state(self, step: int | None = None) -> dict:
        """The run's sums as JSON, for a checkpoint of `step` (1-based global steps
        done; default: the latest mark's) written now: the windows' and evaluations'
        up to the last epoch's end, the wall clock's up to `step` and now."""
        now = time.perf_counter()
        with self._lock:
            wall_images, wall_seconds = self._wall_sums(now, step)
            return {"steady": dict(self._steady), "untraced": dict(self._untraced),
                    "wall_images": wall_images, "wall_seconds": wall_seconds,
                    "eval_images": self._eval[0], "eval_seconds": self._eval[1]}

    # ------------------------------------------------------------------ train
    def on_train_begin(self, logs=None):
        # A second fit of this attempt (after a mid-epoch resume) warms up again for
        # the window, but the wall clock runs on.
        self._first_epoch = True
        # Read once, here: on JAX, `self.model` syncs the training state, which
        # must never happen from the worker threads that run batch hooks.
        self._steps_per_call = getattr(self.model, "steps_per_execution", 1) or 1

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        with self._lock:
            self._marks = []
            self._start = None  # the first mark that may start the window, as it arrived
            self._epoch_eval_rate = None

    def _rule(self):
        return ((self.params or {}).get("steps"), self._steps_per_call, self._first_epoch,
                self.warmup_steps)

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        with self._lock:
            self._marks.append((batch, now))
            done = self._global_step(batch)
            self._steps_done = max(self._steps_done, done)
            if self._start is None:
                if steady_state_begins(batch, *self._rule()):
                    self._start = (batch, now)
                    if self._wall_start is None:  # this attempt's clock starts
                        self._wall_start = (now, done)
                return
            start_batch, start_time = self._start
            if logs is not None and now > start_time and batch > start_batch:
                logs["running_images_per_sec"] = (
                    self.position.images(batch - start_batch) / (now - start_time))

    def on_epoch_end(self, epoch, logs=None):
        now = time.perf_counter()
        with self._lock:
            window = steady_window(self._marks, *self._rule())
            self._first_epoch = False
        logs = logs if logs is not None else {}
        if self._epoch_eval_rate is not None:
            logs["epoch_eval_images_per_sec"] = self._epoch_eval_rate
        # Consecutive gaps telescope: their seconds add up to the window's exactly.
        spans = [(b0, b1, t1 - t0) for (b0, t0), (b1, t1) in zip(window, window[1:])
                 if b1 > b0]
        gaps = [(b1 - b0, seconds) for b0, b1, seconds in spans]
        sums = gap_sums(gaps)
        self.last_window_gaps = gaps
        untraced = gap_sums([(b1 - b0, seconds) for b0, b1, seconds in spans
                             if not self._ran_traced(b0, b1)])
        with self._lock:
            self.images_per_sec_wall = self._wall_rate(now)
            if sums["seconds"] > 0:
                self._steady = add_sums(self._steady, sums)
            if self.traced is not None and untraced["seconds"] > 0:
                self._untraced = add_sums(self._untraced, untraced)
        if self.images_per_sec_wall is not None:
            logs["images_per_sec_wall"] = self.images_per_sec_wall
        if sums["seconds"] <= 0:
            return
        epoch_rate = self.position.images(sums["steps"]) / sums["seconds"]
        self.epoch_images_per_sec.append(epoch_rate)
        logs["epoch_images_per_sec"] = epoch_rate
        logs["epoch_images_per_sec_per_device"] = epoch_rate / self.num_devices
        logs["epoch_timed_steps"] = sums["steps"]
        logs.update({"epoch_" + k: v for k, v in spread_of(sums).items()})

    def _global_step(self, batch: int) -> int:
        """1-based global number of this epoch's step `batch` (callbacks/figures/steps.py)."""
        return self.position.global_step(self._epoch, batch, self.params)

    def _ran_traced(self, b0: int, b1: int) -> bool:
        """Whether the gap between the marks of batches b0 and b1 (it runs the steps
        after b0 up to b1) ran a traced step or the step after them; False unprofiled."""
        if self.traced is None:
            return False
        after, upto = self._global_step(b0), self._global_step(b1)  # after: ran before it
        return upto >= self.traced[0] and after <= self.traced[1]

    def _wall_sums(self, now: float, step: int | None = None) -> tuple:
        """(images, seconds) of the wall clock: earlier attempts', and this attempt's
        from its first window start to global step `step` (default: the latest
        mark's) and `now`."""
        if self._wall_start is None:
            return self._wall
        started, done = self._wall_start
        step = self._steps_done if step is None else step
        return (self._wall[0] + self.position.images(max(step - done, 0)),
                self._wall[1] + now - started)

    def _wall_rate(self, now: float) -> float | None:
        images, seconds = self._wall_sums(now)
        return images / seconds if seconds > 0 and images else None

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
            self._epoch_eval_rate = self.validation_images / seconds
            with self._lock:
                self._eval = [self._eval[0] + self.validation_images, self._eval[1] + seconds]

    def on_train_end(self, logs=None):
        # The last epoch's end work (checkpoint, summaries) is done: the figure to now.
        now = time.perf_counter()
        with self._lock:
            self.images_per_sec_wall = self._wall_rate(now)


def _wait_for_device(model) -> None:
    """Blocks until the device has computed the model's current weights."""
    variables = getattr(model, "trainable_variables", None)
    if variables:
        keras.ops.convert_to_numpy(variables[0].value)
