"""Measuring the model alone: a timed fit on synthetic data, memory, power.

Shared by the sweep (images/sec at each batch size) and the input benchmark (how
fast the model would eat images), so both time the same way as training does:
the Throughput callback's steady-state window after a warm-up fit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time

from app.engine.data import input_spec

OOM_MARKERS = ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory", "OOM",
               "Resource exhausted")


def is_out_of_memory(error: BaseException) -> bool:
    return any(marker in f"{type(error).__name__} {error}" for marker in OOM_MARKERS)


def peak_memory_gib(backend: str) -> float | None:
    """High-water mark of device memory over the local devices, or None (CPU)."""
    try:
        if backend == "jax":
            import jax
            stats = [d.memory_stats() for d in jax.local_devices()]
            peaks = [s.get("peak_bytes_in_use") for s in stats if s]
        else:
            import tensorflow as tf
            gpus = tf.config.list_logical_devices("GPU")
            peaks = [tf.config.experimental.get_memory_info(g.name)["peak"] for g in gpus]
    except Exception:  # not every platform reports memory
        return None
    peaks = [p for p in peaks if p]
    return round(max(peaks) / 2**30, 3) if peaks else None


def gpu_energy_readers(accelerator: str, devices_per_process: int) -> dict | None:
    """EnergyMeter's readers of this process's GPUs: the energy counter where the
    GPUs have one, else their power; None where there is neither (not a GPU, no NVML)."""
    if accelerator != "gpu":
        return None
    from callbacks.energy import nvml_energy_reader, nvml_power_reader, visible_gpu_indices

    indices = visible_gpu_indices(devices_per_process)
    read_energy = nvml_energy_reader(indices)
    if read_energy is not None:
        return {"read_energy": read_energy}
    read_power = nvml_power_reader(indices)
    return {"read_power": read_power} if read_power is not None else None


@contextlib.contextmanager
def frozen_heap():
    """While training, Python's cyclic garbage collector skips what is alive now.

    Its full collections scan every tracked object: with a model, Keras and JAX loaded
    they took 0.14-0.27 s holding the GIL, which stalls the input pipeline's threads
    and the steps' dispatch (on an H200 with the gpu pipeline one epoch in four ran
    ~5% slower; frozen, collections took 0.02-0.04 s and the epochs were even:
    benchmarks/h200_gc.sh). Garbage is collected first, and cyclic garbage made
    meanwhile is still collected. What fit's compiles make later is frozen by
    callbacks/heap.py's FreezeAfterCompile, inside this freeze; all of it is unfrozen
    at the end. Inside another, it leaves the outer one's freeze as it is.
    """
    if gc.get_freeze_count():  # frozen already (an outer frozen_heap): theirs to undo
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def timed_synthetic_fit(model, config, topology, batch: int, steps: int, warmup_steps: int,
                        callbacks=()):
    """Trains `model` on synthetic batches of `batch`: a warm-up fit (compile), then a
    timed fit of `steps` steps. Returns (its Throughput callback, warm-up seconds).

    Raises whatever fit raises (an out-of-memory error among them).
    """
    from callbacks.throughput import Throughput
    from preprocessing.datasets import make_datasets

    spec = dataclasses.replace(input_spec(config, topology, batch), with_validation=False)
    data = make_datasets("synthetic", spec)
    try:
        started = time.perf_counter()
        model.fit(data.train, epochs=1, steps_per_epoch=warmup_steps, verbose=0, shuffle=False)
        warmup_seconds = time.perf_counter() - started
        meter = Throughput(batch, topology.num_replicas, warmup_steps=config.steps_per_execution)
        with frozen_heap():  # as training is timed (app/modes/train.py)
            model.fit(data.train, epochs=1, steps_per_epoch=steps, verbose=0, shuffle=False,
                      callbacks=[meter, *callbacks])
        return meter, warmup_seconds
    finally:
        del data
        gc.collect()
