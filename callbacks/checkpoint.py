"""Checkpoints that survive kills and preemption: atomic, periodic, and on SIGTERM.

A checkpoint is a folder checkpoints/ckpt-<global step>/ holding the model and
optimizer weights (`model.weights.h5`) and `state.json` (epoch, step, billed
time, images seen, the run's own figures). It is written under a temporary name
and renamed into place only when complete, so a kill at any moment leaves the
previous checkpoint usable. The newest `keep` checkpoints are kept.

When to save:
- at the end of every epoch;
- every `every_steps` training steps within an epoch (long epochs);
- at the next step boundary after SIGTERM (what TPU VMs and spot instances send
  before taking the machine), then training stops by raising `Preempted`.

Saves happen in `on_train_batch_begin` and `on_epoch_end`, which Keras always
calls on the main thread, so this callback stays `async_safe` (its batch-end hook
only records the loss) and JAX keeps dispatching ahead between saves. A save is
skipped if the loss or any weight is not finite: a checkpoint is always good.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import tempfile
import threading
import time

import keras
import numpy as np

from callbacks.steps import steps_before
from callbacks.stops import Preempted

CHECKPOINT_DIR = "checkpoints"
WEIGHTS_FILE = "model.weights.h5"
STATE_FILE = "state.json"


class Checkpoint(keras.callbacks.Callback):
    """Saves atomic checkpoints at epoch ends, every N steps, and on SIGTERM.

    Args:
        logdir: the run folder; checkpoints go to logdir/checkpoints/.
        steps_per_epoch: training steps of a full epoch.
        every_steps: also save every N global steps; 0 = epoch ends only.
        started_at: `time.time()` when billing started (this attempt).
        billed_seconds_before: seconds billed by earlier attempts.
        images_before: training images of earlier attempts.
        global_batch_size: images per step.
        extra_state: fn(global step) -> dict of JSON values saved with each
            checkpoint (the step is the one the checkpoint holds).
        resume_step: global step this attempt starts from (0 for a new run).
        keep: how many checkpoints to keep.
        save_on_sigterm: install a SIGTERM handler for the duration of training.
        write: False on the processes of a multi-host run other than process 0:
            they stop on SIGTERM like it, but write nothing.
    """

    async_safe = True

    def __init__(self, logdir: str, steps_per_epoch: int, every_steps: int = 0,
                 started_at: float | None = None, billed_seconds_before: float = 0.0,
                 images_before: int = 0, global_batch_size: int = 1, extra_state=None,
                 resume_step: int = 0, keep: int = 2, save_on_sigterm: bool = True,
                 write: bool = True):
        super().__init__()
        if steps_per_epoch < 1:
            raise ValueError(f"steps_per_epoch must be >= 1, received {steps_per_epoch}")
        if every_steps < 0:
            raise ValueError(f"every_steps must be >= 0, received {every_steps}")
        if keep < 1:
            raise ValueError(f"keep must be >= 1, received {keep}")
        self.directory = os.path.join(logdir, CHECKPOINT_DIR)
        self.steps_per_epoch = steps_per_epoch
        self.every_steps = every_steps
        self.started_at = time.time() if started_at is None else started_at
        self.billed_seconds_before = billed_seconds_before
        self.images_before = images_before
        self.global_batch_size = global_batch_size
        self.extra_state = extra_state or (lambda step: {})
        self.resume_step = resume_step
        self.keep = keep
        self.save_on_sigterm = save_on_sigterm
        self.write = write
        self.saved = []  # paths written by this attempt
        self.sigterm_received = threading.Event()
        self._previous_handler = None
        self._last_loss = None
        self._last_saved_step = resume_step
        self._epoch = 0

    # ---------------------------------------------------------------- signals
    def on_train_begin(self, logs=None):
        if self.save_on_sigterm and threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum, frame):
        # Only note it: the save happens at the next step boundary, on the main thread.
        self.sigterm_received.set()

    def restore_signal_handler(self):
        if self._previous_handler is not None:
            signal.signal(signal.SIGTERM, self._previous_handler)
            self._previous_handler = None

    def on_train_end(self, logs=None):
        self.restore_signal_handler()

    # ------------------------------------------------------------------ steps
    def _global_step(self, epoch: int, batch: int) -> int:
        """Global steps completed before step `batch` of `epoch` starts."""
        return steps_before(epoch, self.steps_per_epoch, self.resume_step) + batch

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if logs and "loss" in logs:
            self._last_loss = logs["loss"]

    def on_train_batch_begin(self, batch, logs=None):
        step = self._global_step(self._epoch, batch)
        if self.sigterm_received.is_set():
            path = self.save(self._epoch, step) if step > self._last_saved_step else None
            self.restore_signal_handler()
            raise Preempted(step, path or self.latest_path())
        if self.every_steps and step - self._last_saved_step >= self.every_steps and batch:
            self.save(self._epoch, step)

    def on_epoch_end(self, epoch, logs=None):
        if logs and "loss" in logs:
            self._last_loss = logs["loss"]
        self.save(epoch + 1, (epoch + 1) * self.steps_per_epoch)

    # ------------------------------------------------------------------ saving
    def latest_path(self) -> str | None:
        return self.saved[-1] if self.saved else None

    def _weights_finite(self) -> bool:
        """Every weight, BatchNorm statistic and optimizer slot is finite.

        Checked on the host, on this process's copy: a device computation here
        would need every process of a multi-host run to take part.
        """
        optimizer = getattr(self.model, "optimizer", None)
        variables = list(self.model.variables) + list(optimizer.variables if optimizer else [])
        return all(np.isfinite(keras.ops.convert_to_numpy(v.value)).all() for v in variables
                   if "float" in str(v.dtype))

    def save(self, epoch: int, step: int) -> str | None:
        """Writes checkpoint `step` (epoch = epochs completed); returns its path."""
        if self._last_loss is not None and not math.isfinite(self._last_loss):
            return None
        if hasattr(self.model, "jax_state_sync"):
            self.model.jax_state_sync()  # bring JAX's in-flight state into the variables
        if not self._weights_finite():
            return None
        if not self.write:
            # Saving may run cross-process steps on JAX (every process must take
            # part), so the other processes save too, privately, and discard it.
            with tempfile.TemporaryDirectory() as scratch:
                self.model.save_weights(os.path.join(scratch, WEIGHTS_FILE))
            return None
        images = self.images_before + (step - self.resume_step) * self.global_batch_size
        state = {
            "epoch": epoch, "step_in_epoch": step - epoch * self.steps_per_epoch,
            "global_step": step, "images_seen": images,
            "billed_seconds": self.billed_seconds_before + time.time() - self.started_at,
            "saved_at": time.time(), **self.extra_state(step),
        }
        final = os.path.join(self.directory, f"ckpt-{step:010d}")
        staging = final + f".tmp-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        os.makedirs(staging)
        self.model.save_weights(os.path.join(staging, WEIGHTS_FILE))
        with open(os.path.join(staging, STATE_FILE), "w") as f:
            json.dump(state, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(final):  # same step saved by an earlier attempt
            shutil.rmtree(final)
        os.replace(staging, final)
        self._last_saved_step = step
        self.saved.append(final)
        self._prune()
        return final

    def _prune(self):
        complete = sorted(d for d in os.listdir(self.directory)
                          if d.startswith("ckpt-") and ".tmp-" not in d)
        for name in complete[:-self.keep]:
            shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)
        for name in os.listdir(self.directory):  # leftovers of killed saves
            if ".tmp-" in name and not name.endswith(f".tmp-{os.getpid()}"):
                shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)


def latest_checkpoint(logdir: str) -> tuple[str, dict] | None:
    """(path, state) of the newest complete checkpoint in `logdir`, or None."""
    directory = os.path.join(logdir, CHECKPOINT_DIR)
    if not os.path.isdir(directory):
        return None
    for name in sorted(os.listdir(directory), reverse=True):
        path = os.path.join(directory, name)
        if not name.startswith("ckpt-") or ".tmp-" in name:
            continue
        try:
            with open(os.path.join(path, STATE_FILE)) as f:
                state = json.load(f)
        except (OSError, json.JSONDecodeError):
            continue
        if os.path.exists(os.path.join(path, WEIGHTS_FILE)):
            return path, state
    return None


def load_latest(model, logdir: str, scope) -> tuple[str, dict] | None:
    """Loads the newest complete checkpoint into `model`; returns (path, state) or None.

    Args:
        model: the compiled model.
        logdir: the run folder.
        scope: the distribution scope (the optimizer's slots are built in it).
    """
    found = latest_checkpoint(logdir)
    if found is None:
        return None
    path, state = found
    with scope:
        # The optimizer's variables must exist before its saved values can load.
        model.optimizer.build(model.trainable_variables)
    model.load_weights(os.path.join(path, WEIGHTS_FILE))
    return path, state
