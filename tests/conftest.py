"""Shared test setup.

The test process runs Keras on the TensorFlow backend, with the host CPU split into
4 logical devices (so MirroredStrategy tests run in-process). Anything on the JAX
backend, and every test of the command line, runs `python app/main.py` in a real
subprocess, as a user would.
"""

import atexit
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# The session's folder, made by the first process that loads this file (pytest-xdist's
# controller, or a serial run) and removed when it exits; the workers inherit it.
if not os.environ.get("TEST_SESSION_DIR"):
    os.environ["TEST_SESSION_DIR"] = tempfile.mkdtemp(prefix="bench-tests-")
    atexit.register(shutil.rmtree, os.environ["TEST_SESSION_DIR"], ignore_errors=True)
SESSION_DIR = os.environ["TEST_SESSION_DIR"]

# One persistent XLA compilation cache for every JAX process of the session. The suite
# starts dozens of JAX runs of the same few small programs, and compiling them (train
# and evaluation steps, initializers) is most of a run's CPU time: 20 of a tiny digits
# run's 27 CPU seconds, 7 with the cache warm. One set from outside is kept
# (JAX_COMPILATION_CACHE_DIR= runs without it).
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(SESSION_DIR, "jax-cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

# A sweep point or ladder rung traces 3 steps after its timed ones and reads the trace
# (app/modes/bench.py): on this CPU about a third of a small point's time. The suite's
# points skip it, but in the tests of what the trace gives (tests/test_ladder.py's "why",
# tests/test_benchmark_points.py's breakdown written once), which ask for the default.
os.environ.setdefault("BENCH_POINT_TRACE_STEPS", "0")

import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGICAL_CPUS = 4
# The most a test waits for a subprocess to get somewhere or to end: generous, since a
# wait polls what the app writes and ends as soon as it is there (tests/processes.py);
# only a process that hangs meets it.
PATIENCE_SECONDS = float(os.environ.get("TEST_PATIENCE_SECONDS", 900))


def pytest_configure(config):
    try:
        import tensorflow as tf
    except ImportError:  # the GPU machine (no TensorFlow) runs only tests that need none
        return

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * LOGICAL_CPUS)


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):  # see tests/xdist_groups.py
        import xdist_groups

        xdist_groups.order_and_record(items, SESSION_DIR)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before pytest-xdist's own choice
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` means tests/xdist_groups.py's groups (xdist's own no longer
    work on pytest 9); any other --dist is xdist's."""
    if config.getvalue("dist") == "loadgroup":
        import xdist_groups

        return xdist_groups.SharedFixtureScheduling(config, SESSION_DIR, log)
    return None


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory):
    """A data_dir holding the digits PNGs (written once per test session)."""
    from preprocessing.datasets import digits

    data_dir = str(tmp_path_factory.mktemp("data"))
    digits.write_pngs(digits.root(data_dir))
    return data_dir


def run_cli(*args, timeout=PATIENCE_SECONDS, env=None):
    """Runs `python app/main.py ARGS` in a fresh process; returns CompletedProcess."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env.pop("KERAS_BACKEND", None)  # the app sets it from --backend
    return subprocess.run([sys.executable, os.path.join(ROOT, "app", "main.py"), *args],
                          capture_output=True, text=True, timeout=timeout, env=full_env,
                          cwd=ROOT)


def run_python(code: str, env: dict) -> dict:
    """Runs `python -c CODE` from the repository root with ENV added; asserts it
    succeeded and returns the JSON its last line printed."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=PATIENCE_SECONDS, cwd=ROOT, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def error_lines(stderr: str) -> list[str]:
    """The app's own error lines (TensorFlow's import noise filtered out)."""
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def tiny_flags(data_dir, logdir, *extra):
    """Flags of a run that takes seconds: digits at 8x8, few steps."""
    return [f"--data_dir={data_dir}", f"--logdir={logdir}", "--image_size=8",
            "--epochs=2", "--steps_per_epoch=4", "--validation_steps=2", "--verbose=0",
            *extra]


@contextlib.contextmanager
def tmpfs(folder, size: str):
    """A real tmpfs of `size` (mount's size=, e.g. "3m") at `folder` for a with-block;
    the test is skipped where mounting is refused (not root)."""
    folder.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True)
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)])
