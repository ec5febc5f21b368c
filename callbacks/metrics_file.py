"""metrics.jsonl: one JSON line per epoch, written by the metrics logger.

Reading tolerates a torn last line (a kill mid-write). Kept here, beside the
callback that writes it, so that readers (resume, report, tests) share one format.
"""

from __future__ import annotations

import json
import os

METRICS_FILE = "metrics.jsonl"


def read_metrics(logdir: str) -> list[dict]:
    """The records of metrics.jsonl (a torn last line, from a kill, is skipped)."""
    path = os.path.join(logdir, METRICS_FILE)
    if not os.path.exists(path):
        return []
    records = []
    with open(path) as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return records


def truncate_metrics(logdir: str, last_epoch: int) -> None:
    """Keeps the records of epochs up to `last_epoch` (atomically)."""
    path = os.path.join(logdir, METRICS_FILE)
    if not os.path.exists(path):
        return
    kept = [r for r in read_metrics(logdir) if r.get("epoch", 0) <= last_epoch]
    temporary = path + ".tmp"
    with open(temporary, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in kept)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
