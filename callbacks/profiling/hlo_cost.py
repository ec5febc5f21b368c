"""An HLO module's instructions, read from its HloProto text (xprof's graph_viewer
pbtxt), and what each one costs: its floating-point operations and the bytes it reads
and writes.

FLOPs are counted for `dot` and `convolution` instructions, as XLA's own cost analysis
counts them (xla/service/hlo_cost_analysis.cc: two per multiply-add; a convolution's
kernel positions that fall on padding or between dilated inputs are not counted), and
summed over what a fusion or call holds. Other instructions count none. An
instruction whose FLOPs cannot be known from its text (a custom call: cuBLAS, cuDNN, a
fused attention kernel; a loop, whose trip count the text does not give) has None:
the breakdown then gives its kind of work no FLOP rate rather than a partial one.

Bytes are the instruction's operands and result as the module's shapes give them (a
fusion reads its operands and writes its result once), None where a shape's element
type is unknown.
"""

from __future__ import annotations

import math

# Messages of an instruction the costs never read: dropped while parsing (a large
# module's text is mostly these).
_SKIPPED = {"layout", "frontend_attributes", "statistics_viz", "sparsity_config",
            "precision_config", "original_value"}
ELEMENT_BYTES = {"PRED": 1, "S4": 0.5, "U4": 0.5, "S8": 1, "U8": 1, "S16": 2, "U16": 2,
                 "S32": 4, "U32": 4, "S64": 8, "U64": 8, "F16": 2, "BF16": 2, "F32": 4,
                 "F64": 8, "C64": 8, "C128": 16, "F8E5M2": 1, "F8E4M3FN": 1,
                 "F8E4M3B11FNUZ": 1, "F8E5M2FNUZ": 1, "F8E4M3FNUZ": 1, "TOKEN": 0}
# (output, kernel) position pairs of one spatial axis counted one by one at most (a
# filter gradient over a 224 x 224 map has ~50,000): beyond, the text is not a model's.
MAX_TAP_PAIRS = 10_000_000
# Instructions that hold others whose work the text does not bound (a loop's trip
# count), or that call out to a library: their FLOPs are unknown.
_UNKNOWN_FLOPS = {"while", "custom-call", "conditional", "all-reduce", "reduce-scatter"}


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return bytes(value[1:-1], "utf-8").decode("unicode_escape").encode(
            "latin-1").decode("utf-8", "replace")
    return value


def computations(text: str) -> dict[str, list[dict]]:
    """Computation id -> its instructions, each a dict of its fields: a scalar field
    as the list of its values (strings), a message field as the list of its messages
    (dicts of the same form)."""
    found: dict[str, list[dict]] = {}
    stack: list[str] = []
    nodes: list[dict | None] = []  # the instruction's open messages (None: skipped)
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith("{"):
            name = line[:-1].strip()
            stack.append(name)
            if len(stack) == 2 and name == "computations":
                current = {"id": "", "instructions": []}
            elif len(stack) == 3 and name == "instructions" and current is not None:
                nodes = [{}]
            elif nodes:
                child = None if nodes[-1] is None or name in _SKIPPED else {}
                if child is not None:
                    nodes[-1].setdefault(name, []).append(child)
                nodes.append(child)
            continue
        if line == "}":
            depth = len(stack)
            name = stack.pop() if stack else ""
            if depth == 3 and name == "instructions" and nodes and current is not None:
                current["instructions"].append(nodes[0])
                nodes = []
            elif nodes and depth > 3:
                nodes.pop()
            elif depth == 2 and name == "computations" and current is not None:
                found[current["id"]] = current["instructions"]
                current = None
            continue
        key, _, value = line.partition(": ")
        if nodes:
            if nodes[-1] is not None:
                nodes[-1].setdefault(key, []).append(_unquote(value))
        elif current is not None and len(stack) == 2 and key == "id":
            current["id"] = value
    return found


def first(fields: dict, key: str, default=""):
    """The first value of a field, where it is of the default's kind (text for a text
    or number default, a message for a dict or None default); else `default`."""
    values = fields.get(key) if isinstance(fields, dict) else None
    value = values[0] if values else default
    return value if isinstance(value, dict) == (default is None or isinstance(default, dict)) \
        else default


def _index(text: str) -> int:
    """A size or a dimension's index: a whole number >= 0 (ValueError otherwise)."""
    value = int(text)
    if value < 0:
        raise ValueError(f"{value} < 0")
    return value


def dims(shape: dict | None) -> list[int] | None:
    """An array shape's dimensions; None for a tuple or no shape."""
    if not shape or "tuple_shapes" in shape:
        return None
    return [_index(d) for d in shape.get("dimensions", [])]


def shape_bytes(shape: dict | None) -> float | None:
    """The bytes a shape holds (a tuple's elements summed); None where unknown."""
    if not shape:
        return None
    if "tuple_shapes" in shape:
        parts = [shape_bytes(s) for s in shape["tuple_shapes"]]
        return None if None in parts else sum(parts)
    size = ELEMENT_BYTES.get(first(shape, "element_type"))
    return None if size is None else size * math.prod(dims(shape) or [])


