"""The work of XLA's library calls on a GPU (custom calls), counted from their text.

On a GPU, XLA hands convolutions to cuDNN and most matrix products to cuBLAS, as
custom calls whose text still says what they compute:

- cuDNN convolutions (`__cudnn$conv...`): `window` and `dim_labels` describe the
  forward convolution whichever of the three a call computes:
  - forward (`$convForward`, `$convBiasActivationForward`, cuDNN graphs): the input is
    operand 0, the kernel operand 1, the output the result's first element;
  - `$convBackwardInput`: the input's gradient is the result, the output's gradient
    operand 0, the kernel operand 1;
  - `$convBackwardFilter`: the input is operand 0, the output's gradient operand 1,
    the kernel's gradient the result.
  Each does the forward's multiply-adds (every (output, kernel tap) pair of the forward
  meets one input element, in whichever direction it runs), counted as XLA counts the
  forward (contractions.py): what XLA's cost analysis gives the same gradient written
  as a plain convolution (its window dilated by the stride, as large as the map).
- cuBLAS GEMMs (`__cublas$gemm`, `__cublas$lt$matmul...`): the dot dimension numbers
  of `gemm_backend_config` in the backend config, batch dimensions included and
  transposed operands as their contracting dimensions say: 2 x the result's elements x
  the contracted size.
- cuDNN's fused attention (`__cudnn$fmha...`): Q, K and V are operands 0-2; the scores
  are `intermediate_tensor_shape` (batch, heads, queries, keys). The forward is two
  matrix products, scores (2 x pairs x head size) and their weighting of V (2 x pairs
  x V's head size); the backward (`...Backward`) four of the same sizes, as XLA counts
  the gradients of those two products unfused (the kernel's recompute of the scores is
  not counted: it is work the model does not ask for). Pairs are the (query, key) pairs
  the mask keeps: all of them unmasked, or with a padding mask (its lengths are known
  only at run time); with a causal mask, keys up to the query's position (cuDNN's
  top-left alignment), within the sliding window where one is set.

A call's count is the work it is asked to do, which can exceed the model's: XLA pads a
map to a multiple that a kernel wants (the op zoo's 32 x 32 stride-2 convolution runs on
33 x 33) and a causal mask's skipped blocks are not counted. Any other target is unknown
(None). A cuDNN or cuBLAS call's result ends in its workspace (`u8[N]` or `s8[N]`),
which holds no data: `data_shape` leaves it out of the bytes the call moves.
"""

from __future__ import annotations

import json
import math

from callbacks.profiling.contractions import convolution_flops, dot_flops
from callbacks.profiling.hlo_text import dims, first, index

# The largest backend config read (a GEMM's or an attention's is under 2 KB).
MAX_CONFIG_CHARS = 1 << 16


def _config(instruction: dict, key: str) -> dict | None:
    text = first(instruction, "backend_config")
    if not text or len(text) > MAX_CONFIG_CHARS:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    value = found.get(key) if isinstance(found, dict) else None
    return value if isinstance(value, dict) else None


def _element_dims(shape: dict | None) -> list[int] | None:
    """The dimensions of an array shape, or of a tuple's first element."""
    if shape and "tuple_shapes" in shape:
        elements = shape["tuple_shapes"]
        return dims(elements[0]) if elements and isinstance(elements[0], dict) else None
    return dims(shape)


def _convolution(target: str, instruction: dict, operands: list, result: list[int]) -> int:
    if len(operands) < 2 or None in operands[:2]:
        raise ValueError("a convolution needs two operands' shapes")
    if target.endswith("BackwardInput"):
        return convolution_flops(instruction, result, operands[1], operands[0])
    if target.endswith("BackwardFilter"):
        return convolution_flops(instruction, operands[0], result, operands[1])
    return convolution_flops(instruction, operands[0], operands[1], result)


def _gemm(instruction: dict, operands: list, result: list[int]) -> int | None:
    config = _config(instruction, "gemm_backend_config")
    numbers = config.get("dot_dimension_numbers") if config else None
    if not isinstance(numbers, dict) or not operands or operands[0] is None:
        return None
    return dot_flops(numbers, operands[0], result)


def attention_pairs(queries: int, keys: int, causal: bool, window: int = 0) -> int:
    """The (query, key) pairs a mask keeps: all; or, causal, keys 0..q for query q (of
    those, the last `window` where a sliding window is set)."""
    if not causal and window <= 0:
        return queries * keys
    pairs = 0
    for query in range(queries):
        last = min(query, keys - 1)
        start = max(0, query - window + 1) if window > 0 else 0
        pairs += max(last - start + 1, 0)
    return pairs


def _attention(target: str, instruction: dict, operands: list) -> int | None:
    config = _config(instruction, "cudnn_fmha_backend_config")
    scores = (config or {}).get("intermediate_tensor_shape")
    sizes = scores.get("dimensions") if isinstance(scores, dict) else None
    if not isinstance(sizes, list) or len(sizes) != 4 or len(operands) < 3 or None in operands[:3]:
        return None
    batch, heads, queries, keys = (index(s) for s in sizes)
    q, k, v = (math.prod(shape) for shape in operands[:3])
    rows = batch * heads * queries
    if not rows or not k or q % rows:
        return None
    head = q // rows
    value_head = v * head / k  # V's head size, grouped-query attention's fewer heads too
    mask = str(config.get("mask_type", ""))
    causal = "CAUSAL" in mask or config.get("is_causal_mask") is True
    window = int(config.get("sliding_window_length") or 0)
    pairs = batch * heads * attention_pairs(queries, keys, causal, window)
    forward = 2 * pairs * (head + value_head)
    return round(2 * forward if "Backward" in target else forward)


def flops(instruction: dict, operands: list, result: dict | None) -> int | None:
    """A custom call's FLOPs (see the module docstring), None where unknown.

    Args:
        instruction: the call's fields (hlo_text.py's form).
        operands: each operand's dimensions (None where not an array).
        result: the call's result shape (its message).

    Raises:
        ValueError, KeyError, IndexError, TypeError: text that does not make sense.
    """
    target = first(instruction, "custom_call_target")
    out = _element_dims(result)
    if out is None:
        return None
    if target.startswith("__cudnn$conv"):
        return _convolution(target, instruction, operands, out)
    if target.startswith("__cublas$"):
        return _gemm(instruction, operands, out)
    if target.startswith("__cudnn$fmha"):
        return _attention(target, instruction, operands)
    return None


def data_shape(instruction: dict, shape: dict | None) -> dict | None:
    """The part of a custom call's result that is data: a cuDNN or cuBLAS call's
    tuple without its trailing workspace (a rank-1 u8 or s8 array)."""
    target = first(instruction, "custom_call_target")
    elements = shape.get("tuple_shapes") if isinstance(shape, dict) else None
    if not target.startswith(("__cudnn$", "__cublas$")) or not elements:
        return shape
    last = elements[-1] if isinstance(elements[-1], dict) else {}
    if first(last, "element_type") in ("U8", "S8") and len(last.get("dimensions", [])) == 1:
        return {"tuple_shapes": elements[:-1]}
    return shape
