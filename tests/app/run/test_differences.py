"""The report names what differed between two runs of the same model and settings whose
speeds differ (app/run/differences.py): two real runs, then one's records rewritten
through the app's own writers as another machine would have written them (another
driver, a GPU power-capped through its timed window, one convolution's kernel
another), and the report of them, made as a user makes it."""

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
import types

import keras
import numpy as np
import pytest

from app.engine import kernels
from app.run import differences, provenance
from callbacks.machine_state import MachineState, nvml_sampler
from callbacks.records import durable
from conftest import ROOT, SESSION_DIR
from fake_nvml import POWER_CAP, FakeNvml
from processes import run
from test_provenance import Compiled, context_for

CONV_5 = ('"algorithm":{"algo_id":"5","is_cudnn_frontend":false,"math_type":"DEFAULT_MATH",'
          '"tuning_knobs":{},"workspace_size":"0"}')
CONV_22 = ('"algorithm":{"algo_id":"22","is_cudnn_frontend":false,"math_type":"DEFAULT_MATH",'
           '"tuning_knobs":{"2":"5"},"workspace_size":"616863760"}')


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two runs of one command (JAX, synthetic data), in folders a and b."""
    folder = tmp_path_factory.mktemp("differences")
    env = {"JAX_PLATFORMS": "cpu", "PYTHONPATH": os.path.join(ROOT, "tests", "no_tensorflow")
           + os.pathsep + ROOT,
           "JAX_COMPILATION_CACHE_DIR": os.path.join(SESSION_DIR, "differences-xla")}
    for name in ("a", "b"):
        done = run(["--backend=jax", "--dataset=synthetic", "--image_size=16",
                    "--global_batch_size=8", "--epochs=1", "--steps_per_epoch=6",
                    "--validation_steps=-1", "--verbose=0", "--seed=1",
                    f"--logdir={folder / name}"], env=env)
        assert done.returncode == 0, done.stderr[-3000:]
    return folder


def sampled(throttled: bool):
    """A MachineState sampled from a fake H100 through a real fit: power-capped at
    1,410 MHz from its 6th step on where `throttled`."""
    nvml = FakeNvml(driver="570.86.10" if throttled else "580.95.05")
    read_sample, facts = nvml_sampler([0], nvml=nvml)
    meter = MachineState(read_sample, interval_seconds=0.005)

    class Throttle(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            time.sleep(0.01)
            if throttled and batch == 5:
                nvml.set(0, sm=1410, reasons=POWER_CAP)

    inputs = keras.Input((4, 4, 3))
    model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Flatten()(inputs)))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(np.zeros((160, 4, 4, 3), "float32"), np.zeros(160, "int64"), batch_size=8,
              verbose=0, callbacks=[meter, Throttle()])
    return provenance.Sampled(meter, facts)


def as_on_a_gpu(folder, program: str, throttled: bool, images_per_sec: float) -> None:
    """Rewrites a run's records as an H100 machine would have written them: its
    kernels (kernels.json and the summary's block, through provenance.fields), its
    machine state, its rate; summary.json through the app's atomic writer."""
    summary = json.loads((folder / "summary.json").read_text())
    blocks = provenance.fields(context_for(str(folder)), types.SimpleNamespace(
        compiling=Compiled(program)), types.SimpleNamespace(machine=sampled(throttled)),
        write=True)
    durable.write_json_atomic(str(folder / "summary.json"), {
        **summary, **blocks, "images_per_sec": images_per_sec})


def report(tmp_path, *folders) -> str:
    out = tmp_path / "report"
    done = subprocess.run([sys.executable, os.path.join(ROOT, "app", "report.py"),
                           *map(str, folders), "--out", str(out)], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return (out / "report.md").read_text(), json.loads((out / "report.json").read_text())


def test_the_report_names_what_differed(two_runs, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(two_runs / "a", a)
    shutil.copytree(two_runs / "b", b)
    with gzip.open(os.path.join(ROOT, "tests", "fixtures",
                                "convnext_tiny_h100_after_optimizations.hlo.txt.gz"), "rt") as f:
        program = f.read()
    assert program.count(CONV_5) > 1
    as_on_a_gpu(a, program.replace(CONV_5, CONV_22, 1), throttled=False, images_per_sec=4440.0)
    as_on_a_gpu(b, program, throttled=True, images_per_sec=3290.0)
    recorded = [json.loads((f / "summary.json").read_text()) for f in (a, b)]
    share = recorded[1]["machine_state"]["timed_window"]["devices"][0]["throttle_share"][
        "sw_power_cap"]
    clocks = [r["machine_state"]["timed_window"]["devices"][0]["sm_clock_mhz"]["mean"]
              for r in recorded]
    digests = [r["kernels"]["digest"][:12] for r in recorded]

    text, content = report(tmp_path, a, b)
    (pair,) = content["differences"]
    assert pair["differs"] == [
        ["NVIDIA driver", "580.95.05", "570.86.10"],
        ["kernels", digests[0], f"{digests[1]} (1 of 348 differ)"],
        ["power-throttled in the timed window", "0%", f"{share:.0%}"],
        ["SM clock's mean in the timed window", f"{clocks[0]:,.0f} MHz",
         f"{clocks[1]:,.0f} MHz"]]
    expected = (f"a (4,440 images/sec) and b (3,290, 1.35x) ran the same model and settings; "
                f"they differ in NVIDIA driver (580.95.05 against 570.86.10); kernels "
                f"({digests[0]} against {digests[1]} (1 of 348 differ)); power-throttled in "
                f"the timed window (0% against {share:.0%}); SM clock's mean in the timed "
                f"window ({clocks[0]:,.0f} MHz against {clocks[1]:,.0f} MHz).")
    assert f"- {expected}" in text.splitlines()


def test_a_pair_whose_records_are_alike_is_said_to_be_alike_and_a_close_pair_is_not_named(
        two_runs, tmp_path):
    a, c = tmp_path / "a", tmp_path / "c"
    shutil.copytree(two_runs / "a", a)
    shutil.copytree(two_runs / "a", c)
    summary = json.loads((a / "summary.json").read_text())
    durable.write_json_atomic(str(c / "summary.json"), {
        **summary, "images_per_sec": summary["images_per_sec"] * 1.2})
    _, content = report(tmp_path, a, c)
    (pair,) = content["differences"]
    assert pair["differs"] == [] and "nothing their records hold differs" in \
        differences.line(pair)
    durable.write_json_atomic(str(c / "summary.json"), {
        **summary, "images_per_sec": summary["images_per_sec"] * 1.04})  # within 5%
    assert report(tmp_path, a, c)[1]["differences"] == []


def test_hostile_records_are_left_out_not_named(two_runs, tmp_path):
    a = tmp_path / "a"
    shutil.copytree(two_runs / "a", a)
    summary = json.loads((a / "summary.json").read_text())
    summary["machine_state"] = {"driver": ["not", "text"], "software": {"jax": {"x": 1}},
                                "timed_window": {"devices": [{"sm_clock_mhz": {"mean": "hot"}}]}}
    summary["kernels"] = {"digest": "<script>", "source": "autotuned"}
    (a / "summary.json").write_text(json.dumps(summary))
    (a / "kernels.json").write_text("{not json")
    read = differences.read(str(a))
    assert read["kernels"] is None and read["kernel_list"] is None
    assert "driver" not in read["state"] and read["state"]["window"] == [{}]
    assert differences.differences(read, differences.read(str(two_runs / "b"))) == []


def test_the_report_imports_no_framework():
    """The report reads records: what it imports to name a difference loads no Keras,
    TensorFlow or JAX (seconds each, and absent from some hosts)."""
    done = subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['x']; "
                           "import app.report; print(sorted(m for m in ('keras', 'tensorflow', "
                           "'jax') if m in sys.modules))"], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-2000:]
