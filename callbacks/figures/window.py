"""The steady-state window: which training steps are timed, for throughput and energy.

Pure Python, the one rule both callbacks/throughput.py and callbacks/energy.py use.
Keras calls `on_train_batch_end` once per execution (every `steps_per_execution`
steps) with the 0-based index of the execution's last step; each call is a mark
(step index, completion time, ...). The window runs from the mark that ends the
warm-up to the epoch's last mark, so it times every step after the warm-up and
nothing else (no evaluation, no epoch-end work):

- first epoch of a fit: the warm-up is `requested` steps, or automatically
  max(2 executions, 5% of the epoch) (compile and the first executions), rounded
  up to whole executions; it is capped to leave two executions to time where the
  epoch has at least three (a two-execution epoch times its second one);
- later epochs: the first execution is the warm-up (the input pipeline restarts
  after evaluation), so the window starts at its end, the epoch's first mark.
"""

from __future__ import annotations

import math


def warmup_steps(epoch_steps: int | None, steps_per_call: int, requested: int = 0) -> int:
    """Steps of a fit's first epoch left out before the window starts (see above)."""
    warmup = requested or max(2 * steps_per_call, math.ceil(0.05 * (epoch_steps or 0)))
    if epoch_steps:
        warmup = min(warmup, epoch_steps - 2 * steps_per_call)
    return max(warmup, steps_per_call)  # the window starts at a mark: one execution at least


def steady_state_begins(batch: int, epoch_steps: int | None, steps_per_call: int,
                        first_epoch: bool, requested: int = 0) -> bool:
    """Whether the mark of the execution ending at step `batch` (0-based) may start
    the window: its end is past the warm-up."""
    if not first_epoch:
        return True
    return batch + 1 >= warmup_steps(epoch_steps, steps_per_call, requested)


def in_step_order(marks: list) -> list:
    """The marks ordered by step, the k-th earliest time (with the readings taken with
    it) given to the k-th step. Marks are tuples (step index, time, readings...).

    On JAX, Keras runs the batch hooks of async_safe callbacks in worker threads, so a
    mark may be taken after those of later steps: sorted by step with their own times,
    a sweep window's steps read -0.17, -30.97 and -3.16 ms. Steps complete in order on
    the device, and each hook runs after its step completed (Keras waits for the
    step's logs first), so the k-th earliest time is at or after the k-th step's
    completion (of the k earliest hooks, one belongs to step k or later), and it is the
    earliest time that bounds it: the step series is never negative, and a window
    whose first and last marks ran in order spans the same seconds as before.
    """
    steps = sorted(mark[0] for mark in marks)
    readings = sorted((mark[1:] for mark in marks), key=lambda rest: rest[0])
    return [(step, *rest) for step, rest in zip(steps, readings)]


def steady_window(marks: list, epoch_steps: int | None, steps_per_call: int,
                  first_epoch: bool, requested: int = 0) -> list:
    """The marks of the window, in step order (`in_step_order`): from the first that
    may start it to the epoch's last. Marks are tuples (step index, time, ...)."""
    marks = in_step_order(marks)
    for index, mark in enumerate(marks):
        if steady_state_begins(mark[0], epoch_steps, steps_per_call, first_epoch, requested):
            return marks[index:]
    return []


def gap_sums(gaps: list) -> dict:
    """What a window's step-time figures are made of, as sums that add up across
    windows, epochs and attempts: steps, seconds, how many gaps, and the sum and
    the sum of squares of each gap's seconds per step. `gaps` are (steps, seconds)
    between consecutive marks."""
    per_step = [s / n for n, s in gaps]
    return {"steps": sum(n for n, _ in gaps), "seconds": sum(s for _, s in gaps),
            "gaps": len(gaps), "step_seconds": sum(per_step),
            "step_seconds_squared": sum(t * t for t in per_step)}


def add_sums(first: dict, second: dict) -> dict:
    """Two windows' `gap_sums` (or any dicts of sums) as one."""
    return {k: first.get(k, 0) + second.get(k, 0) for k in {*first, *second}}


def spread_of(sums: dict) -> dict:
    """Step time from `gap_sums` (one window's, or several added up).

    `step_time_ms` is the seconds over the steps, so that it equals global batch /
    images_per_sec of the same windows exactly; the standard error and the jitter
    (standard deviation / mean) come from the per-step time of each gap.
    """
    steps = sums.get("steps", 0)
    if steps <= 0:
        return {}
    mean = sums["seconds"] / steps
    count = sums["gaps"]
    squares = sums["step_seconds_squared"] - 2 * mean * sums["step_seconds"] + count * mean ** 2
    std = math.sqrt(max(squares, 0.0) / (count - 1)) if count > 1 else 0.0
    return {"step_time_ms": mean * 1e3, "step_time_stderr_ms": std / math.sqrt(count) * 1e3,
            "step_time_jitter": std / mean if mean > 0 else 0.0}
