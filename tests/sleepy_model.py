"""A model whose training step takes a fixed time: it sleeps SECONDS on the host once
per forward pass (JAX only: jax.pure_callback). Its images/sec is the batch over
about SECONDS whoever measures it, so two measurements of it compare the measuring,
not the machine's noise. `--model=tests/sleepy_model.py:make_model`."""

import time

import keras
import numpy as np

SECONDS = 0.05


class Sleep(keras.layers.Layer):
    """Adds 0, which the host returns after sleeping SECONDS."""

    def call(self, images):
        import jax

        def nap(_):
            time.sleep(SECONDS)
            return np.zeros((), np.float32)

        # On the images (no weight depends on them): autodiff never enters the callback.
        zero = jax.pure_callback(nap, jax.ShapeDtypeStruct((), np.float32),
                                 images[0, 0, 0, 0])
        return images + keras.ops.cast(zero, images.dtype)


def make_model(num_classes, image_size):
    inputs = keras.Input((image_size, image_size, 3))
    x = Sleep()(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(num_classes, dtype="float32")(x)
    return keras.Model(inputs, outputs)


BFLOAT16_SECONDS = 0.2  # a step under mixed_bfloat16: 4x float32's


class PrecisionNap(Sleep):
    """Sleeps SECONDS on float32 images and BFLOAT16_SECONDS on bfloat16 ones (the
    images reach a layer in its compute dtype), so that mixed bfloat16 loses."""

    def call(self, images):
        import jax

        seconds = BFLOAT16_SECONDS if images.dtype == "bfloat16" else SECONDS

        def nap(_):
            time.sleep(seconds)
            return np.zeros((), np.float32)

        zero = jax.pure_callback(nap, jax.ShapeDtypeStruct((), np.float32),
                                 images[0, 0, 0, 0])
        return images + keras.ops.cast(zero, images.dtype)


def make_model_slow_in_bfloat16(num_classes, image_size):
    """`--model=tests/sleepy_model.py:make_model_slow_in_bfloat16`: a step of SECONDS in
    float32, BFLOAT16_SECONDS under mixed_bfloat16 (the effort ladder's losing rung)."""
    inputs = keras.Input((image_size, image_size, 3))
    x = PrecisionNap()(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(num_classes, dtype="float32")(x)
    return keras.Model(inputs, outputs)
