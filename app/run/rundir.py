"""The run folder (--logdir): taken under its lock first, then judged, written atomically.

A run folder holds config.json (the frozen config), metrics.jsonl, TensorBoard
event files, checkpoints/ and, at the end, summary.json. Rerunning the same
command with the same --logdir resumes; a folder holding a run with another
config (or a config.json with settings missing) is refused (never overwritten)
unless --fresh, which moves it aside. A folder this app did not write (a dataset,
another tool's output: `is_run_folder`) is refused either way, --fresh included.

One writer, decided under the lock. One live run holds the folder: an exclusive
`flock` on <logdir>/run.lock (an empty file), which the kernel drops when the
process ends, however it ends (SIGKILL included). `preflight` takes it FIRST
(process 0 alone: it alone writes the folder), making the folder if needed, and
only then reads the folder to decide whether the run is new, a resume or refused:
two runs started at the same moment cannot both judge a folder "new". A second run
on a held folder gets one line naming the holder (its pid, from /proc/locks) and
changes nothing. A folder holding nothing but run.lock (a kill between making the
folder and writing config.json) is this app's own: a new run.

A run refused after its preflight (its devices, data, price or model checks in
app/run/context.py, or its mode's own before `create`) leaves nothing behind:
`abandon` removes exactly what the preflight made (run.lock, the folder) and
nothing else. What killed writers left
half-written (`.tmp-*`, durable.remove_temporaries) is removed under the lock,
once the run is accepted (`create`), before its ledger opens.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import time

from callbacks.records import durable
from callbacks.records.durable import write_json_atomic  # noqa: F401 (the app's one JSON writer)
from callbacks.stops import StorageError
from preprocessing.files import writable_ancestor

CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.json"
LOCK_FILE = "run.lock"
_LOCK_TRIES = 5  # a lock file removed between its open and its flock is opened again

_held = {}  # lock path -> open lock file: held for the life of the process
_created = set()  # run folders create() made the run's: abandon() leaves them alone


class RunDirError(ValueError):
    """The logdir cannot be used; the message is one line."""


@dataclasses.dataclass(frozen=True)
class RunDir:
    path: str
    resuming: bool  # the folder holds an earlier attempt of this same run
    fresh_moves_aside: bool  # --fresh: the old folder is moved aside at create()
    # What the preflight made, all that `abandon` removes: the lock file, then the
    # folders (innermost first).
    made: tuple[str, ...] = ()


def _make_folders(path: str) -> list[str]:
    """Makes `path` and its missing parents; returns those this process made,
    innermost first (one made by another process at the same moment is not ours)."""
    missing, folder = [], os.path.abspath(path)
    while not os.path.isdir(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    made = []
    try:
        for folder in reversed(missing):
            try:
                os.mkdir(folder)
                made.append(folder)
            except FileExistsError:
                pass
    except OSError:
        _remove(made[::-1])
        raise
    return made[::-1]


def _lock(path: str) -> bool:
    """Takes the run folder's lock for this process (kept until it exits); returns
    whether this process made the lock file.

    Raises:
        RunDirError: another live process holds it (named from the lock file).
        FileNotFoundError: the folder is gone (a refused run removed what it made).
    """
    lock_path = os.path.join(path, LOCK_FILE)
    if lock_path in _held:
        return False
    for _ in range(_LOCK_TRIES):
        made = False
        try:
            fd = os.open(lock_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            made = True
        except FileExistsError:
            try:
                fd = os.open(lock_path, os.O_RDONLY)
            except FileNotFoundError:
                continue  # removed since: make it
        handle = os.fdopen(fd, "rb", buffering=0)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(os.fstat(handle.fileno()).st_ino)
            handle.close()
            raise RunDirError(f"--logdir={path} is in use by a live run ({holder}); wait "
                              "for it to end or choose another folder")
        # A refused run removes the lock file it made while holding it: the file this
        # process opened may be gone, and the lock on it holds nothing.
        if _same_file(handle, lock_path):
            _held[lock_path] = handle
            return made
        handle.close()
    raise RunDirError(f"--logdir={path}: its {LOCK_FILE} keeps being replaced; choose "
                      "another folder")


def _same_file(handle, path: str) -> bool:
    try:
        return os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
    except OSError:
        return False


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


def _take(path: str) -> tuple[str, ...]:
    """Makes the folder if needed and takes its lock; returns what this process made
    (see RunDir.made).

    Raises:
        RunDirError: it is held by a live run, or cannot be made.
    """
    for _ in range(_LOCK_TRIES):
        try:
            folders = _make_folders(path)
        except OSError as error:
            raise RunDirError(f"--logdir={path} cannot be created or written "
                              f"({error.strerror or error})") from None
        try:
            made_lock = _lock(path)
        except FileNotFoundError:
            continue  # the folder went away since it was made (a refused run's)
        except RunDirError:
            raise  # what this process made is the holder's now
        except OSError as error:
            _remove(folders)
            raise RunDirError(f"--logdir={path} cannot be created or written "
                              f"({error.strerror or error})") from None
        return ((os.path.join(path, LOCK_FILE),) if made_lock else ()) + tuple(folders)
    raise RunDirError(f"--logdir={path} keeps disappearing; choose another folder")


def preflight(config) -> RunDir:
    """Takes the run folder (process 0: makes it if needed and locks it), then decides,
    under the lock, whether this run is new, a resume or refused.

    Raises:
        RunDirError: if it is a file, cannot be written, is held by a live run, or
            holds something else (then what this process made is removed again).
    """
    path = config.logdir
    if os.path.exists(path) and not os.path.isdir(path):
        raise RunDirError(f"--logdir={path} is a file; accepted: a folder (new or a run's)")
    if writable_ancestor(path) is None or (os.path.isdir(path) and not os.access(
            path, os.W_OK | os.X_OK)):
        raise RunDirError(f"--logdir={path} cannot be created or written")
    made = _take(path) if config.process_id == 0 else ()  # process 0 alone writes the folder
    run_dir = RunDir(path, resuming=False, fresh_moves_aside=False, made=made)
    try:
        return _judge(run_dir, config)
    except RunDirError:
        abandon(run_dir)
        raise


# What every config.json this app writes holds (Config.to_dict): a JSON object with
# these settings is a run's; a config.json of anything else (a model's, a tool's) is not.
RUN_CONFIG_KEYS = ("model", "dataset", "backend", "global_batch_size", "epochs", "logdir")
# The records a run writes once its config.json is saved: with the run's own lock file,
# they mark a run folder whose config.json was lost or damaged since.
RUN_RECORDS = ("billing.json", "metrics.jsonl", SUMMARY_FILE, "checkpoints")


def _saved_config(path: str) -> dict | None:
    """The JSON object in `path`'s config.json; None where there is no such file.

    Raises:
        OSError, ValueError: it cannot be read, or holds no JSON object.
    """
    try:
        with open(os.path.join(path, CONFIG_FILE)) as f:
            saved = json.load(f)
    except FileNotFoundError:
        return None
    if not isinstance(saved, dict):
        raise ValueError(f"it holds {type(saved).__name__}, not an object")
    return saved


def is_run_folder(path: str, entries: set[str] | None = None,
                  lock_was_there: bool | None = None) -> bool:
    """Whether `path` is a run folder this app wrote: its config.json is a run's, or it
    holds this app's lock file (taken first in every folder a run writes) beside a
    run's records (a run whose config.json was damaged since). The one test that
    --fresh (which moves only a run folder aside) and resuming both use: a dataset, a
    home folder or another tool's output is never renamed, locked or resumed.

    Args:
        path: the folder.
        entries: its names, where already listed.
        lock_was_there: whether its run.lock was there before this process (None:
            judged from `entries`).
    """
    entries = set(os.listdir(path)) if entries is None else entries
    try:
        saved = _saved_config(path)
        if saved is not None and all(key in saved for key in RUN_CONFIG_KEYS):
            return True
    except (OSError, ValueError):
        pass  # damaged: the records below decide
    lock = LOCK_FILE in entries if lock_was_there is None else lock_was_there
    return lock and any(name in entries for name in RUN_RECORDS)


def _not_a_run_folder(path: str, entries: set[str]) -> RunDirError:
    names = sorted(entries - {LOCK_FILE})
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return RunDirError(f"--logdir={path} is not a run folder (it holds {shown} and no "
                       f"{CONFIG_FILE} of a run of this app); choose a new or empty folder "
                       "(--fresh moves aside only a run folder)")


def _judge(run_dir: RunDir, config) -> RunDir:
    """New, a resume (same config), a --fresh start or refused: read under the lock."""
    path = run_dir.path
    entries = set(os.listdir(path)) if os.path.isdir(path) else set()
    rest = entries - {LOCK_FILE}
    # What a run killed before its config.json was saved leaves: its lock file, and
    # perhaps config.json's temporary. (Without a lock file that was there before this
    # process, a `.tmp-*` is no sign of this app: the folder is someone else's.)
    lock_was_there = LOCK_FILE in entries and os.path.join(path, LOCK_FILE) not in run_dir.made
    if not rest or (lock_was_there and all(
            name.startswith(durable.TEMPORARY_PREFIX) for name in rest)):
        return run_dir  # (create() removes the temporaries)
    if not is_run_folder(path, entries, lock_was_there):
        raise _not_a_run_folder(path, entries)
    if config.fresh:
        return dataclasses.replace(run_dir, fresh_moves_aside=True)
    try:
        saved = _saved_config(path)
        if saved is None:
            raise ValueError("it is missing")
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
    return dataclasses.replace(run_dir, resuming=True)


def abandon(run_dir: RunDir) -> None:
    """Removes what the preflight made (run.lock if it made it, the folder if it made
    it, nothing else) and lets the folder go: a run refused after its preflight leaves
    nothing behind. A folder something else was put in since stays. Does nothing once
    `create` has made the folder the run's."""
    if os.path.abspath(run_dir.path) in _created:
        return
    handle = _held.pop(os.path.join(run_dir.path, LOCK_FILE), None)
    _remove(run_dir.made)  # the lock file while still holding it: see _lock
    if handle is not None:
        handle.close()


