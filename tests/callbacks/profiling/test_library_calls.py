"""callbacks/profiling/library_calls.py: the work of cuDNN's convolutions and fused
attention and of cuBLAS's GEMMs, from the text of the compiled training steps an H100
ran (tests/fixtures/: the op zoo, tests/fixtures/op_zoo.py, and ConvNeXt-T), checked:

- call by call against XLA's own cost analysis of the operation the call does (a
  convolution's forward form, a GEMM's dot), run here on the CPU;
- layer by layer against XLA's cost analysis of the same step before XLA's passes made
  library calls of it (the op zoo's before-optimizations module), and by hand where
  the GPU form asks for more work than the model (a map padded, zeros materialized);
- the step's total against the app's MFU count of the model (app/models/flops.py);
- hostile custom-call text (Hypothesis).
"""

import collections
import math
import re

import hlo_fixtures
import pytest

from callbacks.profiling import hlo_cost, hlo_text, library_calls


def _module(name: str):
    text = hlo_fixtures.text(name)
    module = hlo_text.computations(text)
    lines = {}
    for line in text.splitlines():
        found = re.match(r"^\s*(?:ROOT\s+)?%([\w.\-]+) = ", line)
        if found:
            lines[found.group(1)] = line
    return module, hlo_cost.Costs(module), lines


def _calls(module, prefix: str) -> list[dict]:
    return [i for instructions in module.values() for i in instructions
            if hlo_text.first(i, "custom_call_target").startswith(prefix)]


def _attributes(line: str, *names: str) -> str:
    """The named attributes of a dump line, as written there."""
    found = [re.search(rf"\b{name}=(\{{[^}}]*\}}|[\w\->]+)", line) for name in names]
    return ", ".join(f.group(0) for f in found if f)


def _convolution_roles(costs, call):
    """(input, kernel, output) shapes of the forward convolution a cuDNN call does."""
    target = hlo_text.first(call, "custom_call_target")
    operands = costs._operand_shapes(call)
    result = hlo_text.first(call, "shape", None)["tuple_shapes"][0]
    if target.endswith("BackwardInput"):
        return result, operands[1], operands[0]
    if target.endswith("BackwardFilter"):
        return operands[0], result, operands[1]
    return operands[0], operands[1], result


@pytest.mark.parametrize("fixture,calls", [("op_zoo_h100_after", 17),
                                           ("convnext_tiny_h100_after", 65)])
def test_each_cudnn_convolution_counts_what_xla_counts_for_its_forward_form(fixture, calls):
    """Forward, input-gradient and filter-gradient calls, strided, grouped, depthwise,
    dilated and transposed: each call's count equals XLA's cost analysis of the plain
    convolution with the call's window, labels and groups on the roles' shapes."""
    module, costs, lines = _module(fixture)
    found = _calls(module, "__cudnn$conv")
    assert len(found) == calls
    for call in found:
        lhs, rhs, out = (hlo_fixtures.shape_text(s) for s in _convolution_roles(costs, call))
        attributes = _attributes(lines[hlo_text.first(call, "name")], "window", "dim_labels",
                                 "feature_group_count", "batch_group_count")
        expected = hlo_fixtures.xla_flops(f"{out} convolution(p0, p1), {attributes}", lhs, rhs)
        assert costs.flops(call) == expected > 0, hlo_text.first(call, "name")


@pytest.mark.parametrize("fixture,calls,batched", [("op_zoo_h100_after", 2, 0),
                                                   ("convnext_tiny_h100_after", 99, 24)])
