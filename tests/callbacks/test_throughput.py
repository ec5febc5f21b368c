"""Throughput against a second clock: which steps are timed, one window for the rate
and the step time, and the wall-clock rate with the epoch-end work included.

Each fit here stalls chosen steps or epoch ends on purpose, so that a figure timed
over the wrong steps differs from the independent clock by far more than noise.
"""

import json
import os
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from callbacks.figures.steps import Position
from callbacks.figures.window import steady_window, warmup_steps
from callbacks.throughput import Throughput
from conftest import ROOT
from tiny_keras import tiny_data, tiny_model

BATCH = 8
STALL = 0.25  # seconds


def fit(callbacks, epochs=1, steps=4, steps_per_execution=1):
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(4, 3)(inputs))
    model = keras.Model(inputs, keras.layers.Dense(10)(x))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=steps_per_execution)
    rng = np.random.default_rng(0)
    images = rng.normal(size=(BATCH * steps, 8, 8, 3)).astype("float32")
    labels = rng.integers(0, 10, BATCH * steps)
    return model.fit(images, labels, batch_size=BATCH, epochs=epochs, verbose=0,
                     shuffle=False, callbacks=callbacks).history


class SecondClock(keras.callbacks.Callback):
    """Stalls the steps named in `stall_steps` (of the first epoch) and times, on its
    own, the first epoch from the beginning of step `from_step` to its end, and the
    whole fit from there to the fit's end."""

    def __init__(self, from_step, stall_steps=(), stall_epoch_end=False):
        super().__init__()
        self.from_step, self.stall_steps = from_step, set(stall_steps)
        self.stall_epoch_end = stall_epoch_end
        self.epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.epoch == 0 and batch == self.from_step:
            self.start = time.perf_counter()
        if self.epoch == 0 and batch in self.stall_steps:
            time.sleep(STALL)

    def on_train_batch_end(self, batch, logs=None):
        if self.epoch == 0:
            self.first_epoch_end = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if self.stall_epoch_end:  # what a checkpoint or a summary writer costs
            time.sleep(STALL)

    def on_train_end(self, logs=None):
        self.end = time.perf_counter()


def test_the_window_starts_right_after_the_warmup_and_times_two_executions():
    # 4 steps, automatic warm-up: steps 0-1 are left out, steps 2 and 3 are timed.
    assert warmup_steps(4, 1) == 2
    marks = [(b, float(b)) for b in range(4)]
    assert [b for b, _ in steady_window(marks, 4, 1, first_epoch=True)] == [1, 2, 3]
    # steps_per_execution=4, 16 steps: marks at 3, 7, 11, 15; two executions timed.
    marks = [(b, float(b)) for b in (3, 7, 11, 15)]
    assert [b for b, _ in steady_window(marks, 16, 4, first_epoch=True)] == [7, 11, 15]
    # Three executions: the first is the warm-up, two are timed; two: one is timed.
    assert [b for b, _ in steady_window(marks[:3], 12, 4, first_epoch=True)] == [3, 7, 11]
    assert [b for b, _ in steady_window(marks[:2], 8, 4, first_epoch=True)] == [3, 7]
    # A requested warm-up of 16 steps starts at the end of step 15 (index).
    marks = [(b, float(b)) for b in range(3, 64, 4)]
    assert steady_window(marks, 64, 4, first_epoch=True, requested=16)[0][0] == 15
    # Later epochs: the first execution is the warm-up; the window starts at its end.
    assert steady_window(marks, 64, 4, first_epoch=False)[0][0] == 3


def test_a_four_step_epoch_times_exactly_its_last_two_steps():
    """Step 2 (the first one timed) is stalled: a window starting one execution late
    would miss the stall and report several times the second clock's rate."""
    meter, clock = Throughput(BATCH), SecondClock(from_step=2, stall_steps=[2])
    history = fit([meter, clock], steps=4)
    expected = 2 * BATCH / (clock.first_epoch_end - clock.start)
    assert history["epoch_images_per_sec"][0] == pytest.approx(expected, rel=0.05)
    assert history["epoch_step_time_ms"][0] == pytest.approx(BATCH * 1e3 / expected, rel=0.05)


