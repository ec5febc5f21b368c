"""Which kind of work an op is, and what an HLO module's ops are.

Kinds of work (CATEGORIES), decided per op in this order:
- collectives: all-reduce, all-gather, reduce-scatter, permutes, NCCL calls;
- attention: cuDNN's fused attention, or any other op that is not a convolution or a
  matrix product of an attention layer (a Keras layer whose class name has
  "Attention": its softmax, scaling, masking);
- convolutions: a convolution, a cuDNN convolution, or a fusion holding one;
- matrix products: a dot, a cuBLAS call, or a fusion holding a dot (an attention
  layer's projections and, without a fused kernel, its scores);
- normalization: an op of a normalization layer (BatchNormalization,
  LayerNormalization, the app's BatchNorm: a class name with "Norm");
- host-to-device copies: the device's copies from the host;
- elementwise and other: every other op (activations, residual adds, the loss, the
  optimizer's update, layout copies);
- idle: the step's time with no op running on the device (the host's work, the
  input, the launch of the next step).

An HLO op's opcode, its fused computations' opcodes, its custom-call target and its
framework name (the Keras layer it came from) are read from the module's text; a
TensorFlow executor op's from its name ("path/to/op:Type"). No kernel name is guessed at.
"""

from __future__ import annotations

import re

from callbacks.profiling import hlo_cost, hlo_text

CATEGORIES = ("convolutions", "matrix products", "attention", "normalization",
              "collectives", "host-to-device copies", "elementwise and other", "idle")
_COLLECTIVE = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute",
               "all-to-all", "collective-broadcast")
_TF_CONV = re.compile(r"Conv\d?D|DepthwiseConv")
_TF_MATMUL = re.compile(r"MatMul|Einsum|Gemm")
_TF_COLLECTIVE = re.compile(r"Nccl|Collective|AllReduce")
# TensorFlow's executor bookkeeping (variables' reads, sends, constants): not work.
TF_INTERNAL = ("ReadVariableOp", "AssignVariableOp", "VarHandleOp", "NoOp", "Identity",
               "_Recv", "_Send", "Const", "_Arg", "_Retval")


class Op:
    """An HLO instruction: what it computes, where it came from, what it costs
    (callbacks/profiling/hlo_cost.py: FLOPs and bytes, None where unknown)."""

    __slots__ = ("opcode", "target", "op_name", "fused", "flops", "bytes")

    def __init__(self, opcode="", target="", op_name="", fused=(), flops=None, bytes=None):
        self.opcode, self.target, self.op_name, self.fused = opcode, target, op_name, fused
        self.flops, self.bytes = flops, bytes


def parse_module(text: str) -> dict[str, Op]:
    """Instruction name -> Op, from a module's text: HloProto text (graph_viewer's
    pbtxt) or XLA's dump format (callbacks/profiling/hlo_text.py).

    A fusion's `fused` is the set of opcodes of the computations it calls (nested).
    """
    module = hlo_text.computations(text)
    costs = hlo_cost.Costs(module)
    first = hlo_text.first

    def opcodes(computation_id: str, seen: frozenset = frozenset()) -> set:
        found = set()
        for item in module.get(computation_id, ()):
            found.add(first(item, "opcode"))
            if first(item, "custom_call_target"):
                found.add("custom-call:" + first(item, "custom_call_target"))
            for called in hlo_text.calls(item):
                if called not in seen:
                    found |= opcodes(called, seen | {called})
        return found

    ops = {}
    for instructions in module.values():
        for item in instructions:
            fused = set()
            if first(item, "opcode") == "fusion":
                for called in hlo_text.calls(item):
                    fused |= opcodes(called, frozenset({called}))
            ops[first(item, "name")] = Op(
                first(item, "opcode"), first(item, "custom_call_target"),
                first(first(item, "metadata", {}), "op_name"), frozenset(fused),
                costs.flops(item), costs.bytes(item))
    return ops


# --- which kind of work an op is ----------------------------------------------------

def _innermost_layer(name: str, layer_classes: dict[str, str]) -> str:
    """The class of the innermost Keras layer named in a framework op name ('' if none)."""
    best = ""
    for part in re.split(r"[/()]", name):
        # TensorFlow's name scopes add "_1" to a layer's name: stage1_bn1_1 is stage1_bn1
        for candidate in (part, re.sub(r"_\d+$", "", part)):
            if candidate in layer_classes:
                best = layer_classes[candidate]
                break
    return best


def _by_layer(name: str, layer_classes: dict[str, str]) -> str | None:
    layer = _innermost_layer(name, layer_classes)
    if "Attention" in layer:
        return "attention"
    if "Norm" in layer:
        return "normalization"
    return None


def category_of_hlo(op: Op, layer_classes: dict[str, str]) -> str:
    """The kind of work of one HLO op (see the module docstring for the order)."""
    opcodes = {op.opcode} | set(op.fused)
    targets = {op.target} | {code.split(":", 1)[1] for code in op.fused
                             if code.startswith("custom-call:")}
    target_text = " ".join(t.lower() for t in targets if t)
    base = {code.removesuffix("-start").removesuffix("-done") for code in opcodes}
    if base & set(_COLLECTIVE) or "nccl" in target_text:
        return "collectives"
    if "fmha" in target_text or "attention" in target_text:
        return "attention"
    if "convolution" in base or "conv" in target_text:
        return "convolutions"
    if "dot" in base or "gemm" in target_text or "matmul" in target_text:
        return "matrix products"
    return _by_layer(op.op_name, layer_classes) or "elementwise and other"


def category_of_tf_op(long_name: str, layer_classes: dict[str, str]) -> str:
    """The kind of work of one TensorFlow op, named "path/to/op:Type"."""
    path, _, op_type = long_name.rpartition(":")
    if _TF_COLLECTIVE.search(op_type):
        return "collectives"
    if _TF_CONV.search(op_type):
        return "convolutions"
    if _TF_MATMUL.search(op_type):
        return "matrix products"
    return _by_layer(path, layer_classes) or "elementwise and other"

