"""Training FLOPs per image counted by hand from a model's layers: the independent
count that app/models/flops.py's figures are checked against.

The rule of that module, applied to shapes: 2 FLOPs per multiply-add of every
convolution (only the kernel taps that meet the input, as XLA counts them), dense
layer and attention product; training = 3 x the forward pass (forward, gradient of
the input, gradient of the weights), less the input gradient of the layer that reads
the images (nothing upstream of it trains). Elementwise work is not counted.
"""

import math

import keras
from keras import layers


def _taps(size: int, kernel: int, stride: int, padding: str) -> int:
    """Kernel taps over one axis that meet the input ("same" pads as XLA and TF do)."""
    if padding == "valid":
        return ((size - kernel) // stride + 1) * kernel
    out = math.ceil(size / stride)
    low = max((out - 1) * stride + kernel - size, 0) // 2
    return sum(1 for o in range(out) for k in range(kernel) if 0 <= o * stride - low + k < size)


def _layer_forward(layer) -> float:
    from app.models.vit import SelfAttention

    if isinstance(layer, SelfAttention):
        _, tokens, width = layer.input.shape
        return 2.0 * tokens * width * 4 * width + 2.0 * 2 * tokens * tokens * width
    if isinstance(layer, (layers.Conv2D, layers.DepthwiseConv2D)):
        _, height, width, channels = layer.input.shape
        (kh, kw), (sh, sw) = layer.kernel_size, layer.strides
        taps = _taps(height, kh, sh, layer.padding) * _taps(width, kw, sw, layer.padding)
        if isinstance(layer, layers.DepthwiseConv2D):
            return 2.0 * taps * channels * layer.depth_multiplier
        return 2.0 * taps * channels * layer.filters / layer.groups
    if isinstance(layer, layers.Dense):
        positions = math.prod(layer.input.shape[1:-1])
        return 2.0 * positions * layer.input.shape[-1] * layer.units
    return 0.0


def _leaves(model):
    for layer in model.layers:
        if isinstance(layer, keras.Model):  # a nested model: its own layers
            yield from _leaves(layer)
        else:
            yield layer


def train_flops_per_image(model) -> float:
    counted = [f for f in map(_layer_forward, _leaves(model)) if f]
    return 3 * sum(counted) - counted[0]
