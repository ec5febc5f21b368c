"""Synthetic data: random images and labels made once, on the device.

The throughput upper bound, as in the study's first experiment: no decoding, no
augmentation, no host-to-device copies. The same batch is served every step, so
what is measured is the model and the accelerator alone.

On the JAX backend this module imports no TensorFlow (the GPU machines have
none): the batch is a JAX array placed, already sharded, on the devices of the
active `keras.distribution`. On the TensorFlow backend it is a repeated
`tf.data` tensor, which the strategy distributes.
"""

from __future__ import annotations

import itertools

from preprocessing.spec import Datasets, InputSpec, num_batches

IMAGE_SIZE = 224
NUM_CLASSES = 1000
# The images it stands in for (ImageNet's training set), as summary.json records them.
TRAIN_EXAMPLES = 1_281_167
# An epoch of synthetic data, when --steps_per_epoch does not set one: steps a
# throughput measurement can finish (an ImageNet epoch, 20,018 steps at batch 64, ran
# 28.7 h on a CPU), of which the first execution and 5% are warm-up.
EPOCH_STEPS = 200
VALIDATION_EXAMPLES = 50_000


def check(dataset: str, spec: InputSpec) -> None:
    """Nothing on disk to check."""


def known_shape(dataset: str, spec: InputSpec) -> tuple[int, int]:
    return NUM_CLASSES, spec.image_size or IMAGE_SIZE


def make(dataset: str, spec: InputSpec) -> Datasets:
    size = spec.image_size or IMAGE_SIZE
    val_batches = num_batches(spec.batch.largest_shard(VALIDATION_EXAMPLES), spec.batch_size)
    batch_specs = None
    if spec.backend == "jax":
        train, validation = _jax_streams(spec, size, val_batches)
        if spec.num_processes == 1:  # (several processes' batches are assembled by Keras)
            batch_specs = _batch_specs(spec, size)
    else:
        train, validation = _tf_streams(spec, size, val_batches)
    from preprocessing.datasets import fingerprint

    return Datasets(
        batch_specs=(batch_specs[0], batch_specs[1] if spec.with_validation else None)
        if batch_specs else None,
        train=train,
        validation=validation if spec.with_validation else None,
        num_classes=NUM_CLASSES, image_size=size, train_examples=TRAIN_EXAMPLES,
        validation_examples=VALIDATION_EXAMPLES, validation_batches=val_batches,
        epoch_steps=EPOCH_STEPS,
        fingerprint=fingerprint.of_parameters(dataset="synthetic", image_size=size,
                                              num_classes=NUM_CLASSES))


def _batch_specs(spec, size) -> tuple:
    """The shapes and dtypes of the batches _jax_streams serves, (images, labels) and
    with the weights for evaluation, known before the first: app/engine/precompile.py
    compiles the steps for them ahead of fit, and the kernels they run are read there
    (app/engine/kernels.py)."""
    import jax

    images = jax.ShapeDtypeStruct((spec.batch_size, size, size, 3), spec.dtype)
    labels = jax.ShapeDtypeStruct((spec.batch_size,), "int32")
    weights = jax.ShapeDtypeStruct((spec.batch_size,), "float32")
    return (images, labels), (images, labels, weights)


def _jax_streams(spec, size, val_batches):
    import jax
    import keras  # here, not at the top: `check` runs before the framework is chosen
    import numpy as np

    from preprocessing.feed import Feed

    shape = (spec.batch_size, size, size, 3)
    key = jax.random.PRNGKey(spec.seed or 0)
    images = jax.random.normal(key, shape, dtype=spec.dtype)
    labels = jax.random.randint(jax.random.fold_in(key, 1), (spec.batch_size,), 0,
                                NUM_CLASSES, dtype="int32")
    weights = jax.numpy.ones((spec.batch_size,), "float32")
    distribution = keras.distribution.distribution()
    if distribution is not None:
        if spec.num_processes == 1:
            # Place each array with the layout Keras would give it, so that the
            # per-step device_put in fit finds nothing to move.
            images, labels, weights = (
                jax.device_put(a, distribution.get_data_layout(a.shape).backend_layout)
                for a in (images, labels, weights))
        else:
            # Multi-host: Keras assembles the global batch from each process's
            # local part, which it expects on the host.
            images, labels, weights = (np.asarray(a) for a in (images, labels, weights))
    return (Feed(itertools.repeat((images, labels)), None),
            Feed(_Batches((images, labels, weights), val_batches), val_batches))


class _Batches:
    """The same batch `count` times per pass (re-iterable)."""

    def __init__(self, batch, count):
        self._batch, self._count = batch, count

    def __iter__(self):
        return itertools.repeat(self._batch, self._count)


def _tf_streams(spec, size, val_batches):
    import tensorflow as tf

    generator = tf.random.Generator.from_seed(spec.seed or 0)
    images = generator.normal((spec.batch_size, size, size, 3), dtype=spec.dtype)
    labels = generator.uniform((spec.batch_size,), 0, NUM_CLASSES, dtype=tf.int32)
    weights = tf.ones((spec.batch_size,), tf.float32)
    train = tf.data.Dataset.from_tensors((images, labels)).repeat()
    validation = tf.data.Dataset.from_tensors((images, labels, weights)).repeat(val_batches)
    return train, validation
