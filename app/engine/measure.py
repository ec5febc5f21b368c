"""Measuring the model: timed fits, on synthetic data or a dataset's stream.

Shared by the sweep and the ladder (images/sec at each point), the input benchmark
(how fast the model would eat images) and any mode that times a model, so all time
the same way as training does: the Throughput callback's steady-state window after
a warm-up fit.

`--repeats=N` (`repeats`): N timed windows, each after a compile of its own, so a
point's figure says how far it moves from one compile to the next (on a GPU, XLA's
autotuner may pick other kernels each time:
benchmarks/results/2026-12-06-h100-autotune-spread.json). With N > 1 no window's
program comes from JAX's persistent compilation cache (nor its kernel choices from
XLA's autotuning cache beside it): each compile is fresh. The point's figure is the
median window's rate and its spread the min-max (callbacks/figures/spread.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time

from app.engine.data import input_spec
from callbacks.figures import spread
from callbacks.figures.steps import Position
from callbacks.figures.window import add_sums, gap_sums, spread_of
from callbacks.heap import frozen_heap


@dataclasses.dataclass
class Windows:
    """The timed windows of one measurement; reads like one Throughput callback
    (`images_per_sec`, `step_time()`) where a caller wants one figure.

    Attributes:
        meters: each window's Throughput callback, in order.
        compile_seconds: each window's warm-up fit (its compile included), seconds.
        global_batch_size: images a step.
    """

    meters: list
    compile_seconds: list
    global_batch_size: int

    @property
    def rates(self) -> list:
        """Each timed window's images/sec (a window too short to time left out)."""
        return [m.images_per_sec for m in self.meters if m.images_per_sec is not None]

    @property
    def images_per_sec(self) -> float | None:
        """The median window's images/sec (the one window's, measured once)."""
        return spread.median(self.rates) if self.rates else None

    def step_time(self) -> dict:
        """step_time_ms, step_time_stderr_ms, step_time_jitter: one window's as its
        Throughput gives them; over several, the step time of the median rate (so that
        global batch / images_per_sec is the step time, as for one window) and the
        standard error and jitter of every window's steps together."""
        if len(self.meters) == 1:
            return self.meters[0].step_time()
        sums = {}
        for meter in self.meters:
            sums = add_sums(sums, gap_sums(meter.last_window_gaps))
        figures = spread_of(sums)
        if figures and self.images_per_sec:
            figures["step_time_ms"] = self.global_batch_size / self.images_per_sec * 1e3
        return figures

    def figures(self) -> dict:
        """A row's fields of the repeats: {} measured once; else `repeats`, the rate's
        spread (images_per_sec_min, _max) and `windows`: each one's images/sec, step
        time, compile seconds and its step series (`step_ms`: each host call's
        milliseconds a step, in order), from which its rate is computed again by hand."""
        if len(self.meters) < 2 or not self.rates:
            return {}
        windows = []
        for meter, seconds in zip(self.meters, self.compile_seconds):
            windows.append({
                "images_per_sec": _rounded(meter.images_per_sec, 2),
                "step_time_ms": _rounded(meter.step_time().get("step_time_ms"), 3),
                "compile_and_warmup_seconds": round(seconds, 2),
                "step_ms": [round(s / n * 1e3, 4) for n, s in meter.last_window_gaps],
                "steps_per_call": meter.last_window_gaps[0][0] if meter.last_window_gaps
                else None})
        fields = spread.spread_fields("images_per_sec", self.rates)
        return {"repeats": len(self.meters), "images_per_sec_min": fields["images_per_sec_min"],
                "images_per_sec_max": fields["images_per_sec_max"], "windows": windows}


def _rounded(value, digits):
    return round(value, digits) if value is not None else None


