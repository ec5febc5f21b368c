"""Measuring the model alone: a timed fit on synthetic data.

Shared by the sweep (images/sec at each batch size) and the input benchmark (how
fast the model would eat images), so both time the same way as training does:
the Throughput callback's steady-state window after a warm-up fit.
"""

from __future__ import annotations

import dataclasses
import gc
import time

from app.engine.data import input_spec
from callbacks.heap import frozen_heap


def timed_synthetic_fit(model, config, topology, batch, steps: int, warmup_steps: int,
                        callbacks=(), warmup_callbacks=()):
    """Trains `model` on synthetic batches of `batch` (a BatchShape): a warm-up fit (compile), then a
    timed fit of `steps` steps. Returns (its Throughput callback, warm-up seconds).

    `warmup_callbacks` go to the warm-up fit (e.g. one that stops at a step boundary).

    Raises whatever fit raises (an out-of-memory error among them).
    """
    from callbacks.throughput import Throughput
    from preprocessing.datasets import make_datasets

    spec = dataclasses.replace(input_spec(config, batch), with_validation=False)
    data = make_datasets("synthetic", spec)
    try:
        started = time.perf_counter()
        model.fit(data.train, epochs=1, steps_per_epoch=warmup_steps, verbose=0, shuffle=False,
                  callbacks=list(warmup_callbacks))
        warmup_seconds = time.perf_counter() - started
        meter = Throughput(batch.global_size, batch.num_replicas, warmup_steps=config.steps_per_execution)
        with frozen_heap():  # as training is timed (app/modes/train.py)
            model.fit(data.train, epochs=1, steps_per_epoch=steps, verbose=0, shuffle=False,
                      callbacks=[meter, *callbacks])
        return meter, warmup_seconds
    finally:
        del data
        gc.collect()
