"""callbacks/first_step.py: fit's start and its first training call's end, by the wall
clock, once, in a real Keras fit."""

import time

import keras
import numpy as np

from callbacks.first_step import FirstStep


class Clock(keras.callbacks.Callback):
    """A second clock: when each hook ran, seen by a callback of its own."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_begin(self, logs=None):
        self.seen.append(("begin", time.time()))

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append((batch, time.time()))


def test_the_first_call_of_the_first_fit_is_marked_once():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse", steps_per_execution=3)
    x, y = np.ones((24, 4), "float32"), np.zeros((24, 2), "float32")
    clock, first = Clock(), FirstStep()
    before = time.time()
    model.fit(x, y, batch_size=4, epochs=2, verbose=0, callbacks=[clock, first])
    (_, began), (call, ended) = clock.seen[0], clock.seen[1]
    assert before <= began <= first.train_began_at <= ended <= first.first_step_at
    assert first.first_step_at - ended < 0.5 and call == 2  # the call of steps 0-2
    assert first.steps_in_first_call == 3
    kept = (first.train_began_at, first.first_step_at)
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[first])  # a second fit
    assert (first.train_began_at, first.first_step_at) == kept


def test_a_call_cut_short_by_the_epochs_end_counts_its_own_steps():
    first = FirstStep()
    first.set_model(keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)]))
    first.model.steps_per_execution = 8
    first.on_train_begin()
    first.on_train_batch_end(4)  # an epoch of 5 steps: the call ran 5, not 8
    assert first.steps_in_first_call == 5 and first.first_step_at >= first.train_began_at
