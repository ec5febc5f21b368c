"""One measured point: a sweep's (app/modes/sweep.py) or a ladder rung's (ladder.py).

A point is the run's config with a few settings replaced (`Config.sweep_point`, the
checks of a plain run): the model built for its settings, a warm-up fit that compiles
(excluded), then a fixed number of timed steps under the throughput, MFU and energy
callbacks, on the run's --dataset (synthetic data made on the device, or a real one
read through the point's --input_pipeline: the row's input_pipeline says which fed
it); with --repeats=N, N such windows, each after a fresh compile, the row's figure
their median with their min-max and step series (app/engine/measure.py). A point that
cannot run is a row too, its reason as status:
  skipped: <why>     the settings do not make a valid run (e.g. --input_pipeline=gpu
                     on a CPU), the batch does not divide over the replicas or fit
                     in the host's memory, or the pipeline refused the data;
  out of memory      the device refused it.
A few more steps are then traced (PROFILED_STEPS) and split by kind of work: the row's
`breakdown`. A model axis changes the network only (the recipe stays the run's). Each
point is an HParams session, <logdir>/points/<name>, emptied before it is measured
again (an attempt killed before its row was kept wrote there: point_folders.py). A real dataset's
fingerprint goes into the row: data other than the other points' is refused in one
line. While it runs, a point says what it does (callbacks/progress.py, PointProgress).
"""

from __future__ import annotations

import dataclasses
import os

from app.engine import autotune
from app.engine.data import input_spec
from app.engine.distribute import TopologyError
from app.engine.measure import timed_fit, timed_synthetic_fit
from app.models.memory import is_out_of_memory, peak_memory_gib
from app.models.recipe import make_compiled_model
from app.modes.point_folders import fresh_folder, point_folder, point_name, short_label
from app.run import context as run_context
from app.run import machine_block
from app.run.rundir import RunDirError
from callbacks.energy import EnergyMeter
from callbacks.profiling import breakdown as step_breakdown
from callbacks.profiling.timed import reconcile
from callbacks.figures import spread
from callbacks.figures.bill import usd_per_million_images
from callbacks.figures.steps import Position
from callbacks.mfu import ModelFlopsUtilization
from callbacks.profiler import Profiler
from callbacks.progress import PointProgress
from callbacks.records import faults, hparams
from callbacks.records.dashboard import POINT_FIGURES, POINT_SETTINGS
from callbacks.stop_on_request import StopOnRequest
from callbacks.stops import PROCESS_STOP, Preempted
from flags.config import SWEEPABLE, ConfigError
from preprocessing.datasets import fingerprint, known_shape, make_datasets, synthetic
from preprocessing.spec import DataError

DEFAULT_STEPS = 100
# After its timed steps, each point traces this many more (rounded up to whole host
# calls) and splits them by kind of work (callbacks/profiling/breakdown.py): the row's
# breakdown, what the ladder's "why" lines compare. Not timed: a profiled JAX fit
# dispatches synchronously. BENCH_POINT_TRACE_STEPS=0 traces none (rows without a
# breakdown): on a CPU tracing a point and reading its trace is about a third of a
# small point's time, which the test suite's points that test something else skip.
PROFILED_STEPS = int(os.environ.get("BENCH_POINT_TRACE_STEPS", 3))
# Settings that shape the model or its compiled step: a point that changes none of
# them (only the batch) trains the model the point before it built.
MODEL_SETTINGS = ("model", "precision", "image_size", "batchnorm_statistics",
                  "steps_per_execution", "xla_autotune")
# A progress line this often to a file or a pipe (a terminal's line is redrawn).
PROGRESS_LINE_SECONDS = float(os.environ.get("BENCH_PROGRESS_LINE_SECONDS", 30))


