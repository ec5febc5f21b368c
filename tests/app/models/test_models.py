"""The model factory: ResNet v1.5 and ViT structure and parameter counts, keras.applications
built for the app's inputs, models the app did not write adapted, --model checked."""

import numpy as np
import pytest

from app import models
from app.models import adapt, resnet, vit
from flags import Config, ConfigError

# torchvision's resnet18/34/50 (their trainable parameters; BatchNorm buffers excluded).
TORCHVISION_PARAMS = {"resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032}


def trainable_params(model):
    return sum(int(np.prod(v.shape)) for v in model.trainable_weights)


@pytest.mark.parametrize("name", sorted(TORCHVISION_PARAMS))
def test_parameter_count_equals_torchvision(name):
    model = models.make_model(name, 1000, 224)
    assert trainable_params(model) == TORCHVISION_PARAMS[name]
    assert model.output.shape == (None, 1000)


def test_resnet50_is_v1_5_the_stride_sits_in_the_3x3_conv():
    model = models.make_model("resnet50", 1000, 224)
    for stage in (2, 3, 4):
        block = f"stage{stage}_block1"
        assert model.get_layer(block + "_conv1").strides == (1, 1)
        assert model.get_layer(block + "_conv2").kernel_size == (3, 3)
        assert model.get_layer(block + "_conv2").strides == (2, 2)
        assert model.get_layer(block + "_proj_conv").strides == (2, 2)
    assert model.get_layer("stage1_block1_conv2").strides == (1, 1)
    # 224 -> 112 (stem) -> 56 (pool) -> 56, 28, 14, 7.
    assert model.get_layer("stage4_block3_out").output.shape[1:3] == (7, 7)


def test_residual_branches_start_as_identity():
    model = models.make_model("resnet50", 10, 64)
    gamma = model.get_layer("stage2_block1_bn3").gamma
    assert float(np.abs(np.asarray(gamma)).max()) == 0.0
    assert model.get_layer("stage2_block1_bn1").momentum == resnet.BN_MOMENTUM


def test_resnet50_flops_match_the_published_count():
    model = models.make_model("resnet50", 1000, 224)
    forward = resnet.forward_flops_per_image(model)
    # torchvision: 4.09 GMAC = 8.18 GFLOP forward at 224x224.
    assert forward == pytest.approx(8.18e9, rel=0.01)


def test_small_resnet_runs_on_small_images_and_logits_are_float32():
    import keras

    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        model = models.make_model("small_resnet", 10, 16)
        out = model(np.zeros((2, 16, 16, 3), "float32"))
    finally:
        keras.config.set_dtype_policy("float32")
    assert out.shape == (2, 10)
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    assert trainable_params(model) < 1_000_000


def test_unknown_model_is_refused():
    with pytest.raises(ValueError, match="unknown model 'vgg16'"):
        models.make_model("vgg16", 10, 32)


# ViT parameters for 1,000 classes: width, depth, MLP as vit.VITS; torchvision's
# vit_b_16 has 86,567,656, its class token and that token's position (2 x 768) more.
def vit_parameters(name, classes=1000, tokens=196):
    width, depth, _, mlp = vit.VITS[name]
    block = 4 * width + 4 * width * width + 4 * width + 2 * width * mlp + mlp + width
    return (16 * 16 * 3 * width + width + tokens * width + depth * block + 2 * width
            + width * classes + classes)


def test_vit_b16_has_torchvisions_parameters_less_the_class_token():
    model = models.make_model("vit_b16", 1000, 224)
    assert trainable_params(model) == 86_567_656 - 2 * 768 == vit_parameters("vit_b16")
    assert model.output.shape == (None, 1000)


@pytest.mark.parametrize("name", ["vit_ti16", "vit_s16"])
def test_vits_are_pre_norm_mean_pooled_over_196_tokens_with_64_wide_heads(name):
    model = models.make_model(name, 1000, 224)
    assert trainable_params(model) == vit_parameters(name)
    width, depth, heads, _ = vit.VITS[name]
    assert model.get_layer("tokens").output.shape == (None, 196, width)  # no class token
    assert width // heads == 64 and len([l for l in model.layers
                                          if isinstance(l, vit.SelfAttention)]) == depth
    # pre-norm: each block's attention reads a LayerNorm of the residual stream
    attention = model.get_layer("block1_attention")
    assert attention.input._keras_history.operation.name == "block1_norm1"


