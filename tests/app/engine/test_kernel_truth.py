"""The per-op truth behind a choice of kernels (app/engine/kernel_truth.py): XLA's
autotune log read against the program's chosen kernels and a profiled run's trace.

Fixtures: ConvNeXt-T's optimized HLO from an H100 (its real instructions and choices),
a small autotune log in XLA's text form for two of its signatures
(autotune_log_h100_head.textproto) and a trace of two steps in trace_viewer's form
(trace_h100_convnext_slow_conv.json) where the stage-0 depthwise convolution's six
calls take 3.4 ms each against the 46 µs XLA's autotuner measured for its engine."""

import gzip
import json
import os
import types

import pytest

from app.engine import kernel_truth, kernels
from conftest import ROOT

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
DEPTHWISE = ("__cudnn$convForward", "bf16[256,56,56,96]", 96, "7x7")
GEMM = ("__cublas$lt$matmul", "bf16[50176,384]", 1, "")


@pytest.fixture(scope="module")
def program():
    with gzip.open(os.path.join(FIXTURES, "convnext_tiny_h100_after_optimizations.hlo.txt.gz"),
                   "rt") as f:
        return f.read()


def _log():
    with open(os.path.join(FIXTURES, "autotune_log_h100_head.textproto"), "rb") as f:
        return kernel_truth.read_log(f.read())


def _events():
    with open(os.path.join(FIXTURES, "trace_h100_convnext_slow_conv.json")) as f:
        return json.load(f)["traceEvents"]


def test_the_log_names_each_signature_and_every_candidates_time_and_scratch():
    log = _log()
    assert set(log) == {DEPTHWISE, GEMM}
    conv = log[DEPTHWISE]
    assert conv["instruction"] == "cudnn-conv.50"
    assert [(c["run_time_us"], c["scratch_bytes"], c["failed"]) for c in conv["candidates"]] == [
        (46.208, 0, None), (49.92, 0, None), (0.0, 0, "WRONG_RESULT"), (812.544, 1048576, None)]


def test_the_chosen_kernel_is_the_one_the_program_names_else_xlas_rule(program):
    calls = kernel_truth.hlo_calls(program)
    log = _log()
    conv = kernel_truth.chosen_candidate(log[DEPTHWISE]["candidates"],
                                         calls["cudnn-conv.50"]["config"])
    assert kernel_truth.engine_words(conv) == "cuDNN engine 5" and conv["run_time_us"] == 46.208
    gemm = kernel_truth.chosen_candidate(log[GEMM]["candidates"],
                                         calls["custom-call.145"]["config"])
    assert kernel_truth.engine_words(gemm) == "cuBLAS algorithm 1"
    # Without the program's word, XLA's rule: algorithm 7 is 0.26 µs faster, within the
    # 4 µs XLA counts as a tie, and takes twice the scratch: algorithm 1 again.
    assert kernel_truth.chosen_candidate(log[GEMM]["candidates"], {}) is not None
    assert kernel_truth.engine_words(kernel_truth.chosen_candidate(
        log[GEMM]["candidates"], {})) == "cuBLAS algorithm 1"
    # an engine's knobs must match too: engine 22 with other knobs is a kernel the
    # autotuner never timed (as the heuristic program's may be): nothing to set it against
    engine_22 = {"algo_id": "22", "tuning_knobs": {"2": "3", "3": "0"}}
    assert kernel_truth.chosen_candidate(log[DEPTHWISE]["candidates"], engine_22)[
        "run_time_us"] == 49.92
    other_knobs = {"algo_id": "22", "tuning_knobs": {"2": "3", "3": "1"}}
    assert kernel_truth.chosen_candidate(log[DEPTHWISE]["candidates"], other_knobs) is None


def test_an_op_far_slower_in_the_trace_than_autotuned_is_named_with_its_cost(program):
    """The depthwise convolution's six calls ran 3.4 ms each (two kernels each) against
    46 µs autotuned: one finding, its shape, engine and 20.4 ms a step; the matrix
    products ran at 430 µs against 410: none. Another module's op of the same name (the
    evaluation step's) is not counted."""
    per_step, steps = kernel_truth.device_us_per_step(_events())
    assert steps == 2 and per_step["cudnn-conv.50"] == 3400.0
    found = kernel_truth.findings(_log(), kernel_truth.hlo_calls(program), per_step)
    assert found == [{
        "op_name": "jit(train_step)/jvp(convnext_tiny_stage_0_block_0_depthwise_conv)/"
                   "conv_general_dilated",
        "shape": "bf16[256,56,56,96]", "target": "__cudnn$convForward",
        "engine": "cuDNN engine 5", "autotuner_us": 46.21, "calls_per_step": 6,
        "trace_us_per_call": 3400.0, "times_autotuned": 73.6, "ms_per_step": 20.4,
        "excess_ms_per_step": 20.123}]
    assert kernel_truth.words(found[0]) == (
        "jit(train_step)/jvp(convnext_tiny_stage_0_block_0_depthwise_conv)/"
        "conv_general_dilated bf16[256,56,56,96] (cuDNN engine 5): 20.40 ms a step in 6 "
        "call(s), 73.6x the 46.21 µs the autotuner measured")
    line = kernels.line({"digest": "0" * 64, "library_calls": 164, "fusions": 184,
                         "source": "autotuned", "slow_ops": found})
    assert line.endswith("; 1 kind(s) of library call over 2x their autotuned time in the "
                         "trace: " + kernel_truth.words(found[0]))
    assert "\n" not in line


def test_a_profiled_kept_run_gets_its_findings_in_its_kernels_block(program, tmp_path,
                                                                    monkeypatch):
    """add_findings, as a run's end calls it: the kept log in the run folder, the trace
    session the profiler wrote (read by xprof's converters: here the fixture's events),
    the program fit ran."""
    from callbacks.profiling import xprof

    (tmp_path / "kernels").mkdir()
    (tmp_path / kernel_truth.LOG_FILE).write_bytes(
        open(os.path.join(FIXTURES, "autotune_log_h100_head.textproto"), "rb").read())
    monkeypatch.setattr(xprof, "session", lambda folder: [os.path.join(folder, "h.xplane.pb")])
    monkeypatch.setattr(xprof, "events", lambda paths: _events())
    context = types.SimpleNamespace(config=types.SimpleNamespace(keep_kernels=True),
                                    logdir=str(tmp_path))
    compiling = types.SimpleNamespace(train_step=types.SimpleNamespace(as_text=lambda: program))
    result = {"profile": {"folder": str(tmp_path / "plugins" / "profile"), "session": "s1"}}
    block = {}
    kernel_truth.add_findings(block, context, result, compiling)
    assert [f["calls_per_step"] for f in block["slow_ops"]] == [6]
    assert block["slow_ops_traced_steps"] == 2
    # no log kept (XLA autotuned nothing): a reason, not a failure
    os.remove(tmp_path / kernel_truth.LOG_FILE)
    block = {}
    kernel_truth.add_findings(block, context, result, compiling)
    assert "slow_ops" not in block and block["slow_ops_not_read"].startswith("XLA wrote no")
    # a run that was not profiled, or did not keep its kernels: nothing said
    block = {}
    kernel_truth.add_findings(block, context, {"profile": None}, compiling)
    assert block == {}
