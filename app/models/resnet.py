"""The built-in ResNets: ResNet v1.5 (18, 34, 50) and a small ResNet for small images.

ResNet-50 here is v1.5, the benchmark model of MLPerf, NVIDIA and torchvision: the
stride-2 of a downsampling bottleneck sits in its 3x3 convolution, not in the first
1x1 as in `keras.applications.ResNet50` (v1). Its 25,557,032 trainable parameters
equal torchvision's `resnet50`.

The models output float32 logits (the softmax lives in the loss), use channels-last
layout, He-normal (fan-out) initialization, and BatchNorm with momentum 0.9: with
Keras's default of 0.99 the moving statistics lag badly on small datasets, whose
epochs are a few dozen steps (and lower still for short epochs: the recipe caps every
BatchNorm's horizon at a fifth of an epoch, app/models/recipe.py). The last BatchNorm of every residual branch starts at
zero (gamma = 0), so each block starts as the identity; this speeds up early
training, as in Goyal et al. 2017.
"""

from __future__ import annotations

import keras
from keras import layers

from app.models import layers as fast
from app.models import host_init
from app.models.layer_set import FAST, LayerSet

BN_MOMENTUM = 0.9
BN_EPSILON = 1e-5
# Initial weights are drawn by numpy (host_init.py: no XLA compile per shape): the
# convolutions' as torchvision's kaiming_normal_(mode="fan_out", nonlinearity="relu").

# name -> (block kind, blocks per stage, width of the first stage)
RESNETS = {
    "resnet18": ("basic", (2, 2, 2, 2), 64),
    "resnet34": ("basic", (3, 4, 6, 3), 64),
    "resnet50": ("bottleneck", (3, 4, 6, 3), 64),
}
SMALL_RESNET_WIDTHS = (32, 64, 128)
NAMES = ("small_resnet", *RESNETS)


def _conv(x, filters, kernel, stride, name):
    return layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False,
                         kernel_initializer=host_init.HeNormalFanOut(), name=name)(x)


def _bn(x, name, ls: LayerSet, zero_init=False, relu=False):
    options = dict(momentum=BN_MOMENTUM, epsilon=BN_EPSILON, name=name,
                   gamma_initializer=host_init.Constant(0.0 if zero_init else 1.0),
                   beta_initializer=host_init.Constant(0.0),
                   moving_mean_initializer=host_init.Constant(0.0),
                   moving_variance_initializer=host_init.Constant(1.0))
    if ls.batchnorm_synchronized:
        options["synchronized"] = True
    if ls.batchnorm == "keras":
        return layers.BatchNormalization(**options)(x)
    return fast.BatchNorm(apply_in_compute_dtype=ls.batchnorm == "fast",
                          groups=ls.batchnorm_groups, relu=relu, **options)(x)


def _bn_relu(x, name, relu_name, ls: LayerSet):
    """BatchNorm then ReLU: one layer where the LayerSet computes the ReLU inside."""
    if ls.relu_in_batchnorm and ls.batchnorm != "keras":
        return _bn(x, name, ls, relu=True)
    return layers.ReLU(name=relu_name)(_bn(x, name, ls))


def _shortcut(x, filters, stride, name, ls):
    if stride == 1 and x.shape[-1] == filters:
        return x
    x = _conv(x, filters, 1, stride, name + "_proj_conv")
    return _bn(x, name + "_proj_bn", ls)


def _basic_block(x, width, stride, name, ls):
    shortcut = _shortcut(x, width, stride, name, ls)
    y = _conv(x, width, 3, stride, name + "_conv1")
    y = _bn_relu(y, name + "_bn1", name + "_relu1", ls)
    y = _bn(_conv(y, width, 3, 1, name + "_conv2"), name + "_bn2", ls, zero_init=True)
    return layers.ReLU(name=name + "_out")(layers.Add(name=name + "_add")([shortcut, y]))


