"""callbacks/profiling/timed.py: the traced steps' breakdown set against the timed
step, by hand: ConvNeXt-T on one H100 (its traced step 12.7 ms longer than the timed
one: the profiler's, not idle), a CPU's traced ops slower than the timed step (a
sweep point's), a traced step faster than the timed one. The real runs' are checked
in test_breakdown.py."""

import pytest

from callbacks.profiling import breakdown, timed

TRACED = {"step_ms": 69.8, "devices": 1, "steps": 3, "parts": {
    "elementwise and other": {"ms": 19.5, "share": 0.2794, "gb_per_sec": 900.0},
    "convolutions": {"ms": 14.5, "share": 0.2077, "tflops_per_sec": 300.0},
    "matrix products": {"ms": 13.3, "share": 0.1905},
    "idle": {"ms": 22.5, "share": 0.3224}}}


def test_the_profilers_part_is_not_the_models_idle():
    """Timed 57.1 ms: the kinds keep their 47.3 ms; idle is 57.1 - 47.3 = 9.8 ms (not
    22.5); the traced step's 12.7 ms more is the profiler's; shares are of 57.1 ms."""
    result = timed.reconcile(TRACED, 57.1)
    assert result["step_ms"] == 57.1 and result["traced_step_ms"] == 69.8
    assert result["busy_ms"] == pytest.approx(47.3)
    assert result["profiler_ms"] == pytest.approx(12.7)
    assert "over_step_ms" not in result
    parts = result["parts"]
    assert parts["idle"] == {"ms": pytest.approx(9.8), "share": pytest.approx(9.8 / 57.1, abs=1e-4)}
    assert parts["convolutions"] == {"ms": 14.5, "share": pytest.approx(14.5 / 57.1, abs=1e-4),
                                     "tflops_per_sec": 300.0}
    assert sum(part["share"] for part in parts.values()) == pytest.approx(1.0, abs=1e-3)
    assert TRACED["parts"]["idle"]["ms"] == 22.5  # the traced breakdown is left as it was
    assert breakdown.line(result).startswith(
        "step 57.1 ms timed (traced 69.8 ms, 12.7 ms of it the profiler's): 34% elementwise "
        "and other at 900 GB/s, 25% convolutions at 300 TFLOP/s, 23% matrix products, "
        "17% idle")


def test_ops_slower_than_the_timed_step_leave_no_idle_and_say_by_how_much():
    """A CPU's sweep point: timed 98.5 ms, traced 240.1 ms with its ops busy 150 ms: no
    idle, the shares are of the 150 ms, and the line says the ops ran 51.5 ms over."""
    traced = {"step_ms": 240.1, "parts": {"convolutions": {"ms": 100.0, "share": 0.4165},
                                          "normalization": {"ms": 50.0, "share": 0.2082},
                                          "idle": {"ms": 90.1, "share": 0.3753}}}
    result = timed.reconcile(traced, 98.5)
    assert "idle" not in result["parts"]
    assert result["over_step_ms"] == pytest.approx(51.5)
    assert result["parts"]["convolutions"]["share"] == pytest.approx(100 / 150, abs=1e-4)
    assert breakdown.line(result) == (
        "step 98.5 ms timed (traced 240.1 ms, 141.6 ms of it the profiler's; its ops 51.5 "
        "ms over the timed step): 67% convolutions, 33% normalization")


def test_a_traced_step_faster_than_the_timed_one_is_given_as_a_ratio():
    result = timed.reconcile({"step_ms": 8.5, "parts": {"convolutions": {"ms": 6.0},
                                                         "idle": {"ms": 2.5}}}, 10.0)
    assert "profiler_ms" not in result and result["parts"]["idle"]["ms"] == 4.0
    assert timed.step_words(result) == "step 10.0 ms timed (traced 8.5 ms, 0.85x)"


@pytest.mark.parametrize("step", [None, 0, -3.0, float("nan"), float("inf"), "57"])
def test_without_a_timed_step_the_breakdown_is_the_traced_one(step):
    assert timed.reconcile(TRACED, step) is TRACED
    assert timed.step_words(TRACED) == "step 69.8 ms"


def test_reconciling_again_starts_from_the_traced_step():
    once = timed.reconcile(TRACED, 50.0)
    assert timed.reconcile(once, 57.1) == timed.reconcile(TRACED, 57.1)


def test_a_breakdown_without_parts_is_not_made_all_idle_by_a_timed_step():
    """Found by the report's hostile-values test: a trace of 0 ms with no kind of work,
    set against a 5 ms timed step, read '100% idle' and made a finding of it."""
    empty = {"step_ms": 0.0, "parts": {}}
    assert timed.reconcile(empty, 5.0) is empty
