"""The energy meter with injected readers (no GPU here): an energy counter, and the
power-sample fallback, both over the throughput's window and never through
evaluation or the warm-up."""

import os
import threading
import time

import keras
import numpy as np
import pytest

from callbacks.energy import (
    EnergyMeter,
    nvml_energy_reader,
    nvml_power_reader,
    visible_gpu_indices,
)
from callbacks.figures.steps import Position


class FakeBoard:
    """A board whose power the test sets; `joules()` is its energy counter (the
    integral of that power), `watts()` its power meter."""

    def __init__(self, watts):
        self._watts, self._joules, self._since = watts, 0.0, time.perf_counter()
        self._lock = threading.Lock()

    def _advance(self):
        now = time.perf_counter()
        self._joules += self._watts * (now - self._since)
        self._since = now

    def set(self, watts):
        with self._lock:
            self._advance()
            self._watts = watts

    def joules(self):
        with self._lock:
            self._advance()
            return self._joules

    def watts(self):
        return self._watts


def drive(meter, board, steps=10, warmup=2, step_seconds=0.02):
    """One epoch by hand: warm-up at 100 W, timed steps at 500 W, then an
    evaluation at 50 W before the epoch ends."""
    meter.set_params({"steps": steps})
    meter.on_train_begin()
    meter.on_epoch_begin(0)
    for batch in range(steps):
        time.sleep(step_seconds)
        meter.on_train_batch_end(batch)
        if batch == warmup - 1:
            board.set(500.0)  # the window starts at this mark
    board.set(50.0)  # evaluation
    time.sleep(0.3)
    logs = {}
    meter.on_epoch_end(0, logs)
    meter.on_train_end()
    return logs


def test_the_energy_counter_is_differenced_over_exactly_the_timed_steps():
    board = FakeBoard(100.0)
    meter = EnergyMeter(read_energy=board.joules, warmup_steps=2,
                        position=Position(global_batch_size=32, steps_per_epoch=100))
    logs = drive(meter, board)
    assert meter.method == "energy_counter"
    assert logs["epoch_power_watts"] == pytest.approx(500.0, rel=0.01)
    window = meter.windows[0]
    assert window["images"] == 8 * 32  # steps 2..9
    seconds = window["end_unix"] - window["start_unix"]
    assert window["joules"] == pytest.approx(500.0 * seconds, rel=0.01)
    assert logs["epoch_joules_per_image"] == pytest.approx(window["joules"] / 256)
    assert logs["epoch_kwh"] == pytest.approx(logs["epoch_joules_per_image"] * 3200 / 3.6e6)
    assert meter.power_watts == pytest.approx(logs["epoch_power_watts"])  # one epoch: the run


def test_a_resumed_meter_adds_its_windows_to_the_checkpoint_state():
    """Attempt 1 at 500 W, attempt 2 at 200 W over as many steps: the run's power is
    both windows' joules over their seconds, and both windows are listed."""
    board = FakeBoard(100.0)
    first = EnergyMeter(read_energy=board.joules, position=32, warmup_steps=2)
    drive(first, board)
    board.set(100.0)
    second = EnergyMeter(read_energy=lambda: board.joules() * 0.4, position=32,
                         warmup_steps=2, carried=first.state())
    drive(second, board)
    (one,), (_, two) = first.windows, second.windows
    seconds = [w["end_unix"] - w["start_unix"] for w in (one, two)]
    assert 150 < two["joules"] / seconds[1] < 250 < 450 < one["joules"] / seconds[0]
    # The windows' seconds by hand come from their unix stamps, each good to 2.4e-7 s at
    # today's 1.8e9 (a float's step there): 1.1e-6 of these 0.3 s once, past approx's 1e-6.
    assert second.power_watts == pytest.approx((one["joules"] + two["joules"]) / sum(seconds),
                                               rel=1e-5)
    assert second.joules_per_image == pytest.approx((one["joules"] + two["joules"]) / 512)


def test_power_samples_are_the_fallback_and_leave_out_the_evaluation():
    board = FakeBoard(100.0)
    meter = EnergyMeter(read_power=board.watts, position=32, interval_seconds=0.005,
                        warmup_steps=2)
    logs = drive(meter, board)
    assert meter.method == "power_samples"
    assert logs["epoch_power_watts"] == pytest.approx(500.0, rel=0.05)  # not the eval's 50 W


def test_in_a_real_fit_the_window_ends_before_evaluation_begins():
    events = {}

    class Evaluation(keras.callbacks.Callback):
        def on_test_begin(self, logs=None):
            events.setdefault("evaluation_unix", time.time())

    board = FakeBoard(300.0)
    meter = EnergyMeter(read_energy=board.joules, position=8)
    inputs = keras.Input((8, 8, 3))
    model = keras.Model(inputs, keras.layers.Dense(10)(keras.layers.Flatten()(inputs)))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.zeros((64, 8, 8, 3), "float32")
    y = np.zeros(64, "int64")
    started = time.time()
    history = model.fit(x, y, batch_size=8, epochs=2, validation_data=(x, y), verbose=0,
                        callbacks=[meter, Evaluation()])
    first = meter.windows[0]
    assert started < first["start_unix"] < first["end_unix"] <= events["evaluation_unix"]
    assert [w["images"] for w in meter.windows] == [6 * 8, 7 * 8]  # after 2, then 1, steps
    assert history.history["epoch_power_watts"][0] == pytest.approx(300.0, rel=0.02)


def test_energy_needs_a_reader_and_nvml_absence_means_no_figures():
    with pytest.raises(ValueError, match="read_energy or read_power must be a callable"):
        EnergyMeter()
    for reader in (nvml_energy_reader([0]), nvml_power_reader([0])):
        assert reader is None or callable(reader)
    os.environ["CUDA_VISIBLE_DEVICES"] = "3,1"
    try:
        assert visible_gpu_indices(2) == [3, 1]
    finally:
        del os.environ["CUDA_VISIBLE_DEVICES"]
    assert visible_gpu_indices(2) == [0, 1]
