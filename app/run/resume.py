"""Resuming a run: load the newest good checkpoint and rewind the logs to it.

After a kill, the logs may hold more than the checkpoint (an epoch logged but not
yet checkpointed). That part is redone by the new attempt, so it is removed first:
metrics.jsonl keeps the epochs the checkpoint covers, and TensorBoard's event
files keep the points up to its epoch (epoch series) and step (step series). Each
epoch then appears exactly once, in order. Checkpoint files themselves (format,
saving, finding, loading) belong to callbacks/checkpoint.py.
"""

from __future__ import annotations

import dataclasses

from callbacks import metrics_logger
from callbacks.checkpoint import load_latest


@dataclasses.dataclass(frozen=True)
class State:
    """Where an earlier attempt left the run."""

    epoch: int  # epochs completed
    step_in_epoch: int  # steps done in the next epoch (mid-epoch checkpoint)
    global_step: int
    images_seen: int
    top1_history: list
    path: str | None
    input_state: object = None  # the input stream's position, where it has one


NEW_RUN = State(0, 0, 0, 0, [], None)


def rewind_logs(logdir: str, epoch: int, global_step: int) -> None:
    """Removes what was logged after (epoch, global_step)."""
    metrics_logger.rewind(logdir, epoch, global_step)


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
    found = load_latest(model, logdir, scope)
    state = NEW_RUN
    if found is not None:
        path, saved = found
        state = State(epoch=saved["epoch"], step_in_epoch=saved["step_in_epoch"],
                      global_step=saved["global_step"], images_seen=saved["images_seen"],
                      top1_history=saved.get("top1_history", []), path=path,
                      input_state=saved.get("input_state"))
    if rewind:
        rewind_logs(logdir, state.epoch, state.global_step)
    return state
