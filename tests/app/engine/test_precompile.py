"""app/engine/precompile.py: on JAX the training and evaluation steps compile in
threads while the run starts, and `fit` compiles neither of them itself: it is handed
the thread's programs, or (the cut off) finds them in the compilation cache. Watched
through JAX's own compile events, in a real run of the app (digits, the device
pipeline, TensorFlow unimportable)."""

import json
import os

import pytest

from conftest import ROOT, SESSION_DIR, run_python

NO_TF = os.path.join(ROOT, "tests", "no_tensorflow")

# Runs app/main.py in this process, recording each XLA compile of a training or
# evaluation step: the thread it ran in and whether the compilation cache served it.
WATCHED_RUN = """
import json, runpy, sys, threading
from jax._src import monitoring

events, served = [], set()

def on_event(event, **kwargs):
    if event == "/jax/compilation_cache/cache_hits":
        served.add(threading.current_thread().name)

def on_duration(event, seconds, **kwargs):
    name = kwargs.get("fun_name", "")
    thread = threading.current_thread().name
    if event == "/jax/core/compile/backend_compile_duration" and name.endswith("_step)"):
        events.append({"step": name, "thread": thread, "cached": thread in served})
    if event == "/jax/core/compile/backend_compile_duration":
        served.discard(thread)

monitoring.register_event_listener(on_event)
monitoring.register_event_duration_secs_listener(on_duration)

def report():
    print(json.dumps(events))

import atexit
atexit.register(report)
sys.argv = ["app/main.py"] + sys.argv[1:]
runpy.run_path("app/main.py", run_name="__main__")
"""


