"""Shared test setup.

The test process runs Keras on the TensorFlow backend, with the host CPU split into
4 logical devices (so MirroredStrategy tests run in-process). Anything on the JAX
backend, and every test of the command line, runs `python app/main.py` in a real
subprocess, as a user would.
"""

import json
import os
import subprocess
import sys

os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGICAL_CPUS = 4


def pytest_configure(config):
    try:
        import tensorflow as tf
    except ImportError:  # the GPU machine (no TensorFlow) runs only tests that need none
        return

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * LOGICAL_CPUS)


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory):
    """A data_dir holding the digits PNGs (written once per test session)."""
    from preprocessing.datasets import digits

    data_dir = str(tmp_path_factory.mktemp("data"))
    digits.write_pngs(digits.root(data_dir))
    return data_dir


def run_cli(*args, timeout=300, env=None):
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
                          timeout=240, cwd=ROOT, env={**os.environ, **env})
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