def test_rate_and_step_time_of_the_run_share_one_window():
    """The first epoch is slow (a stalled step), the second fast: the run's step time
    must be the run's, not the last epoch's."""
    meter = Throughput(BATCH, warmup_steps=2)
    clock = SecondClock(from_step=2, stall_steps=[3])
    history = fit([meter, clock], epochs=2, steps=8)
    step_time = meter.step_time()["step_time_ms"]
    assert step_time == pytest.approx(BATCH * 1e3 / meter.images_per_sec, rel=1e-9)
    assert step_time > 1.2 * history["epoch_step_time_ms"][-1]  # the slow epoch counts
    first = 6 * BATCH / (clock.first_epoch_end - clock.start)
    assert history["epoch_images_per_sec"][0] == pytest.approx(first, rel=0.05)


def test_the_wall_clock_rate_includes_the_epoch_end_work():
    """Each epoch ends with a stall (a checkpoint's worth): the steady rate leaves it
    out, the wall-clock rate counts it, as a second clock does."""
    meter, clock = Throughput(BATCH, warmup_steps=2), SecondClock(2, stall_epoch_end=True)
    history = fit([meter, clock], epochs=3, steps=8)
    images = (6 + 8 + 8) * BATCH  # every step after the warm-up
    expected = images / (clock.end - clock.start)
    assert meter.images_per_sec_wall == pytest.approx(expected, rel=0.05)
    assert meter.images_per_sec > 2 * meter.images_per_sec_wall
    assert len(history["images_per_sec_wall"]) == 3
    # Epoch by epoch, the stalls of the epochs before are in; the latest is not yet.
    assert history["images_per_sec_wall"][0] > history["images_per_sec_wall"][-1]


def test_a_resumed_attempt_continues_the_run_window_from_the_checkpoint_state():
    """Attempt 1 is slow (a stalled step), attempt 2 fast: the run's rate is both
    attempts' timed images over both attempts' timed seconds, as two second clocks
    measure them, not the last attempt's; its step time is the same window's."""
    import json

    first, clock_1 = Throughput(BATCH, warmup_steps=2), SecondClock(2, stall_steps=[4])
    fit([first, clock_1], steps=8)
    state = json.loads(json.dumps(first.state()))  # as a checkpoint keeps it
    second, clock_2 = Throughput(BATCH, warmup_steps=2, carried=state), SecondClock(2)
    fit([second, clock_2], steps=8)
    seconds = (clock_1.first_epoch_end - clock_1.start) + (clock_2.first_epoch_end
                                                           - clock_2.start)
    assert second.images_per_sec == pytest.approx(2 * 6 * BATCH / seconds, rel=0.05)
    assert second.images_per_sec < 0.8 * second.epoch_images_per_sec[-1]  # not attempt 2's
    assert second.step_time()["step_time_ms"] == pytest.approx(
        BATCH * 1e3 / second.images_per_sec, rel=1e-9)


class TracedSteps(keras.callbacks.Callback):
    """Every step takes STEP seconds at least, as the second clock; steps `first` to
    `last` (1-based) are "traced": STALL more where the trace starts (before step
    `first`) and where it stops and is written (after step `last`), as the Profiler's."""

    STEP = 0.02

    def __init__(self, first, last):
        super().__init__()
        self.first, self.last = first, last

    def on_train_batch_begin(self, batch, logs=None):
        time.sleep(self.STEP + (STALL if batch + 1 == self.first else 0.0))

    def on_train_batch_end(self, batch, logs=None):
        if batch + 1 == self.last:
            time.sleep(STALL)


