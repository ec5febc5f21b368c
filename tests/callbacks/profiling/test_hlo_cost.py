"""callbacks/profiling/hlo_cost.py: each instruction's FLOPs and bytes, a fusion's
against what it holds, a kind's rate only where all its work is known, and the reader
against hostile text (Hypothesis). The dot and convolution rules against XLA's own cost
analysis: test_contractions.py; library calls: test_library_calls.py."""

import json
import math

import pytest

from callbacks.profiling import breakdown

def _pbtxt(message: dict, indent: str = "  ") -> str:
    """A message in protobuf's text form, one field a line: {key: value or [values],
    a dict for a message}."""
    lines = []
    for key, values in message.items():
        for value in values if isinstance(values, list) else [values]:
            if isinstance(value, dict):
                lines += [f"{indent}{key} {{", _pbtxt(value, indent + "  "), f"{indent}}}"]
            else:
                lines.append(f"{indent}{key}: {value}")
    return "\n".join(line for line in lines if line)


def _shape(element, *sizes):
    return {"element_type": element, "dimensions": list(sizes)}


def _instruction(name, opcode, shape, *operands, **fields):
    return {"name": f'"{name}"', "opcode": f'"{opcode}"', "shape": shape,
            "operand_ids": list(operands), **fields}


MODULE = "hlo_module {\n" + _pbtxt({"computations": [
    {"name": '"fused"', "instructions": [
        _instruction("p0", "parameter", _shape("BF16", 4, 6), id=1),
        _instruction("p1", "parameter", _shape("BF16", 6, 5), id=2),
        _instruction("dot.1", "dot", _shape("F32", 4, 5), 1, 2, id=3, dot_dimension_numbers={
            "lhs_contracting_dimensions": 1, "rhs_contracting_dimensions": 0})],
     "id": 7},
    {"name": '"main"', "instructions": [
        _instruction("a", "parameter", _shape("BF16", 4, 6), id=10),
        _instruction("b", "parameter", _shape("BF16", 6, 5), id=11),
        _instruction("fusion.1", "fusion", _shape("F32", 4, 5), 10, 11, id=12,
                     called_computation_ids=7),
        _instruction("gemm.1", "custom-call", {"tuple_shapes": [
            _shape("F32", 4, 5), _shape("S8", 64)]}, 10, 11, id=13,
            custom_call_target='"__cublas$gemm"', backend_config=json.dumps(json.dumps(
                {"gemm_backend_config": {"dot_dimension_numbers": {
                    "lhs_contracting_dimensions": ["1"], "rhs_contracting_dimensions": ["0"],
                    "lhs_batch_dimensions": [], "rhs_batch_dimensions": []}}}))),
        _instruction("gemm.2", "custom-call", {"tuple_shapes": [
            _shape("F32", 4, 5), _shape("S8", 64)]}, 10, 11, id=15,
            custom_call_target='"__cublas$gemm"'),
        _instruction("odd", "add", _shape("F31", 4), id=14)],
     "id": 8}]}) + "\n}\n"


def test_a_fusion_counts_what_it_holds_and_a_library_call_what_its_config_says():
    """Written by hand in graph_viewer's form: a fusion holding a 4x6 by 6x5 dot is
    2 x 4 x 5 x 6 FLOPs and reads 2 x 24 + 2 x 30 bytes, writes 4 x 20; a cuBLAS call
    of the same shapes and dot dimensions (its backend config, a JSON string) as many
    FLOPs and bytes, its 64-byte workspace not counted as data; the same call without
    its config has no FLOPs; an unknown element type has no bytes."""
    ops = breakdown.parse_module(MODULE)
    fusion, gemm, bare, odd = ops["fusion.1"], ops["gemm.1"], ops["gemm.2"], ops["odd"]
    assert fusion.flops == 2 * 4 * 5 * 6 and fusion.fused == {"parameter", "dot"}
    assert fusion.bytes == 2 * 24 + 2 * 30 + 4 * 20
    assert gemm.flops == 2 * 4 * 5 * 6 and gemm.bytes == 2 * 24 + 2 * 30 + 4 * 20
    assert bare.flops is None and bare.bytes == gemm.bytes
    assert odd.flops == 0 and odd.bytes is None
    assert breakdown.category_of_hlo(gemm, {}) == "matrix products"


def test_a_kind_has_a_rate_only_where_all_its_work_is_known():
    """Two matrix products in a 1 ms window of one step: both counted gives the rate of
    their FLOPs over the kind's time; one uncounted gives none (not a partial one)."""
    known = breakdown.Op("dot", flops=3e9, bytes=1e6)
    unknown = breakdown.Op("custom-call", "__cublas$gemm", flops=None, bytes=1e6)
    windows = [(0.0, 1000.0)]
    other = breakdown.Op("dot", flops=3e9, bytes=1e6)  # a second op: its work counts too
    for second, rate in ((other, 6e9 / 1e-3 / 1e12), (unknown, None)):
        spans = [(0.0, 400.0, "matrix products", known), (400.0, 900.0, "matrix products",
                                                           second)]
        totals, _ = breakdown._share(spans, windows)
        work = breakdown._work(spans, windows)
        found = breakdown._rates("matrix products", work["matrix products"], 1,
                                 totals["matrix products"])
        assert found.get("tflops_per_sec") == (pytest.approx(rate * 1000 / 900, rel=1e-3) if rate
                                             else None)
        assert found.get("no_rate") == (None if rate else
                                        "a library call whose work is not known (__cublas$gemm)")


def test_the_reader_takes_any_text_without_a_traceback():
    """Hypothesis: graph_viewer's text cut, garbled or made up line by line is read into
    ops (their costs unknown where the text does not give them), never a traceback."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    lines = MODULE.splitlines()
    fragments = st.sampled_from(lines + ["}", "{", "instructions {", "computations {",
                                         "id: x", "dimensions: -3", "operand_ids: 99",
                                         "opcode: \"convolution\"", "window {",
                                         "dimensions: 99999999999", "shape {",
                                         "called_computation_ids: 8"])

    @settings(max_examples=300, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.one_of(fragments, st.text(max_size=30)), max_size=80))
    def read(chosen):
        ops = breakdown.parse_module("\n".join(chosen))
        for op in ops.values():
            assert op.flops is None or (isinstance(op.flops, int) and op.flops >= 0)
            assert op.bytes is None or (math.isfinite(op.bytes) and op.bytes >= 0)

    read()