class Bench:
    """What every point of one sweep or ladder shares: the run's context, the energy
    readers, the model last built (reused while only the batch changes), the device
    memory's high-water mark so far, and the data each point was measured on.

    Args:
        context: the run's RunContext.
        readers: this process's GPU energy readers, or None.
        prefix: the points' lines' start ("[sweep]", "[ladder]").
        varying: the settings the campaign varies (listed first in HParams).
        earlier: rows measured before (an earlier attempt's): their data fingerprints
            are what this attempt's points must match.
    """

    def __init__(self, context, readers: dict | None, prefix: str = "[sweep]",
                 varying=(), earlier=()):
        self.context = context
        self.readers = readers
        self.prefix = prefix
        self.varying = tuple(varying)
        self.data_of = [(row["point"], row.get("input_pipeline"), row["data_fingerprint"])
                        for row in earlier if isinstance(row.get("data_fingerprint"), dict)]
        self._model_key = None
        self._model = None
        self._high_water = None

    def model(self, config, image_size: int, steps: int,
              num_classes: int = synthetic.NUM_CLASSES):
        """(model, FLOPs per image) for `config`, built anew where its MODEL_SETTINGS
        (or the data's classes and image side) differ from the last point's."""
        import keras

        key = (*(getattr(config, name) for name in MODEL_SETTINGS), num_classes, image_size)
        if key != self._model_key:
            self._model = self._model_key = None  # the old model goes before the new
            keras.config.set_dtype_policy(config.policy)
            self._model = make_compiled_model(config, self.context.topology,
                                              num_classes, image_size, steps)
            self._model_key = key
        return self._model

    def peak(self, backend: str) -> float | None:
        """The point's peak device memory: the high-water mark where it rose during
        the point; None where it did not (then it says nothing of this point)."""
        peak = peak_memory_gib(backend)
        rose = peak is not None and (self._high_water is None or peak > self._high_water)
        self._high_water = peak if rose else self._high_water
        return peak if rose else None

    def check_data(self, name: str, pipeline: str, found: dict | None) -> None:
        """Refuses a point whose data differs from what an earlier point was measured on
        (a class added to a folder between two attempts); records it otherwise. A TFDS
        dataset's fingerprint names the record files its pipeline reads (TFRecord or
        ArrayRecord): it is compared with points read through the same pipeline.

        Raises:
            RunDirError: one line naming the difference and the point it differs from.
        """
        if found is None:
            return
        for other, read_by, saved in self.data_of:
            if found.get("kind") == "tfds" and read_by != pipeline:
                continue
            differs = fingerprint.differences(saved, found)
            if differs:
                raise RunDirError(
                    f"--logdir={self.context.logdir} holds points measured on other data: "
                    f"{differs} (point {other} against {name} now); restore that data to "
                    "resume, or pass --fresh to measure every point again")
        self.data_of.append((name, pipeline, found))


def settings_of(config, xla_autotune: str | None) -> dict:
    """The point's SWEEPABLE settings as it ran (precision resolved, image size the
    data's, XLA's choice or none; no input pipeline on synthetic data). A real
    dataset's image side and pipeline are known once it is built (`_run` sets them)."""
    values = {name: getattr(config, name) for name in SWEEPABLE}
    synthetic_data = config.dataset == "synthetic"
    values.update(precision=config.policy,
                  image_size=config.image_size or (synthetic.IMAGE_SIZE if synthetic_data
                                                   else None),
                  input_pipeline="none" if synthetic_data else config.input_pipeline,
                  steps_per_execution=config.steps_per_execution or 1,
                  xla_autotune=xla_autotune or "none")
    return values


def image_size_of(context) -> int | None:
    """The side of the images the points train on, as far as it is known before any is
    built (--image_size, synthetic data's, a dataset's own where its check knows it)."""
    config = context.config
    if config.image_size or config.dataset == "synthetic":
        return config.image_size or synthetic.IMAGE_SIZE
    shape = known_shape(config.dataset, context.spec)
    return shape[1] if shape else None


def measure(bench: Bench, settings: dict, name: str | None = None,
            label: str | None = None) -> dict:
    """One point's row: its settings and steady-state figures, or why it has none;
    its HParams session written (process 0). `label` names it in its lines and its
    HParams group (default: its settings, "global batch 8, precision float32" in its
    lines, "batch 8, float32" in its group's name).

    Raises:
        callbacks.stops.Preempted: SIGTERM or Ctrl-C, at a step boundary.
        RunDirError: its data is not what the campaign's other points had.
    """
    name = name or point_name(settings)
    trial = label or short_label(settings)
    label = label or ", ".join(f"{k.replace('_size', '').replace('_', ' ')} {v}"
                               for k, v in settings.items())
    row = {"point": name, "settings": dict(settings), "status": "ok"}
    context = bench.context
    if context.is_chief:
        fresh_folder(context, name)  # an earlier attempt's unkept files go
    config = context.config
    progress = PointProgress(f"{bench.prefix} {label}", config.verbosity if context.is_chief
                             else 0, line_every_seconds=PROGRESS_LINE_SECONDS,
                             stop_request=PROCESS_STOP)
    # The machine through the point's timed windows, as a training run records it.
    sampled = machine_block.sampler(config, context.topology)
    try:
        row["status"], figures = _run(bench, settings, row, progress, sampled)
    finally:
        progress.close()
        row["machine_state"] = machine_block.block(context.topology, config.backend, sampled)
    row.update(figures)
    line = f"{bench.prefix} {label}: {_result(row, context)}"
    print(line, flush=True)
    faults.reached("point_printed")  # a kill here: the row is not kept (tests)
    if context.is_chief:
        hparams.write_record(
            point_folder(context, name), _hparams_of(context, row), row, row["status"],
            started_at=context.started_at, columns=POINT_SETTINGS, metrics=POINT_FIGURES,
            label=trial, varying=bench.varying, run_folder=context.logdir)
    return row


