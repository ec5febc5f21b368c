"""The run folder (--logdir): checked before anything starts, held by one run, written atomically.

A run folder holds config.json (the frozen config), metrics.jsonl, TensorBoard
event files, checkpoints/ and, at the end, summary.json. Rerunning the same
command with the same --logdir resumes; a folder holding a run with another
config (or a config.json with settings missing) is refused (never overwritten)
unless --fresh, which moves it aside.

One live run holds the folder: an exclusive `flock` on <logdir>/run.lock (an empty
file), which the kernel drops when the process ends, however it ends (SIGKILL
included). A second run on a held folder gets one line naming the holder (its pid,
from /proc/locks) and changes nothing.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import time

from callbacks.records.durable import write_json_atomic  # noqa: F401 (the app's one JSON writer)
from callbacks.stops import StorageError
from preprocessing.files import writable_ancestor

CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.json"
LOCK_FILE = "run.lock"

_held = {}  # path -> open lock file: held for the life of the process


class RunDirError(ValueError):
    """The logdir cannot be used; the message is one line."""


@dataclasses.dataclass(frozen=True)
class RunDir:
    path: str
    resuming: bool  # the folder holds an earlier attempt of this same run
    fresh_moves_aside: bool  # --fresh: the old folder is moved aside at create()


def _lock(path: str, create: bool) -> None:
    """Takes the run folder's lock for this process (kept until it exits).

    Raises:
        RunDirError: another live process holds it (named from the lock file).
    """
    lock_path = os.path.join(path, LOCK_FILE)
    if lock_path in _held:
        return
    if not create and not os.path.exists(lock_path):
        return
    handle = open(lock_path, "a" if create else "r")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(os.fstat(handle.fileno()).st_ino)
        handle.close()
        raise RunDirError(f"--logdir={path} is in use by a live run ({holder}); wait for it "
                          "to end or choose another folder")
    _held[lock_path] = handle


def _holder(inode: int) -> str:
    """'pid N' of the process holding the flock on `inode` (Linux), if it can be found."""
    try:
        with open("/proc/locks") as f:
            for line in f:  # "1: FLOCK  ADVISORY  WRITE 4242 00:2e:1234 0 EOF"
                fields = line.split()
                if fields[1:2] == ["FLOCK"] and fields[5].split(":")[-1] == str(inode):
                    return f"pid {fields[4]}"
    except (OSError, IndexError):
        pass
    return "another process"


def preflight(config) -> RunDir:
    """Checks --logdir without writing anything.

    Raises:
        RunDirError: if it is a file, cannot be written, is held by a live run, or
            holds something else.
    """
    path = config.logdir
    if os.path.exists(path) and not os.path.isdir(path):
        raise RunDirError(f"--logdir={path} is a file; accepted: a folder (new or a run's)")
    if writable_ancestor(path) is None or (os.path.isdir(path) and not os.access(
            path, os.W_OK | os.X_OK)):
        raise RunDirError(f"--logdir={path} cannot be created or written")
    if os.path.isdir(path) and config.process_id == 0:  # process 0 alone writes the folder
        _lock(path, create=False)
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
        if not isinstance(saved, dict):
            raise ValueError(f"it holds {type(saved).__name__}, not an object")
    except (OSError, ValueError) as error:
        raise RunDirError(f"--logdir={path}: cannot read {CONFIG_FILE} ({error}); pass "
                          "--fresh to move the folder aside")
    differences = config.differences(saved)
    if differences:
        shown = ", ".join(f"--{k} missing" if k not in saved else
                          f"--{k}={saved.get(k)!r}->{getattr(config, k)!r}"
                          for k in differences[:4])
        raise RunDirError(f"--logdir={path} holds a run with another config ({shown}); "
                          "rerun with the same flags to resume, or pass --fresh to start over")
    return RunDir(path, resuming=True, fresh_moves_aside=False)


def create(run_dir: RunDir, config) -> None:
    """Takes the folder's lock, makes the folder (moving an old one aside for --fresh)
    and saves config.json (a resumed run's is already there, and is kept).

    Raises:
        RunDirError: another run took the folder since the preflight, or whatever
            else stops it (the preflight cannot foresee everything: as root, /proc
            looks writable but no folder can be made in it).
    """
    try:
        if run_dir.fresh_moves_aside:
            aside = f"{os.path.normpath(run_dir.path)}.old-{time.strftime('%Y%m%d-%H%M%S')}"
            os.replace(run_dir.path, aside)
            _held.pop(os.path.join(run_dir.path, LOCK_FILE), None)  # that lock went with it
            print(f"--fresh: moved the previous contents of {run_dir.path} to {aside}")
        os.makedirs(run_dir.path, exist_ok=True)
        _lock(run_dir.path, create=True)
        if not run_dir.resuming:
            write_json_atomic(os.path.join(run_dir.path, CONFIG_FILE), config.to_dict())
    except OSError as error:
        raise RunDirError(f"--logdir={run_dir.path} cannot be created or written "
                          f"({error.strerror or error})") from None



def check_intact(run_dir: RunDir) -> None:
    """The run folder is still the one this process locked (not deleted or replaced).

    Raises:
        StorageError: it is gone.
    """
    handle = _held.get(os.path.join(run_dir.path, LOCK_FILE))
    try:
        intact = handle is None or os.path.samestat(
            os.fstat(handle.fileno()), os.stat(os.path.join(run_dir.path, LOCK_FILE)))
    except OSError:
        intact = False
    if not intact:
        raise StorageError.folder_lost(run_dir.path, "its results are lost")


def read_json(path: str):
    with open(path) as f:
        return json.load(f)
