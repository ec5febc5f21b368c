"""app/engine/precompile.py: on JAX the training and evaluation steps compile in a
thread while the run starts, and `fit` compiles neither of them itself: it finds the
thread's programs in the compilation cache. Watched through JAX's own compile events,
in a real run of the app (digits, the device pipeline, TensorFlow unimportable)."""

import json
import os

import pytest

from conftest import ROOT, SESSION_DIR

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


def watched_run(tmp_path, cache: str, devices: int = 1, data=None) -> tuple[list, dict]:
    """(the step compiles seen, summary.json) of a short digits run on JAX (`data`: other
    data flags in place of the digits')."""
    import subprocess
    import sys

    logdir = tmp_path / "run"
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": NO_TF, "JAX_COMPILATION_CACHE_DIR": cache,
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
def test_fit_finds_both_steps_compiled_beside_the_start(tmp_path, devices):
    """Each step is compiled once, by the thread, from an empty cache; in fit (the main
    thread) the cache serves both. Two devices: keras.distribution's layouts too."""
    events, summary = watched_run(tmp_path, str(tmp_path / "xla"), devices)
    assert summary["status"] == "completed" and summary["num_replicas"] == devices
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
    compiled = [(e["step"], e["thread"]) for e in events if not e["cached"]]
    assert compiled == [("jit(train_step)", "precompile-steps"),
                        ("jit(test_step)", "precompile-steps")], events
    assert all(e["cached"] for e in events if e["thread"] == "MainThread"), events
    assert summary["kernels"]["digest"] == kernels.digest([])
    assert summary["kernels"]["source"] == "compiled"
    again = watched_run(tmp_path / "again", str(tmp_path / "xla"),
                        data=["--dataset=synthetic", "--validation_steps=2"])[1]
    assert again["kernels"]["source"] == "jax_cache"  # the first run's programs
    assert again["kernels"]["digest"] == summary["kernels"]["digest"]


@pytest.mark.slow
def test_without_a_compilation_cache_nothing_is_compiled_twice(tmp_path):
    """No cache, nothing to hand fit the thread's programs: fit compiles, alone."""
    events, summary = watched_run(tmp_path, "")
    assert summary["status"] == "completed"
    assert summary["kernels"] == {"digest": None, "not_known": "JAX's compilation cache is "
                                  "off, so fit compiles the step itself"}
    assert [(e["step"], e["thread"], e["cached"]) for e in events] == [
        ("jit(train_step)", "MainThread", False), ("jit(test_step)", "MainThread", False)]


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
    compiling = Precompile([SlowToCompile()])
    threading.Timer(0.3, stop.set).start()
    waited = compiling.join(stop=stop)
    assert 0.25 < waited < 1.5 and compiling.seconds is None  # still compiling
    assert compiling.join() > 1.0 and compiling.seconds >= 3 and compiling.error is None
