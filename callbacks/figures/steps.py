"""The run's position, one owner: how training steps are numbered across epochs, fits
and attempts, and how many images they are.

Keras numbers batches from 0 within each epoch of each `fit` call. A run that
resumed mid-epoch first finishes that epoch in a short `fit` (fewer steps), so
`epoch * params["steps"] + batch` is wrong there. Every callback that needs the
global step (checkpoints, NaN guard, profiler, step-level logs) uses this rule,
given the full epoch length and the step the attempt resumed from.

`Position` holds those facts of one attempt (the global and per-process batch, the
epoch's steps, the step it resumed from, the images of earlier attempts). It is built
once, beside the Bill (app/modes/train_callbacks.py), and handed to every callback that
numbers steps or counts images: none of them multiplies a step count by a batch
(tests/test_one_owner.py holds that rule), as none of them prices an hour.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Position:
    """Where one attempt of a run stands in its steps and images.

    Args:
        global_batch_size: images per training step, over every process.
        per_process_batch: of them, those one process's devices see (0: all of them,
            one process).
        steps_per_epoch: training steps of a full epoch (0: each fit's own `steps`).
        resume_step: global steps done before this attempt's first step.
        images_before: training images of earlier attempts.
    """

    global_batch_size: int = 1
    per_process_batch: int = 0
    steps_per_epoch: int = 0
    resume_step: int = 0
    images_before: int = 0

    def __post_init__(self):
        if not isinstance(self.global_batch_size, int) or self.global_batch_size < 1:
            raise ValueError(f"global_batch_size must be >= 1, received "
                             f"{self.global_batch_size!r}")
        for name in ("per_process_batch", "steps_per_epoch", "resume_step", "images_before"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be >= 0, received {value!r}")

    @classmethod
    def of(cls, position: Position | int) -> Position:
        """`position` itself, or a fit of its own at a global batch of `position` images
        (a user's callback: `Throughput(16)`)."""
        return position if isinstance(position, Position) else cls(global_batch_size=position)

    @classmethod
    def of_batch(cls, batch, **facts) -> Position:
        """The position of a run whose batch shape is `batch` (preprocessing/spec.py's
        BatchShape: its `global_size` and `per_process`), with the other `facts`."""
        return cls(global_batch_size=batch.global_size, per_process_batch=batch.per_process,
                   **facts)

    def epoch_steps(self, params: dict | None = None) -> int:
        """A full epoch's steps: `steps_per_epoch`, else the fit's own (`params`)."""
        return self.steps_per_epoch or (params or {}).get("steps") or 0

    def steps_before(self, epoch: int, params: dict | None = None) -> int:
        """Global steps completed before batch 0 of `epoch` (0-based) of this attempt."""
        return steps_before(epoch, self.epoch_steps(params), self.resume_step)

    def global_step(self, epoch: int, batch: int, params: dict | None = None) -> int:
        """1-based global number of the step with (0-based) index `batch` in `epoch`."""
        return global_step(epoch, batch, self.epoch_steps(params), self.resume_step)

    def images(self, steps: float) -> float:
        """Training images of `steps` steps, over every process."""
        return steps * self.global_batch_size

    def process_images(self, steps: float) -> float:
        """Training images of `steps` steps that this process's devices see."""
        return steps * (self.per_process_batch or self.global_batch_size)

    def images_at(self, step: int) -> int:
        """Training images of the run once global step `step` is done: earlier attempts'
        and this one's since `resume_step`."""
        return self.images_before + int(self.images(step - self.resume_step))


def steps_before(epoch: int, steps_per_epoch: int, resume_step: int = 0) -> int:
    """Global steps completed before batch 0 of `epoch` (0-based) of this attempt.

    In the epoch that holds `resume_step` strictly inside it, the attempt starts
    at `resume_step`, not at the epoch's beginning.
    """
    base = epoch * steps_per_epoch
    if base < resume_step < base + steps_per_epoch:
        return resume_step
    return base


def global_step(epoch: int, batch: int, steps_per_epoch: int, resume_step: int = 0) -> int:
    """1-based global number of the step with (0-based) index `batch` in `epoch`."""
    return steps_before(epoch, steps_per_epoch, resume_step) + batch + 1


def every_whole_call(every_steps: int, steps_per_execution: int) -> int:
    """`every_steps` rounded up to a multiple of `steps_per_execution`: with N steps
    per call Keras runs batch hooks once per N steps, after the call's last step, so
    a series asked for every 5 steps at 4 per call is written every 8 (steps 8, 16,
    ...), each point the figures at that step, not every 5 at the next call's end."""
    steps_per_execution = max(1, steps_per_execution)
    return -(-every_steps // steps_per_execution) * steps_per_execution
