"""The `Example:` of each callback a user would put in their own fit (Throughput,
CloudCost, TopOneTargets, ModelFlopsUtilization, NanGuard) runs as written: a real
Keras fit, its printed results as the docstring says (doctest), in a process of its
own on each backend."""

import os
import subprocess
import sys

import pytest
from conftest import PATIENCE_SECONDS, ROOT

CALLBACKS = {"callbacks.throughput": "Throughput", "callbacks.cost": "CloudCost",
             "callbacks.accuracy": "TopOneTargets", "callbacks.mfu": "ModelFlopsUtilization",
             "callbacks.nan_guard": "NanGuard"}
RUN = """
import doctest, importlib, sys
module = importlib.import_module(sys.argv[1])
found = doctest.DocTestFinder().find(getattr(module, sys.argv[2]), sys.argv[2], module=module)
runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
for test in found:
    runner.run(test)
print("attempted", runner.tries, "failed", runner.failures)
"""


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
@pytest.mark.parametrize("module", sorted(CALLBACKS))
def test_the_callbacks_example_runs_as_written(module, backend):
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", RUN, module, CALLBACKS[module]], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=PATIENCE_SECONDS)
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1].split()
    assert last[0] == "attempted" and int(last[1]) >= 5, done.stdout[-3000:]
    assert last[2:] == ["failed", "0"], done.stdout[-3000:]
