"""The step breakdown (callbacks/profiling/breakdown.py): each profiled step split by kind
of work, read from real traces of real runs on both backends, its parts summing to
the step, the step equal to the Profiler's own clock; the sharing of concurrent ops
against a hand count; a trace whose kernels no module names; the line; the report's
reader of a breakdown (the kinds of ops: test_kinds.py; two runs compared:
test_difference.py)."""

import json
import math
import textwrap

import pytest
from conftest import run_cli
from step_events import step_times

from callbacks.profiling import breakdown

SYNTHETIC = ["--dataset=synthetic", "--image_size=32", "--global_batch_size=16",
             "--epochs=1", "--steps_per_epoch=8", "--validation_steps=-1",
             "--profile_steps=4,6", "--verbose=0"]


def test_ops_at_once_share_each_moment_and_the_rest_is_idle():
    """A hand count: in a 100 us step, a convolution over 10-50 and a matrix product over
    30-70 share 30-50 equally: 30 us each, 40 us idle."""
    spans = [(10.0, 50.0, "convolutions", "a"), (30.0, 70.0, "matrix products", "b"),
             (90.0, 130.0, "elementwise and other", "c")]  # half outside the step
    totals, idle = breakdown._share(spans, [(0.0, 100.0)])
    assert totals == {"convolutions": 30.0, "matrix products": 30.0,
                      "elementwise and other": 10.0}
    assert idle == 30.0
    assert sum(totals.values()) + idle == 100.0


def _profiled(tmp_path, backend, model, *extra):
    logdir = tmp_path / f"{backend}-{model.replace('/', '_').replace(':', '_')}"
    done = run_cli(f"--backend={backend}", f"--model={model}", f"--logdir={logdir}",
                   *SYNTHETIC, *extra)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((logdir / "summary.json").read_text()), done.stdout


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
@pytest.mark.parametrize("model,work", [("small_resnet", {"convolutions", "normalization"}),
                                        ("vit_ti16", {"matrix products", "normalization"})])
def test_the_timed_step_is_explained_and_the_traced_step_is_the_profilers_own_clock(
        tmp_path, backend, model, work):
    summary, stdout = _profiled(tmp_path, backend, model, "--log_every_steps=1")
    result = summary["profile"]["breakdown"]
    assert result["traced"] == [4, 6] and result["steps"] == 3
    parts = result["parts"]
    assert set(parts) <= set(breakdown.CATEGORIES)
    # The traced step (the trace's markers) against a second clock: the Profiler's
    # perf_counter around the same markers.
    assert result["traced_step_ms"] == pytest.approx(result["host_clock_ms"], rel=0.05)
    # The step explained is the timed one (callbacks/throughput.py's clock) less the
    # steps the profiler slowed: traced (4-6) and the one after (7), where the trace
    # stops and is written (on a CPU, 2.6x the whole window's other steps). A second
    # clock: the metrics sink's event of each step (its wall time), steps 3 and 8 (test_
    # throughput.py checks the window exactly, with its own clock). The kinds' time as
    # traced, idle by hand: that step less it, never below 0
    times = step_times(summary["logdir"])
    untraced = [times[s] - times[s - 1] for s in (3, 8)]
    assert result["step_ms"] == pytest.approx(1e3 * sum(untraced) / 2, rel=0.5), untraced
    busy = sum(part["ms"] for kind, part in parts.items() if kind != "idle")
    assert result["busy_ms"] == pytest.approx(busy, abs=1e-3)
    assert parts.get("idle", {}).get("ms", 0.0) == pytest.approx(
        max(result["step_ms"] - busy, 0.0), abs=1e-3)
    assert ("over_step_ms" in result) == (busy > result["step_ms"] + 1e-3)
    assert sum(part["share"] for part in parts.values()) == pytest.approx(1.0, abs=2e-3)
    assert work <= set(parts), parts
    assert f"breakdown: {breakdown.line(result)}" in stdout.splitlines()
    assert f"step {result['step_ms']:.1f} ms timed (traced {result['traced_step_ms']:.1f} ms" \
        in stdout
    if backend == "jax":  # XLA's ops: their FLOPs from the module's shapes
        # The app's count of the same step (app/models/flops.py, from the lowered step's
        # HLO text, for MFU) against this one (the compiled module run in the trace).
        counted = sum(part.get("gflop", 0.0) for part in parts.values()) * 1e9
        assert counted == pytest.approx(summary["train_flops_per_image"] * 16, rel=2e-3)
        assert result["gflop"] * 1e9 == pytest.approx(counted, rel=1e-5)
        assert result["ops_without_flops"] == 0
        for name in {"convolutions", "matrix products"} & set(parts):
            part = parts[name]
            assert part["tflops_per_sec"] == pytest.approx(
                part["gflop"] / part["ms"], rel=2e-3)  # GFLOP per ms is TFLOP/s
        assert parts["elementwise and other"]["gb_per_sec"] > 0
    else:  # TensorFlow's executor: no shapes in the trace, and the parts say so
        assert {part.get("no_rate") for kind, part in parts.items() if kind != "idle"} == {
            "TensorFlow's own ops: the trace gives their names, not their shapes"}


