"""A benchmark point's names and its folder: the path-safe name of its settings (its
row's `point`, its folder's name), the few characters HParams shows of it, and
<logdir>/points/<name>, emptied before the point is measured again (app/modes/bench.py
measures it; sweep.py and ladder.py name theirs with it)."""

from __future__ import annotations

import os
import re
import shutil

POINTS_FOLDER = "points"
# How a setting is named in a trial ID (HParams' first column, ~16 characters shown).
SHORT_NAMES = {"global_batch_size": "batch", "steps_per_execution": "steps/call",
               "image_size": "image", "xla_autotune": "autotune",
               "batchnorm_statistics": "batchnorm", "input_pipeline": "input"}


def point_name(settings: dict) -> str:
    """The point's path-safe name, e.g. precision=float32,global_batch_size=8."""
    text = ",".join(f"{k}={v}" for k, v in settings.items())
    return re.sub(r"[^\w.,=+-]", "_", text) or "default"


def short_label(settings: dict) -> str:
    """The point's settings in few characters, its values first: "bfloat16, batch 8"."""
    words = []
    for key, value in settings.items():
        value = str(value).replace("mixed_", "")
        words.append(f"{SHORT_NAMES[key]} {value}" if key in SHORT_NAMES else value)
    return ", ".join(words) or "default"


def point_folder(context, name: str) -> str:
    """<logdir>/points/<name>, made where missing (a point skipped before it was
    profiled made none); never the run folder itself, which exists."""
    folder = os.path.join(context.logdir, POINTS_FOLDER)
    for path in (folder, os.path.join(folder, name)):
        if not os.path.isdir(path):
            os.mkdir(path)
    return os.path.join(folder, name)


def fresh_folder(context, name: str) -> str:
    """The point's folder, emptied: what an attempt killed before the point's row was
    kept wrote there (its HParams record, its trace, its step breakdown at step 3)
    would otherwise be read beside what this measurement writes."""
    path = os.path.join(context.logdir, POINTS_FOLDER, name)
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
        os.remove(path)  # not a folder this app made: nothing to keep
    elif os.path.isdir(path):
        shutil.rmtree(path)
    return point_folder(context, name)