def watched_run(tmp_path, cache: str, devices: int = 1, cuts: str = "",
                data=None) -> tuple[list, dict]:
    """(the step compiles seen, summary.json) of a short digits run on JAX (`data`: other
    data flags in place of the digits'; `cuts`: BENCH_STARTUP_CUTS)."""
    import subprocess
    import sys

    logdir = tmp_path / "run"
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": NO_TF, "JAX_COMPILATION_CACHE_DIR": cache, "BENCH_STARTUP_CUTS": cuts,
           # the watcher imports JAX before the app could ask for the host's devices
           "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    done = subprocess.run(
        [sys.executable, "-c", WATCHED_RUN, "--backend=jax", *(data or [
            "--input_pipeline=device",
            f"--data_dir={os.path.join(SESSION_DIR, 'precompile-digits')}"]), "--image_size=8",
         "--epochs=2", "--steps_per_epoch=4", "--verbose=0", f"--logdir={logdir}",
         f"--num_devices={devices}"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    events = json.loads(done.stdout.strip().splitlines()[-1])
    return events, json.loads((logdir / "summary.json").read_text())


@pytest.fixture(scope="module", autouse=True)
def digits_pngs():
    from preprocessing.datasets import digits

    folder = os.path.join(SESSION_DIR, "precompile-digits")
    if not os.path.isdir(folder):
        digits.write_pngs(digits.root(folder))


@pytest.mark.slow
@pytest.mark.parametrize("devices", [1, 2])
def test_fit_is_handed_both_steps_compiled_beside_the_start(tmp_path, devices):
    """Each step is compiled once, in a thread of its own, from an empty cache, and fit
    (the main thread) neither traces, lowers nor looks up either: it is handed them (cut
    fit_takes_compiled_steps). Two devices: keras.distribution's layouts too."""
    events, summary = watched_run(tmp_path, str(tmp_path / "xla"), devices)
    assert summary["status"] == "completed" and summary["num_replicas"] == devices
    assert sorted((e["step"], e["thread"], e["cached"]) for e in events) == [
        ("jit(test_step)", "precompile-test", False),
        ("jit(train_step)", "precompile-steps", False)], events
    programs = {p["program"]: p for p in summary["startup"]["programs"]}
    assert programs["train_step"]["traces"] == programs["test_step"]["traces"] == 1
    assert summary["startup"]["cuts"]["fit_takes_compiled_steps"] is True


@pytest.mark.slow
def test_without_the_hand_over_fit_finds_both_steps_in_the_cache(tmp_path):
    """The cut off: the thread compiles each step once, in turn; fit asks for both and
    the compilation cache serves them (keras.distribution's layouts: with two devices)."""
    events, summary = watched_run(tmp_path, str(tmp_path / "xla"), devices=2,
                                  cuts="-fit_takes_compiled_steps,-steps_side_by_side")
    assert summary["status"] == "completed" and summary["num_replicas"] == 2
    compiled = [(e["step"], e["thread"]) for e in events if not e["cached"]]
    assert compiled == [("jit(train_step)", "precompile-steps"),
                        ("jit(test_step)", "precompile-steps")], events
    in_fit = {e["step"] for e in events if e["thread"] == "MainThread"}
    assert in_fit == {"jit(train_step)", "jit(test_step)"}, events  # fit asked, and was served
    assert all(e["cached"] for e in events if e["thread"] == "MainThread"), events


@pytest.mark.slow
def test_synthetic_data_precompiles_too_and_its_kernels_are_read(tmp_path):
    """Synthetic data (the models recipe's) knows its batches' shapes: its steps compile
    in the thread and fit is served; the summary names the kernels of that program
    (a CPU's: none, the digest of an empty list) and that XLA compiled it here."""
    from app.engine import kernels

    events, summary = watched_run(tmp_path, str(tmp_path / "xla"),
                                  data=["--dataset=synthetic", "--validation_steps=2"])
    compiled = sorted((e["step"], e["thread"]) for e in events if not e["cached"])
    assert compiled == [("jit(test_step)", "precompile-test"),
                        ("jit(train_step)", "precompile-steps")], events
    assert not [e for e in events if e["thread"] == "MainThread"], events  # handed over
    assert summary["kernels"]["digest"] == kernels.digest([])
    assert summary["kernels"]["source"] == "compiled"
    again = watched_run(tmp_path / "again", str(tmp_path / "xla"),
                        data=["--dataset=synthetic", "--validation_steps=2"])[1]
    assert again["kernels"]["source"] == "jax_cache"  # the first run's programs
    assert again["kernels"]["digest"] == summary["kernels"]["digest"]


def test_without_a_compilation_cache_the_steps_are_still_compiled_once(tmp_path):
    """No cache: handed over, the thread's programs still serve fit; without the hand
    over nothing could give them to fit, so fit compiles, alone."""
    events, summary = watched_run(tmp_path, "")
    assert summary["status"] == "completed"
    assert summary["kernels"]["source"] == "compiled"  # the thread's program, read
    assert sorted((e["step"], e["thread"], e["cached"]) for e in events) == [
        ("jit(test_step)", "precompile-test", False),
        ("jit(train_step)", "precompile-steps", False)], events
    events, summary = watched_run(tmp_path / "off", "", cuts="-fit_takes_compiled_steps")
    assert [(e["step"], e["thread"], e["cached"]) for e in events] == [
        ("jit(train_step)", "MainThread", False), ("jit(test_step)", "MainThread", False)]


HANDED = """
import json, os
import numpy as np, keras, jax
from app.engine import precompile
from app.engine.distribute import Topology

model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
model.compile(optimizer="sgd", loss="mse", jit_compile=True)
spec = (jax.ShapeDtypeStruct((4, 3), "float32"), jax.ShapeDtypeStruct((4, 2), "float32"))
topology = Topology("jax", "cpu", 1, 0, 1, "cpu")
compiling = precompile.start(model, (spec, None), topology, hand_to_fit=True)
compiling.join()
assert compiling.hand_to(model) == ["train"]
function = model.train_function
x, y = np.ones((10, 3), "float32"), np.zeros((10, 2), "float32")
history = model.fit(x, y, batch_size=4, epochs=2, verbose=0)  # 4, 4, then a batch of 2
print(json.dumps({"fallbacks": compiling.handed["train"].fallbacks,
                  "same_function": model.train_function is function,
                  "epochs": len(history.history["loss"])}))
"""


@pytest.mark.slow
def test_a_batch_the_step_was_not_compiled_for_goes_to_the_jitted_step():
    """Compiled refuses a batch of another shape before it runs: fit's last, short
    batch goes to the step as fit would have jitted it (once), and training goes on."""
    found = run_python(HANDED, {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
                                "PYTHONPATH": f"{NO_TF}:{ROOT}",
                                "JAX_COMPILATION_CACHE_DIR": ""})
    assert found == {"fallbacks": 1, "same_function": True, "epochs": 2}


def test_a_stop_request_ends_the_wait_for_the_compile():
    """A SIGTERM while XLA compiles must reach the checkpoint-and-exit path at once, not
    after the compile (tens of seconds on a large model): the wait ends when asked."""
    import threading
    import time

    from app.engine.precompile import Precompile

    class SlowToCompile:  # stands in for a jax.stages.Lowered whose compile takes long
        def compile(self):
            time.sleep(3)

    stop = threading.Event()
    compiling = Precompile()
    compiling.add("train", SlowToCompile())
    threading.Timer(0.3, stop.set).start()
    waited = compiling.join(stop=stop)
    assert 0.25 < waited < 1.5 and compiling.seconds is None  # still compiling
    assert compiling.join() > 1.0 and compiling.seconds >= 3 and compiling.error is None
