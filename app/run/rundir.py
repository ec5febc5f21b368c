"""The run folder (--logdir): checked before anything starts, written atomically.

A run folder holds config.json (the frozen config), metrics.jsonl, TensorBoard
event files, checkpoints/ and, at the end, summary.json. Rerunning the same
command with the same --logdir resumes; a folder holding a run with another
config is refused (never overwritten) unless --fresh, which moves it aside.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time

from preprocessing.paths import writable_ancestor

CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.json"


class RunDirError(ValueError):
    """The logdir cannot be used; the message is one line."""


@dataclasses.dataclass(frozen=True)
class RunDir:
    path: str
    resuming: bool  # the folder holds an earlier attempt of this same run
    fresh_moves_aside: bool  # --fresh: the old folder is moved aside at create()


def preflight(config) -> RunDir:
    """Checks --logdir without writing anything.

    Raises:
        RunDirError: if it is a file, cannot be written, or holds something else.
    """
    path = config.logdir
    if os.path.exists(path) and not os.path.isdir(path):
        raise RunDirError(f"--logdir={path} is a file; accepted: a folder (new or a run's)")
    if writable_ancestor(path) is None or (os.path.isdir(path) and not os.access(
            path, os.W_OK | os.X_OK)):
        raise RunDirError(f"--logdir={path} cannot be created or written")
    saved_path = os.path.join(path, CONFIG_FILE)
    if not os.path.isdir(path) or not os.listdir(path):
        return RunDir(path, resuming=False, fresh_moves_aside=False)
    if config.fresh:
        return RunDir(path, resuming=False, fresh_moves_aside=True)
    if not os.path.exists(saved_path):
        raise RunDirError(f"--logdir={path} is not empty and holds no {CONFIG_FILE} (not a "
                          "run folder); choose a new folder, or pass --fresh to move it aside")
    try:
        with open(saved_path) as f:
            saved = json.load(f)
    except (OSError, json.JSONDecodeError) as error:
        raise RunDirError(f"--logdir={path}: cannot read {CONFIG_FILE} ({error}); pass "
                          "--fresh to move the folder aside")
    differences = config.differences(saved)
    if differences:
        shown = ", ".join(f"--{k}={saved.get(k)!r}->{getattr(config, k)!r}"
                          for k in differences[:4])
        raise RunDirError(f"--logdir={path} holds a run with another config ({shown}); "
                          "rerun with the same flags to resume, or pass --fresh to start over")
    return RunDir(path, resuming=True, fresh_moves_aside=False)


def create(run_dir: RunDir, config) -> None:
    """Makes the folder (moving an old one aside for --fresh) and saves config.json.

    Raises:
        RunDirError: whatever stops it (the preflight cannot foresee everything:
            as root, /proc looks writable but no folder can be made in it).
    """
    try:
        if run_dir.fresh_moves_aside:
            aside = f"{os.path.normpath(run_dir.path)}.old-{time.strftime('%Y%m%d-%H%M%S')}"
            os.replace(run_dir.path, aside)
            print(f"--fresh: moved the previous contents of {run_dir.path} to {aside}")
        os.makedirs(run_dir.path, exist_ok=True)
        write_json_atomic(os.path.join(run_dir.path, CONFIG_FILE), config.to_dict())
    except OSError as error:
        raise RunDirError(f"--logdir={run_dir.path} cannot be created or written "
                          f"({error.strerror or error})") from None


def write_json_atomic(path: str, obj) -> None:
    """Writes JSON to a temporary file, syncs it, then renames it over `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        with os.fdopen(handle, "w") as f:
            json.dump(obj, f, indent=2, sort_keys=True, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def read_json(path: str):
    with open(path) as f:
        return json.load(f)
