"""callbacks/nan_guard.py: a NaN loss stops training at its global step, and the
checkpoint callback never saves non-finite weights."""

import math

import numpy as np
import pytest

from callbacks.checkpoint import Checkpoint
from callbacks.figures.steps import Position
from callbacks.nan_guard import NanGuard
from callbacks.stops import Diverged
from tiny_keras import tiny_data, tiny_model


def test_non_finite_weights_are_never_checkpointed_and_nan_stops_training(tmp_path):
    x, y = tiny_data(64)
    model = tiny_model()
    saver = Checkpoint(str(tmp_path), Position(steps_per_epoch=8))
    saver.set_model(model)
    model.layers[1].kernel.assign(np.full(model.layers[1].kernel.shape, np.nan, "float32"))
    assert saver.save(1, 8) is None
    guard = NanGuard(Position(steps_per_epoch=8))
    guard.on_epoch_begin(1)
    with pytest.raises(Diverged) as stop:
        guard.on_train_batch_end(2, {"loss": math.nan})
    assert stop.value.step == 11 and guard.diverged_at == 11
    guard.on_train_batch_end(3, {"loss": 1.0})  # finite: nothing happens