def _result(row: dict, context) -> str:
    """What a point's line says after its label: its rate, spread and why; or why not."""
    if row["status"] != "ok":
        return ("does not fit in device memory" if row["status"] == "out of memory"
                else row["status"])
    text = f"{row['images_per_sec']:,.1f} images/sec"
    repeats = spread.words(row)
    text += f" ({repeats})" if repeats else ""
    if row.get("breakdown"):
        text += "; " + step_breakdown.line(
            row["breakdown"], peak_tflops_per_device=context.billing.peak_tflops_per_device)
    return text


def _run(bench, settings, row, progress, sampled=None) -> tuple[str, dict]:
    context = bench.context
    topology, billing = context.topology, context.billing
    try:
        config = context.config.sweep_point(settings)
    except ConfigError as error:
        return f"skipped: {error}", {}
    spe = config.steps_per_execution or 1
    config = config.replace(steps_per_execution=spe)
    choice = autotune.choose(config, None)
    row.update(settings_of(config, choice))
    steps = config.steps_per_epoch or DEFAULT_STEPS - DEFAULT_STEPS % spe
    warmup_steps = max(2 * spe, config.throughput_warmup_steps)
    try:
        shape = topology.batch_shape(config.global_batch_size)
    except TopologyError:
        return f"skipped: not divisible by {topology.num_replicas} replicas", {}
    try:
        run_context.check_batch_fits(input_spec(config, shape))
    except DataError as error:
        return f"skipped: {error}", {}
    row["per_device_batch_size"] = shape.per_replica
    readers = bench.readers
    energy = EnergyMeter(**readers, position=Position.of_batch(shape),
                         warmup_steps=spe) if readers else None
    callbacks = [c for c in (energy, sampled and sampled.callback, StopOnRequest(PROCESS_STOP))
                 if c is not None]
    profiled = _profiled(context, config, row["point"])
    repeats = context.config.repeats
    try:
        with autotune.compiled_with(choice):
            if config.dataset == "synthetic":
                progress.phase("building the model")
                model, flops = bench.model(config, row["image_size"], steps)
                PROCESS_STOP.raise_if_requested()  # a stop asked for while it was built
                meter, warmup_seconds = timed_synthetic_fit(
                    model, config, topology, shape, steps, warmup_steps, callbacks,
                    warmup_callbacks=[StopOnRequest(PROCESS_STOP)], profiled=profiled,
                    repeats=repeats, progress=progress)
            else:
                meter, warmup_seconds, flops = _timed_on_dataset(
                    bench, config, shape, steps, warmup_steps, callbacks, row, profiled,
                    progress)
    except (Preempted, RunDirError):
        raise
    except DataError as error:  # e.g. a dataset too large to hold on the device
        return f"skipped: {error}", {}
    except Exception as error:  # noqa: BLE001 - one point's failure must not end the sweep
        bench._model = bench._model_key = None  # what it holds may be half-made
        if is_out_of_memory(error):
            return "out of memory", {}
        # e.g. XLA that cannot compile the step under these settings: recorded, and the
        # sweep goes on (the error's first line is the row's status)
        first = (str(error).strip().splitlines() or [""])[0][:300]
        return f"failed: {type(error).__name__}: {first}", {}
    rate = meter.images_per_sec
    if rate is None:  # the meter leaves out the first execution: the warm-up
        return (f"skipped: {steps} timed steps are one execution of {spe}; give "
                f"--steps_per_epoch at least {2 * spe}"), {}
    mfu = ModelFlopsUtilization(flops, topology.num_replicas,
                                billing.peak_tflops_per_device).utilization(rate)
    figures = {
        "images_per_sec": round(rate, 2),
        **meter.figures(),  # --repeats: the windows, the spread
        "images_per_sec_per_device": round(rate / topology.num_replicas, 2),
        "mfu": float(f"{mfu:.6g}") if mfu is not None else None,
        "train_flops_per_image": flops,
        "model_tflops_per_sec": float(f"{flops * rate / 1e12:.6g}") if flops else None,
        "peak_memory_gib": bench.peak(config.backend),
        "power_watts": round(energy.power_watts, 1) if energy and energy.power_watts else None,
        "joules_per_image": round(energy.joules_per_image, 4)
        if energy and energy.joules_per_image else None,
        "energy_method": energy.method if energy else None,
        "usd_per_million_images": round(usd_per_million_images(
            rate, billing.price_per_hour_usd), 4) if billing.price_per_hour_usd else None,
        "timed_steps": steps, "warmup_steps": warmup_steps,
        "compile_and_warmup_seconds": round(warmup_seconds, 2),
        **{k: round(v, 3) for k, v in meter.step_time().items()},
    }
    # The traced steps' split set against the timed window's step (a CPU sweep point's
    # traced ops ran slower than its timed step; now the "why" and the speed agree):
    # idle is the timed step's, what tracing added the profiler's
    # (callbacks/profiling/timed.py).
    figures["breakdown"] = (reconcile(profiled[1].breakdown, figures.get("step_time_ms"))
                            if profiled[1] and profiled[1].breakdown else None)
    return "ok", figures


