"""What the run ran on and which kernels it ran (app/run/provenance.py): recorded in
summary.json, kernels.json and TensorBoard and read back through the untrusted readers
(a fake NVML whose clocks and throttle reasons are known, the H100 program's kernels);
the closing lines; and kept kernels reused by a second run, end to end in real
processes (on a CPU XLA ignores the GPU flags: the flags reach XLA_FLAGS, the file is
checked at the door, and the digests are equal)."""

import gzip
import json
import os
import shutil
import time
import types

import keras
import numpy as np

from app.engine import kernels
from app.run import provenance
from callbacks.machine_state import MachineState, nvml_sampler
from callbacks.records import events, untrusted
from callbacks.records.state_records import machine_state, read_kernels
from conftest import ROOT, SESSION_DIR
from fake_nvml import POWER_CAP, FakeNvml
from flags import Config
from processes import run

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
H100_STATE = {
    "devices": [{"index": 0, "max_sm_clock_mhz": 1980}],
    "timed_window": {"devices": [{"samples": 100, "sm_clock_mhz": {"mean": 1410.0},
                                  "throttle_share": {"sw_power_cap": 0.38, "gpu_idle": 0.5},
                                  "other_processes": []}]}}


def test_the_machine_gets_a_line_only_when_something_was_off():
    assert provenance.off_lines(H100_STATE) == [
        "the GPU was power-throttled for 38% of the timed window; its SM clock averaged "
        "1,410 of 1,980 MHz"]
    well = {"devices": [{"max_sm_clock_mhz": 1980}], "timed_window": {"devices": [
        {"sm_clock_mhz": {"mean": 1975.0}, "throttle_share": {"sw_power_cap": 0.02,
                                                              "gpu_idle": 0.9}}]}}
    assert provenance.off_lines(well) == []  # 2% capped, idle between kernels: all well
    slow = {"devices": [{"max_sm_clock_mhz": 1980}] * 2, "timed_window": {"devices": [
        {"sm_clock_mhz": {"mean": 1975.0}},
        {"sm_clock_mhz": {"mean": 1500.0}, "throttle_share": {"hw_thermal_slowdown": 0.2},
         "other_processes": [31, 32]}]}}
    assert provenance.off_lines(slow) == [
        "GPU 1 was thermally throttled for 20% of the timed window; its SM clock averaged "
        "1,500 of 1,980 MHz; 2 other processes used it during the timed window (pid 31, 32)"]
    assert provenance.off_lines(None) == [] and provenance.off_lines({}) == []


class Compiled:
    """A precompiled step as app/engine/precompile.py keeps it: the H100 program."""

    def __init__(self, text, served=False):
        self.train_step = types.SimpleNamespace(as_text=lambda: text)
        self.train_served, self.error = served, None


def context_for(logdir, **config):
    topology = types.SimpleNamespace(device_kind="NVIDIA H100 80GB HBM3", accelerator="gpu",
                                     devices_per_process=1)
    return types.SimpleNamespace(config=Config(backend="jax", logdir=logdir, **config),
                                 topology=topology, logdir=logdir, xla_autotune="full",
                                 run_dir=types.SimpleNamespace(resuming=False))


