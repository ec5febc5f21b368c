"""A benchmark point's machine (app/run/machine_block.py): the block a training run's
summary.json holds, with the point's own timed windows sampled from a fake NVML, and
without a sampler where there is nothing to sample; the campaign's shared block."""

import threading
import time
import types

import keras
import numpy as np

from app.run import machine_block
from app.run import provenance
from callbacks.machine_state import MachineState, nvml_sampler
from callbacks.records.state_records import machine_state
from fake_nvml import POWER_CAP, FakeNvml

GPU = types.SimpleNamespace(device_kind="NVIDIA H100 80GB HBM3", accelerator="gpu",
                            devices_per_process=1)
CPU = types.SimpleNamespace(device_kind="cpu", accelerator="cpu", devices_per_process=1)


def test_a_point_records_its_machine_through_its_timed_window():
    nvml = FakeNvml()
    read_sample, facts = nvml_sampler([0], nvml=nvml)
    meter = MachineState(read_sample, interval_seconds=0.005)

    class Throttle(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            time.sleep(0.01)
            if batch == 19:
                nvml.set(0, sm=1410, reasons=POWER_CAP)

    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    model.compile("sgd", "mse")
    model.fit(np.zeros((320, 4), "float32"), np.zeros((320, 2), "float32"), batch_size=8,
              epochs=1, verbose=0, callbacks=[meter, Throttle()])
    state = machine_block.block(GPU, "tensorflow", provenance.Sampled(meter, facts))
    assert set(state) == {"device_kind", "accelerator", "devices_per_process", "host",
                          "software", "driver", "cuda_driver", "devices", "timed_window",
                          "not_sampled"}  # a training run's block, key for key
    checked, notes = machine_state(state)
    assert notes == [] and checked["driver"] == "580.95.05"
    assert 0.3 < checked["window"][0]["throttle_share"]["sw_power_cap"] < 0.7
    assert provenance.off_lines(state)[0].startswith("the GPU was power-throttled for ")
    # its sampling thread was stopped (callbacks/sampling.py names it)
    assert not any(t.name == "machine-state" for t in threading.enumerate())


def test_a_point_with_nothing_to_sample_says_why_and_the_campaign_shares_its_facts():
    state = machine_block.block(CPU, "jax", None)
    assert state["timed_window"] is None and state["devices"] == []
    assert state["not_sampled"] == "a CPU run: no accelerator to sample"
    assert state["software"]["python"] and state["host"]["cores"] >= 1
    shared = machine_block.campaign_block(CPU, "jax")
    assert shared["timed_window"] is None
    assert shared["not_sampled"] == ("a campaign's windows are its points': each row's "
                                     "machine_state")