def _profiled(context, config, name: str) -> tuple[int, Profiler | None]:
    """(steps to trace after the timed ones, process 0's Profiler writing into the
    point's folder <logdir>/points/<name>; None on the other processes)."""
    if PROFILED_STEPS <= 0:
        return 0, None
    spe = config.steps_per_execution
    steps = spe * -(-PROFILED_STEPS // spe)
    if not context.is_chief:
        return steps, None
    return steps, Profiler(point_folder(context, name), 1, steps, backend=config.backend,
                           position=Position(steps_per_epoch=steps))


def _timed_on_dataset(bench, config, shape, steps, warmup_steps, callbacks, row, profiled,
                      progress):
    """A point on the run's real dataset, read through the point's input pipeline
    (built first: the model is built for its classes and image side). Returns
    (Windows, warm-up seconds, FLOPs per image); the row gets the image side, the
    pipeline that fed it and the data's fingerprint.

    Raises:
        DataError: the pipeline cannot serve the data (e.g. it does not fit its share of
            device memory); whatever fit raises.
        RunDirError: the data is not what an earlier point was measured on.
    """
    import gc

    from preprocessing import streams

    spec = dataclasses.replace(input_spec(config, shape), with_validation=False)
    streams.check(spec)  # e.g. grain or TensorFlow not installed: one line
    progress.phase("reading the data")
    data = make_datasets(config.dataset, spec)
    try:
        bench.check_data(row["point"], data.input_pipeline, data.fingerprint)
        row.update(image_size=data.image_size, input_pipeline=data.input_pipeline,
                   data_fingerprint=data.fingerprint)
        progress.phase("building the model")
        model, flops = bench.model(config, data.image_size, steps, data.num_classes)
        PROCESS_STOP.raise_if_requested()  # a stop asked for while it was built
        meter, warmup_seconds = timed_fit(
            model, data.train, config, shape, steps, warmup_steps, callbacks,
            warmup_callbacks=[StopOnRequest(PROCESS_STOP)], profiled=profiled,
            repeats=bench.context.config.repeats, progress=progress)
        return meter, warmup_seconds, flops
    finally:
        del data  # its worker processes or device arrays go before the next point's
        gc.collect()


def _hparams_of(context, row) -> dict:
    """The point's HParams settings: the run's, with the point's own."""
    topology, billing, config = context.topology, context.billing, context.config
    return {"accelerator": config.accelerator, "backend": config.backend,
            "device_kind": topology.device_kind, "num_replicas": topology.num_replicas,
            "dataset": config.dataset, "machine": billing.machine,
            "price_per_hour_usd": billing.price_per_hour_usd,
            **{k: row.get(k, v) for k, v in settings_of(config, None).items()},
            **row["settings"]}
