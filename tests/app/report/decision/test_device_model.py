"""The device model (app/report/decision/device_model.py), its arithmetic by hand on a fixture
breakdown and table: a compute-bound kind (matrix products) and a memory-bound kind
(elementwise), predicted on a device with twice the run's bandwidth and the same peak.

The run: 100 images a step on "Slow Y" (100 TFLOP/s peak, 1,000 GB/s), its matrix products
40 ms at 50 TFLOP/s (2e12 FLOPs a step: 2e10 an image, 50% of the peak), its elementwise
work 60 ms at 800 GB/s (4.8e10 bytes a step: 4.8e8 an image, 80% of the bandwidth), 5 ms
idle: a step of 105 ms. The target "Twice": 100 TFLOP/s, 2,000 GB/s.
"""

import pytest

from app.report.decision import device_model
from app.report.decision.device_rates import Rate

SLOW = device_model.Device("Slow Y", "^Slow Y$", 100.0, 1000.0, 16.0)
TWICE = device_model.Device("Twice", "^Twice$", 100.0, 2000.0, 16.0)
CPU = device_model.Device("cpu", "^cpu$", None, None)
BREAKDOWN = {"parts": {"matrix products": {"ms": 40.0, "tflops_per_sec": 50.0},
                       "elementwise and other": {"ms": 60.0, "gb_per_sec": 800.0},
                       "idle": {"ms": 5.0}}}
SOURCE = "benchmarks/results/2026-12-06-h100-models-call5.json"


def rate(device, kind, family, measure, value):
    return Rate(device, device, kind, family, measure, value, SOURCE)


def test_the_work_an_image_by_hand():
    work = device_model.work_per_image(BREAKDOWN, 100, 100, SLOW)
    assert work["flops"] == {"matrix products": pytest.approx(2e10)}
    assert work["bytes"] == {"elementwise and other": pytest.approx(4.8e8)}
    assert work["shares"] == {"matrix products": 0.5, "elementwise and other": 0.8}
    assert work["carried_ms"] == {"idle": 5.0}


def test_twice_the_bandwidth_halves_the_memory_bound_kind_only():
    """The run's own shares carried (no row of "Twice" for this family, no family
    measured on both): matrix products 2e12 / (0.5 x 100 TFLOP/s) = 40 ms as before;
    elementwise 4.8e10 / (0.8 x 2,000 GB/s) = 30 ms, half its 60; idle 5 ms as measured."""
    rates = [rate("Twice", "matrix products", "other", "peak", 0.9)]  # another family's
    work = device_model.work_per_image(BREAKDOWN, 100, 100, SLOW)
    step = device_model.predict_step(work, TWICE, rates, "mine", {})
    assert step["terms"]["matrix products"]["ms"] == pytest.approx(40.0)
    assert step["terms"]["elementwise and other"]["ms"] == pytest.approx(30.0)
    assert step["step_ms"] == pytest.approx(75.0)
    assert step["images_per_sec"] == pytest.approx(100 / 0.075)
    assert step["terms"]["elementwise and other"]["from"] == "the run's own share, carried"


def test_a_memory_share_moves_as_other_families_moved_and_a_family_row_wins():
    """Another family ran its elementwise work at 60% of Twice's bandwidth and 80% of Slow
    Y's: the run's 80% becomes 80% x 0.75 = 60%: 4.8e10 / 1.2e12 = 40 ms. A row of the job's
    own family on Twice (50% of its peak... 25%) is taken as it is: 2e12 / 25e12 = 80 ms."""
    rates = [rate("Twice", "elementwise and other", "other", "bandwidth", 0.6),
             rate("Slow Y", "elementwise and other", "other", "bandwidth", 0.8),
             rate("Twice", "matrix products", "mine", "peak", 0.25)]
    work = device_model.work_per_image(BREAKDOWN, 100, 100, SLOW)
    step = device_model.predict_step(work, TWICE, rates, "mine", {})
    assert step["terms"]["elementwise and other"]["ms"] == pytest.approx(40.0)
    assert step["terms"]["matrix products"]["ms"] == pytest.approx(80.0)
    assert step["terms"]["matrix products"]["from"] == f"mine measured on Twice, {SOURCE}"


def test_from_a_cpu_the_tables_shares_and_bytes_ratio():
    """A CPU run's shares say nothing of a GPU's: Twice's own (50%, 80%) are taken, its
    idle is not carried, and its bytes are set to an accelerator's by the cpu_bytes ratio
    (0.5): matrix products 40 ms; elementwise 2.4e10 / (0.8 x 2,000 GB/s) = 15 ms."""
    rates = [rate("Twice", "matrix products", "other", "peak", 0.5),
             rate("Twice", "elementwise and other", "other", "bandwidth", 0.8),
             Rate("cpu", "cpu", "elementwise and other", "other", "cpu_bytes", 0.5, SOURCE)]
    work = device_model.work_per_image(BREAKDOWN, 100, 100, CPU)
    step = device_model.predict_step(work, TWICE, rates, "mine", {})
    assert work["carried_ms"] == {} and step["step_ms"] == pytest.approx(55.0)
    assert step["images_per_sec"] == pytest.approx(100 / 0.055)
    assert "Twice's median over other" in step["terms"]["matrix products"]["from"]


def test_flops_over_the_mfu_count_are_cut_to_it():
    """A CPU compiler's convolutions counted 4x the MFU count's: the MFU count is taken."""
    breakdown = {"parts": {"convolutions": {"ms": 10.0, "tflops_per_sec": 4.0},
                           "matrix products": {"ms": 10.0, "tflops_per_sec": 1.0}}}
    work = device_model.work_per_image(breakdown, 100, 100, CPU, mfu_flops_per_image=2e8)
    assert work["flops"]["matrix products"] == pytest.approx(1e8)
    assert work["flops"]["convolutions"] == pytest.approx(1e8)  # 4e8 counted, 2e8 - 1e8
    assert "cut to the MFU count" in work["notes"][0]


def test_a_breakdown_without_work_and_hostile_figures():
    tensorflow = {"parts": {"convolutions": {"ms": 50.0, "no_rate": "TensorFlow's own ops"}}}
    with pytest.raises(device_model.WorkError, match="profile the job with --backend=jax"):
        device_model.work_per_image(tensorflow, 64, 64, CPU)
    hostile = {"parts": {"matrix products": {"ms": 1e300, "tflops_per_sec": 1e300},
                         "normalization": {"ms": 10.0, "gb_per_sec": "fast"}}}
    with pytest.raises(device_model.WorkError):
        device_model.work_per_image(hostile, 64, 64, SLOW)


def test_what_does_not_fit_says_why():
    """3 float32 copies of 1e9 weights (12e9 bytes) and 100 images of 1e7: 13e9 bytes,
    12.1 GiB, more than 10 GiB; within 16 GiB."""
    small = device_model.Device("S", "^S$", 1.0, 1.0, 10.0)
    assert device_model.fits(small, 10**9, 10**7, 100) == (
        False, "its step keeps at least 12.1 GiB (100 images a device), the device holds 10 GiB")
    assert device_model.fits(TWICE, 10**9, 10**7, 100)[0] is True
    assert device_model.fits(CPU, 10**9, None, 100) == (None, "its memory is not known")