def test_the_steps_the_profiler_slows_are_left_out_of_the_untraced_step_time():
    """On one H100, a profiled ConvNeXt-T run timed 104.0 ms a step where its
    untraced steps ran about 80 ms, and the breakdown set against it called 26% of the
    step idle. Here the trace's start and stop cost 0.25 s each in a 16-step epoch of
    20 ms steps: the run's step time counts them (what the run did), the untraced step
    time leaves out every gap that ran a traced step or the one after, and so reads
    the 20 ms the second clock set; it is carried through a checkpoint's state."""
    meter = Throughput(Position(global_batch_size=BATCH, steps_per_epoch=16), warmup_steps=2,
                       traced=(8, 10))
    fit([meter, TracedSteps(8, 10)], steps=16)
    untraced = meter.untraced_step_time_ms
    assert meter.step_time()["step_time_ms"] > 40  # 13 timed steps, 0.5 s of stalls
    assert 1e3 * TracedSteps.STEP <= untraced < 1e3 * TracedSteps.STEP + 8, untraced
    state = json.loads(json.dumps(meter.state()))
    assert state["untraced"]["steps"] == 16 - 2 - 4  # the window less steps 8-11
    resumed = Throughput(Position(global_batch_size=BATCH, steps_per_epoch=16), carried=state,
                         traced=(8, 10))
    assert resumed.untraced_step_time_ms == untraced
    assert Throughput(BATCH, carried=state).untraced_step_time_ms is None  # not profiled


@pytest.mark.parametrize("make, message", [
    (lambda: Throughput(0), "global_batch_size must be >= 1, received 0"),
    (lambda: Throughput(8, num_devices=0), "num_devices must be >= 1, received 0"),
])
def test_throughput_arguments_are_checked_with_the_value_received(make, message):
    with pytest.raises(ValueError) as error:
        make()
    assert message in str(error.value)


def test_throughput_counts_images_from_step_indices_with_steps_per_execution():
    x, y = tiny_data(256)
    model = tiny_model(steps_per_execution=4)
    meter = Throughput(8, num_devices=2, warmup_steps=8)
    history = model.fit(x, y, batch_size=8, epochs=2, callbacks=[meter], verbose=0)
    # 32 steps an epoch, hooks fire every 4 steps: marks at steps 3, 7, ..., 31.
    assert meter.images_per_sec > 0
    assert len(meter.epoch_images_per_sec) == 2
    logs = history.history
    assert logs["epoch_images_per_sec_per_device"][-1] == pytest.approx(
        logs["epoch_images_per_sec"][-1] / 2)
    # Step times are per step, not per execution: 4 steps per gap.
    assert logs["epoch_step_time_ms"][-1] == pytest.approx(
        8 * 1e3 / logs["epoch_images_per_sec"][-1])
    assert meter.step_time()["step_time_ms"] == pytest.approx(8 * 1e3 / meter.images_per_sec)
    assert logs["epoch_step_time_jitter"][-1] >= 0
    # The first epoch times 24 steps after its warm-up (marks 7..31), the second 28.
    assert logs["epoch_timed_steps"] == [24, 28]


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_throughput_matches_an_independent_timing_of_the_same_fit(backend):
    """steps_per_execution=4: our figure vs a naive timer of the same steps (see
    tests/throughput_check.py), within 5%, in a fresh process per backend."""
    script = os.path.join(ROOT, "tests", "throughput_check.py")
    done = subprocess.run([sys.executable, script, backend], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["backend"] == backend
    assert sorted(result["ratios"])[1] == pytest.approx(1.0, abs=0.05), result


def test_throughput_is_async_safe_and_eval_speed_is_separate():
    assert Throughput.async_safe is True
    x, y = tiny_data(64)
    model = tiny_model()
    meter = Throughput(8, validation_images=64)
    history = model.fit(x, y, batch_size=8, epochs=2, validation_data=(x, y), callbacks=[meter],
                        verbose=0)
    # Each epoch's evaluation pass, and the run's: both passes' images over their seconds.
    first, second = history.history["epoch_eval_images_per_sec"]
    assert meter.eval_images_per_sec == pytest.approx(128 / (64 / first + 64 / second))
    assert "images_per_sec" not in history.history  # the name of the run's figure only
