"""The fast layers compute what the Keras layers they replace compute."""

import dataclasses

import keras
import numpy as np
import pytest

from app.models import layers as fast
from app import models
from app.models import resnet


def random(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


@pytest.mark.parametrize("size,channel_multiple", [(224, 1), (32, 1), (17, 1), (224, 16),
                                                   (32, 16)])
def test_space_to_depth_stem_equals_the_7x7_stride_2_convolution(size, channel_multiple):
    x = random((2, size, size, 3))
    reference = keras.layers.Conv2D(64, 7, strides=2, padding="same", use_bias=False)
    stem = fast.SpaceToDepthStem(64, 7, strides=2, padding="same", use_bias=False,
                                 channel_multiple=channel_multiple)
    reference.build(x.shape)
    stem.build(x.shape)
    stem.kernel.assign(reference.kernel)
    assert stem.kernel.shape == (7, 7, 3, 64)
    np.testing.assert_allclose(np.asarray(stem(x)), np.asarray(reference(x)), atol=1e-4)


def _pool_values_and_gradient(layer, x, weights):
    """The layer's output and the gradient of sum(output * weights), through the
    backend's own autodiff (TensorFlow's tape or jax.grad)."""
    if keras.backend.backend() == "jax":
        import jax

        return (np.asarray(layer(x)),
                np.asarray(jax.grad(lambda t: (layer(t) * weights).sum())(x)))
    import tensorflow as tf

    t = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(t)
        y = layer(t)
        loss = tf.reduce_sum(y * weights)
    return y.numpy(), tape.gradient(loss, t).numpy()


@pytest.mark.parametrize("argmax", [True, False])
@pytest.mark.parametrize("size", [112, 15, 2])
def test_slice_max_pool_equals_max_pooling_values_and_gradients(size, argmax):
    x = random((2, size, size, 8), seed=1)
    weights = random((2, (size + 1) // 2, (size + 1) // 2, 8), seed=2)
    ours = _pool_values_and_gradient(fast.MaxPool3x3S2(argmax=argmax), x, weights)
    theirs = _pool_values_and_gradient(keras.layers.MaxPooling2D(3, 2, padding="same"), x,
                                       weights)
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_allclose(ours[1], theirs[1], atol=1e-6)


@pytest.mark.parametrize("size", [16, 9])
def test_the_argmax_gradient_goes_to_the_first_maximum_on_ties_as_max_pooling_does(size):
    """Small integers: most windows hold their maximum more than once (as after a
    ReLU, whose zeros tie). Keras's MaxPooling2D gives each output's gradient to the
    first maximum in the window (row by row); so does the hand-written gradient, and
    every output's gradient arrives whole (the total is kept)."""
    x = np.random.default_rng(3).integers(0, 3, size=(2, size, size, 8)).astype("float32")
    weights = random((2, (size + 1) // 2, (size + 1) // 2, 8), seed=4)
    ours = _pool_values_and_gradient(fast.MaxPool3x3S2(), x, weights)
    theirs = _pool_values_and_gradient(keras.layers.MaxPooling2D(3, 2, padding="same"), x,
                                       weights)
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_allclose(ours[1], theirs[1], atol=1e-6)
    assert np.isclose(ours[1].sum(), weights.sum(), atol=1e-4)
    # By hand: four tied maxima at rows 0-1, columns 0-1, all in output (0, 0)'s
    # window (rows and columns 0-2 for an even size, -1-1 for an odd one); only
    # output (0, 0) has a gradient: all of it goes to (0, 0), the first.
    single = np.zeros((1, size, size, 1), "float32")
    single[0, :2, :2, 0] = 1.0  # four tied maxima in output (0, 0)'s window
    one = np.zeros((1, (size + 1) // 2, (size + 1) // 2, 1), "float32")
    one[0, 0, 0, 0] = 5.0
    gradient = _pool_values_and_gradient(fast.MaxPool3x3S2(), single, one)[1][0, :, :, 0]
    expected = np.zeros((size, size), "float32")
    expected[0, 0] = 5.0
    np.testing.assert_array_equal(gradient, expected)


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


def bn_relu_outputs_and_gradients(relu_in_layer: bool, groups: int, seed: int = 8) -> dict:
    """relu(BatchNorm(x)) in training, with the ReLU inside the layer (its hand-written
    gradient) or after it (autodiff): output, moving statistics, and the gradients of
    sum(output * weights) for x, gamma and beta, through the backend's own autodiff.
    Also run in a JAX process by the test below."""
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(8, 5, 5, 6)) * 2 + 0.5).astype("float32")
    weights = rng.normal(size=x.shape).astype("float32")
    layer = fast.BatchNorm(groups=groups, relu=relu_in_layer, momentum=0.9, epsilon=1e-5)
    layer.build(x.shape)
    layer.gamma.assign(rng.normal(size=(6,)).astype("float32"))
    layer.beta.assign(rng.normal(size=(6,)).astype("float32"))

    def output(y):
        return y if relu_in_layer else keras.ops.relu(y)

    if keras.backend.backend() == "jax":
        import jax

        def loss(x, trainable):
            y, moving = layer.stateless_call(trainable, layer.non_trainable_variables, x,
                                             training=True)
            y = output(y)
            return (y * weights).sum(), (y, moving)

        trainable = [v.value for v in layer.trainable_variables]
        (dx, (dgamma, dbeta)), (y, moving) = jax.grad(loss, argnums=(0, 1), has_aux=True)(
            x, trainable)
    else:
        import tensorflow as tf

        t = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(t)
            y = output(layer(t, training=True))
            loss = tf.reduce_sum(y * weights)
        dx, dgamma, dbeta = tape.gradient(loss, [t, layer.gamma, layer.beta])
        moving = [layer.moving_mean, layer.moving_variance]
    return {name: np.asarray(value) for name, value in
            [("y", y), ("dx", dx), ("dgamma", dgamma), ("dbeta", dbeta),
             ("moving_mean", moving[0]), ("moving_variance", moving[1])]}


@pytest.mark.parametrize("groups", [1, 2])
def test_batchnorm_with_its_relu_inside_computes_what_batchnorm_then_relu_does(groups):
    fused = bn_relu_outputs_and_gradients(True, groups)
    separate = bn_relu_outputs_and_gradients(False, groups)
    assert (fused["y"] == 0).mean() > 0.2  # the ReLU cuts: its mask matters
    for name in fused:
        np.testing.assert_allclose(fused[name], separate[name], rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_batchnorm_with_its_relu_inside_has_the_same_gradients_on_jax():
    """The same comparison in a JAX process (the test process runs TensorFlow)."""
    from conftest import run_python

    code = ("import json, sys; sys.path.insert(0, 'tests/app/models'); sys.path.insert(0, 'tests'); sys.path.insert(0, '.')\n"
            "import numpy as np, test_layers as t\n"
            "worst = 0.0\n"
            "for groups in (1, 2):\n"
            "    a = t.bn_relu_outputs_and_gradients(True, groups)\n"
            "    b = t.bn_relu_outputs_and_gradients(False, groups)\n"
            "    worst = max([worst] + [float(np.abs(a[k] - b[k]).max()) for k in a])\n"
            "print(json.dumps({'worst': worst, 'keys': sorted(a)}))\n")
    result = run_python(code, {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"})
    assert result["keys"] == ["dbeta", "dgamma", "dx", "moving_mean", "moving_variance", "y"]
    assert result["worst"] < 1e-4


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
    assert resnet.forward_flops_per_image(fast_model) == resnet.forward_flops_per_image(
        keras_model)
    fused = models.make_model("resnet50", 10, 64, dataclasses.replace(
        models.FAST, relu_in_batchnorm=True))
    assert [w.name for w in fused.weights] == [w.name for w in fast_model.weights]
    fused.set_weights(weights)
    np.testing.assert_allclose(np.asarray(fused(x, training=False)),
                               np.asarray(fast_model(x, training=False)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_a_resnet_with_the_default_layers_trains_on_each_backend(backend, tmp_path):
    """The stem, the pool's hand-written gradient and the padded space-to-depth stem,
    through `fit` as a user runs it (TensorFlow's oneDNN pass once aborted the process
    on the padded stem's filter)."""
    import json

    from conftest import run_cli

    result = run_cli(f"--backend={backend}", "--model=resnet18", "--dataset=synthetic",
                     "--image_size=32", "--global_batch_size=8", "--epochs=1",
                     "--steps_per_epoch=2", "--validation_steps=-1", "--verbose=0",
                     f"--logdir={tmp_path}")
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["backend"] == backend and summary["model"] == "resnet18"
    assert summary["epochs_completed"] == 1 and summary["images_per_sec"] > 0


def small_map_model(side: int):
    """ConvNeXt's last-stage form: 7x7 groups over 16 channels on a side x side map."""
    inputs = keras.Input((side, side, 16))
    x = keras.layers.Conv2D(16, 7, padding="same", groups=16, name="dw")(inputs)
    x = keras.layers.Conv2D(8, 3, padding="same", name="plain")(x)
    return keras.Model(inputs, keras.layers.GlobalAveragePooling2D()(x))


def small_map_outputs_and_gradients() -> list:
    """Outputs, then the gradients of sum(y * y) for the images and every weight, of the
    7x7 model and of its swapped twin (JAX's autodiff; run in a JAX process below)."""
    import jax

    from app.models import adapt
    from app.models.layer_set import FAST

    small = small_map_model(7)
    swapped = adapt.with_app_layers(small, FAST, "test")
    images = np.random.RandomState(0).randn(4, 7, 7, 16).astype("float32")
    found = []
    for m in (small, swapped):
        def loss(x, weights, m=m):
            y, _ = m.stateless_call(weights, [], x)
            return (y * y).sum(), y
        weights = [w.value for w in m.trainable_variables]
        (dx, dw), y = jax.grad(loss, argnums=(0, 1), has_aux=True)(images, weights)
        found.append([np.asarray(v).tolist() for v in (y, dx, *dw)])
    return found


def test_a_grouped_convolution_on_a_map_no_larger_than_its_kernel_is_swapped_for_the_same_numbers():
    """The 7x7-on-7x7 grouped convolution becomes SmallMapGroupedConv2D with the same
    weights, outputs and gradients (checked in a JAX process); the same layer on a larger
    map, a plain convolution, and the KERAS layer set leave the model as it is."""
    from conftest import run_python

    from app.models import adapt
    from app.models.layer_set import FAST, KERAS

    small = small_map_model(7)
    swapped = adapt.with_app_layers(small, FAST, "test")
    assert [type(layer).__name__ for layer in swapped.layers[1:3]] == [
        "SmallMapGroupedConv2D", "Conv2D"]
    images = np.random.RandomState(0).randn(4, 7, 7, 16).astype("float32")
    np.testing.assert_allclose(small(images), swapped(images), rtol=1e-5, atol=1e-5)
    assert type(adapt.with_app_layers(small_map_model(14), FAST, "test").get_layer("dw")) \
        is keras.layers.Conv2D
    assert adapt.with_app_layers(small, KERAS, "test") is small
    code = ("import json, sys; sys.path.insert(0, 'tests/app/models'); sys.path.insert(0, 'tests');"
            " sys.path.insert(0, '.')\n"
            "import test_layers as t\n"
            "print(json.dumps(t.small_map_outputs_and_gradients()))\n")
    first, second = run_python(code, {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"})
    assert len(first) == len(second) == 6  # y, dx, dw kernel and bias, plain kernel and bias
    for a, b in zip(first, second):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
