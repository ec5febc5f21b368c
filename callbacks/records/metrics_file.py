"""metrics.jsonl: one JSON line per epoch, written by the metrics logger.

Kept here, beside the callback that writes it, so that readers (resume, report,
tests) share one format. Each line is read as untrusted (callbacks/records/untrusted.py):
an object whose `epoch` is a whole number >= 1 and whose every other value is a
finite number. A torn last line (a kill mid-write) is skipped quietly: it is redone.
Any other line that fails is damage: every good line is still read, and a rewind
keeps the file as it was beside it and says so.

The TensorBoard event files hold the same figures (the logger writes each epoch's
line and its `epoch_*` scalars together), so a rewind rebuilds from them the
epochs that the checkpoint covers and metrics.jsonl lacks (deleted, damaged),
with one warning line.
"""

from __future__ import annotations

import math
import os
import shutil
import time

from callbacks.records import durable, untrusted

METRICS_FILE = "metrics.jsonl"
MAX_EPOCH = 10**9


def check_record(value) -> dict:
    """One metrics line's value, checked (see the module docstring).

    Raises:
        RecordError: naming what is wrong.
    """
    untrusted.field(value, "epoch", "integer", low=1, high=MAX_EPOCH)
    for key in value:
        if key != "epoch":
            untrusted.field(value, key, "number")
    return value


def _scan(path: str) -> tuple[list[dict], list[int]]:
    """(good records, 1-based numbers of damaged lines) of a metrics file.

    Raises:
        RecordError: the file is not a regular file or is too large.
        OSError: it cannot be read.
    """
    records, damaged = [], []
    lines = untrusted.read_bytes(path).split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(check_record(untrusted.loads(line)))
        except untrusted.RecordError:
            if number < len(lines):  # the last piece has no newline: torn, not damaged
                damaged.append(number)
    return records, damaged


def read_metrics(logdir: str) -> list[dict]:
    """Every good record of metrics.jsonl (damaged lines and a torn tail skipped).

    Raises:
        RecordError: metrics.jsonl is not a regular file (a FIFO) or is too large.
        OSError: it exists but cannot be read.
    """
    path = os.path.join(logdir, METRICS_FILE)
    return _scan(path)[0] if os.path.lexists(path) else []


def truncate_metrics(logdir: str, last_epoch: int) -> None:
    """Keeps the records of epochs up to `last_epoch`, each once, in order (atomically),
    and rebuilds from the event files those epochs that metrics.jsonl lacks.

    If the file had damaged lines, it is first copied aside as it was, and a
    warning names the lines; a file that cannot be read at all (not a regular
    file, too large, unreadable) is set aside (renamed) with a warning.
    """
    path = os.path.join(logdir, METRICS_FILE)
    records, damaged = [], []
    if os.path.lexists(path):
        try:
            records, damaged = _scan(path)
        except (untrusted.RecordError, OSError) as error:
            reason = getattr(error, "strerror", None) or str(error)
            aside = durable.set_aside(path)
            durable.warn(f"{path} cannot be read ({reason}); kept as {aside}")
    if damaged:
        aside = f"{path}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"
        shutil.copyfile(path, aside)
        durable.warn(f"{path}: line(s) {', '.join(map(str, damaged[:5]))} cannot be read; "
                     f"the file as it was is kept as {aside}, every good line is kept")
    kept = {}
    for record in records:
        if record["epoch"] <= last_epoch:
            kept.setdefault(record["epoch"], record)
    missing = [epoch for epoch in range(1, last_epoch + 1) if epoch not in kept]
    if missing:
        kept.update(_rebuild(logdir, path, missing))
    if not kept and not os.path.lexists(path):
        return  # nothing to keep, and no file to empty
    lines = [durable.dumps(kept[epoch]) + "\n" for epoch in sorted(kept)]
    durable.write_atomic(path, "".join(lines))


def _rebuild(logdir: str, path: str, missing: list[int]) -> dict:
    """{epoch: record} of the `missing` epochs, from the event files, with one warning
    line (the figures are float32 there: rebuilt lines agree to ~7 digits)."""
    found = epoch_figures(logdir, set(missing))
    rebuilt = sorted(found)
    lost = [epoch for epoch in missing if epoch not in found]
    said = f"{path} lacked epoch(s) {_epochs(missing)} that the checkpoint covers; "
    if rebuilt:
        said += f"epoch(s) {_epochs(rebuilt)} rebuilt from the TensorBoard event files"
    if lost:
        said += f"{'; ' if rebuilt else ''}epoch(s) {_epochs(lost)} are not in the event " \
                "files either and stay missing"
    durable.warn(said)
    return found


def _epochs(epochs: list[int]) -> str:
    shown = ", ".join(map(str, epochs[:10]))
    return shown + (f" and {len(epochs) - 10} more" if len(epochs) > 10 else "")


def epoch_figures(logdir: str, epochs: set[int]) -> dict:
    """{epoch: the metrics line of that epoch} rebuilt from the `epoch_*` scalars that
    callbacks/metrics_logger.py writes to logdir/train and logdir/validation (each at
    step = epoch, wall time = the line's `time`), for the `epochs` asked for. Damaged
    event files give what precedes their damage; values that are not finite are left
    out; an epoch with no figure is left out."""
    from tensorboard.util import tensor_util

    from callbacks.records import events
    from callbacks.records.dashboard import FIGURES, TRAIN, VALIDATION

    keys = {(figure.run, figure.tag("epoch")): key for key, figure in FIGURES.items()}
    found = {}
    for run in (TRAIN, VALIDATION):
        for event_file in events.event_files(os.path.join(logdir, run)):
            try:
                read = events.scan_events(event_file)[0]
            except OSError:
                continue
            for event in read:
                if event.step not in epochs or not math.isfinite(event.wall_time):
                    continue
                for value in event.summary.value:
                    key = keys.get((run, value.tag))
                    if key is None and run == TRAIN and value.tag.startswith("other/epoch_"):
                        key = value.tag[len("other/epoch_"):]  # figure_of's default
                    if key is None or value.tensor.tensor_shape.dim:
                        continue  # not an epoch figure, or not a scalar (not the app's)
                    try:
                        number = float(tensor_util.make_ndarray(value.tensor).item())
                    except Exception:  # a hostile tensor proto: not a scalar, bad bytes
                        continue
                    if math.isfinite(number):
                        record = found.setdefault(event.step, {"epoch": event.step})
                        record.setdefault("time", event.wall_time)
                        record.setdefault(key, number)
    return {epoch: {"epoch": epoch, "time": record.pop("time"),
                    **dict(sorted((k, v) for k, v in record.items() if k != "epoch"))}
            for epoch, record in found.items()}