def dot_flops(instruction: dict, lhs: list[int]) -> int:
    """2 x the result's elements x the contracted size."""
    numbers = first(instruction, "dot_dimension_numbers", {})
    contracted = math.prod(lhs[_index(d)] for d in numbers.get("lhs_contracting_dimensions", []))
    return 2 * math.prod(dims(first(instruction, "shape", {})) or []) * contracted


def valid_taps(input_size, kernel, output, stride, pad_low, base_dilation,
               window_dilation) -> int:
    """Kernel taps over one spatial axis that land on the input, as XLA counts them
    (not on padding, nor between base-dilated inputs). app/engine/flops.py's count of
    a lowered step uses it too."""
    taps = 0
    for out in range(output):
        for k in range(kernel):
            position = out * stride - pad_low + k * window_dilation
            if position % base_dilation == 0 and 0 <= position // base_dilation < input_size:
                taps += 1
    return taps


def convolution_flops(instruction: dict, lhs: list[int], rhs: list[int]) -> int:
    """XLA's count (HloCostAnalysis::GetConvolutionFlops): 2 x input features per
    group x output features x batch per batch group x the valid positions' product."""
    numbers = first(instruction, "convolution_dimension_numbers", {})
    get = lambda key: _index(first(numbers, key, 0))  # noqa: E731
    result = dims(first(instruction, "shape", {})) or []
    windows = first(instruction, "window", {}).get("dimensions", [])
    positions = 1
    for i, window in enumerate(windows):
        get_window = lambda key, default: int(first(window, key, default))  # noqa: E731
        kernel = rhs[_index(numbers["kernel_spatial_dimensions"][i])]
        out = result[_index(numbers["output_spatial_dimensions"][i])]
        if kernel * out > MAX_TAP_PAIRS:
            raise ValueError(f"a {kernel} x {out} window: more pairs than any model has")
        positions *= valid_taps(
            lhs[_index(numbers["input_spatial_dimensions"][i])], kernel, out,
            get_window("stride", 1), get_window("padding_low", 0),
            get_window("base_dilation", 1), get_window("window_dilation", 1))
    groups = int(first(instruction, "feature_group_count", 1))
    batch_groups = int(first(instruction, "batch_group_count", 1))
    fmas = ((lhs[get("input_feature_dimension")] // groups)
            * result[get("output_feature_dimension")]
            * (lhs[get("input_batch_dimension")] // batch_groups) * positions)
    return 2 * fmas


def calls(instruction: dict) -> list[str]:
    """The ids of the computations an instruction calls (a fusion's, a call's)."""
    return [c for c in instruction.get("called_computation_ids", []) if isinstance(c, str)]


class Costs:
    """Each instruction's FLOPs and bytes in one module, by instruction name."""

    def __init__(self, module: dict[str, list[dict]]):
        self._module = module
        self._by_id = {first(i, "id"): i for instructions in module.values()
                       for i in instructions}
        self._computation_flops: dict[str, int | None] = {}

    def _operand_dims(self, instruction: dict) -> list[list[int] | None]:
        return [dims(first(self._by_id.get(o, {}), "shape", {}))
                for o in self._operands(instruction)]

    @staticmethod
    def _operands(instruction: dict) -> list[str]:
        return [o for o in instruction.get("operand_ids", []) if isinstance(o, str)]

    def flops(self, instruction: dict) -> int | None:
        """The instruction's FLOPs, those of what it calls included; None: unknown (or
        text that does not make sense: a negative size, an index out of range)."""
        try:
            return self._flops(instruction)
        except (ValueError, KeyError, IndexError, TypeError, ZeroDivisionError,
                RecursionError):
            return None

    def _flops(self, instruction: dict) -> int | None:
        opcode = first(instruction, "opcode")
        if opcode in _UNKNOWN_FLOPS:
            return None
        own = 0
        if opcode in ("dot", "convolution"):
            operands = self._operand_dims(instruction)
            if len(operands) < 2 or None in operands[:2]:
                return None
            own = (dot_flops(instruction, operands[0]) if opcode == "dot" else
                   convolution_flops(instruction, operands[0], operands[1]))
        if opcode not in ("fusion", "call"):
            return own  # a reduce's or a map's called computation is per element: none
        for called in calls(instruction):
            inner = self._computation(called)
            if inner is None:
                return None
            own += inner
        return own

    def _computation(self, computation_id: str) -> int | None:
        if computation_id not in self._computation_flops:
            self._computation_flops[computation_id] = 0  # a cycle counts once
            total = 0
            for instruction in self._module.get(computation_id, []):
                flops = self.flops(instruction)
                if flops is None:
                    total = None
                    break
                total += flops
            self._computation_flops[computation_id] = total
        return self._computation_flops[computation_id]

    def bytes(self, instruction: dict) -> float | None:
        """What the instruction reads (its operands) and writes (its result)."""
        try:
            return self._bytes(instruction)
        except (ValueError, TypeError, RecursionError):
            return None

    def _bytes(self, instruction: dict) -> float | None:
        shapes = [first(self._by_id.get(o, {}), "shape", None)
                  for o in self._operands(instruction)]
        shapes.append(first(instruction, "shape", None))
        sizes = [shape_bytes(s) for s in shapes]
        return None if None in sizes else sum(sizes)
