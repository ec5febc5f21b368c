"""Resuming a run: check it may resume, load the newest good checkpoint, rewind the logs.

A later attempt resumes only on the data the run started on: each checkpoint
records the example counts, classes and steps per epoch, and what identifies the
data's content (its fingerprint), and a mismatch is refused in one line (a silently
shorter epoch would roll training back, a new class would not even load, swapped
classes would train on wrong labels). A finished run is not trained again: its summary is
kept as it is, or, gone or damaged, rebuilt from its records (`finished_by_records`).

After a kill, the logs may hold more than the checkpoint (an epoch logged but not
yet checkpointed). That part is redone by the new attempt, so it is removed first:
metrics.jsonl keeps the epochs the checkpoint covers, and TensorBoard's event
files keep the points up to its epoch (epoch series) and step (step series). Each
epoch then appears exactly once, in order. (The metrics logger writes an epoch's
line before the checkpoint of that epoch commits, so the logs are never behind a
checkpoint.) Checkpoint files themselves (format, saving, finding, loading) belong
to callbacks/checkpoint.py and callbacks/records/checkpoint_files.py.
"""

from __future__ import annotations

import dataclasses
import os

from app.run import summary as run_summary
from app.run.ledger import LEDGER_FILE, check_attempt
from app.run.rundir import SUMMARY_FILE, RunDirError
from callbacks import metrics_logger
from callbacks.figures.bill import saved_seconds
from callbacks.records import untrusted
from callbacks.records.checkpoint_files import (
    CheckpointMismatch,
    latest_checkpoint,
    load_latest,
)
from callbacks.records.metrics_file import read_metrics
from preprocessing.datasets import fingerprint


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
    billed_seconds: float = 0.0  # as recorded by the checkpoint
    # The run's sums of the epochs the checkpoint holds, by callback (throughput,
    # energy), for the run's figures to cover every attempt.
    run_figures: dict = dataclasses.field(default_factory=dict)


NEW_RUN = State(0, 0, 0, 0, [], None)


FINGERPRINT = "fingerprint"  # the data facts' key of the data's identity


def data_facts(data, steps_per_epoch: int) -> dict:
    """What a run trains on, as saved with each checkpoint and checked on resume: the
    counts, and what identifies the content (Datasets.fingerprint), where known."""
    facts = {"train_examples": data.train_examples,
             "validation_examples": data.validation_examples,
             "num_classes": data.num_classes, "steps_per_epoch": steps_per_epoch}
    if data.fingerprint is not None:
        facts[FINGERPRINT] = data.fingerprint
    return facts


def check_same_data(logdir: str, facts: dict) -> None:
    """Refuses to resume on other data than the newest checkpoint was trained on: other
    counts, or the same counts of other content (two classes swapped, one image
    replaced: preprocessing/datasets/fingerprint.py).

    A checkpoint written before fingerprints were saved has none: that run resumes on
    its counts alone, as it did then.

    Raises:
        RunDirError: naming what changed.
    """
    found = latest_checkpoint(logdir)
    saved = found[1].get("data") if found else None
    saved = saved if isinstance(saved, dict) else {}  # read back: untrusted
    changed = [f"{k} {saved[k]}->{facts[k]}" for k in facts
               if k != FINGERPRINT and k in saved and saved[k] != facts[k]]
    if changed:
        raise RunDirError(f"--logdir={logdir} holds a run started on other data "
                          f"({', '.join(changed)}); restore that data to resume, or pass "
                          "--fresh to start over")
    if FINGERPRINT in saved and FINGERPRINT in facts:
        differs = fingerprint.differences(saved[FINGERPRINT], facts[FINGERPRINT])
        if differs:
            raise RunDirError(f"--logdir={logdir} was trained on other data: {differs}; "
                              "rerun on the same data to resume, or pass --fresh to start "
                              "over")


def completed_summary(logdir: str, epochs: int) -> dict | None:
    """The summary of a run in `logdir` that completed all `epochs`, else None.

    summary.json is read back as untrusted: one whose closing lines cannot be made
    (a hand-edited or damaged file) counts as none, and `finished_by_records` decides.
    """
    try:
        summary = untrusted.read_json(os.path.join(logdir, SUMMARY_FILE))
    except (OSError, untrusted.RecordError):
        return None
    if not (isinstance(summary, dict) and summary.get("status") == "completed"
            and summary.get("epochs_completed") == epochs):
        return None
    try:
        run_summary.closing_lines(summary)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return summary


def finished_by_records(logdir: str, epochs: int) -> bool:
    """Whether the run in `logdir` completed all `epochs` by its records, whatever its
    summary.json says: the newest checkpoint ends the last epoch, metrics.jsonl holds
    every epoch, and the ledger's last attempt closed as completed. Such a run is not
    trained nor billed again: its summary is rebuilt from them (app/modes/train.py).

    A run killed after its last checkpoint but before the ledger closed is resumed
    instead (it finishes at once; that attempt ran, so it is billed). Reads only: a
    damaged record here means "not by its records", and the resume path handles it.
    """
    found = latest_checkpoint(logdir)
    if not found or found[1].get("epoch") != epochs or found[1].get("step_in_epoch"):
        return False
    try:
        logged = {record.get("epoch") for record in read_metrics(logdir)}
        ledger = untrusted.read_json(os.path.join(logdir, LEDGER_FILE))
        attempts = untrusted.field(ledger, "attempts", "list")
        last = check_attempt(attempts[-1]) if attempts else {}
    except (OSError, untrusted.RecordError):
        return False
    return set(range(1, epochs + 1)) <= logged and last.get("status") == "completed"


def rewind_logs(logdir: str, epoch: int, global_step: int) -> None:
    """Removes what was logged after (epoch, global_step)."""
    metrics_logger.rewind(logdir, epoch, global_step)


def restore(model, logdir: str, scope, rewind: bool = True) -> State:
    """Loads the newest intact checkpoint into `model` (weights and optimizer).

    A damaged checkpoint is set aside and the one before it used. With none (killed
    before the first save), the run starts from step 0, and the logs are rewound to
    nothing.

    Args:
        model: the compiled model.
        logdir: the run folder.
        scope: the distribution scope (the optimizer's slots are built in it).
        rewind: also rewind the logs (process 0 only).

    Raises:
        RunDirError: an intact checkpoint that does not fit the model.
    """
    try:
        found = load_latest(model, logdir, scope)
    except CheckpointMismatch as error:
        raise RunDirError(f"{error}; pass --fresh to start over")
    state = NEW_RUN
    if found is not None:
        path, saved = found
        state = State(epoch=saved["epoch"], step_in_epoch=saved["step_in_epoch"],
                      global_step=saved["global_step"], images_seen=saved["images_seen"],
                      top1_history=saved.get("top1_history", []), path=path,
                      input_state=saved.get("input_state"),
                      billed_seconds=saved_seconds(saved),
                      run_figures=saved.get("run_figures") or {})
    if rewind:
        rewind_logs(logdir, state.epoch, state.global_step)
    return state
