"""The FLOPs of a dot and of a convolution, as XLA's own cost analysis counts them
(xla/service/hlo_cost_analysis.cc): two per multiply-add; a convolution's kernel
positions that fall on padding or between dilated inputs are not counted.

The same rules count a library call that does a dot's or a convolution's work
(library_calls.py: cuBLAS's GEMMs, cuDNN's convolutions), and the app's MFU count of a
lowered training step (app/models/flops.py uses valid_taps).
"""

from __future__ import annotations

import math

from callbacks.profiling.hlo_text import dims, first, index

# (output, kernel) position pairs of one spatial axis counted one by one at most (a
# filter gradient over a 224 x 224 map has ~50,000): beyond, the text is not a model's.
MAX_TAP_PAIRS = 10_000_000


def dot_flops(numbers: dict, lhs: list[int], out: list[int]) -> int:
    """2 x the result's elements x the contracted size (`numbers`: the dot's
    dot_dimension_numbers, its lhs_contracting_dimensions read)."""
    contracted = math.prod(lhs[index(d)] for d in numbers.get("lhs_contracting_dimensions", []))
    return 2 * math.prod(out) * contracted


def valid_taps(input_size, kernel, output, stride, pad_low, base_dilation,
               window_dilation) -> int:
    """Kernel taps over one spatial axis that land on the input, as XLA counts them
    (not on padding, nor between base-dilated inputs). app/models/flops.py's count of
    a lowered step uses it too."""
    taps = 0
    for out in range(output):
        for k in range(kernel):
            position = out * stride - pad_low + k * window_dilation
            if position % base_dilation == 0 and 0 <= position // base_dilation < input_size:
                taps += 1
    return taps


def convolution_flops(instruction: dict, lhs: list[int], rhs: list[int],
                      out: list[int] | None = None) -> int:
    """XLA's count (HloCostAnalysis::GetConvolutionFlops): 2 x input features per
    group x output features x batch per batch group x the valid positions' product.

    Args:
        instruction: its window, convolution_dimension_numbers, feature_group_count
            and batch_group_count are read.
        lhs, rhs: the input's and the kernel's dimensions.
        out: the output's dimensions (None: the instruction's own shape).

    Raises:
        ValueError, KeyError, IndexError: text that does not make sense.
    """
    numbers = first(instruction, "convolution_dimension_numbers", {})
    get = lambda key: index(first(numbers, key, 0))  # noqa: E731
    result = out if out is not None else dims(first(instruction, "shape", {})) or []
    windows = first(instruction, "window", {}).get("dimensions", [])
    positions = 1
    for i, window in enumerate(windows):
        get_window = lambda key, default: int(first(window, key, default))  # noqa: E731
        kernel = rhs[index(numbers["kernel_spatial_dimensions"][i])]
        size = result[index(numbers["output_spatial_dimensions"][i])]
        if kernel * size > MAX_TAP_PAIRS:
            raise ValueError(f"a {kernel} x {size} window: more pairs than any model has")
        positions *= valid_taps(
            lhs[index(numbers["input_spatial_dimensions"][i])], kernel, size,
            get_window("stride", 1), get_window("padding_low", 0),
            get_window("base_dilation", 1), get_window("window_dilation", 1))
    groups = int(first(instruction, "feature_group_count", 1))
    batch_groups = int(first(instruction, "batch_group_count", 1))
    fmas = ((lhs[get("input_feature_dimension")] // groups)
            * result[get("output_feature_dimension")]
            * (lhs[get("input_batch_dimension")] // batch_groups) * positions)
    return 2 * fmas
