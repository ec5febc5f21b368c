"""Step marks that arrive out of order (on JAX, batch hooks run in worker threads):
the per-step times come from the marks ordered by step and are never negative, and
each window's total seconds are what its marks span.

A sweep window on JAX (`timed_steps: 16`) listed step times of -0.17, -30.97 and
-3.16 ms: the marks were sorted by step, each keeping the time its hook ran, so a
step whose hook ran late carried a later time than the steps after it.
"""

import json
import os
import subprocess
import sys
import time

import pytest

from callbacks.energy import EnergyMeter
from callbacks.figures.window import steady_window
from callbacks.throughput import Throughput
from conftest import ROOT

STEP = 0.02  # seconds a step takes, on the test's own clock


def gaps_of(window):
    return [(b1 - b0, t1 - t0) for (b0, t0, *_), (b1, t1, *_) in zip(window, window[1:])]


def test_a_late_mark_moves_no_step_time_below_zero_and_keeps_the_window_total():
    # Steps 0-7 end 1 s apart; step 5's hook runs after step 7's (at 7.5 s).
    marks = [(0, 0.0), (1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0), (6, 6.0), (7, 7.0), (5, 7.5)]
    window = steady_window(marks, 8, 1, first_epoch=True, requested=2)
    assert [b for b, *_ in window] == [1, 2, 3, 4, 5, 6, 7]
    gaps = gaps_of(window)
    assert min(seconds for _, seconds in gaps) >= 0, gaps
    assert sum(seconds for _, seconds in gaps) == pytest.approx(7.5 - 1.0)
    # The k-th earliest time belongs to the k-th step: step 5 ends at 6.0, 6 at 7.0.
    assert [t for _, t in window] == [1.0, 2.0, 3.0, 4.0, 6.0, 7.0, 7.5]


def test_a_late_mark_keeps_its_readings_with_its_time():
    """A mark's readings (an energy counter read with the clock) go with its time."""
    marks = [(0, 0.0, 0.0), (1, 1.0, 10.0), (3, 3.0, 30.0), (2, 3.5, 35.0)]
    window = steady_window(marks, 4, 1, first_epoch=False)
    assert window == [(0, 0.0, 0.0), (1, 1.0, 10.0), (2, 3.0, 30.0), (3, 3.5, 35.0)]


def drive(meter, steps=10, late=5, held_until=7, warmup=2):
    """One epoch by hand, a step every STEP seconds; the hook of step `late` is held
    until after that of step `held_until`. Returns the test's own clock: when each
    hook was called, {step: perf_counter() just before its hook}."""
    meter.set_params({"steps": steps})
    meter.on_train_begin()
    meter.on_epoch_begin(0)
    called = {}
    for batch in range(steps):
        time.sleep(STEP)
        if batch != late:
            called[batch] = time.perf_counter()
            meter.on_train_batch_end(batch, {})
        if batch == held_until:
            called[late] = time.perf_counter()
            meter.on_train_batch_end(late, {})
    logs = {}
    meter.on_epoch_end(0, logs)
    meter.on_train_end()
    return called, logs


def test_the_throughput_meter_driven_by_hand_with_a_late_hook():
    meter = Throughput(8, warmup_steps=2)
    called, logs = drive(meter)
    seconds = [s for _, s in meter.last_window_gaps]
    assert min(seconds) >= 0, meter.last_window_gaps
    # The window spans the warm-up's last mark (step 1) to the last hook, on the
    # test's clock; its rate and step time are that span's.
    span = called[9] - called[1]
    assert sum(seconds) == pytest.approx(span, abs=2e-3)
    assert logs["epoch_timed_steps"] == 8
    assert logs["epoch_step_time_ms"] == pytest.approx(span / 8 * 1e3, rel=0.02)
    # Step 5 ends by step 6's hook, 2 steps after step 4's (sorted by step with
    # their own times, step 5 read 3 steps and step 6 minus 1).
    assert max(seconds) < 2 * STEP + 5e-3, seconds
    # Gap by gap, the test's clock: the k-th earliest hook call ends the k-th step.
    times = sorted(called.values())[1:]
    expected = [t1 - t0 for t0, t1 in zip(times, times[1:])]
    assert seconds == pytest.approx(expected, abs=2e-3)


def test_the_energy_meter_with_the_window_start_mark_late():
    """The hook of step 1 (the warm-up's last, where the window starts) runs after
    step 3's: the window starts at the second earliest time, as the throughput's."""
    def read_energy():  # 100 W, as a counter
        return 100.0 * time.perf_counter()

    meter = EnergyMeter(read_energy=read_energy, position=8, warmup_steps=2)
    called, logs = drive(meter, late=1, held_until=3)
    (window,) = meter.windows
    span = called[9] - called[2]  # step 1 ended by the second hook, step 9 by the last
    assert window["end_unix"] - window["start_unix"] == pytest.approx(span, abs=2e-3)
    assert window["images"] == 8 * 8  # steps 2-9
    assert logs["epoch_joules_per_image"] == pytest.approx(100.0 * span / 64, rel=0.03)


def test_a_real_jax_fit_whose_hooks_run_out_of_order():
    """A fit on JAX with every callback async_safe and step 8's hook held 0.15 s
    (tests/late_hooks_check.py): the meter's hooks really ran out of order, and its
    step series has no negative time, sums to its step time, and fits inside a second
    clock of the same steps."""
    script = os.path.join(ROOT, "tests", "late_hooks_check.py")
    done = subprocess.run([sys.executable, script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["order"] != sorted(result["order"]), result["order"]  # really late
    seconds = [s for _, s in result["gaps"]]
    assert min(seconds) >= 0, result["gaps"]
    assert result["timed_steps"] == 36 == sum(n for n, _ in result["gaps"])
    assert sum(seconds) == pytest.approx(result["step_time_ms"] * 36 / 1e3, rel=1e-6)
    assert 35 * 0.01 <= sum(seconds) <= result["clock_seconds"] + 0.05, result