def test_a_vit_trains_on_small_images_and_gives_float32_logits():
    import keras

    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        model = models.make_model("vit_ti16", 10, 32)
        out = model(np.zeros((2, 32, 32, 3), "float32"), training=True)
    finally:
        keras.config.set_dtype_policy("float32")
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    np.testing.assert_allclose(np.asarray(out), 0.0)  # the zero head: every class equal


def test_vit_image_size_must_divide_into_patches():
    with pytest.raises(ConfigError, match="cuts images into 16x16 patches"):
        Config(model="vit_s16", image_size=40, logdir="x")
    with pytest.raises(models.ModelError, match="not a multiple of 16"):
        models.make_model("vit_s16", 10, 40)


def test_efficientnet_b_sees_the_apps_normalized_images():
    """EfficientNetB0 has no include_preprocessing switch: the Rescaling(255) put
    before it cancels its Rescaling(1/255); its Normalization is the identity."""
    import keras

    model = models.make_model("applications:EfficientNetB0", 10, 32)
    inner = next(layer for layer in model.layers if isinstance(layer, keras.Model))
    first = [model.layers[1], *inner.layers[1:3]]  # ours, then its two
    assert [type(l).__name__ for l in first] == ["Rescaling", "Rescaling", "Normalization"]
    x = np.random.default_rng(0).normal(size=(2, 32, 32, 3)).astype("float32")
    y = x
    for layer in first:
        y = layer(y)
    np.testing.assert_allclose(np.asarray(y), x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["MobileNetV3Small", "EfficientNetV2B0", "ConvNeXtTiny"])
def test_applications_get_no_preprocessing_and_logits(name):
    import keras

    model = models.make_model(f"applications:{name}", 7, 32)
    assert not any(isinstance(l, (keras.layers.Rescaling, keras.layers.Normalization))
                   for l in model.layers)
    assert model.output.shape == (None, 7) and not adapt.ends_in_softmax(model)


def test_keras_batchnorm_becomes_the_apps_with_the_runs_statistics():
    import keras

    from app.models import layers as fast

    layer_set = models.LayerSet(batchnorm_groups=2)
    model = models.make_model("applications:MobileNetV3Small", 10, 32, layer_set)
    norms = [l for l in model.layers if isinstance(l, keras.layers.BatchNormalization)]
    assert norms and all(type(l) is fast.BatchNorm and l.groups == 2 for l in norms)
    assert trainable_params(model) == trainable_params(
        keras.applications.MobileNetV3Small(weights=None, input_shape=(32, 32, 3), classes=10,
                                            include_preprocessing=False))


def test_a_saved_head_is_made_float32_logits_of_the_datas_classes(capsys):
    import keras

    inputs = keras.Input((8, 8, 3))
    x = keras.layers.GlobalAveragePooling2D()(inputs)
    softmax = keras.Model(inputs, keras.layers.Dense(5, activation="softmax", name="head")(x))
    same = adapt.as_logits(softmax, 5, "x.keras")
    assert same.layers[-1].get_weights()[0].tolist() == softmax.layers[-1].get_weights()[
        0].tolist() and same.layers[-1].activation.__name__ == "linear"
    other = adapt.as_logits(softmax, 3, "x.keras")
    assert other.output.shape == (None, 3)
    said = capsys.readouterr().out.splitlines()
    assert said == ["model: x.keras's head 'head' made linear float32 logits (weights kept)",
                    "model: x.keras has 5 classes, the data 3: its head 'head' is replaced "
                    "by a new Dense(3)"]


@pytest.mark.parametrize("value, message", [
    ("applications:EfficientNetB9", "has no image classifier 'EfficientNetB9'; did you "
                                    "mean EfficientNetB7"),
    ("applications:decode_predictions", "has no image classifier"),
    ("/nonexistent/m.py:make", "/nonexistent/m.py is not a file"),
    ("examples/my_model.py:build", "has no function 'build'; its functions: make_model"),
    ("/nonexistent/m.keras", "is not a file; accepted: FILE.keras"),
])
def test_check_model_names_what_it_received_and_what_it_accepts(value, message):
    with pytest.raises(models.ModelError) as error:
        models.check_model(Config(model=value, logdir="x"))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_flags_list_exactly_the_built_in_models():
    from flags.config import MODELS

    assert MODELS == (*resnet.NAMES, *vit.NAMES)


