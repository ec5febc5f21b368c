"""Checkpoint files: their names, their CRC, and loading the newest intact one.

The format (written by callbacks/checkpoint.py): checkpoints/ckpt-<global step>/
holding `model.weights.h5` and `state.json`; state.json records the weights file's
size and CRC-32, so a truncated, zeroed or overwritten file is found before it is
loaded. Loading takes the newest checkpoint that is intact; one that is not is set
aside (renamed `*.unloadable-<time>`, kept, reported on stderr) and the one before
it is used. state.json is read as untrusted: a hostile one (wrong types, numbers
out of range, not finite, nested too deep) makes its checkpoint unloadable, never a
traceback.
"""

from __future__ import annotations

import os
import re
import zlib

from callbacks.records import durable, untrusted
from callbacks.records.untrusted import RecordError, field

CHECKPOINT_DIR = "checkpoints"
WEIGHTS_FILE = "model.weights.h5"
STATE_FILE = "state.json"
NAME = re.compile(r"ckpt-\d+")  # a committed checkpoint (not staging, not set aside)
REQUIRED_STATE = ("epoch", "step_in_epoch", "global_step", "images_seen")


class CheckpointMismatch(ValueError):
    """A checkpoint that is intact but does not fit the model (one line)."""



def file_crc(path: str) -> tuple[int, int]:
    """(size in bytes, CRC-32) of a file, read in 1 MiB chunks."""
    crc, size = 0, 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            crc, size = zlib.crc32(chunk, crc), size + len(chunk)
    return size, crc


def committed(directory: str) -> list[str]:
    """Names of the committed checkpoints in `directory`, oldest first."""
    if not os.path.isdir(directory):
        return []
    return sorted(name for name in os.listdir(directory) if NAME.fullmatch(name))


MAX_COUNT = 2**53  # steps, images, bytes: beyond this a float cannot count them
MAX_STATE_BYTES = 16 << 20  # state.json is kilobytes (top-1 history, input position)
# The most seconds a run can have billed: 20 years, more than has passed since 2020
# (app/run/ledger.py's EARLIEST) for years to come; past it, the figure is not a bill.
MAX_BILLED_SECONDS = 20 * 366 * 86400.0


def read_state(path: str) -> dict:
    """state.json of checkpoint `path`, read as untrusted (callbacks/records/untrusted.py)
    and checked to hold what a resume needs, with the app's types and ranges.

    Raises:
        OSError: unreadable.
        RecordError (a ValueError): not JSON, not finite, nested too deep, a field
            of the wrong type or out of range; one line naming it.
    """
    state = untrusted.read_json(os.path.join(path, STATE_FILE), MAX_STATE_BYTES)
    if not isinstance(state, dict):
        raise RecordError(f"{STATE_FILE} holds {type(state).__name__}, not an object")
    missing = [k for k in REQUIRED_STATE if state.get(k) is None]
    if missing:
        raise RecordError(f"{STATE_FILE} lacks {', '.join(missing)}")
    try:
        _check_state(state, os.path.basename(os.path.normpath(path)))
    except RecordError as error:
        raise RecordError(f"{STATE_FILE}: {error}") from None
    return state


