"""NaN guard: stop at the first non-finite training loss, and say where.

Unlike Keras's TerminateOnNaN, it is `async_safe` (it reads the loss Keras has
already converted), and it raises `Diverged`, so `fit` stops at once instead of
running a validation pass on broken weights. The checkpoint callback never saves
non-finite weights, so the last checkpoint stays good.
"""

from __future__ import annotations

import math

import keras

from callbacks.figures.steps import Position
from callbacks.stops import Diverged


class NanGuard(keras.callbacks.Callback):
    """Raises `Diverged(step, loss)` when the training loss is not finite.

    `step` is the 1-based global step whose execution reported the loss.

    Args:
        position: the run's Position (callbacks/figures/steps.py), to number steps
            globally; None: a fit of its own.

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

    def __init__(self, position: Position | None = None):
        super().__init__()
        self.position = position or Position()
        self.diverged_at = None
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None or math.isfinite(loss):
            return
        step = self.position.global_step(self._epoch, batch, self.params)
        self.diverged_at = step
        raise Diverged(step, loss)