def test_a_model_of_only_matrix_products_is_matrix_products(tmp_path):
    """A file model of Dense layers only (no convolution, no normalization): the work
    the breakdown finds is matrix products first, and none of the other named kinds."""
    source = tmp_path / "dense_only.py"
    source.write_text(textwrap.dedent('''\
        import keras

        def make_model(num_classes, image_size):
            inputs = keras.Input((image_size, image_size, 3))
            x = keras.layers.Flatten()(inputs)
            for i in range(4):
                x = keras.layers.Dense(1024, name=f"wide_{i}")(x)
            return keras.Model(inputs, keras.layers.Dense(num_classes, dtype="float32")(x))
        '''))
    summary, _ = _profiled(tmp_path, "jax", f"{source}:make_model", "--global_batch_size=256")
    parts = summary["profile"]["breakdown"]["parts"]
    work = {name: part for name, part in parts.items() if name != "idle"}
    assert max(work, key=lambda name: work[name]["ms"]) == "matrix products", parts
    assert not {"convolutions", "normalization", "attention"} & set(parts), parts
    # Its FLOPs by hand: each Dense of n -> m units, 2 x 256 x n x m forward, as many
    # for its weights' gradient and, but for the first layer's (the images need
    # none), for its input's.
    widths = [32 * 32 * 3, 1024, 1024, 1024, 1024, summary["num_classes"]]
    layers = list(zip(widths, widths[1:]))
    by_hand = sum(6 * 256 * n * m for n, m in layers) - 2 * 256 * widths[0] * widths[1]
    assert parts["matrix products"]["gflop"] * 1e9 == pytest.approx(by_hand, rel=1e-4)


def test_a_trace_whose_kernels_no_module_names_is_no_breakdown():
    """A GPU's stream where most kernel time carries no HLO op (as inside a CUDA graph):
    refused with why, not split into 'elementwise and other'; a few such kernels pass."""
    modules = {"jit_train_step": {"fusion.1": breakdown.Op("fusion", fused=frozenset({"dot"}))}}
    meta = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:GPU:0"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7,
             "args": {"name": "Stream #7(Compute)"}}]

    def kernel(ts, dur, **args):
        return {"ph": "X", "pid": 1, "tid": 7, "ts": ts, "dur": dur, "name": "k", "args": args}

    named = kernel(0, 40, hlo_op="fusion.1", hlo_module="jit_train_step(12)")
    spans = breakdown._op_spans(meta + [named, kernel(40, 30)], {1}, {}, modules)
    assert [span[2] for span in spans] == ["matrix products", "elementwise and other"]
    with pytest.raises(breakdown.ProfileError, match="57% of the device's op time"):
        breakdown._op_spans(meta + [named, kernel(40, 30), kernel(70, 23)], {1}, {},
                             modules)


