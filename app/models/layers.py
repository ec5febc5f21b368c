"""Faster drop-in layers for ResNet training on accelerators (Keras ops only).

Each is a subclass of the Keras layer it replaces, with the same variables (names,
shapes, initializers), so parameter counts, checkpoints and the FLOP count do not
change. Measured on one H200 (benchmarks/model_variants.py, results in
benchmarks/results/), where a ResNet-50 step spends about 40% of its time in
BatchNorm's memory traffic.

- `BatchNorm`: batch statistics accumulated in float32 in one pass over the
  input (E[x^2] - E[x]^2, as Flax does by default), then y = x * scale + shift
  applied in the compute dtype with per-channel scale and shift. Keras's layer
  upcasts the whole activation to float32 first. Results differ from Keras's by
  bf16 rounding of the output and of scale/shift, and by the one-pass variance.
  With `groups=G` (JAX, G replicas of keras.distribution.DataParallel), the
  statistics are computed per replica: the global batch, sharded over the
  replicas, is viewed as [G, batch/G, ...] and each slice is normalized with its
  own mean and variance, so no cross-device reduction sits on the forward or
  backward path (MLPerf's ResNet-50 does the same). The moving averages take the
  mean of the G slices' statistics (a small all-reduce off the critical path).
  On TensorFlow, MirroredStrategy's replicas each normalize their own batch, and each
  keeps its own copy of the moving statistics: Keras's layer updates each copy from
  its replica's batch, so evaluation inside `fit` (every replica, its own copy) and
  the saved model (replica 0's copy) disagreed. Here the moving averages take the
  mean over the replicas of their statistics (one small all-reduce per layer, off the
  normalization's path), as on JAX: every copy stays the same, the saved model is the
  one evaluated. `synchronized=True` (TensorFlow only) normalizes with statistics
  over all replicas instead.
  `relu=True` computes the ReLU that follows inside the layer, with one hand-written
  gradient for both that recomputes ReLU's mask from the input instead of keeping
  ReLU's gradient as a tensor (a LayerSet option for benchmarks/model_variants.py;
  not measured on a GPU yet, not a default).
- `MaxPool3x3S2`: 3x3/2 "same" max-pooling as the maximum of nine strided
  slices. Same values. Its gradient (`argmax=True`, the default) is written by hand:
  the forward pass also keeps, per output, which of the nine window positions held
  the maximum (int8; the first one on ties, as XLA's and TensorFlow's max-pool
  gradients choose), and the backward pass routes each output's gradient to that
  position in one elementwise pass over the input's four stride-2 phases. On an
  H200 the gradient XLA derived from the slices took 2.3 ms of a 34 ms ResNet-50
  step at batch 256 (one fused kernel re-deriving the chain of maxima per input
  element), and XLA's own select-and-scatter was slower still. `argmax=False`
  leaves the gradient to XLA (ties then share the gradient).
- `SpaceToDepthStem`: the 7x7/2 stem convolution computed as a 4x4/1
  convolution over 2x2 space-to-depth blocks (12 channels instead of 3, which
  tensor cores handle far better; `channel_multiple=16` zero-pads them to 16, so
  cuDNN need not pad them itself). The kernel variable stays 7x7x3xC; it is
  rearranged inside the step. Same math: every product is the same, only the
  summation order differs.
"""

from __future__ import annotations

import math

import keras
from keras import layers, ops


