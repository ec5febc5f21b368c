"""The run's sink: every figure in the logs goes to metrics.jsonl and TensorBoard.

The other callbacks publish their figures into Keras `logs`; this one, placed
after them, writes what it finds:
- `metrics.jsonl`: one JSON line per epoch (epoch numbers are 1-based);
- TensorBoard scalars laid out as Keras's own TensorBoard callback lays them out
  (callbacks/records/dashboard.py): runs `train/` and `validation/`, `epoch_*` tags at
  step = epoch, and every `log_every_steps` training steps (rounded up to a
  multiple of the model's steps per execution: `every_steps`) the live figures
  (throughput, cost, loss) as `batch_*` tags at step = global training step;
  each tag with its description and unit;
- at the start of a new run, the HParams plugin's record of the run's settings, in
  the run folder itself (callbacks/records/hparams.py; the run's figures are added
  to it when the run ends, from summary.json).

Only process 0 should get this callback. Files are opened in `on_train_begin`
and closed in `on_train_end`; each line and event is flushed as written, so a
run killed at any moment keeps what it logged.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time

import keras

from callbacks.figures.steps import Position, every_whole_call
from callbacks.records import events, faults
from callbacks.records import hparams as hparams_record
from callbacks.records.checkpoint_files import kept_line
from callbacks.records.dashboard import TRAIN, VALIDATION, figure_of
from callbacks.records.metrics_file import METRICS_FILE, truncate_metrics
from callbacks.stops import STORAGE_ERRNOS, StorageError

BATCH_KEYS = ("running_images_per_sec", "cost_usd", "loss")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def rewind(logdir: str, epoch: int, step: int) -> None:
    """Removes what the logger wrote after epoch `epoch` and global step `step`
    (a resumed run redoes that part). metrics.jsonl's lines of epochs up to `epoch`
    that are missing (the file deleted, a line damaged) are rebuilt first from the
    event files, which hold the same figures (callbacks/records/metrics_file.py)."""
    truncate_metrics(logdir, epoch)
    events.rewind(os.path.join(logdir, TRAIN),
                  lambda tag: step if "/batch_" in tag else epoch)
    events.rewind(os.path.join(logdir, VALIDATION), lambda tag: epoch)


class MetricsLogger(keras.callbacks.Callback):
    """Writes epoch logs to metrics.jsonl and TensorBoard, and step logs every N steps.

    Args:
        logdir: the run folder.
        log_every_steps: interval of the step-level series asked for; the one used,
            `every_steps`, is rounded up to a multiple of the model's
            steps_per_execution (figures/steps.py every_whole_call) when training begins.
        hparams: settings to record for TensorBoard's HParams dashboard (a flat
            dict of str/int/float/bool; None values are left out), or None to
            write none (a resumed run has its record).
        position: the run's Position (callbacks/figures/steps.py), to number steps
            over the whole run; None: a fit of its own.
        descriptions: {log key: card description} replacing the vocabulary's
            (callbacks/records/dashboard.py), e.g. how energy was measured.
        started_at: `time.time()` when the run started (the HParams session's start).
    """

    async_safe = True

    def __init__(self, logdir: str, log_every_steps: int = 50, hparams: dict | None = None,
                 position: Position | None = None, descriptions: dict | None = None,
                 started_at: float | None = None):
        super().__init__()
        if log_every_steps < 1:
            raise ValueError(f"log_every_steps must be >= 1, received {log_every_steps}")
        self.logdir = logdir
        self.log_every_steps = log_every_steps
        self.every_steps = log_every_steps  # the interval used (on_train_begin)
        self.hparams = dict(hparams or {})
        self.descriptions = dict(descriptions or {})
        self.started_at = started_at
        self.position = position or Position()
        self.path = os.path.join(logdir, METRICS_FILE)
        self.records = []
        self._lock = threading.Lock()
        self._epoch = 0
        self._epoch_start = 0  # global steps done before this epoch's first batch
        self._steps_per_call = 1  # steps per batch hook (steps_per_execution)
        self._file = None
        self._writers = {}  # run name -> EventWriter, opened on use

    def _writer(self, run: str) -> events.EventWriter:
        if run not in self._writers:
            try:
                self._writers[run] = events.EventWriter(os.path.join(self.logdir, run))
            except FileNotFoundError:
                if os.path.isdir(self.logdir):
                    raise
                raise StorageError.folder_lost(self.logdir, "nothing more can be logged "
                                               "there") from None
        return self._writers[run]

    @contextlib.contextmanager
    def _writing(self):
        """A write the run folder refuses (full, read-only, its permissions taken
        away: STORAGE_ERRNOS) is the run's end in one line (exit 74), naming the file,
        not a traceback from whichever write met it first."""
        try:
            yield
        except OSError as error:
            if error.errno not in STORAGE_ERRNOS:
                raise
            raise StorageError.cannot_write(error, self.logdir, "stopped, " + kept_line(
                self.logdir, "the last good checkpoint")) from None

    def on_train_begin(self, logs=None):
        # Read here, on the main thread: on JAX, `self.model` syncs the training state.
        self._steps_per_call = getattr(self.model, "steps_per_execution", 1) or 1
        self.every_steps = every_whole_call(self.log_every_steps, self._steps_per_call)
        with self._writing():
            os.makedirs(self.logdir, exist_ok=True)
            self._file = open(self.path, "a")
            if self.hparams:
                hparams_record.write_record(self.logdir, self.hparams,
                                            started_at=self.started_at)

    def on_epoch_begin(self, epoch, logs=None):
        with self._lock:
            self._epoch = epoch
            self._epoch_start = self.position.steps_before(epoch, self.params)

    def _due(self, step: int) -> bool:
        """Whether `step` is the call that covers a multiple of `every_steps`.

        Decided from the step alone, never from the calls seen before: on JAX, Keras
        runs batch hooks in a pool of worker threads when every callback is
        `async_safe`, so step 13's hook can run before step 12's. Each call covers
        the `steps_per_execution` steps that end at `step` (none before the epoch's
        start), and logs when one of them is a multiple of the interval: the call's
        last step, as the interval is a multiple of the steps per call, except in an
        epoch resumed from a step that is not a multiple of them.
        """
        covered_from = max(step - self._steps_per_call, self._epoch_start)
        return step // self.every_steps > covered_from // self.every_steps

    def on_train_batch_end(self, batch, logs=None):
        with self._lock:
            step = self.position.global_step(self._epoch, batch, self.params)
            if not self._due(step) or self._file is None or not logs:
                return
            with self._writing():
                for key in BATCH_KEYS:
                    if _is_number(logs.get(key)):
                        self._scalar(key, "batch", logs[key], step)

    def _scalar(self, key: str, prefix: str, value: float, step: int, wall_time=None):
        figure = figure_of(key)
        self._writer(figure.run).scalar(figure.tag(prefix), value, step, wall_time=wall_time,
                                        description=self.descriptions.get(key, figure.text))

    def on_epoch_end(self, epoch, logs=None):
        record = {"epoch": epoch + 1, "time": time.time()}
        record.update({k: v for k, v in sorted((logs or {}).items()) if _is_number(v)})
        with self._lock:
            self.records.append(record)
            if self._file is None:
                return
            faults.reached("metrics_line")
            with self._writing():
                self._file.write(json.dumps(record) + "\n")
                self._file.flush()
                os.fsync(self._file.fileno())
                for key, value in record.items():
                    if key not in ("epoch", "time"):
                        self._scalar(key, "epoch", value, epoch + 1,
                                     wall_time=record["time"])

    def on_train_end(self, logs=None):
        with self._lock:
            if self._file is not None:
                self._file.close()
            for writer in self._writers.values():
                writer.close()
            self._file = None
            self._writers = {}
