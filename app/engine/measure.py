"""Measuring the model: a timed fit, on synthetic data or a dataset's stream.

Shared by the sweep and the ladder (images/sec at each point) and the input
benchmark (how fast the model would eat images), so all time the same way as
training does:
the Throughput callback's steady-state window after a warm-up fit.
"""

from __future__ import annotations

import dataclasses
import gc
import time

from app.engine.data import input_spec
from callbacks.heap import frozen_heap


def timed_synthetic_fit(model, config, topology, batch, steps: int, warmup_steps: int,
                        callbacks=(), warmup_callbacks=(), profiled=(0, None)):
    """Trains `model` on synthetic batches of `batch` (a BatchShape): `timed_fit` on
    them. Returns (its Throughput callback, warm-up seconds).

    Raises whatever fit raises (an out-of-memory error among them).
    """
    from preprocessing.datasets import make_datasets

    spec = dataclasses.replace(input_spec(config, batch), with_validation=False)
    data = make_datasets("synthetic", spec)
    try:
        return timed_fit(model, data.train, config, batch, steps, warmup_steps, callbacks,
                         warmup_callbacks, profiled)
    finally:
        del data
        gc.collect()


def timed_fit(model, train, config, batch, steps: int, warmup_steps: int, callbacks=(),
              warmup_callbacks=(), profiled=(0, None)):
    """Trains `model` on `train` (an endless stream of batches of `batch`, a
    BatchShape): a warm-up fit (compile), then a timed fit of `steps` steps. Returns
    (its Throughput callback, warm-up seconds).

    `warmup_callbacks` go to the warm-up fit (e.g. one that stops at a step boundary).
    `profiled`: (steps, callbacks.profiler.Profiler or None): with steps, a third fit
    of that many after the timed one, traced by the Profiler where one is given (process
    0's; the other processes run the same steps untraced). A profiled JAX fit dispatches
    synchronously, so it is never the fit timed. `warmup_callbacks` go to it too.

    Raises whatever fit raises (an out-of-memory error among them).
    """
    from callbacks.throughput import Throughput

    started = time.perf_counter()
    model.fit(train, epochs=1, steps_per_epoch=warmup_steps, verbose=0, shuffle=False,
              callbacks=list(warmup_callbacks))
    warmup_seconds = time.perf_counter() - started
    meter = Throughput(batch.global_size, batch.num_replicas,
                       warmup_steps=config.steps_per_execution)
    with frozen_heap():  # as training is timed (app/modes/train.py)
        model.fit(train, epochs=1, steps_per_epoch=steps, verbose=0, shuffle=False,
                  callbacks=[meter, *callbacks])
    profiled_steps, profiler = profiled
    if profiled_steps:
        model.fit(train, epochs=1, steps_per_epoch=profiled_steps, verbose=0, shuffle=False,
                  callbacks=[c for c in (profiler, *warmup_callbacks) if c is not None])
    return meter, warmup_seconds