@keras.saving.register_keras_serializable("bench")
class BatchNorm(layers.BatchNormalization):
    """BatchNormalization with float32 statistics and a compute-dtype apply.

    Args:
        apply_in_compute_dtype: y = x * scale + shift in the compute dtype (bf16
            under mixed precision) rather than float32.
        groups: training statistics per slice of the batch, one per replica
            (1 = over the whole batch). The batch must divide by it.
        relu: a ReLU after it, in the same layer; in training its gradient and
            BatchNorm's are one hand-written function that recomputes ReLU's mask
            from the input rather than keeping ReLU's gradient as a tensor of its own
            (not with `synchronized`).
    """

    def __init__(self, apply_in_compute_dtype: bool = True, groups: int = 1,
                 relu: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.apply_in_compute_dtype = apply_in_compute_dtype
        self.groups = int(groups)
        self.relu = bool(relu)

    def call(self, inputs, training=None, mask=None):
        if not (training and self.trainable):
            y = self._apply(inputs, self.moving_mean, self.moving_variance)
            return ops.relu(y) if self.relu else y
        # [groups, batch/groups, ...]: the statistics of each slice (channels-last).
        x = ops.reshape(inputs, (self.groups, -1) + tuple(inputs.shape[1:]))
        axes = tuple(range(1, len(x.shape) - 1))
        if self.relu and not self.synchronized:
            # gamma and beta as tensors read here (a TensorFlow custom gradient may not
            # read variables itself)
            y, mean, variance = _batchnorm_relu(self._affine, self.epsilon, axes)(
                x, ops.copy(self.gamma), ops.copy(self.beta))
            self._update_moving(mean, variance)
            return ops.reshape(y, ops.shape(inputs))
        x32 = ops.cast(x, "float32")
        if self.synchronized:  # TensorFlow: over every replica of the strategy
            mean, variance = ops.moments(x32, axes=axes, keepdims=True, synchronized=True)
        else:
            mean, variance = _one_pass_moments(x32, axes)
        self._update_moving(mean, variance)
        y = self._apply(x, mean, variance)
        return ops.reshape(ops.relu(y) if self.relu else y, ops.shape(inputs))

    def _update_moving(self, mean, variance):
        """The moving averages take the mean of the groups' and replicas' statistics."""
        momentum = self.momentum
        batch_mean = ops.reshape(ops.mean(mean, axis=0), (-1,))
        batch_variance = ops.reshape(ops.mean(variance, axis=0), (-1,))
        if not self.synchronized:  # (synchronized statistics are the same everywhere)
            batch_mean, batch_variance = _mean_over_replicas([batch_mean, batch_variance])
        self.moving_mean.assign(self.moving_mean * momentum + batch_mean * (1.0 - momentum))
        self.moving_variance.assign(
            self.moving_variance * momentum + batch_variance * (1.0 - momentum))

    def _apply(self, inputs, mean, variance):
        return self._affine(inputs, *_scale_shift(mean, variance, self.gamma, self.beta,
                                                  self.epsilon))

    def _affine(self, inputs, scale, shift):
        """inputs * scale + shift (per channel, float32) in the layer's apply dtype."""
        if self.apply_in_compute_dtype:
            return inputs * ops.cast(scale, inputs.dtype) + ops.cast(shift, inputs.dtype)
        return ops.cast(ops.cast(inputs, "float32") * scale + shift, self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "apply_in_compute_dtype": self.apply_in_compute_dtype,
                "groups": self.groups, "relu": self.relu}


def _mean_over_replicas(values):
    """On TensorFlow inside a strategy's replica of several, the mean over the replicas
    (one all-reduce); elsewhere (JAX, one replica, no strategy) `values` as they are."""
    if keras.config.backend() != "tensorflow":
        return values
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:  # None: cross-replica code
        return values
    return context.all_reduce(tf.distribute.ReduceOp.MEAN, values)


def _one_pass_moments(x32, axes):
    """Mean and variance over `axes` in one pass (E[x^2] - E[x]^2, at least 0)."""
    mean = ops.mean(x32, axis=axes, keepdims=True)
    return mean, ops.maximum(
        ops.mean(ops.square(x32), axis=axes, keepdims=True) - ops.square(mean), 0.0)


def _scale_shift(mean, variance, gamma, beta, epsilon: float):
    """BatchNorm as x * scale + shift: scale = gamma / sqrt(variance + epsilon)."""
    scale = ops.rsqrt(variance + epsilon) * gamma
    return scale, beta - mean * scale


def _batchnorm_relu(affine, epsilon: float, axes: tuple):
    """relu(BatchNorm(x)) in training, statistics over `axes` (per group along axis 0),
    as f(x, gamma, beta) -> (output, mean, variance) with a hand-written gradient.

    Autodiff keeps ReLU's gradient dy = where(y > 0, d_out, 0) as a tensor of its own,
    which BatchNorm's gradient then reads twice (its two sums, then dx). Here the mask
    is recomputed from x, which those passes read anyway:
        dy = where(affine(x) > 0, d_out, 0),  xhat = (x - mean) * rstd,
        dx = gamma * rstd * (dy - mean(dy) - xhat * mean(dy * xhat)),
        dgamma = sum(dy * xhat),  dbeta = sum(dy)
    (the moving statistics take `mean` and `variance`, whose gradients are not used).
    """

    @ops.custom_gradient
    def forward(x, gamma, beta):
        x32 = ops.cast(x, "float32")
        mean, variance = _one_pass_moments(x32, axes)
        scale, shift = _scale_shift(mean, variance, gamma, beta, epsilon)
        out = ops.relu(affine(x, scale, shift))

        def grad(*args, upstream=None):
            if upstream is None:  # JAX: one tuple of cotangents; TensorFlow: one each
                upstream = args[0] if len(args) == 1 else args
            d_out = upstream[0]
            dy = ops.cast(ops.where(affine(x, scale, shift) > 0, d_out,
                                    ops.zeros_like(d_out)), "float32")
            xhat = (x32 - mean) * ops.rsqrt(variance + epsilon)
            mean_dy = ops.mean(dy, axis=axes, keepdims=True)
            mean_dy_xhat = ops.mean(dy * xhat, axis=axes, keepdims=True)
            dx = scale * (dy - mean_dy - xhat * mean_dy_xhat)
            reduce_all = (0,) + axes
            return (ops.cast(dx, x.dtype), ops.sum(dy * xhat, axis=reduce_all),
                    ops.sum(dy, axis=reduce_all))

        return (out, mean, variance), grad

    return forward


def _same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


# The nine window positions of a 3x3 window, in the order the first maximum is chosen.
_WINDOW = tuple((dy, dx) for dy in range(3) for dx in range(3))


def _pool_3x3_s2(inputs, argmax: bool):
    """3x3/2 "same" max-pooling of an NHWC tensor as the maximum of nine slices;
    with `argmax`, its gradient goes to each window's first maximum (hand-written)."""
    height, width = inputs.shape[1], inputs.shape[2]
    out_h, out_w = math.ceil(height / 2), math.ceil(width / 2)
    (top, bottom), (left, right) = _same_padding(height, 3, 2), _same_padding(width, 3, 2)

    def forward(x):
        padded = ops.pad(x, [[0, 0], [top, bottom], [left, right], [0, 0]],
                         constant_values=float("-inf"))
        windows = [padded[:, dy:dy + 2 * out_h - 1:2, dx:dx + 2 * out_w - 1:2, :]
                   for dy, dx in _WINDOW]
        if not argmax:
            result = windows[0]
            for window in windows[1:]:
                result = ops.maximum(result, window)
            return result, None
        best, index = windows[0], ops.zeros_like(windows[0], dtype="int8")
        for k, window in enumerate(windows[1:], start=1):
            take = ops.greater(window, best)  # strictly: the first maximum keeps it
            best = ops.where(take, window, best)
            index = ops.where(take, ops.cast(k, "int8"), index)
        return best, index

    if not argmax:
        return forward(inputs)[0]

    @ops.custom_gradient
    def pool(x):
        best, index = forward(x)

        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            zero = ops.zeros_like(upstream)
            # The padded input's gradient in its four stride-2 phases: phase (p, q)
            # holds rows 2a + p, columns 2b + q, for a <= out_h, b <= out_w. Window
            # position (dy, dx) of output (i, j) is phase (dy % 2, dx % 2) at
            # (i + dy // 2, j + dx // 2).
            phases = {}
            for k, (dy, dx) in enumerate(_WINDOW):
                part = ops.where(ops.equal(index, k), upstream, zero)
                part = ops.pad(part, [[0, 0], [dy // 2, 1 - dy // 2],
                                      [dx // 2, 1 - dx // 2], [0, 0]])
                key = (dy % 2, dx % 2)
                phases[key] = part if key not in phases else phases[key] + part
            rows = [ops.stack([phases[(p, 0)], phases[(p, 1)]], axis=3) for p in (0, 1)]
            interleaved = ops.reshape(ops.stack(rows, axis=2),
                                      (-1, 2 * out_h + 2, 2 * out_w + 2, upstream.shape[-1]))
            return interleaved[:, top:top + height, left:left + width, :]

        return best, grad

    return pool(inputs)


@keras.saving.register_keras_serializable("bench")
class MaxPool3x3S2(layers.MaxPooling2D):
    """MaxPooling2D(3, strides=2, padding="same") as the maximum of nine slices.

    Args:
        argmax: the hand-written gradient (to each window's first maximum) rather
            than the one XLA derives from the slices.
    """

    def __init__(self, argmax: bool = True, **kwargs):
        kwargs.setdefault("pool_size", 3)
        kwargs.setdefault("strides", 2)
        kwargs.setdefault("padding", "same")
        super().__init__(**kwargs)
        self.argmax = bool(argmax)

    def call(self, inputs):
        return _pool_3x3_s2(inputs, self.argmax)

    def get_config(self):
        return {**super().get_config(), "argmax": self.argmax}


@keras.saving.register_keras_serializable("bench")
class SpaceToDepthStem(layers.Conv2D):
    """Conv2D(C, 7, strides=2, padding="same") computed over 2x2 space-to-depth blocks.

    Args:
        channel_multiple: zero-pad the blocks' channels (4 x the input's) up to a
            multiple of this (1 = no padding).
    """

    def __init__(self, *args, channel_multiple: int = 1, **kwargs):
        super().__init__(*args, **kwargs)
        self.channel_multiple = int(channel_multiple)

    def call(self, inputs):
        height, width = inputs.shape[1], inputs.shape[2]
        if height % 2 or width % 2:
            return super().call(inputs)  # odd sizes: the plain convolution
        out_h, out_w = height // 2, width // 2
        (top, _), (left, _) = _same_padding(height, 7, 2), _same_padding(width, 7, 2)
        channels = inputs.shape[-1]
        extra = -4 * channels % self.channel_multiple  # zero channels after the blocks'
        # Pad so the 2x2 blocks cover rows top..: (out + 3) blocks of 2.
        padded = ops.pad(inputs, [[0, 0], [top, 2 * (out_h + 3) - height - top],
                                  [left, 2 * (out_w + 3) - width - left], [0, 0]])
        blocks = ops.reshape(padded, (-1, out_h + 3, 2, out_w + 3, 2, channels))
        blocks = ops.reshape(ops.transpose(blocks, (0, 1, 3, 2, 4, 5)),
                             (-1, out_h + 3, out_w + 3, 4 * channels))
        kernel = ops.pad(ops.cast(self.kernel, self.compute_dtype),
                         [[0, 1], [0, 1], [0, 0], [0, 0]])  # 7x7 -> 8x8, zeros
        filters = kernel.shape[-1]
        kernel = ops.reshape(kernel, (4, 2, 4, 2, channels, filters))
        kernel = ops.reshape(ops.transpose(kernel, (0, 2, 1, 3, 4, 5)),
                             (4, 4, 4 * channels, filters))
        if extra:  # (concatenated, not padded: TensorFlow's oneDNN pass fails on a
            # convolution whose filter is a pad of a pad, on CPU)
            blocks = ops.pad(blocks, [[0, 0], [0, 0], [0, 0], [0, extra]])
            kernel = ops.concatenate(
                [kernel, ops.zeros((4, 4, extra, filters), kernel.dtype)], axis=2)
        return ops.conv(blocks, kernel, strides=1, padding="valid")

    def get_config(self):
        return {**super().get_config(), "channel_multiple": self.channel_multiple}


@keras.saving.register_keras_serializable("bench")
class SmallMapGroupedConv2D(layers.Conv2D):
    """A grouped stride-1 'same' convolution (Conv2D with groups: ConvNeXt's depthwise
    ones) whose feature map is no
    larger than its kernel, computed on the map padded with zeros below and to the
    right to one more than the kernel, then cropped back: the same numbers (the zeros
    stand where 'same' padding put zeros already).

    Why: XLA's GPU compiler takes a filter gradient whose window (the map) is no larger
    than its output (the kernel) in both dimensions for a forward convolution, and runs
    a grouped one as a convolution of batch x channels features: on one H200, 4.1 ms
    for each 7x7 depthwise convolution of ConvNeXt-T's last stage (7x7 maps; 12.4 ms of
    a 62 ms step), where cuDNN's backward-filter kernel takes the larger map's in
    about 0.1 ms (the step breakdown and trace of the models recipe,
    benchmarks/device_run.sh). app/models/adapt.py swaps it in for such layers.
    """

    def call(self, inputs):
        height, width = inputs.shape[1], inputs.shape[2]
        rows = max(self.kernel_size[0] + 1 - height, 0)
        columns = max(self.kernel_size[1] + 1 - width, 0)
        padded = ops.pad(inputs, [[0, 0], [0, rows], [0, columns], [0, 0]])
        return super().call(padded)[:, :height, :width, :]


def is_small_map_grouped_conv(layer) -> bool:
    """Whether `layer` is a plain Keras Conv2D with groups (channels last, stride 1,
    'same', no dilation) whose known input map is no larger than its kernel
    (DepthwiseConv2D is not: the app's models from keras.applications have none with a
    kernel as large as its map). SmallMapGroupedConv2D.from_config(layer.get_config())
    is then the same layer."""
    if type(layer) is not layers.Conv2D or layer.groups == 1:
        return False
    if (layer.data_format != "channels_last" or tuple(layer.strides) != (1, 1)
            or layer.padding != "same" or tuple(layer.dilation_rate) != (1, 1)):
        return False
    try:
        shape = tuple(layer.input.shape)
    except (AttributeError, ValueError):  # called more than once: no single input
        return False
    return (len(shape) == 4 and None not in shape[1:] and shape[1] <= layer.kernel_size[0]
            and shape[2] <= layer.kernel_size[1])
