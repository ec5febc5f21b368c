"""The fast layers compute what the Keras layers they replace compute."""

import keras
import numpy as np
import pytest

from app.engine import layers as fast
from app.engine import models


def random(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


@pytest.mark.parametrize("size", [224, 32, 17])
def test_space_to_depth_stem_equals_the_7x7_stride_2_convolution(size):
    x = random((2, size, size, 3))
    reference = keras.layers.Conv2D(64, 7, strides=2, padding="same", use_bias=False)
    stem = fast.SpaceToDepthStem(64, 7, strides=2, padding="same", use_bias=False)
    reference.build(x.shape)
    stem.build(x.shape)
    stem.kernel.assign(reference.kernel)
    assert stem.kernel.shape == (7, 7, 3, 64)
    np.testing.assert_allclose(np.asarray(stem(x)), np.asarray(reference(x)), atol=1e-4)


@pytest.mark.parametrize("size", [112, 15])
def test_slice_max_pool_equals_max_pooling_values_and_gradients(size):
    import tensorflow as tf

    x = tf.constant(random((2, size, size, 8), seed=1))
    pool, reference = fast.MaxPool3x3S2(), keras.layers.MaxPooling2D(3, 2, padding="same")
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours, theirs = pool(x), reference(x)
        weights = tf.constant(random(tuple(ours.shape), seed=2))
        loss_ours, loss_theirs = tf.reduce_sum(ours * weights), tf.reduce_sum(theirs * weights)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    np.testing.assert_allclose(tape.gradient(loss_ours, x).numpy(),
                               tape.gradient(loss_theirs, x).numpy(), atol=1e-6)


@pytest.mark.parametrize("apply_in_compute_dtype", [True, False])
def test_batchnorm_matches_keras_in_training_and_inference(apply_in_compute_dtype):
    x = random((16, 6, 6, 8), seed=3) * 3 + 1
    options = dict(momentum=0.9, epsilon=1e-5)
    ours = fast.BatchNorm(apply_in_compute_dtype=apply_in_compute_dtype, **options)
    theirs = keras.layers.BatchNormalization(**options)
    for layer in (ours, theirs):
        layer.build(x.shape)
        layer.gamma.assign(random((8,), seed=4))
        layer.beta.assign(random((8,), seed=5))
    np.testing.assert_allclose(np.asarray(ours(x, training=True)),
                               np.asarray(theirs(x, training=True)), atol=1e-4)
    np.testing.assert_allclose(np.asarray(ours.moving_mean), np.asarray(theirs.moving_mean),
                               atol=1e-5)
    np.testing.assert_allclose(np.asarray(ours.moving_variance),
                               np.asarray(theirs.moving_variance), atol=1e-4)
    np.testing.assert_allclose(np.asarray(ours(x, training=False)),
                               np.asarray(theirs(x, training=False)), atol=1e-4)


def test_fast_and_keras_resnet50_are_the_same_function():
    fast_model = models.make_model("resnet50", 10, 64, models.FAST)
    keras_model = models.make_model("resnet50", 10, 64, models.KERAS)
    assert [w.shape for w in fast_model.weights] == [w.shape for w in keras_model.weights]
    rng = np.random.default_rng(6)
    weights = [rng.normal(scale=0.05, size=w.shape).astype("float32")
               if "variance" not in w.name else np.ones(w.shape, "float32")
               for w in keras_model.weights]
    keras_model.set_weights(weights)
    fast_model.set_weights(weights)
    x = random((2, 64, 64, 3), seed=7)
    np.testing.assert_allclose(np.asarray(fast_model(x, training=False)),
                               np.asarray(keras_model(x, training=False)), rtol=1e-3, atol=1e-3)
    assert models.forward_flops_per_image(fast_model) == models.forward_flops_per_image(
        keras_model)
