"""Resuming a run: load the newest good checkpoint and rewind the logs to it.

After a kill, the logs may hold more than the checkpoint (an epoch logged but not
yet checkpointed). That part is redone by the new attempt, so it is removed first:
metrics.jsonl keeps the epochs the checkpoint covers, and TensorBoard's event
files keep the points up to its epoch (epoch series) and step (step series). Each
epoch then appears exactly once, in order.
"""

from __future__ import annotations

import dataclasses
import json
import os

from callbacks import _events
from callbacks.checkpoint import WEIGHTS_FILE, latest_checkpoint
from app.rundir import METRICS_FILE, read_metrics


@dataclasses.dataclass(frozen=True)
class State:
    """Where an earlier attempt left the run."""

    epoch: int  # epochs completed
    step_in_epoch: int  # steps done in the next epoch (mid-epoch checkpoint)
    global_step: int
    images_seen: int
    billed_seconds: float
    top1_history: list
    path: str | None


def _truncate_metrics(logdir: str, last_epoch: int) -> None:
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


def rewind_logs(logdir: str, epoch: int, global_step: int) -> None:
    """Removes what was logged after (epoch, global_step)."""
    _truncate_metrics(logdir, epoch)
    _events.rewind(logdir, epoch)
    _events.rewind(os.path.join(logdir, "steps"), global_step)


NEW_RUN = State(0, 0, 0, 0, 0.0, [], None)


def restore(model, logdir: str, scope, rewind: bool = True) -> State:
    """Loads the newest complete checkpoint into `model` (weights and optimizer).

    With no checkpoint yet (killed before the first save), the run starts from
    step 0, and the logs are rewound to nothing.

    Args:
        model: the compiled model.
        logdir: the run folder.
        scope: the distribution scope (the optimizer's slots are built in it).
        rewind: also rewind the logs (process 0 only).
    """
    found = latest_checkpoint(logdir)
    if found is None:
        state = NEW_RUN
    else:
        path, saved = found
        with scope:
            # The optimizer's variables must exist before its saved values can load.
            model.optimizer.build(model.trainable_variables)
        model.load_weights(os.path.join(path, WEIGHTS_FILE))
        state = State(epoch=saved["epoch"], step_in_epoch=saved["step_in_epoch"],
                      global_step=saved["global_step"], images_seen=saved["images_seen"],
                      billed_seconds=saved["billed_seconds"],
                      top1_history=saved.get("top1_history", []), path=path)
    if rewind:
        rewind_logs(logdir, state.epoch, state.global_step)
    return state
