"""callbacks/compile_ahead.py: the evaluation step compiles in a thread beside the first
training step, into JAX's persistent cache, where Keras's own compile of it finds it."""

import os
import subprocess
import sys

from conftest import PATIENCE_SECONDS, ROOT, tiny_flags

NO_TF = os.path.join(ROOT, "tests", "no_tensorflow")


def test_the_evaluation_step_is_compiled_once_ahead_and_keras_finds_it(digits_dir, tmp_path):
    """A JAX run on the device pipeline with a fresh cache: the evaluation step is
    compiled by the thread and Keras's request for it is a cache hit; with the cache
    off the callback is not added and Keras compiles the step itself, once."""
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(PYTHONPATH=NO_TF, JAX_LOG_COMPILES="1")

    def run(name, cache):
        done = subprocess.run(
            [sys.executable, os.path.join(ROOT, "app", "main.py"),
             *tiny_flags(digits_dir, tmp_path / name, "--backend=jax", "--epochs=1",
                         "--input_pipeline=device", "--seed=4",
                         "--precision=mixed_bfloat16")],  # as the GPU runs
            capture_output=True, text=True, timeout=PATIENCE_SECONDS, cwd=ROOT,
            env={**env, "JAX_COMPILATION_CACHE_DIR": cache})
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stderr

    ahead = run("ahead", str(tmp_path / "xla"))
    # two requests (JAX logs a load from the cache as a compilation too): the thread's,
    # which compiled, then Keras's, which found it
    assert ahead.count("Finished XLA compilation of jit(test_step)") == 2
    assert ahead.count("Persistent compilation cache hit for 'jit_test_step'") == 1
    off = run("off", "")
    assert off.count("Finished XLA compilation of jit(test_step)") == 1
    assert "Persistent compilation cache hit" not in off
