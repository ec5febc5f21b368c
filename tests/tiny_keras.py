"""A tiny Keras model and data that fit in a fraction of a second, for the callbacks' tests."""

import keras
import numpy as np


def tiny_model(steps_per_execution=1):
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inputs, keras.layers.Dense(10)(x))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=steps_per_execution)
    return model


def tiny_data(n=64):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 8, 8, 3)).astype("float32"), rng.integers(0, 10, n)
