"""Learning rate: the optimizer's current rate, into each epoch's logs."""

from __future__ import annotations

import keras


class LearningRateLogger(keras.callbacks.Callback):
    """Publishes `learning_rate` (the rate the next step will use) at each epoch end.

    Reading the rate is one small device read per epoch, never per step.
    """

    def __init__(self):
        super().__init__()
        self.learning_rate = None

    def on_epoch_end(self, epoch, logs=None):
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is None:
            return
        self.learning_rate = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
        if logs is not None:
            logs["learning_rate"] = self.learning_rate
