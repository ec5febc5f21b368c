"""Learning rate: the optimizer's current rate, into each epoch's logs."""

from __future__ import annotations

import keras


class LearningRateLogger(keras.callbacks.Callback):
    """Publishes `learning_rate` (the rate the next step will use) at each epoch end.

    Reading the rate is one small device read per epoch (the step count), never per
    step. A schedule is asked for its rate at that step as a plain number, so one that
    computes plain steps on the host (app/models/recipe.py's WarmupSchedule) runs no
    device operation; any other computes it as the optimizer would.
    """

    def __init__(self):
        super().__init__()
        self.learning_rate = None

    def on_epoch_end(self, epoch, logs=None):
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is None:
            return
        # Keras's optimizer.learning_rate is schedule(iterations); the schedule itself
        # is only kept as _learning_rate.
        schedule = getattr(optimizer, "_learning_rate", None)
        if isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
            step = int(keras.ops.convert_to_numpy(optimizer.iterations))
            rate = schedule(step)
        else:
            rate = optimizer.learning_rate
        self.learning_rate = float(keras.ops.convert_to_numpy(rate))
        if logs is not None:
            logs["learning_rate"] = self.learning_rate