def _bottleneck_block(x, width, stride, name, ls):
    shortcut = _shortcut(x, width * 4, stride, name, ls)
    y = _conv(x, width, 1, 1, name + "_conv1")
    y = _bn_relu(y, name + "_bn1", name + "_relu1", ls)
    y = _conv(y, width, 3, stride, name + "_conv2")  # v1.5: the stride is here
    y = _bn_relu(y, name + "_bn2", name + "_relu2", ls)
    y = _bn(_conv(y, width * 4, 1, 1, name + "_conv3"), name + "_bn3", ls, zero_init=True)
    return layers.ReLU(name=name + "_out")(layers.Add(name=name + "_add")([shortcut, y]))


def _head(x, num_classes):
    x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
    # float32 logits even under a mixed policy: the loss needs the range.
    return layers.Dense(num_classes, dtype="float32", name="logits",
                        kernel_initializer=host_init.GlorotUniform(),
                        bias_initializer=host_init.Constant(0.0))(x)


def make_resnet(depth_name: str, num_classes: int, image_size: int,
                ls: LayerSet = FAST) -> keras.Model:
    """ImageNet-style ResNet v1.5: 7x7/2 stem, 3x3/2 max-pool, four stages."""
    kind, blocks, width = RESNETS[depth_name]
    block = _bottleneck_block if kind == "bottleneck" else _basic_block
    inputs = keras.Input((image_size, image_size, 3), name="images")
    stem_options = dict(strides=2, padding="same", use_bias=False,
                        kernel_initializer=host_init.HeNormalFanOut(), name="stem_conv")
    if ls.stem == "keras":
        x = layers.Conv2D(width, 7, **stem_options)(inputs)
    else:
        x = fast.SpaceToDepthStem(width, 7, channel_multiple=16 if ls.stem == "s2d16" else 1,
                                  **stem_options)(inputs)
    x = _bn_relu(x, "stem_bn", "stem_relu", ls)
    if ls.pool == "keras":
        x = layers.MaxPooling2D(3, strides=2, padding="same", name="stem_pool")(x)
    else:
        x = fast.MaxPool3x3S2(argmax=ls.pool == "argmax", name="stem_pool")(x)
    for stage, count in enumerate(blocks):
        for index in range(count):
            stride = 2 if stage > 0 and index == 0 else 1
            x = block(x, width * 2**stage, stride, f"stage{stage + 1}_block{index + 1}", ls)
    return keras.Model(inputs, _head(x, num_classes), name=depth_name)


def make_small_resnet(num_classes: int, image_size: int, ls: LayerSet = FAST) -> keras.Model:
    """A ResNet for small images (CIFAR-style): 3x3 stem, three stages of one basic
    block each (widths 32, 64, 128), no max-pool. 309,994 parameters for 10 classes."""
    inputs = keras.Input((image_size, image_size, 3), name="images")
    x = _conv(inputs, SMALL_RESNET_WIDTHS[0], 3, 1, "stem_conv")
    x = _bn_relu(x, "stem_bn", "stem_relu", ls)
    for stage, width in enumerate(SMALL_RESNET_WIDTHS):
        x = _basic_block(x, width, 1 if stage == 0 else 2, f"stage{stage + 1}_block1", ls)
    return keras.Model(inputs, _head(x, num_classes), name="small_resnet")


def forward_flops_per_image(model: keras.Model) -> float:
    """Forward-pass FLOPs of one image, counted from the model's layers: the usual count.

    Counts multiply-adds as 2 FLOPs in convolutions and dense layers (the work on
    tensor cores), the zero border of "same" convolutions included; BatchNorm, ReLU,
    additions and pooling are left out, as in the usual ResNet-50 count (4.09 GMAC =
    8.2 GFLOP at 224x224). The app's MFU uses XLA's count of the training step
    instead (app/models/flops.py): 3 x this, less the border and the images' gradient.
    """
    flops = 0.0
    for layer in model.layers:
        if isinstance(layer, layers.Conv2D):
            kh, kw, cin, cout = layer.kernel.shape
            _, h, w, _ = layer.output.shape
            flops += 2.0 * kh * kw * cin * cout * h * w / layer.groups
        elif isinstance(layer, layers.Dense):
            cin, cout = layer.kernel.shape
            flops += 2.0 * cin * cout
    return flops