def test_each_cublas_gemm_counts_what_xla_counts_for_the_same_dot(fixture, calls, batched):
    """The dot dimension numbers of each call's backend config (batch dimensions, and
    operands transposed: contracting over either of their dimensions) as a plain dot:
    XLA's count of it is the call's. ConvNeXt-T has 24 batched GEMMs whose batch is
    the left operand's second dimension."""
    import json

    module, costs, _ = _module(fixture)
    found = _calls(module, "__cublas$")
    assert len(found) == calls
    seen_batched = 0
    for call in found:
        numbers = json.loads(hlo_text.first(call, "backend_config"))[
            "gemm_backend_config"]["dot_dimension_numbers"]
        lhs, rhs = (hlo_text.dims(s) for s in costs._operand_shapes(call)[:2])
        get = {key: [int(d) for d in numbers[f"{key}_dimensions"]] for key in (
            "lhs_batch", "lhs_contracting", "rhs_batch", "rhs_contracting")}
        taken = {side: get[f"{side}_batch"] + get[f"{side}_contracting"] for side in ("lhs", "rhs")}
        free = ([lhs[d] for d in get["lhs_batch"]]
                + [s for d, s in enumerate(lhs) if d not in taken["lhs"]]
                + [s for d, s in enumerate(rhs) if d not in taken["rhs"]])
        result = hlo_text.dims(hlo_text.first(call, "shape", None)["tuple_shapes"][0])
        assert math.prod(free) == math.prod(result)
        attributes = ", ".join(f"{key}_dims={{{','.join(map(str, value))}}}"
                               for key, value in get.items() if value)
        shapes = [f"bf16[{','.join(map(str, dims))}]" for dims in (free, lhs, rhs)]
        expected = hlo_fixtures.xla_flops(f"{shapes[0]} dot(p0, p1), {attributes}", *shapes[1:])
        assert costs.flops(call) == expected > 0
        seen_batched += bool(get["lhs_batch"])
    assert seen_batched == batched


def test_the_op_zoos_convolutions_by_hand():
    """Batch 64 on 16 x 16 maps of 32 features (taps that meet the map, an axis): the
    grouped 3x3 (4 groups of 8 inputs; 46 taps), the depthwise 5x5 (1 input a group;
    74), the dilated 3x3 (rate 2, padded by 2; 44), the 4x4 patches at stride 4 on 32 x
    32 (64 outputs; 32), and the depthwise filter's gradient: the forward's count."""
    module, costs, _ = _module("op_zoo_h100_after")
    by_name = {hlo_text.first(i, "name"): i for i in _calls(module, "__cudnn$conv")}
    assert costs.flops(by_name["cudnn-conv-bias-activation.14"]) == 2 * 64 * 32 * 8 * 46**2
    assert costs.flops(by_name["cudnn-conv.17"]) == 2 * 64 * 32 * 1 * 74**2
    assert costs.flops(by_name["cudnn-conv-bias-activation.15"]) == 2 * 64 * 32 * 32 * 44**2
    assert costs.flops(by_name["cudnn-conv-bias-activation.16"]) == 2 * 64 * 64 * 32 * 32**2
    assert costs.flops(by_name["cudnn-conv-bw-filter.7"]) == 2 * 64 * 32 * 1 * 74**2


def test_the_op_zoos_gemms_and_attention_by_hand():
    """mlp_out's forward: 4,096 tokens x 128 -> 64; mlp_in's input gradient, its kernel
    transposed (contracting over its second dimension): 4,096 x 128 -> 64; cuDNN's
    flash attention on 64 images x 4 heads x 64 tokens, heads of 16: the scores and
    their weighting of V, 2 x 64 x 4 x 64 x 64 x (16 + 16) forward, twice that backward."""
    module, costs, _ = _module("op_zoo_h100_after")
    by_name = {hlo_text.first(i, "name"): i for i in _calls(module, "__")}
    assert costs.flops(by_name["custom-call.35"]) == 2 * 4096 * 128 * 64
    assert costs.flops(by_name["custom-call.34"]) == 2 * 4096 * 128 * 64
    forward = 2 * 64 * 4 * 64 * 64 * (16 + 16)
    assert costs.flops(by_name["dot_product_attention_fwd.5"]) == forward
    assert costs.flops(by_name["dot_product_attention_bwd.8"]) == 2 * forward
    # the workspace (s8[33554432]) is no data: the GEMM reads 4,096 x 128 and 128 x 64
    # bf16 values and writes 4,096 x 64
    assert costs.bytes(by_name["custom-call.35"]) == 2 * (4096 * 128 + 128 * 64 + 4096 * 64)


def test_the_pairs_a_mask_keeps_by_hand():
    assert library_calls.attention_pairs(4, 4, causal=False) == 16
    assert library_calls.attention_pairs(4, 4, causal=True) == 1 + 2 + 3 + 4
    assert library_calls.attention_pairs(4, 4, causal=True, window=2) == 1 + 2 + 2 + 2
    assert library_calls.attention_pairs(3, 5, causal=True) == 1 + 2 + 3  # top-left
    assert library_calls.attention_pairs(5, 3, causal=True) == 1 + 2 + 3 + 3 + 3