def _check_state(state: dict, name: str) -> None:
    """Types and ranges of what resume and the callbacks read back (train_callbacks'
    `_extra_state` writes them)."""
    for key in REQUIRED_STATE:
        field(state, key, "integer", low=0, high=MAX_COUNT)
    if NAME.fullmatch(name) and int(name[len("ckpt-"):]) != state["global_step"]:
        raise RecordError(f"'global_step' holds {state['global_step']}, not the step of "
                          f"its folder {name}")
    field(state, "billed_seconds", "number", low=0, high=MAX_BILLED_SECONDS, required=False)
    field(state, "saved_at", "number", required=False)
    field(state, "weights_bytes", "integer", low=0, high=MAX_COUNT, required=False)
    field(state, "weights_crc32", "integer", low=0, high=2**32 - 1, required=False)
    field(state, "data", "object", required=False)
    # input_state is the input stream's own (a grain iterator's state); the stream
    # checks it when it restores.
    for entry in field(state, "top1_history", "list", required=False, default=[]):
        field(entry, "epoch", "integer", low=1, high=MAX_COUNT)
        for key in ("top1", "top5", "hours", "cost_usd"):
            field(entry, key, "number", required=False)
    figures = field(state, "run_figures", "object", required=False, default={})
    throughput = field(figures, "throughput", "object", required=False, default={})
    for key in ("wall_images", "wall_seconds", "eval_images", "eval_seconds"):
        field(throughput, key, "number", low=0, required=False)
    steady = field(throughput, "steady", "object", required=False, default={})
    for key in steady:
        field(steady, key, "number", low=0)
    energy = field(figures, "energy", "object", required=False, default={})
    totals = field(energy, "totals", "list", required=False, default=[0, 0, 0])
    if len(totals) != 3 or not all(_number(t) and t >= 0 for t in totals):
        raise RecordError("'totals' of run_figures.energy is not 3 numbers >= 0")
    for window in field(energy, "windows", "list", required=False, default=[]):
        for key in ("epoch", "start_unix", "end_unix", "joules", "images"):
            field(window, key, "number")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_weights(path: str, state: dict) -> None:
    """Raises ValueError if the weights file is missing or not what was saved."""
    weights = os.path.join(path, WEIGHTS_FILE)
    if not os.path.isfile(weights):
        raise ValueError(f"{WEIGHTS_FILE} is missing")
    if "weights_crc32" in state and file_crc(weights) != (state.get("weights_bytes"),
                                                         state["weights_crc32"]):
        raise ValueError(f"{WEIGHTS_FILE} does not match the size and CRC saved with it "
                         "(truncated or overwritten)")


def latest_checkpoint(logdir: str) -> tuple[str, dict] | None:
    """(path, state) of the newest checkpoint whose state.json reads, or None."""
    directory = os.path.join(logdir, CHECKPOINT_DIR)
    for name in reversed(committed(directory)):
        path = os.path.join(directory, name)
        try:
            state = read_state(path)
        except (OSError, ValueError):
            continue
        if os.path.exists(os.path.join(path, WEIGHTS_FILE)):
            return path, state
    return None


def kept_line(logdir: str | None, last: str = "the last checkpoint") -> str:
    """What a stop's line may say it kept: "<last> is kept" where `logdir` holds a
    checkpoint, else "no checkpoint was saved before it" (never a promise of one)."""
    try:
        found = bool(logdir) and latest_checkpoint(logdir) is not None
    except OSError:  # the folder is what failed: nothing to promise
        found = False
    return f"{last} is kept" if found else "no checkpoint was saved before it"


def load_latest(model, logdir: str, scope) -> tuple[str, dict] | None:
    """Loads the newest intact checkpoint into `model`; returns (path, state) or None.

    A checkpoint whose files are damaged is set aside (renamed, kept) with a warning
    on stderr, and the one before it is tried.

    Args:
        model: the compiled model.
        logdir: the run folder.
        scope: the distribution scope (the optimizer's slots are built in it).

    Raises:
        CheckpointMismatch: an intact checkpoint that does not fit the model.
    """
    directory = os.path.join(logdir, CHECKPOINT_DIR)
    with scope:
        # The optimizer's variables must exist before its saved values can load.
        model.optimizer.build(model.trainable_variables)
    for name in reversed(committed(directory)):
        path = os.path.join(directory, name)
        try:
            state = read_state(path)
            _check_weights(path, state)
        except (OSError, ValueError) as error:
            aside = durable.set_aside(path, "unloadable")
            durable.warn(f"checkpoint {path} cannot be loaded ({error}); set aside as "
                         f"{aside}, using the one before it")
            continue
        try:
            model.load_weights(os.path.join(path, WEIGHTS_FILE))
        except Exception as error:  # Keras raises ValueError, h5py OSError/KeyError
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise CheckpointMismatch(f"checkpoint {path} does not fit this model "
                                     f"({type(error).__name__}: {reason})")
        return path, state
    return None
