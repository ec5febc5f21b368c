"""The one rule for numbering training steps across epochs, fits and attempts.

Keras numbers batches from 0 within each epoch of each `fit` call. A run that
resumed mid-epoch first finishes that epoch in a short `fit` (fewer steps), so
`epoch * params["steps"] + batch` is wrong there. Every callback that needs the
global step (checkpoints, NaN guard, profiler, step-level logs) uses this rule,
given the full epoch length and the step the attempt resumed from.
"""

from __future__ import annotations


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