def test_a_kind_without_a_rate_says_why():
    """TensorFlow's executor ops (no shapes in the trace), kernels no HLO op names, a
    loop: each kind's `no_rate`; attention whose ops do no FLOPs (a softmax without a
    fused kernel) has the GB/s its bytes give instead."""
    windows = [(0.0, 1000.0)]
    spans = [(0.0, 100.0, "convolutions", breakdown.TF_OP),
             (100.0, 200.0, "elementwise and other", None),
             (200.0, 300.0, "matrix products", breakdown.Op("while", bytes=8.0)),
             (300.0, 500.0, "attention", breakdown.Op("fusion", flops=0, bytes=4e6))]
    work = breakdown._work(spans, windows)
    rates = {kind: breakdown._rates(kind, work[kind], 1, 100.0) for kind in work}
    assert rates["convolutions"] == {
        "no_rate": "TensorFlow's own ops: the trace gives their names, not their shapes"}
    assert rates["elementwise and other"] == {
        "no_rate": "kernels or copies that no traced HLO op names"}
    assert rates["matrix products"] == {
        "no_rate": "a loop, whose trip count the module's text does not give"}
    assert rates["attention"] == {"gb_per_sec": 40.0}  # 4 MB in 100 us
    assert breakdown._counted(spans, windows, 1) == {"gflop": 0.0, "ops_without_flops": 3}


def test_an_op_run_as_several_kernels_counts_its_work_once_a_step_and_all_their_time():
    """A cuBLASLt matrix product of 2 GFLOP runs as a GEMM kernel (0-80 us) and its
    epilogue (80-100 us), each a span naming the op; it runs once in each of two traced
    steps: 2 GFLOP a step (not 4), over its 100 us a step, 20 TFLOP/s. On an H100 each
    kernel counted the work again: ViT-B/16's matrix products read 1,513 TFLOP/s, 153%
    of the peak, and the step's count 2.1x the MFU count (2026-12-06)."""
    gemm = breakdown.Op("custom-call", flops=2e9, bytes=1e6)
    windows = [(0.0, 1000.0), (1000.0, 2000.0)]
    spans = [(start + offset, start + offset + length, "matrix products", gemm)
             for start in (0.0, 1000.0) for offset, length in ((0.0, 80.0), (80.0, 20.0))]
    work = breakdown._work(spans, windows)["matrix products"]
    assert work["flops"] == 4e9 and work["us"] == work["flops_us"] == 200.0
    assert breakdown._rates("matrix products", work, 2, 200.0) == {
        "gflop": 2.0, "tflops_per_sec": 20.0}
    assert breakdown._counted(spans, windows, 2) == {"gflop": 2.0, "ops_without_flops": 0}
    # TensorFlow's ops all stand as one TF_OP: each launch is still an op without FLOPs
    tf_spans = [(10.0 * i, 10.0 * i + 5, "convolutions", breakdown.TF_OP) for i in range(3)]
    assert breakdown._counted(tf_spans, windows[:1], 1)["ops_without_flops"] == 3


def test_a_kinds_rate_is_that_of_its_ops_whose_work_is_known_where_they_hold_most_of_it():
    """Elementwise work of 950 us in ops of known bytes (9.5 MB) and 50 us in a memset no
    HLO op names, in a kind of 1,000 us: 9.5 MB over 950 us, 10 GB/s, 95% of its time
    rated; one of 850 us known is under MIN_RATED: no rate, and why."""
    windows = [(0.0, 2000.0)]
    for known_us, expected in ((950.0, {"gb_per_sec": 10.0, "rated_share": 0.95}),
                               (850.0, {"no_rate": "kernels or copies that no traced HLO "
                                                   "op names"})):
        spans = [(0.0, known_us, "elementwise and other",
                  breakdown.Op("fusion", flops=0, bytes=known_us * 1e4)),
                 (known_us, 1000.0, "elementwise and other", None)]
        totals, _ = breakdown._share(spans, windows)
        work = breakdown._work(spans, windows)
        assert breakdown._rates("elementwise and other", work["elementwise and other"], 1,
                                totals["elementwise and other"]) == expected