def timed_synthetic_fit(model, config, topology, batch, steps: int, warmup_steps: int,
                        callbacks=(), warmup_callbacks=(), profiled=(0, None), repeats=1,
                        progress=None):
    """Trains `model` on synthetic batches of `batch` (a BatchShape): `timed_fit` on
    them. Returns (its Windows, the first window's warm-up seconds).

    Raises whatever fit raises (an out-of-memory error among them).
    """
    from preprocessing.datasets import make_datasets

    spec = dataclasses.replace(input_spec(config, batch), with_validation=False)
    data = make_datasets("synthetic", spec)
    try:
        return timed_fit(model, data.train, config, batch, steps, warmup_steps, callbacks,
                         warmup_callbacks, profiled, repeats, progress)
    finally:
        del data
        gc.collect()


def timed_fit(model, train, config, batch, steps: int, warmup_steps: int, callbacks=(),
              warmup_callbacks=(), profiled=(0, None), repeats=1, progress=None):
    """Trains `model` on `train` (an endless stream of batches of `batch`, a
    BatchShape): `repeats` times a warm-up fit (compile) then a timed fit of `steps`
    steps, each time compiling the training step afresh. Returns (its Windows, the
    first window's warm-up seconds).

    `warmup_callbacks` go to the warm-up fits (e.g. one that stops at a step boundary).
    `profiled`: (steps, callbacks.profiler.Profiler or None): with steps, a fit of that
    many after the last timed one, traced by the Profiler where one is given (process
    0's; the other processes run the same steps untraced). A profiled JAX fit dispatches
    synchronously, so it is never the fit timed. `warmup_callbacks` go to it too.
    `progress`: a callbacks.progress.PointProgress told each phase, and a callback of
    every fit (steps done), or None.

    Raises whatever fit raises (an out-of-memory error among them).
    """
    from callbacks.throughput import Throughput

    def told(phase, fit_steps):
        if progress is not None:
            progress.phase(phase, fit_steps)
        return [progress] if progress is not None else []

    meters, compile_seconds = [], []
    with fresh_compiles(config.backend, repeats > 1):
        for window in range(repeats):
            which = f" {window + 1}/{repeats}" if repeats > 1 else ""
            if window:  # the next fit traces and compiles its step anew
                model.make_train_function(force=True)
            started = time.perf_counter()
            model.fit(train, epochs=1, steps_per_epoch=warmup_steps, verbose=0,
                      shuffle=False, callbacks=[*warmup_callbacks,
                                                *told(f"compiling{which}", warmup_steps)])
            compile_seconds.append(time.perf_counter() - started)
            meter = Throughput(Position.of_batch(batch), batch.num_replicas,
                               warmup_steps=config.steps_per_execution)
            timed = [meter, *callbacks, *told(f"timing window{which}", steps)]
            with frozen_heap():  # as training is timed (app/modes/train.py)
                model.fit(train, epochs=1, steps_per_epoch=steps, verbose=0, shuffle=False,
                          callbacks=timed)
            meters.append(meter)
    profiled_steps, profiler = profiled
    if profiled_steps:
        traced = [c for c in (profiler, *warmup_callbacks) if c is not None]
        model.fit(train, epochs=1, steps_per_epoch=profiled_steps, verbose=0, shuffle=False,
                  callbacks=[*traced, *told("tracing", profiled_steps)])
    return Windows(meters, compile_seconds, batch.global_size), compile_seconds[0]


@contextlib.contextmanager
def fresh_compiles(backend: str, fresh: bool):
    """Within the block (where `fresh`), JAX compiles every program anew: its
    persistent compilation cache is neither read nor written, and XLA's autotuning
    cache beside it (which JAX enables with it) is off.

    Trap: JAX decides whether it uses the persistent cache once, at its first compile,
    and keeps the answer; turning the option off needs `reset_cache` for JAX to ask
    again, before and after. TensorFlow keeps no compiled program between tf.functions:
    a new train function compiles anew there by itself.
    """
    if not fresh or backend != "jax":
        yield
        return
    import logging

    import jax
    from jax.experimental.compilation_cache import compilation_cache

    # reset_cache logs "Resetting cache at ..." at INFO, which absl's handler prints
    quiet = logging.getLogger(compilation_cache.reset_cache.__module__)
    level = quiet.level
    quiet.setLevel(max(level, logging.WARNING))
    was = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    compilation_cache.reset_cache()
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", was)
        compilation_cache.reset_cache()
        quiet.setLevel(level)