def test_the_state_and_the_kernels_are_recorded_and_read_back(tmp_path):
    """A real fit sampled from a fake NVML: its second half power-capped at 1,410 MHz;
    summary.json's blocks and kernels.json read back through the untrusted readers."""
    nvml = FakeNvml()
    read_sample, facts = nvml_sampler([0], nvml=nvml)
    meter = MachineState(read_sample, interval_seconds=0.005)

    class Throttle(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            time.sleep(0.01)
            if batch == 19:
                nvml.set(0, sm=1410, reasons=POWER_CAP)

    inputs = keras.Input((8, 8, 3))
    model = keras.Model(inputs, keras.layers.Dense(10)(keras.layers.Flatten()(inputs)))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(np.zeros((320, 8, 8, 3), "float32"), np.zeros(320, "int64"), batch_size=8,
              epochs=1, verbose=0, callbacks=[meter, Throttle()])
    with gzip.open(os.path.join(FIXTURES, "convnext_tiny_h100_after_optimizations.hlo.txt.gz"),
                   "rt") as f:
        program = f.read()
    logdir = str(tmp_path)
    blocks = provenance.fields(context_for(logdir), types.SimpleNamespace(
        compiling=Compiled(program)), types.SimpleNamespace(
        machine=provenance.Sampled(meter, facts)), write=True)
    (tmp_path / "summary.json").write_text(json.dumps({**blocks, "accelerator": "gpu"}))

    summary = untrusted.read_json(str(tmp_path / "summary.json"))
    state, notes = machine_state(summary["machine_state"])
    assert notes == [] and state["driver"] == "580.95.05" and state["cuda_driver"] == "13.0"
    assert state["devices"] == [{"name": "NVIDIA H100 80GB HBM3", "max_sm_clock_mhz": 1980,
                                 "max_memory_clock_mhz": 2619, "power_limit_watts": 700.0,
                                 "ecc": "on"}]
    (window,) = state["window"]
    share = window["throttle_share"]["sw_power_cap"]
    assert 0.3 < share < 0.7  # the window is steps 3-40 (the warm-up 2, to whole calls)
    assert window["sm_clock_mhz"] == round(1980 - 570 * share, 2) or abs(
        window["sm_clock_mhz"] - (1980 - 570 * share)) < 1
    line = provenance.closing_lines(summary)[1]
    assert line.startswith(f"machine: the GPU was power-throttled for {share:.0%} of the "
                           "timed window; its SM clock averaged ")

    recorded = read_kernels(str(tmp_path / "kernels.json"))
    found = kernels.chosen_kernels(program)
    assert recorded["digest"] == kernels.digest(found) == summary["kernels"]["digest"]
    assert len(recorded["kernels"]) == 348 and recorded["source"] in ("autotuned",
                                                                      "autotune_cache")
    assert provenance.closing_lines(summary)[0] == kernels.line(summary["kernels"])
    on_a_cpu = {"accelerator": "cpu", "kernels": {"digest": kernels.digest([]),
                                                  "source": "compiled"}}
    assert provenance.closing_lines(on_a_cpu) == []  # a CPU chooses no kernels: no line
    assert provenance.closing_lines({}) == []  # an older run's summary
    card = [value.tag for path in events.event_files(str(tmp_path / "train"))
            for event in events.read_events(path) for value in event.summary.value]
    assert card == ["machine_state"]


def test_a_later_attempt_that_ran_other_kernels_says_so(tmp_path):
    with gzip.open(os.path.join(FIXTURES, "op_zoo_h100_after_optimizations.hlo.txt.gz"),
                   "rt") as f:
        other = f.read()
    logdir = str(tmp_path)
    first = provenance.fields(context_for(logdir), types.SimpleNamespace(
        compiling=Compiled(other)), types.SimpleNamespace(), write=True)["kernels"]
    again = provenance.fields(context_for(logdir), types.SimpleNamespace(
        compiling=Compiled(other.replace('"selected_algorithm":"', '"selected_algorithm":"1'),
                           served=True)), types.SimpleNamespace(), write=True)["kernels"]
    assert again["earlier_digest"] == first["digest"] != again["digest"]
    assert "an earlier attempt of this run ran others" in kernels.line(again)
    unknown = provenance.fields(context_for(logdir), types.SimpleNamespace(
        compiling="the TensorFlow backend compiles its step inside fit"),
        types.SimpleNamespace(), write=False)["kernels"]
    assert unknown["digest"] == again["digest"] and unknown["from_file"] == "kernels.json"


def test_kept_kernels_are_loaded_by_a_later_run_and_its_digest_is_the_same(tmp_path):
    """Run A keeps its kernels (XLA's dump flag, in its folder); on a GPU XLA writes
    kernels/autotune.textproto there, here it is put there as XLA wrote it on an H100.
    Run B names them from A's folder: the load flag reaches XLA with the kept file's
    path, checked at the door, and B's kernels are A's; on this CPU nothing is loaded,
    and B says so. A file XLA could not load is one line before anything starts."""
    common = ["--backend=jax", "--dataset=synthetic", "--image_size=16",
              "--global_batch_size=8", "--epochs=1", "--steps_per_epoch=6",
              "--validation_steps=-1", "--verbose=2"]
    env = {"JAX_PLATFORMS": "cpu", "PYTHONPATH": os.path.join(ROOT, "tests", "no_tensorflow")
           + os.pathsep + ROOT,
           "JAX_COMPILATION_CACHE_DIR": os.path.join(SESSION_DIR, "provenance-xla")}
    a, b = tmp_path / "a", tmp_path / "b"
    done = run([*common, f"--logdir={a}", "--keep_kernels"], env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    first = json.loads((a / "summary.json").read_text())["kernels"]
    assert first["not_kept"] and first["kept"] is None and (a / "kernels").is_dir()
    assert first["digest"] == kernels.digest([])  # a CPU program chooses nothing
    kept_line = [line for line in done.stdout.splitlines() if line.startswith("kernels: ")]
    assert kept_line == [kernels.line(first)]
    shutil.copy(os.path.join(FIXTURES, "autotune_h100_head.textproto"), a / kernels.KEPT_FILE)

    done = run([*common, f"--logdir={b}", f"--kernels_from={a}"], env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    second = json.loads((b / "summary.json").read_text())["kernels"]
    assert second["loaded_from"] == str(a / kernels.KEPT_FILE)  # from the run's XLA_FLAGS
    assert second["digest"] == first["digest"]
    # A CPU's program chooses no GPU kernels: the file reached XLA, but nothing of it was
    # loaded, and the run says so (it read "loaded" before, though nothing was)
    assert second["source"] == "compiled" and second["not_loaded"].startswith(
        f"nothing loaded from {a / kernels.KEPT_FILE}: ")
    loaded_line = [line for line in done.stdout.splitlines() if line.startswith("kernels: ")]
    assert loaded_line == [kernels.line(second)] and "; nothing loaded from " in loaded_line[0]
    assert "loaded from" not in loaded_line[0].split(";")[0]
    assert json.loads((b / "config.json").read_text())["kernels_from"] == str(a)

    (a / kernels.KEPT_FILE).write_bytes(b"\x1f\x8b\x08\x00" + bytes(30))  # gzipped
    done = run([*common, f"--logdir={tmp_path / 'c'}", f"--kernels_from={a}"], env=env)
    assert done.returncode == 2 and not (tmp_path / "c").exists()
    assert [line for line in done.stderr.splitlines() if line.startswith("error:")] == [
        f"error: --kernels_from={a} (its {kernels.KEPT_FILE}) is neither form of an autotune results proto (as text: "
        "not UTF-8 (byte 1); as binary: byte 0: field 3, wire type 7); accepted: an XLA "
        "autotune results file (.textproto or .pb, as --xla_gpu_dump_autotune_results_to "
        "writes it) or a run folder that kept one (--keep_kernels)"]
