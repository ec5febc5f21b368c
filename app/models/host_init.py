"""Initializers drawn by numpy on the host, for the app's own models.

Keras's initializers draw with the backend's random ops, which JAX runs op by op: every
op of every new shape is one XLA compile (on an H200, from cold, ~40 programs and
6.4 s to build the small ResNet, ~0.25 s for each He-normal draw, on the CPU's XLA as
on the GPU's: benchmarks/device_run.sh fashion_mnist DIAG=1). Drawn by numpy, the
values reach the variables as device arrays and nothing is compiled. Same distributions as
the Keras initializers they stand for; each initializer draws from its own numpy
Generator, seeded from Python's `random` when it is made (keras.utils.set_random_seed
seeds `random`), so --seed makes them repeat.

Also: a Keras initializer instance made without a seed draws the same values at every
call of the same shape (its seed is fixed when it is made), so one instance shared by
every convolution gave equal-shaped convolutions equal starting weights; each call
here draws afresh.
"""

from __future__ import annotations

import math
import random

import keras
import numpy as np


def _on_backend(values: np.ndarray):
    """`values` as the variable will hold them. On JAX, put on the default device as
    they are: a Keras variable converts a numpy initial value with jnp.asarray, which
    compiles one identity program (`stage`) per shape (13 for the small ResNet, ~30 ms
    each on an H200 from cold); a JAX array it takes as it is."""
    if keras.config.backend() == "jax":
        import jax

        return jax.device_put(values)
    return values


def generator() -> np.random.Generator:
    """A numpy Generator for one initializer's draws (seeded from `random`)."""
    return np.random.default_rng(random.getrandbits(64))


def _fans(shape) -> tuple[int, int]:
    """(fan_in, fan_out), as keras.initializers.VarianceScaling counts them."""
    if len(shape) < 2:
        size = int(shape[0]) if shape else 1
        return size, size
    receptive = math.prod(int(s) for s in shape[:-2])
    return int(shape[-2]) * receptive, int(shape[-1]) * receptive


@keras.saving.register_keras_serializable("bench")
class HeNormalFanOut(keras.initializers.Initializer):
    """VarianceScaling(2.0, "fan_out", "untruncated_normal"): N(0, 2 / fan_out), as
    torchvision's kaiming_normal_(mode="fan_out", nonlinearity="relu")."""

    def __init__(self, rng: np.random.Generator | None = None):
        self.rng = rng if rng is not None else generator()

    def __call__(self, shape, dtype=None):
        stddev = math.sqrt(2.0 / max(1, _fans(shape)[1]))
        return _on_backend((self.rng.standard_normal(shape, np.float32)
                            * np.float32(stddev)).astype(dtype or "float32"))

    def get_config(self):
        return {}


@keras.saving.register_keras_serializable("bench")
class GlorotUniform(keras.initializers.Initializer):
    """keras.initializers.GlorotUniform: U(-l, l), l = sqrt(6 / (fan_in + fan_out))."""

    def __init__(self, rng: np.random.Generator | None = None):
        self.rng = rng if rng is not None else generator()

    def __call__(self, shape, dtype=None):
        fan_in, fan_out = _fans(shape)
        limit = math.sqrt(6.0 / max(1, fan_in + fan_out))
        return _on_backend(self.rng.uniform(-limit, limit, shape).astype(dtype or "float32"))

    def get_config(self):
        return {}


@keras.saving.register_keras_serializable("bench")
class Constant(keras.initializers.Initializer):
    """keras.initializers.Constant, as a numpy array."""

    def __init__(self, value: float = 0.0):
        self.value = float(value)

    def __call__(self, shape, dtype=None):
        return _on_backend(np.full(shape, self.value, dtype or "float32"))

    def get_config(self):
        return {"value": self.value}
