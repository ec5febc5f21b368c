"""Checkpoints that survive kills and preemption: atomic, periodic, and on SIGTERM.

A checkpoint is a folder checkpoints/ckpt-<global step>/ holding the model and
optimizer weights (`model.weights.h5`) and `state.json` (epoch, step, billed
time, images seen, the data the run trains on, the weights file's size and CRC,
the run's own figures). It is written under a temporary name, every file and the
folder are fsynced, and only then is it renamed into place, so a kill or a power
cut at any moment leaves the previous checkpoint usable. The newest `keep` are kept.

When to save:
- at the end of every epoch;
- every `every_steps` training steps within an epoch (long epochs);
- at the next step boundary after a stop request (SIGTERM, which TPU VMs and spot
  instances send before taking the machine, or SIGINT), then training stops by
  raising `Preempted`.

Saves happen in `on_train_batch_begin` and `on_epoch_end`, which Keras always
calls on the main thread, so this callback stays `async_safe` (its batch-end hook
only records the loss) and JAX keeps dispatching ahead between saves. A save is
skipped if the loss or any weight is not finite: a checkpoint is always good.
A save that cannot be written (disk full, read-only, run folder gone) raises
`StorageError` and leaves the older checkpoints as they were.

Finding and loading checkpoints: callbacks/records/checkpoint_files.py.
"""

from __future__ import annotations

import errno
import math
import os
import re
import shutil
import signal
import tempfile
import threading
import time
import weakref

import keras
import numpy as np

from callbacks.figures.bill import Bill
from callbacks.figures.steps import Position
from callbacks.records import durable, faults
from callbacks.records.checkpoint_files import (  # noqa: F401 (latest_checkpoint, load_latest: re-exported)
    CHECKPOINT_DIR,
    STATE_FILE,
    WEIGHTS_FILE,
    committed,
    file_crc,
    latest_checkpoint,
    load_latest,
)
from callbacks.stops import Preempted, StopRequest, StorageError