def _remove(paths) -> None:
    """Removes each path: a file, or a folder only while it is empty."""
    for path in paths:
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)
            else:
                os.remove(path)
        except OSError:
            pass


def create(run_dir: RunDir, config) -> None:
    """Makes the locked folder the run's: removes what killed writers left half-written,
    saves config.json (a resumed run's is already there, and is kept). For --fresh it
    first moves the old folder aside (its run.lock goes with it) and makes and locks a
    new one in its place.

    Raises:
        RunDirError: another run took the folder's name while --fresh moved it aside,
            the folder was removed since the preflight, or it cannot be written.
    """
    lock_path = os.path.join(run_dir.path, LOCK_FILE)
    try:
        if run_dir.fresh_moves_aside:
            aside = f"{os.path.normpath(run_dir.path)}.old-{time.strftime('%Y%m%d-%H%M%S')}"
            os.replace(run_dir.path, aside)
            old = _held.pop(lock_path, None)  # that lock went with it: held until the new one
            print(f"--fresh: moved the previous contents of {run_dir.path} to {aside}")
            try:
                os.mkdir(run_dir.path)
            except FileExistsError:
                raise RunDirError(f"--logdir={run_dir.path} was taken by another run while "
                                  f"--fresh moved the old one aside (to {aside})") from None
            _lock(run_dir.path)
            if old is not None:
                old.close()
        elif lock_path in _held and not _same_file(_held[lock_path], lock_path):
            raise RunDirError(f"--logdir={run_dir.path} was removed or replaced since this "
                              "run took it")
        # What killed writers left half-written goes, under the lock (a temporary is a
        # live writer's until its rename) and only now: a refused run changes nothing.
        durable.remove_temporaries(run_dir.path)
        if not run_dir.resuming:
            write_json_atomic(os.path.join(run_dir.path, CONFIG_FILE), config.to_dict())
        _created.add(os.path.abspath(run_dir.path))
    except OSError as error:
        raise RunDirError(f"--logdir={run_dir.path} cannot be created or written "
                          f"({error.strerror or error})") from None


def check_intact(run_dir: RunDir) -> None:
    """The run folder is still the one this process locked (not deleted or replaced).

    Raises:
        StorageError: it is gone.
    """
    lock_path = os.path.join(run_dir.path, LOCK_FILE)
    handle = _held.get(lock_path)
    if handle is not None and not _same_file(handle, lock_path):
        raise StorageError.folder_lost(run_dir.path, "its results are lost")


def read_json(path: str):
    with open(path) as f:
        return json.load(f)
