"""NaN guard: stop at the first non-finite training loss, and say where.

Unlike Keras's TerminateOnNaN, it is `async_safe` (it reads the loss Keras has
already converted), and it raises `Diverged`, so `fit` stops at once instead of
running a validation pass on broken weights. The checkpoint callback never saves
non-finite weights, so the last checkpoint stays good.
"""

from __future__ import annotations

import math

import keras

from callbacks.figures.steps import global_step
from callbacks.stops import Diverged


class NanGuard(keras.callbacks.Callback):
    """Raises `Diverged(step, loss)` when the training loss is not finite.

    `step` is the 1-based global step whose execution reported the loss.

    Args:
        steps_per_epoch: training steps of a full epoch (to number steps globally).
        resume_step: global steps done before this attempt's first step.
    """

    async_safe = True

    def __init__(self, steps_per_epoch: int = 0, resume_step: int = 0):
        super().__init__()
        self.steps_per_epoch = steps_per_epoch
        self.resume_step = resume_step
        self.diverged_at = None
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None or math.isfinite(loss):
            return
        step = global_step(self._epoch, batch, self.steps_per_epoch, self.resume_step)
        self.diverged_at = step
        raise Diverged(step, loss)