class Checkpoint(keras.callbacks.Callback):
    """Saves atomic checkpoints at epoch ends, every N steps, and when asked to stop.

    Args:
        logdir: the run folder; checkpoints go to logdir/checkpoints/.
        position: the run's Position (callbacks/figures/steps.py): its epoch's steps (at
            least 1), the step this attempt resumed from (0 for a new run), the images
            of earlier attempts and per step.
        every_steps: also save every N global steps; 0 = epoch ends only.
        bill: the run's Bill (callbacks/figures/bill.py): each checkpoint saves its
            seconds so far (default: a bill started now, without earlier attempts).
        extra_state: fn(global step) -> dict of JSON values saved with each
            checkpoint (the step is the one the checkpoint holds).
        keep: how many checkpoints to keep.
        save_on_sigterm: without `stop_request`, install a SIGTERM handler for the
            duration of training.
        write: False on the processes of a multi-host run other than process 0:
            they stop like it, but write nothing.
        stop_request: the process's StopRequest (set by its signal handlers); None
            = this callback's own.
        data_facts: what the run trains on (example counts, steps per epoch),
            saved with each checkpoint so a resume can check the data is the same.
    """

    async_safe = True

    def __init__(self, logdir: str, position: Position, every_steps: int = 0,
                 bill: Bill | None = None, extra_state=None,
                 keep: int = 2, save_on_sigterm: bool = True,
                 write: bool = True, stop_request: StopRequest | None = None,
                 data_facts: dict | None = None):
        super().__init__()
        if not isinstance(position, Position) or position.steps_per_epoch < 1:
            raise ValueError(f"position must be a Position of at least 1 step an epoch, "
                             f"received {position!r}")
        if every_steps < 0:
            raise ValueError(f"every_steps must be >= 0, received {every_steps}")
        if keep < 1:
            raise ValueError(f"keep must be >= 1, received {keep}")
        self.logdir = logdir
        self.directory = os.path.join(logdir, CHECKPOINT_DIR)
        self.position = position
        self.every_steps = every_steps
        self.bill = bill or Bill(time.time())
        self.extra_state = extra_state or (lambda step: {})
        self.keep = keep
        self.write = write
        self.data_facts = dict(data_facts or {})
        self.install_handler = stop_request is None and save_on_sigterm
        self.stop_request = stop_request or StopRequest()
        self.saved = []  # paths written by this attempt
        self._previous_handler = None
        self._folder_identity = None
        self._last_loss = None
        self._last_saved_step = position.resume_step
        self._epoch = 0

    # ---------------------------------------------------------------- signals
    def on_train_begin(self, logs=None):
        if self.write and self._folder_identity is None:
            os.makedirs(self.logdir, exist_ok=True)
            # Held open for as long as this callback lives: a deleted folder's inode
            # number is given to the next folder made (on ext4, at once), so without
            # the handle a run folder deleted and made again would pass for the same.
            handle = os.open(self.logdir, os.O_RDONLY | os.O_DIRECTORY)
            weakref.finalize(self, os.close, handle)
            self._folder_identity = _identity(handle)
        if self.install_handler and threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.signal(
                signal.SIGTERM, lambda *_: self.stop_request.request("SIGTERM"))

    def restore_signal_handler(self):
        if self._previous_handler is not None:
            signal.signal(signal.SIGTERM, self._previous_handler)
            self._previous_handler = None

    def on_train_end(self, logs=None):
        self.restore_signal_handler()

    # ------------------------------------------------------------------ steps
    def _global_step(self, epoch: int, batch: int) -> int:
        """Global steps completed before step `batch` of `epoch` starts."""
        return self.position.steps_before(epoch) + batch

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if logs and "loss" in logs:
            self._last_loss = logs["loss"]

    def on_train_batch_begin(self, batch, logs=None):
        step = self._global_step(self._epoch, batch)
        if self.stop_request.requested.is_set():
            name = self.stop_request.take()
            path = self.save(self._epoch, step) if step > self._last_saved_step else None
            self.restore_signal_handler()
            raise Preempted(step, path or self.latest_path(), name)
        if self.every_steps and step - self._last_saved_step >= self.every_steps and batch:
            self.save(self._epoch, step)

    def on_epoch_end(self, epoch, logs=None):
        if logs and "loss" in logs:
            self._last_loss = logs["loss"]
        self.save(epoch + 1, (epoch + 1) * self.position.steps_per_epoch)

    # ------------------------------------------------------------------ saving
    def latest_path(self) -> str | None:
        """The newest checkpoint: this attempt's, else an earlier attempt's on disk."""
        if self.saved:
            return self.saved[-1]
        found = latest_checkpoint(self.logdir)
        return found[0] if found else None

    def _weights_finite(self) -> bool:
        """Every weight, BatchNorm statistic and optimizer slot is finite.

        Checked on the host, on this process's copy: a device computation here
        would need every process of a multi-host run to take part.
        """
        optimizer = getattr(self.model, "optimizer", None)
        variables = [v for v in list(self.model.variables) + list(
            optimizer.variables if optimizer else []) if "float" in str(v.dtype)]
        if keras.config.backend() == "jax":
            import jax

            # All copies in flight at once rather than one after the other (~180 for
            # the small ResNet), and each array keeps its host copy, which save_weights
            # then reads instead of copying it again.
            values = jax.device_get([v.value for v in variables])
        else:
            values = (keras.ops.convert_to_numpy(v.value) for v in variables)
        return all(np.isfinite(value).all() for value in values)

    def _check_folder(self):
        """The run folder is still the one this attempt started in."""
        try:
            same = _identity(self.logdir) == self._folder_identity
        except OSError:
            same = False
        if not same:
            self._folder_lost()

    def _folder_lost(self):
        raise StorageError.folder_lost(self.logdir, "nothing more can be saved there")

    def save(self, epoch: int, step: int) -> str | None:
        """Writes checkpoint `step` (epoch = epochs completed); returns its path.

        Raises:
            StorageError: the checkpoint could not be written (older ones are kept).
        """
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
        if self._folder_identity is not None:
            self._check_folder()
        state = {
            "epoch": epoch, "step_in_epoch": step - epoch * self.position.steps_per_epoch,
            "global_step": step, "images_seen": self.position.images_at(step),
            **self.bill.state(), "saved_at": time.time(), "data": self.data_facts,
            **self.extra_state(step),
        }
        final = os.path.join(self.directory, f"ckpt-{step:010d}")
        try:
            self._commit(final, state)
        except (OSError, RuntimeError) as error:  # h5py raises RuntimeError for some
            if self._folder_identity is not None:
                self._check_folder()
            latest = self.latest_path()
            if latest and not os.path.exists(latest):  # deleted under us: so is the folder
                if self._folder_identity is not None:
                    self._folder_lost()
                latest = None
            kept = (f"the last good checkpoint is kept ({latest})" if latest
                    else "no checkpoint was saved before it")
            raise StorageError(f"cannot write checkpoint {final}: {_reason(error)}; "
                               f"{kept}") from None
        self._last_saved_step = step
        self.saved.append(final)
        self._prune()
        return final

    def _check_space(self, newest: list[str]) -> None:
        """Refuses a save that cannot fit, before HDF5 starts it: an HDF5 file whose
        writes failed crashes the library's exit handler (a segfault at exit).
        `newest`: the newest committed checkpoint's name, if any, as a list."""
        if newest:
            needed = os.path.getsize(os.path.join(self.directory, newest[-1], WEIGHTS_FILE))
        else:
            optimizer = getattr(self.model, "optimizer", None)
            needed = sum(int(np.prod(v.shape)) * 4 for v in list(self.model.variables) + list(
                optimizer.variables if optimizer else []))
        info = os.statvfs(self.logdir)
        free = info.f_bavail * info.f_frsize
        if free < needed * 1.1 + 2**20:
            raise OSError(errno.ENOSPC, f"No space left on device (a checkpoint needs about "
                          f"{needed / 2**20:.1f} MiB, {free / 2**20:.1f} MiB are free)")

    def _commit(self, final: str, state: dict) -> None:
        """Checks the space, stages, syncs and renames one checkpoint into place;
        cleans up on failure.

        Raises:
            StorageError: the save failed because the run folder is being deleted:
                rmtree takes a folder's contents before the folder itself, so
                something this save found (the newest checkpoint, whose size the
                space check reads) or made vanished while the run folder stands.
            OSError, RuntimeError: the save failed otherwise (a full or read-only disk).
        """
        staging = final + f".tmp-{os.getpid()}"
        newest = committed(self.directory)[-1:]
        standing = [self.directory] + [  # what vanishing means the folder is going
            os.path.join(self.directory, *parts) for name in newest
            if name != os.path.basename(final)
            for parts in ((name,), (name, WEIGHTS_FILE), (name, STATE_FILE))]
        standing = [path for path in standing if os.path.exists(path)]
        try:
            self._check_space(newest)
            if not os.path.isdir(self.directory):
                os.mkdir(self.directory)  # not makedirs: never re-create a lost run folder
                standing.append(self.directory)
            shutil.rmtree(staging, ignore_errors=True)
            os.mkdir(staging)
            standing.append(staging)
            weights = os.path.join(staging, WEIGHTS_FILE)
            self.model.save_weights(weights)
            standing.append(weights)
            state["weights_bytes"], state["weights_crc32"] = file_crc(weights)
            with open(os.path.join(staging, STATE_FILE), "w") as f:
                f.write(durable.dumps(state, indent=2))
            standing.append(os.path.join(staging, STATE_FILE))
            durable.sync_tree(staging)
            if os.path.exists(final):  # same step saved by an earlier attempt
                shutil.rmtree(final)
            os.replace(staging, final)
            standing = [path.replace(staging, final, 1) for path in standing]  # moved
            durable.sync_folder(self.directory)
            faults.reached("checkpoint_committed")
        except BaseException as error:
            vanished = any(not os.path.exists(path) for path in standing)
            shutil.rmtree(staging, ignore_errors=True)
            if (vanished and isinstance(error, (OSError, RuntimeError))
                    and self._folder_identity is not None):
                self._folder_lost()
            raise

    def _prune(self):
        for name in committed(self.directory)[:-self.keep]:
            shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)
        try:
            leftovers = os.listdir(self.directory)
        except FileNotFoundError:  # gone since the commit: the run folder is being deleted
            if self._folder_identity is None:
                raise
            self._folder_lost()
        for name in leftovers:  # leftovers of killed saves
            if ".tmp-" in name and not name.endswith(f".tmp-{os.getpid()}"):
                shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)


def _reason(error: Exception) -> str:
    """One line saying why a write failed (h5py's messages span lines)."""
    found = re.search(r"error message = '([^']+)'", str(error))
    if found:
        return found.group(1)
    return getattr(error, "strerror", None) or str(error).strip().splitlines()[0]


def _identity(path: str | int) -> tuple[int, int]:
    """(device, inode) of a path or an open descriptor."""
    info = os.stat(path)
    return info.st_dev, info.st_ino
