"""The model factory: ResNet v1.5 structure, parameter counts, FLOPs."""

import numpy as np
import pytest

from app.engine import models

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
    assert model.get_layer("stage2_block1_bn1").momentum == models.BN_MOMENTUM


def test_resnet50_flops_match_the_published_count():
    model = models.make_model("resnet50", 1000, 224)
    forward = models.forward_flops_per_image(model)
    # torchvision: 4.09 GMAC = 8.18 GFLOP forward at 224x224.
    assert forward == pytest.approx(8.18e9, rel=0.01)
    assert models.train_flops_per_image(model) == pytest.approx(3 * forward)


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
