"""The shared measuring function (app/engine/measure.py): --repeats' windows, each after
a compile of its own, their median and min-max by hand from each window's step series,
and JAX compiling afresh for every window (no program from its persistent cache)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from conftest import ROOT
from tiny_keras import tiny_model

from app.engine.measure import Windows, timed_fit
from flags import Config
from preprocessing.spec import BatchShape


def stream(batch: int):
    """An endless stream of batches, as the pipelines give `fit`."""
    rng = np.random.default_rng(0)
    images = rng.normal(size=(batch, 8, 8, 3)).astype("float32")
    labels = rng.integers(0, 10, batch)
    return tf.data.Dataset.from_tensors((images, labels)).repeat()


class TrainFunctions:
    """Notes the train function each fit starts with (a new one is a new compile)."""

    def __init__(self):
        self.seen = []

    def callback(self):
        import keras

        outer = self

        class Note(keras.callbacks.Callback):
            def on_train_begin(self, logs=None):
                outer.seen.append(self.model.train_function)  # kept: ids not reused
        return Note()


def test_three_repeats_are_three_windows_each_after_its_own_compile_their_median_by_hand():
    model, functions = tiny_model(), TrainFunctions()
    config = Config(dataset="synthetic", steps_per_execution=1, sweep_batch_sizes=(8,),
                    repeats=3)
    windows, first_compile = timed_fit(model, stream(8), config, BatchShape(8), steps=6,
                                       warmup_steps=2, callbacks=[functions.callback()],
                                       repeats=3)
    assert isinstance(windows, Windows) and len(windows.meters) == 3
    assert len({id(f) for f in functions.seen}) == 3  # each window's is a new function
    assert first_compile == windows.compile_seconds[0] > 0
    figures = windows.figures()
    assert figures["repeats"] == 3 and len(figures["windows"]) == 3
    by_hand = []
    for window in figures["windows"]:
        series = window["step_ms"]
        assert window["steps_per_call"] == 1 and len(series) == 5  # 6 steps: 5 gaps
        by_hand.append(8 * 1e3 / (sum(series) / len(series)))
        assert by_hand[-1] == pytest.approx(window["images_per_sec"], rel=1e-3)
    assert windows.images_per_sec == pytest.approx(sorted(by_hand)[1], rel=1e-3)
    assert figures["images_per_sec_min"] == pytest.approx(min(by_hand), rel=1e-3)
    assert figures["images_per_sec_max"] == pytest.approx(max(by_hand), rel=1e-3)
    # one figure of step time, consistent with the median rate
    assert windows.step_time()["step_time_ms"] == pytest.approx(
        8 * 1e3 / windows.images_per_sec)


def test_one_window_reads_as_its_throughput_callback_and_says_no_spread():
    model = tiny_model()
    config = Config(dataset="synthetic", steps_per_execution=1)
    windows, _ = timed_fit(model, stream(8), config, BatchShape(8), steps=6, warmup_steps=2)
    (meter,) = windows.meters
    assert windows.images_per_sec == meter.images_per_sec
    assert windows.step_time() == meter.step_time()
    assert windows.figures() == {}


FRESH = textwrap.dedent("""
    import os, sys
    os.environ["KERAS_BACKEND"] = "jax"
    import jax
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    import keras, numpy as np
    from app.engine.measure import fresh_compiles
    hits = []
    jax.monitoring.register_event_listener(
        lambda event, **_: hits.append(event) if event.endswith("cache_hits") else None)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    model.compile("sgd", "mse")
    x, y = np.ones((32, 8)), np.ones((32, 4))
    def fit():
        model.make_train_function(force=True)
        model.fit(x, y, verbose=0, batch_size=8)
    fit(); fit()
    print("cached", len(hits))
    with fresh_compiles("jax", True):
        fit(); fit()
    print("fresh", len(hits))
    fit()
    print("after", len(hits))
""")


def test_jax_compiles_each_repeat_afresh_and_its_cache_serves_again_after(tmp_path):
    """In JAX (a process of its own: this one is TensorFlow's), a retraced train step
    is a hit of the persistent cache; within fresh_compiles it is compiled, never read
    from it; after the block the cache serves again."""
    done = subprocess.run([sys.executable, "-c", FRESH, str(tmp_path / "cache")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr[-3000:]
    counts = dict(line.split() for line in done.stdout.splitlines())
    cached, fresh, after = (int(counts[k]) for k in ("cached", "fresh", "after"))
    assert cached >= 1  # the second fit's step came from the cache
    assert fresh == cached  # no hit while each compile is fresh
    assert after > fresh  # and the cache is back
