"""What each instruction of an HLO module costs: its floating-point operations and the
bytes it reads and writes (the module read by hlo_text.py, from either text form).

FLOPs are counted for `dot` and `convolution` instructions as XLA's own cost analysis
counts them (contractions.py), for the library calls that do their work on a GPU
(library_calls.py: cuDNN convolutions, cuBLAS GEMMs, cuDNN fused attention), and summed
over what a fusion or call holds (a Triton GEMM fusion's dot). Other instructions
count none. An instruction whose FLOPs cannot be known from its text (another custom
call; a loop, whose trip count the text does not give) has None: the breakdown then
gives its kind of work no FLOP rate rather than a partial one.

Bytes are the instruction's operands and result as the module's shapes give them (a
fusion reads its operands and writes its result once; a library call's workspace is
not data), None where a shape's element type is unknown.
"""

from __future__ import annotations

import math

from callbacks.profiling import library_calls
from callbacks.profiling.contractions import convolution_flops, dot_flops
from callbacks.profiling.hlo_text import calls, dims, first, index

ELEMENT_BYTES = {"PRED": 1, "S4": 0.5, "U4": 0.5, "S8": 1, "U8": 1, "S16": 2, "U16": 2,
                 "S32": 4, "U32": 4, "S64": 8, "U64": 8, "F16": 2, "BF16": 2, "F32": 4,
                 "F64": 8, "C64": 8, "C128": 16, "F8E5M2": 1, "F8E4M3FN": 1,
                 "F8E4M3B11FNUZ": 1, "F8E5M2FNUZ": 1, "F8E4M3FNUZ": 1, "TOKEN": 0}
# Instructions that hold others whose work the text does not bound (a loop's trip
# count): their FLOPs are unknown.
_UNKNOWN_FLOPS = {"while", "conditional", "all-reduce", "reduce-scatter"}


def shape_bytes(shape: dict | None) -> float | None:
    """The bytes a shape holds (a tuple's elements summed); None where unknown."""
    if not shape:
        return None
    if "tuple_shapes" in shape:
        parts = [shape_bytes(s) for s in shape["tuple_shapes"]]
        return None if None in parts else sum(parts)
    size = ELEMENT_BYTES.get(first(shape, "element_type"))
    return None if size is None else size * math.prod(dims(shape) or [])


class Costs:
    """Each instruction's FLOPs and bytes in one module, by instruction name."""

    def __init__(self, module: dict[str, list[dict]]):
        self._module = module
        self._by_id = {first(i, "id"): i for instructions in module.values()
                       for i in instructions}
        self._computation_flops: dict[str, int | None] = {}

    def _shape(self, operand: str) -> dict | None:
        """An operand's shape: an instruction's, or an element of its tuple
        (`name#i`, `name#i#j`: the dump format's tuple elements)."""
        name, *elements = operand.split("#")
        shape = first(self._by_id.get(name, {}), "shape", None)
        for element in elements:
            parts = shape.get("tuple_shapes") if shape else None
            position = index(element)
            shape = parts[position] if parts and position < len(parts) else None
        return shape

    def _operand_shapes(self, instruction: dict) -> list[dict | None]:
        return [self._shape(o) for o in instruction.get("operand_ids", [])
                if isinstance(o, str)]

    def flops(self, instruction: dict) -> int | None:
        """The instruction's FLOPs, those of what it calls included; None: unknown (or
        text that does not make sense: a negative size, an index out of range)."""
        try:
            return self._flops(instruction)
        except (ValueError, KeyError, IndexError, TypeError, ZeroDivisionError,
                AttributeError, OverflowError, RecursionError):
            return None

    def _flops(self, instruction: dict) -> int | None:
        opcode = first(instruction, "opcode")
        if opcode in _UNKNOWN_FLOPS:
            return None
        if opcode == "custom-call":
            return library_calls.flops(
                instruction, [dims(s) for s in self._operand_shapes(instruction)],
                first(instruction, "shape", None))
        own = 0
        if opcode in ("dot", "convolution"):
            operands = [dims(s) for s in self._operand_shapes(instruction)]
            out = dims(first(instruction, "shape", {})) or []
            if len(operands) < 2 or None in operands[:2]:
                return None
            own = (dot_flops(first(instruction, "dot_dimension_numbers", {}), operands[0], out)
                   if opcode == "dot" else
                   convolution_flops(instruction, operands[0], operands[1], out))
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
        except (ValueError, TypeError, AttributeError, RecursionError):
            return None

    def _bytes(self, instruction: dict) -> float | None:
        shapes = self._operand_shapes(instruction)
        result = first(instruction, "shape", None)
        if first(instruction, "opcode") == "custom-call":
            result = library_calls.data_shape(instruction, result)
        sizes = [shape_bytes(s) for s in shapes + [result]]
        return None if None in sizes else sum(sizes)