def test_the_line_gives_each_kinds_rate_and_its_share_of_the_traced_devices_peak():
    """Two H100s: convolutions at 400 TFLOP/s of their 2 x 989 (20%), normalization at
    1,340 GB/s of their 2 x 3,350 (20%); an unknown device's kind gives no bandwidth."""
    result = {"step_ms": 10.0, "devices": 2, "device_kind": "NVIDIA H100 80GB HBM3", "parts": {
        "convolutions": {"ms": 6.0, "share": 0.6, "tflops_per_sec": 400.0},
        "normalization": {"ms": 3.0, "share": 0.3, "gb_per_sec": 1340.0},
        "idle": {"ms": 1.0, "share": 0.1}}}
    assert breakdown.line(result, peak_tflops_per_device=1000.0) == (
        "step 10.0 ms: 60% convolutions at 400 TFLOP/s (20% of peak), 30% normalization "
        "at 1,340 GB/s (20% of bandwidth), 10% idle")
    result["device_kind"] = "cpu"
    result["parts"]["normalization"]["gb_per_sec"] = 0.5
    assert breakdown.line(result) == ("step 10.0 ms: 60% convolutions at 400 TFLOP/s, "
                                      "30% normalization at 500 MB/s, 10% idle")


def test_the_reports_reader_of_a_breakdown_takes_hostile_values_without_a_traceback():
    """Hypothesis: summary.json's profile.breakdown with any kinds, numbers (NaN, inf,
    huge, negative, booleans) and shapes is read as a checked breakdown or as none with
    a caveat, never a traceback; what it keeps is finite and in range, and two kept
    breakdowns with parts always make their sentence."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from app.report import page as report_page
    from app.report import reading
    from callbacks.profiling import difference

    values = st.one_of(st.none(), st.booleans(), st.text(max_size=6),
                       st.floats(allow_nan=True, allow_infinity=True),
                       st.integers(min_value=-2**70, max_value=2**70),
                       st.floats(min_value=0, max_value=2, allow_nan=False))
    kinds = st.one_of(st.sampled_from(breakdown.CATEGORIES), st.text(max_size=6))
    parts = st.one_of(values, st.dictionaries(kinds, st.one_of(values, st.fixed_dictionaries(
        {"ms": values, "share": values},
        optional={"tflops_per_sec": values, "gb_per_sec": values})), max_size=4))
    found = st.one_of(values, st.fixed_dictionaries({"step_ms": values, "parts": parts}))

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(first=found, second=found)
    def check(first, second):
        kept = []
        for item in (first, second):
            notes = []
            result = reading._breakdown({"profile": {"breakdown": item}}, "summary.json", notes)
            assert (result is None) == bool(notes) or item is None
            if result is not None:
                assert 0 <= result["step_ms"] <= 1e9
                for kind, part in result["parts"].items():
                    assert kind in breakdown.CATEGORIES
                    assert 0 <= part["ms"] <= 1e9 and 0 <= part["share"] <= 1
                    assert all(math.isfinite(part[rate]) and part[rate] >= 0
                               for rate in difference.RATES if rate in part)
                breakdown.line(result)  # what the page prints of it
                kept.append(result)
        rows = {f"run {i}": {"label": f"run {i}", "breakdown": b, "global_batch_size": 8,
                             "step_time_ms": 5.0} for i, b in enumerate(kept)}
        sentences = report_page._breakdown_findings(rows, str)
        assert len(sentences) == (len(kept) == 2 and all(b["parts"] for b in kept))

    check()
