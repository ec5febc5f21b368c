"""metrics.jsonl: one JSON line per epoch, written by the metrics logger.

Kept here, beside the callback that writes it, so that readers (resume, report,
tests) share one format. A torn last line (a kill mid-write) is skipped quietly: it
is redone. Any other line that does not parse is damage: every good line is still
read, and a rewind keeps the file as it was beside it and says so.
"""

from __future__ import annotations

import json
import os
import shutil
import time

from callbacks.records import durable

METRICS_FILE = "metrics.jsonl"


def _scan(path: str) -> tuple[list[dict], list[int]]:
    """(good records, 1-based numbers of damaged lines) of a metrics file."""
    records, damaged = [], []
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict) and isinstance(record.get("epoch"), int):
            records.append(record)
        elif number < len(lines):  # the last piece has no newline: torn, not damaged
            damaged.append(number)
    return records, damaged


def read_metrics(logdir: str) -> list[dict]:
    """Every good record of metrics.jsonl (damaged lines and a torn tail skipped)."""
    path = os.path.join(logdir, METRICS_FILE)
    return _scan(path)[0] if os.path.exists(path) else []


def truncate_metrics(logdir: str, last_epoch: int) -> None:
    """Keeps the records of epochs up to `last_epoch`, each once (atomically).

    If the file had damaged lines, it is first copied aside as it was, and a
    warning names the lines.
    """
    path = os.path.join(logdir, METRICS_FILE)
    if not os.path.exists(path):
        return
    records, damaged = _scan(path)
    if damaged:
        aside = f"{path}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"
        shutil.copyfile(path, aside)
        durable.warn(f"{path}: line(s) {', '.join(map(str, damaged[:5]))} cannot be read; "
                     f"the file as it was is kept as {aside}, every good line is kept")
    kept, seen = [], set()
    for record in records:
        if record["epoch"] <= last_epoch and record["epoch"] not in seen:
            seen.add(record["epoch"])
            kept.append(record)
    durable.write_atomic(path, "".join(durable.dumps(r) + "\n" for r in kept))