def _layer(op_name: str) -> tuple[str, str] | None:
    """(direction, layer) of a framework op name: ('forward', 'strided')."""
    found = re.search(r"(transpose\()?jvp\((\w+)\)", op_name)
    if not found:
        return None
    layer = found.group(2)
    return ("backward" if found.group(1) else "forward", layer)


def _by_layer(fixture: str, xla: bool) -> collections.Counter:
    """Each (direction, layer)'s FLOPs: every convolution and dot (XLA's cost analysis of
    each, where `xla`), library call and fusion of the entry computation (the reader)."""
    module, costs, lines = _module(fixture)
    entry = next(name for name in module if name.startswith("main"))
    totals = collections.Counter()
    for item in module[entry]:
        opcode = hlo_text.first(item, "opcode")
        if opcode not in ("convolution", "dot", "custom-call", "fusion"):
            continue
        key = _layer(hlo_text.first(hlo_text.first(item, "metadata", {}), "op_name"))
        if xla and opcode in ("convolution", "dot"):
            shapes = [hlo_fixtures.shape_text(s) for s in costs._operand_shapes(item)]
            out = hlo_fixtures.shape_text(hlo_text.first(item, "shape", None))
            line = lines[hlo_text.first(item, "name")]
            attributes = _attributes(line, "window", "dim_labels", "feature_group_count",
                                     "batch_group_count", "lhs_batch_dims",
                                     "lhs_contracting_dims", "rhs_batch_dims",
                                     "rhs_contracting_dims")
            flops = hlo_fixtures.xla_flops(f"{out} {opcode}(p0, p1), {attributes}", *shapes)
        else:
            flops = costs.flops(item)
        if flops:
            totals[key] += flops
    return totals


# What the GPU form asks of cuDNN beyond the model's work, by hand: XLA runs two 32 x 32
# maps as 33 x 33 (a stride-2 3x3 window then takes 48 taps an axis, not 47), and the
# transposed convolution's filter gradient over its 16 x 16 input dilated to 31 x 31
# with the zeros written out (93 taps an axis where 47 meet the input); the logits'
# gradient pads the 1,000 classes to 1,024.
EXCESS = {("forward", "strided"): 2 * 64 * 3 * 32 * (48**2 - 47**2),
          ("backward", "strided"): 2 * 64 * 3 * 32 * (48**2 - 47**2),
          ("forward", "transposed"): 2 * 64 * 32 * 32 * (48**2 - 47**2),
          ("backward", "transposed"): 2 * 64 * 32 * 32 * (48**2 - 47**2)
          + 2 * 64 * 32 * 32 * (93**2 - 47**2),
          ("backward", "logits"): 2 * 64 * 64 * (1024 - 1000)}


def test_layer_by_layer_the_gpu_form_counts_what_xla_counted_before_its_passes():
    """The op zoo's step before XLA's passes (plain convolutions and dots, each counted
    by XLA's cost analysis) and after (library calls and Triton GEMM fusions, counted by
    the reader): per layer and direction the same FLOPs, but for EXCESS."""
    before = _by_layer("op_zoo_h100_before", xla=True)
    after = _by_layer("op_zoo_h100_after", xla=False)
    assert set(before) == set(after) and len(before) == 20  # 10 layers, both ways
    for key in before:
        assert after[key] - before[key] == EXCESS.get(key, 0), key


