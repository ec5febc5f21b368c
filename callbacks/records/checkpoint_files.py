"""Checkpoint files: their names, their CRC, and loading the newest intact one.

The format (written by callbacks/checkpoint.py): checkpoints/ckpt-<global step>/
holding `model.weights.h5` and `state.json`; state.json records the weights file's
size and CRC-32, so a truncated, zeroed or overwritten file is found before it is
loaded. Loading takes the newest checkpoint that is intact; one that is not is set
aside (renamed `*.unloadable-<time>`, kept, reported on stderr) and the one before
it is used.
"""

from __future__ import annotations

import json
import os
import re
import zlib

from callbacks.records import durable

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


def read_state(path: str) -> dict:
    """state.json of checkpoint `path`, checked to hold what a resume needs.

    Raises:
        OSError, ValueError: unreadable, not JSON, or missing a field.
    """
    with open(os.path.join(path, STATE_FILE)) as f:
        state = json.load(f)
    if not isinstance(state, dict):
        raise ValueError(f"{STATE_FILE} holds {type(state).__name__}, not an object")
    missing = [k for k in REQUIRED_STATE if not isinstance(state.get(k), int)]
    if missing:
        raise ValueError(f"{STATE_FILE} lacks {', '.join(missing)}")
    return state


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
