"""The run's sink: every figure in the logs goes to metrics.jsonl and TensorBoard.

The other callbacks publish their figures into Keras `logs`; this one, placed
after them, writes what it finds:
- `metrics.jsonl`: one JSON line per epoch (epoch numbers are 1-based);
- TensorBoard scalars at step = epoch, named in groups so the dashboard reads
  naturally (throughput/, accuracy/, loss/, cost/, utilization/, optimizer/);
- every `log_every_steps` training steps, a finer series of the live figures
  (throughput, cost, loss) under <logdir>/steps, at step = global training step;
- once, the HParams plugin's record of the run's settings.

Only process 0 should get this callback. Files are opened in `on_train_begin`
and closed in `on_train_end`; each line and event is flushed as written, so a
run killed at any moment keeps what it logged.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time

import keras

from callbacks.events import EventWriter
from callbacks.metrics_file import METRICS_FILE
from callbacks.steps import global_step, steps_before

# Key -> dashboard group. Keys not listed go under "other/".
GROUPS = {
    "images_per_sec": "throughput", "images_per_sec_per_device": "throughput",
    "images_per_sec_wall": "throughput",
    "eval_images_per_sec": "throughput", "step_time_ms": "throughput",
    "step_time_stderr_ms": "throughput", "step_time_jitter": "throughput",
    "top1": "accuracy", "val_top1": "accuracy", "top5": "accuracy", "val_top5": "accuracy",
    "best_val_top1": "accuracy", "targets_reached": "accuracy",
    "loss": "loss", "val_loss": "loss",
    "cost_usd": "cost", "billed_hours": "cost", "usd_per_epoch": "cost",
    "projected_cost_usd": "cost", "billed_usd_per_million_images": "cost",
    "mfu": "utilization", "model_tflops_per_sec": "utilization",
    "power_watts": "energy", "joules_per_image": "energy", "kwh_per_epoch": "energy",
    "learning_rate": "optimizer",
}
STEP_KEYS = ("images_per_sec", "cost_usd", "loss")


def tag_for(key: str) -> str:
    """The TensorBoard tag of a log key, e.g. "val_top1" -> "accuracy/val_top1"."""
    return f"{GROUPS.get(key, 'other')}/{key}"


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class MetricsLogger(keras.callbacks.Callback):
    """Writes epoch logs to metrics.jsonl and TensorBoard, and step logs every N steps.

    Args:
        logdir: the run folder.
        log_every_steps: interval of the step-level series.
        hparams: settings to record for TensorBoard's HParams dashboard (a flat
            dict of str/int/float/bool), or None to write none.
        hparam_metrics: log keys the HParams dashboard shows against the settings.
        steps_per_epoch: training steps of a full epoch (0 = the fit's own).
        resume_step: global steps done before this attempt's first step.
    """

    async_safe = True

    def __init__(self, logdir: str, log_every_steps: int = 50, hparams: dict | None = None,
                 hparam_metrics=("val_top1", "best_val_top1", "images_per_sec", "cost_usd",
                                 "mfu"), steps_per_epoch: int = 0, resume_step: int = 0):
        super().__init__()
        if log_every_steps < 1:
            raise ValueError(f"log_every_steps must be >= 1, received {log_every_steps}")
        self.logdir = logdir
        self.log_every_steps = log_every_steps
        self.hparams = hparams
        self.hparam_metrics = tuple(hparam_metrics)
        self.steps_per_epoch = steps_per_epoch
        self.resume_step = resume_step
        self.path = os.path.join(logdir, METRICS_FILE)
        self.records = []
        self._lock = threading.Lock()
        self._epoch = 0
        self._next_step_log = log_every_steps
        self._file = self._epochs = self._steps = None

    def on_train_begin(self, logs=None):
        os.makedirs(self.logdir, exist_ok=True)
        self._file = open(self.path, "a")
        self._epochs = EventWriter(self.logdir)
        self._steps = EventWriter(os.path.join(self.logdir, "steps"))
        if self.hparams:
            self._write_hparams()

    def _write_hparams(self):
        from tensorboard.plugins.hparams import summary_v2 as hp

        metrics = [hp.Metric(tag_for(key), display_name=key) for key in self.hparam_metrics]
        self._epochs.summary(hp.hparams_config_pb(
            hparams=[hp.HParam(name) for name in sorted(self.hparams)], metrics=metrics))
        self._epochs.summary(hp.hparams_pb(self.hparams, trial_id=os.path.basename(
            os.path.normpath(self.logdir))))

    def _epoch_steps(self) -> int:
        return self.steps_per_epoch or (self.params or {}).get("steps") or 0

    def on_epoch_begin(self, epoch, logs=None):
        before = steps_before(epoch, self._epoch_steps(), self.resume_step)
        with self._lock:
            self._epoch = epoch
            self._next_step_log = (before // self.log_every_steps + 1) * self.log_every_steps

    def on_train_batch_end(self, batch, logs=None):
        with self._lock:
            step = global_step(self._epoch, batch, self._epoch_steps(), self.resume_step)
            if step < self._next_step_log or self._steps is None or not logs:
                return
            self._next_step_log = (step // self.log_every_steps + 1) * self.log_every_steps
            for key in STEP_KEYS:
                if _is_number(logs.get(key)):
                    self._steps.scalar(tag_for(key), logs[key], step)

    def on_epoch_end(self, epoch, logs=None):
        record = {"epoch": epoch + 1, "time": time.time()}
        record.update({k: v for k, v in sorted((logs or {}).items()) if _is_number(v)})
        with self._lock:
            self.records.append(record)
            if self._file is None:
                return
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())
            for key, value in record.items():
                if key not in ("epoch", "time"):
                    self._epochs.scalar(tag_for(key), value, epoch + 1, wall_time=record["time"])

    def on_train_end(self, logs=None):
        with self._lock:
            for handle in (self._file, self._epochs, self._steps):
                if handle is not None:
                    handle.close()
            self._file = self._epochs = self._steps = None