def _mfu_count(make_model: str, image_size: int, batch: int) -> float:
    """The app's MFU count (app/models/flops.py) of a model x the batch, on JAX as the
    GPU runs counted it: in a process of its own (this one's Keras runs TensorFlow,
    whose count of a dilated convolution differs: its lowering writes the padding out)."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    script = ("from app.models import flops; " + make_model
              + f"; print(flops.train_flops_per_image(model, {image_size}, 1) * {batch})")
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.split()[-1])


OP_ZOO = ("import importlib.util; spec = importlib.util.spec_from_file_location('op_zoo', "
          "'tests/fixtures/op_zoo.py'); zoo = importlib.util.module_from_spec(spec); "
          "spec.loader.exec_module(zoo); model = zoo.make_model(1000, 32)")


def _total(fixture: str) -> int:
    module, costs, _ = _module(fixture)
    entry = next(name for name in module if name.startswith("main"))
    return sum(costs.flops(item) for item in module[entry])


def test_the_op_zoos_gpu_step_is_its_mfu_count_and_the_excess_by_hand():
    """The app's MFU count of the op zoo (app/models/flops.py: the step lowered on the
    CPU, attention unfused) x the batch of 64 is the GPU form's total less EXCESS, to
    the FLOP: the fused attention counts what XLA counts the unfused products."""
    counted = _mfu_count(OP_ZOO, 32, 64)
    assert _total("op_zoo_h100_after") - sum(EXCESS.values()) == counted
    assert _total("op_zoo_h100_before") == counted


@pytest.mark.slow
def test_convnext_tinys_gpu_step_is_within_2_percent_of_its_mfu_count():
    """ConvNeXt-T at batch 256 (keras.applications, as --model=applications:ConvNeXtTiny
    builds it): the counted FLOPs of its compiled step on an H100 against the app's
    MFU count of the same model (lowered here, ~40 s)."""
    counted = _mfu_count("from app import models; model = models.make_model("
                         "'applications:ConvNeXtTiny', 1000, 224)", 224, 256)
    assert _total("convnext_tiny_h100_after") == pytest.approx(counted, rel=0.02)


def test_hostile_custom_call_text_is_unknown_or_counted_never_a_traceback():
    """Hypothesis: library calls of any target, shapes, window, labels and backend
    config (JSON or not, wrong kinds, huge or negative numbers): a count >= 0 or None."""
    import json

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    numbers = st.one_of(st.integers(-3, 70), st.text(max_size=3), st.none(),
                        st.integers(2**40, 2**70))
    leaves = st.one_of(numbers, st.booleans(), st.floats())
    json_values = st.one_of(leaves, st.lists(leaves, max_size=4), st.dictionaries(
        st.text(max_size=12), st.one_of(leaves, st.lists(leaves, max_size=3)), max_size=4))
    configs = st.one_of(
        st.text(max_size=40),
        st.builds(lambda d: json.dumps({"gemm_backend_config": {"dot_dimension_numbers": d}}),
                  st.dictionaries(st.sampled_from(["lhs_contracting_dimensions",
                                                   "lhs_batch_dimensions"]),
                                  st.lists(numbers, max_size=3))),
        st.builds(lambda d: json.dumps({"cudnn_fmha_backend_config": d}),
                  st.fixed_dictionaries({"intermediate_tensor_shape": st.fixed_dictionaries(
                      {"dimensions": st.lists(numbers, max_size=5)})},
                      optional={"mask_type": st.sampled_from(["NO_MASK", "CAUSAL", 7]),
                                "sliding_window_length": numbers})),
        st.builds(json.dumps, json_values))
    shapes = st.lists(st.integers(0, 70), max_size=5).map(
        lambda d: f"bf16[{','.join(map(str, d))}]")
    targets = st.sampled_from(["__cudnn$convForward", "__cudnn$convBackwardInput",
                               "__cudnn$convBackwardFilter", "__cublas$lt$matmul",
                               "__cudnn$fmhaSoftmax", "__cudnn$fmhaSoftmaxBackward", "other"])
    windows = st.lists(st.sampled_from(["size=3x3", "stride=2x2", "pad=1_1x1_1", "size=0",
                                        "rhs_dilate=9x9", "lhs_dilate=0x2", "pad=-4_2"]),
                       max_size=4).map(" ".join)
    labels = st.sampled_from(["b01f_o01i->b01f", "bf_io->bf", "b01f_01io->b01f", "zz", ""])

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(targets, shapes, shapes, shapes, windows, labels, configs,
           st.integers(-1, 40))
    def count(target, a, b, out, window, label, config, groups):
        text = (f"HloModule m\n\nENTRY %main () -> f32[] {{\n  %a = {a} parameter(0)\n"
                f"  %b = {b} parameter(1)\n  %c = ({out}, u8[0]) custom-call(%a, %b, %a), "
                f"window={{{window}}}, dim_labels={label}, feature_group_count={groups}, "
                f"custom_call_target=\"{target}\", backend_config={json.dumps(config)}\n}}\n")
        module = hlo_text.computations(text)
        costs = hlo_cost.Costs(module)
        for item in module["main"]:
            flops = costs.flops(item)
            assert flops is None or (isinstance(flops, int) and flops >= 0), (text, flops)

    count()
