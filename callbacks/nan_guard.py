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

    Example (a fit whose loss is not finite from its first step stops there):

    >>> import keras, numpy as np
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    >>> model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(
    ...     from_logits=True), metrics=[keras.metrics.SparseCategoricalAccuracy("top1")])
    >>> x, y = np.full((64, 4), np.nan), np.zeros(64, int)
    >>> from callbacks.nan_guard import NanGuard
    >>> from callbacks.stops import Diverged
    >>> try:
    ...     _ = model.fit(x, y, batch_size=16, verbose=0, callbacks=[NanGuard()])
    ... except Diverged as error:
    ...     print("diverged at step", error.step)
    diverged at step 1
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
