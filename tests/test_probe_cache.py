"""A probe after a run that filled JAX's compile cache, as a user meets it: the JAX probe
that missed its own backend's full run by a third started in 3.5 s instead of 6.8 s once
the cache was warm, and nothing said so.

A tiny JAX run fills a compile cache; a probe of the same job with that cache says its
step came from it (warm), measures a fresh compile in its later windows and gives the
cold start-up a fresh machine pays; a probe with an empty cache says it started cold.
The decision predicts from the cold start-up and says which the probe measured.
"""

import json
import os

import pytest
from conftest import ROOT, run_cli, tiny_flags

from app.report.decision import predict as decision, inputs as decision_inputs

NO_TF = os.path.join(ROOT, "tests", "no_tensorflow")
PROBE = ("--benchmark=probe", "--repeats=2", "--backend=jax")  # the run's own flags


def probe(digits_dir, logdir, cache):
    done = run_cli(*tiny_flags(digits_dir, logdir), *PROBE,
                   env={"PYTHONPATH": NO_TF, "JAX_COMPILATION_CACHE_DIR": str(cache),
                        "BENCH_PROBE_SECONDS": "4"})  # windows of ~2 s: not what is tested
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((logdir / "summary.json").read_text()), done.stdout


@pytest.mark.slow
def test_a_probe_after_a_run_that_filled_the_cache_says_so_and_gives_the_cold_start_up(
        digits_dir, tmp_path):
    cache = tmp_path / "xla"
    done = run_cli(*tiny_flags(digits_dir, tmp_path / "run"), "--backend=jax",
                   env={"PYTHONPATH": NO_TF, "JAX_COMPILATION_CACHE_DIR": str(cache)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert os.listdir(cache)  # the run filled it

    warm, said = probe(digits_dir, tmp_path / "warm", cache)
    assert warm["compile_cache"] == "warm" and warm["repeats"] == 2
    assert len(warm["windows"]) == 2
    # Its later window compiled afresh (no cache): the cold start-up is the warm one less
    # the compiles read from the cache plus the same compiled, longer than the warm one,
    # and the fresh window's warm-up fit held that compile.
    assert warm["startup_cold_seconds"] > warm["startup_seconds"]
    assert warm["startup_cold_from"].startswith("estimated: the warm start-up less its "
                                                "compiles read from the cache")
    added = warm["startup_cold_seconds"] - warm["startup_seconds"]
    assert added < warm["windows"][1]["compile_and_warmup_seconds"]
    line = next(line for line in said.splitlines() if line.startswith("start-up: "))
    assert ("its step came from the compile cache (warm): from empty caches, as a fresh "
            f"machine starts, {warm['startup_cold_seconds']:,.1f} s") in line

    cold, said = probe(digits_dir, tmp_path / "cold", tmp_path / "empty")
    assert cold["compile_cache"] == "cold"
    assert cold["startup_cold_seconds"] == cold["startup_seconds"]
    assert "from empty compile caches (cold)" in said

    # The decision predicts from the cold start-up and says the warm probe found a cache.
    found = decision_inputs.read_folder(str(tmp_path / "warm"))
    assert decision.measured_startup(found) == warm["startup_cold_seconds"]
    assert decision.startup_note(found).startswith("its process found its step in the "
                                                   "compile cache")
    assert decision.startup_note(decision_inputs.read_folder(str(tmp_path / "cold"))) is None
    run = decision_inputs.read_folder(str(tmp_path / "run"))
    assert run["compile_cache"] == "cold"  # it compiled every program itself
