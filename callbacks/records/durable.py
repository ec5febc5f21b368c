"""Files that survive kills and say when they are damaged (a helper, not a callback).

- Strict JSON: everything the app writes parses with any JSON reader (no NaN or
  Infinity: a figure that is not finite is written as null).
- Atomic writes: a temporary file, synced, renamed over the target, then the
  folder synced, so a kill or a power cut leaves the old file or the new one.
- Setting aside: a damaged file is renamed, never deleted, and reported.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import sys
import tempfile
import time

from callbacks.records import faults

def strict(value):
    """`value` with every non-finite number replaced by None (JSON's null)."""
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()  # a NumPy scalar
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: strict(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(item) for item in value]
    return value


def dumps(value, **kwargs) -> str:
    """Strict JSON text of `value` (see `strict`); anything else odd becomes a string."""
    return json.dumps(strict(value), allow_nan=False, default=str, **kwargs)


def warn(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")
    sys.stderr.flush()


def sync_folder(path: str) -> None:
    """Makes the names in folder `path` (a rename, a new file) durable."""
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def sync_tree(path: str) -> None:
    """fsyncs every file under `path`, then every folder (before a commit-rename)."""
    for folder, _, names in os.walk(path, topdown=False):
        for name in names:
            with open(os.path.join(folder, name), "rb") as f:
                os.fsync(f.fileno())
        sync_folder(folder)


TEMPORARY_PREFIX = ".tmp-"  # write_atomic's temporary files


def write_atomic(path: str, text: str) -> None:
    """Writes `text` to a temporary file, syncs it, renames it over `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=TEMPORARY_PREFIX, dir=folder)
    try:
        with os.fdopen(handle, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        faults.reached("atomic_write")  # a kill here leaves the temporary (tests)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise
    sync_folder(folder)


def remove_temporaries(folder: str) -> list[str]:
    """Removes what killed writers left half-written in run folder `folder`: the
    `.tmp-*` files of `write_atomic` in it and in its train/ and validation/ folders,
    and checkpoints/ckpt-*.tmp-<pid> staging folders (callbacks/checkpoint.py).
    Returns the paths removed.

    Call it ONLY while this process holds the run folder's lock
    (app/run/rundir.py): a temporary file is a live writer's until its rename, and
    without the lock another process may be writing this folder right now.
    Committed files are never touched: every name removed holds ".tmp-".
    """
    removed = []
    for sub in ("", "train", "validation", "checkpoints"):
        place = os.path.join(folder, sub) if sub else folder
        try:
            names = os.listdir(place)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            path = os.path.join(place, name)
            if sub == "checkpoints":
                if not (name.startswith("ckpt-") and ".tmp-" in name):
                    continue
            elif not name.startswith(TEMPORARY_PREFIX):
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
            removed.append(path)
    if removed:
        sync_folder(folder)
    return removed


def write_json_atomic(path: str, obj) -> None:
    """`obj` as strict, indented JSON at `path`, atomically."""
    write_atomic(path, dumps(obj, indent=2, sort_keys=True) + "\n")


def set_aside(path: str, why: str = "damaged") -> str:
    """Renames `path` to `<path>.<why>-<time>` (kept, never deleted); returns the new name."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside, n = f"{path}.{why}-{stamp}", 1
    while os.path.exists(aside):
        aside, n = f"{path}.{why}-{stamp}-{n}", n + 1
    os.replace(path, aside)
    return aside
