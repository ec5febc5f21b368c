"""The GPU-form HLO fixtures (tests/fixtures/*.hlo.txt.gz, XLA's dump format saved from
an H100 run) and XLA's own tools on them, on the CPU: its text parser (the fixture as
an HloProto, in the text form xprof's graph_viewer gives a trace's modules) and its cost
analysis of one instruction at a time.

The fixtures were printed by a newer XLA (JAX 0.11 on the GPU machine) than the CPU's
parser reads: an operand that is a tuple's element is printed `%name#i` there, a
get-tuple-element here. `for_this_parser` writes those out, and leaves the schedule to
the parser.
"""

from __future__ import annotations

import functools
import gzip
import os
import re

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
_DEFINITION = re.compile(r"^(\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*)")
_ELEMENT = re.compile(r"%([\w.\-]+)((?:#\d+)+)")


@functools.cache
def text(name: str) -> str:
    """A fixture's module text: `op_zoo_h100_after` is op_zoo_h100_after_optimizations."""
    with gzip.open(os.path.join(FIXTURES, f"{name}_optimizations.hlo.txt.gz"), "rt") as f:
        return f.read()


def _closing(shape: str) -> str:
    depth = 0
    for i, char in enumerate(shape):
        depth += (char == "(") - (char == ")")
        if depth == 0:
            return shape[:i + 1]
    return shape


def _tuple_elements(shape: str) -> list[str]:
    inner, parts, depth, current = shape.strip()[1:-1], [], 0, ""
    for char in inner:
        depth += (char in "([{") - (char in ")]}")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [re.sub(r"/\*.*?\*/", "", p).strip() for p in parts if p.strip()]


def for_this_parser(module: str) -> str:
    """The module with each `%name#i` operand a get-tuple-element instruction."""
    used = {}
    for name, chain in set(_ELEMENT.findall(module)):
        used.setdefault(name, set()).add(tuple(int(i) for i in chain[1:].split("#")))
    out = []
    for line in module.splitlines():
        defined = _DEFINITION.match(line)
        out.append(_ELEMENT.sub(lambda m: "%" + m.group(1) + "".join(
            f"_gte{i}" for i in m.group(2)[1:].split("#")), line))
        if not defined or defined.group(2) not in used:
            continue
        rest = line[defined.end():].lstrip()
        shape = _closing(rest) if rest.startswith("(") else rest.split()[0]
        made = set()
        for chain in sorted(used[defined.group(2)]):
            parent, parent_shape = defined.group(2), shape
            for i in chain:
                child, child_shape = f"{parent}_gte{i}", _tuple_elements(parent_shape)[i]
                if child not in made:
                    out.append(f"  %{child} = {child_shape} get-tuple-element(%{parent}), "
                               f"index={i}")
                    made.add(child)
                parent, parent_shape = child, child_shape
    return "\n".join(out).replace("is_scheduled=true", "is_scheduled=false")


def proto_text(module: str) -> str:
    """The module as graph_viewer gives it: XLA's HloProto, in protobuf's text form."""
    from google.protobuf import text_format
    from jax._src.lib import hlo
    from tensorflow.compiler.xla.service import hlo_pb2

    proto = hlo.hlo_module_from_text(for_this_parser(module)).as_serialized_hlo_module_proto()
    return "hlo_module {\n" + text_format.MessageToString(
        hlo_pb2.HloModuleProto.FromString(proto)) + "}\n"


def xla_flops(root: str, *operands: str) -> float:
    """XLA's cost analysis of one instruction: `root` its text after `ROOT r = `, using
    parameters p0, p1, ... of the `operands` shapes."""
    import jax
    from jax._src.lib import _jax, hlo

    parameters = "\n".join(f"  p{i} = {shape} parameter({i})" for i, shape in enumerate(operands))
    module = f"HloModule one\n\nENTRY e {{\n{parameters}\n  ROOT r = {root}\n}}\n"
    client = jax.devices("cpu")[0].client
    return _jax.hlo_module_cost_analysis(client, hlo.hlo_module_from_text(module))["flops"]


def shape_text(shape: dict) -> str:
    """An array shape of hlo_text.py's form, as HLO text: bf16[64,16,16,32]."""
    return f"{shape['element_type'][0].lower()}[{','.join(shape['dimensions'])}]"
