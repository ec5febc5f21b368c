"""A model whose training step naps NAP_SECONDS on the host (an environment variable,
read when the model is built; JAX only: jax.pure_callback), so that two attempts of one
run step at different speeds, as a preempted run resumed on another machine does.
`--model=tests/nap_model.py:make_model`."""

import os
import time

import keras
import numpy as np


class Nap(keras.layers.Layer):
    """Adds 0, which the host returns after sleeping `seconds`."""

    def __init__(self, seconds: float, **kwargs):
        super().__init__(**kwargs)
        self.seconds = seconds

    def call(self, images):
        import jax

        def nap(_):
            time.sleep(self.seconds)
            return np.zeros((), np.float32)

        # On the images (no weight depends on them): autodiff never enters the callback.
        zero = jax.pure_callback(nap, jax.ShapeDtypeStruct((), np.float32),
                                 images[0, 0, 0, 0])
        return images + keras.ops.cast(zero, images.dtype)


def make_model(num_classes, image_size):
    inputs = keras.Input((image_size, image_size, 3))
    x = Nap(float(os.environ.get("NAP_SECONDS", "0.05")))(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(num_classes, dtype="float32")(x)
    return keras.Model(inputs, outputs)