def test_the_resnets_initial_weights_are_drawn_on_the_host_fresh_and_as_torchvision_draws():
    """host_init: each convolution draws its own He-normal (fan-out) weights (a shared
    Keras initializer gave equal-shaped convolutions equal ones), with the right spread;
    BatchNorm starts at its constants, the last of each block at gamma 0; --seed repeats."""
    import random

    random.seed(3)
    model = models.make_model("small_resnet", 10, 28)
    random.seed(3)
    again = models.make_model("small_resnet", 10, 28)
    kernels = {w.path: np.asarray(w.value) for w in model.weights if w.path.endswith("kernel")}
    same_shape = [k for k in kernels.values() if k.shape == (3, 3, 32, 32)]
    assert len(same_shape) >= 2 and not np.array_equal(same_shape[0], same_shape[1])
    for kernel in same_shape + [k for k in kernels.values() if k.shape == (3, 3, 64, 64)]:
        expected = np.sqrt(2.0 / (9 * kernel.shape[-1]))
        assert abs(kernel.std() / expected - 1) < 0.08 and abs(kernel.mean()) < 0.2 * expected
    head = kernels["logits/kernel"]
    assert np.abs(head).max() <= np.sqrt(6 / (128 + 10)) and head.std() > 0.05
    gammas = {w.path: np.asarray(w.value) for w in model.weights if w.path.endswith("gamma")}
    assert any((g == 0).all() for g in gammas.values()) and any((g == 1).all() for g in gammas.values())
    assert all(np.array_equal(np.asarray(a.value), np.asarray(b.value))
               for a, b in zip(model.weights, again.weights))


BUILD_COMPILES = """
import json
from jax._src import monitoring
compiled = []
monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **_: compiled.append(seconds)
    if event == "/jax/core/compile/backend_compile_duration" else None)
import numpy as np
from app import models
from app.models import recipe
from flags import Config
model = models.make_model("small_resnet", 10, 28)
built = len(compiled)
recipe.compile_model(model, Config(backend="jax", logdir="x"), 10, steps_per_epoch=100)
slots = model.optimizer.variables
print(json.dumps({"compiles": built, "seconds": sum(compiled),
                  "optimizer_compiles": len(compiled) - built,
                  "optimizer_built": model.optimizer.built,
                  "slots": len(slots), "trainable": len(model.trainable_variables),
                  "slots_zero": all(not np.asarray(v.value).any() for v in slots),
                  "shapes_match": sorted(tuple(v.shape) for v in slots
                                         if v.name.endswith("_momentum"))
                  == sorted(tuple(v.shape) for v in model.trainable_variables)}))
"""


def test_building_the_small_resnet_on_jax_compiles_next_to_nothing():
    """Before host_init, building it compiled 41 programs (12.4 s of XLA on this 2-core
    host; 6.4 s of an H200's cold start): one per initializer op and shape; then 13
    identity programs (`stage`) where Keras converted the numpy values, and 13 more for
    the optimizer's zeros in fit. Now none: the values reach the device as they are, and
    compile_model builds the optimizer (its momentum zeros, one per trainable
    variable) from the host."""
    import os

    from conftest import ROOT, run_python

    result = run_python(BUILD_COMPILES, {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
                                         "PYTHONPATH": os.path.join(ROOT, "tests",
                                                                    "no_tensorflow")})
    assert result["compiles"] == 0, result
    assert result["optimizer_built"] and result["optimizer_compiles"] <= 2, result
    assert result["slots_zero"] and result["shapes_match"], result


def test_a_model_built_aside_leaves_keras_layer_names_as_they_were():
    """What the run's door builds to check a model (and drops) must not move Keras's
    name counters: the run's own build names its layers as a checkpoint has them."""
    import keras

    from app.models import models_built_aside

    first = keras.layers.Dense(1).name
    with models_built_aside():
        aside = [keras.layers.Dense(1).name for _ in range(3)]
    after = keras.layers.Dense(1).name
    number = (lambda name: int(name.rsplit("_", 1)[1]) if "_" in name else 0)
    assert number(after) == number(first) + 1, (first, aside, after)
    assert all(number(name) > number(first) for name in aside)
