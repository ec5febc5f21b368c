"""`--benchmark=input`: is the input pipeline or the accelerator the bottleneck?

Times the training input pipeline alone (decode, augment, batch; no model) on the
real dataset, per CPU core too, then the model alone on synthetic data of the same
shape on the chosen accelerator. Their ratio says which one limits training:
below 1, the accelerator would wait for images.

With --repeats=N each is timed N times (the model's windows each after a fresh
compile): the figures are their medians, with their min-max.

Outputs (process 0): input_benchmark.json and summary.json (the same dict), and
three lines on stdout.
"""

from __future__ import annotations

import dataclasses
import os
import time

from app.engine.measure import timed_synthetic_fit
from app.models.recipe import make_compiled_model
from app.run import context as run_context
from app.run import rundir
from callbacks.figures import spread
from preprocessing.datasets import make_datasets

WARMUP_BATCHES = 5
DEFAULT_BATCHES = 50


def cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def time_pipeline(stream, batches: int, batch_size: int) -> float:
    """Images/second of `stream` over `batches` batches after a warm-up."""
    return pipeline_rates(stream, batches, batch_size, 1)[0]


def pipeline_rates(stream, batches: int, batch_size: int, repeats: int) -> list[float]:
    """`time_pipeline`'s rate `repeats` times in a row (one window after another of
    the same stream, after one warm-up)."""
    iterator = iter(stream)
    for _ in range(WARMUP_BATCHES):
        next(iterator)
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(batches):
            next(iterator)
        rates.append(batches * batch_size / (time.perf_counter() - start))
    return rates


def model_appetite(config, topology, batch, num_classes: int, image_size: int):
    """Steady-state training images/second of the model on synthetic data of the
    dataset's shape (the same measurement as one size of the sweep): the measure's
    Windows (--repeats of them, each after a fresh compile)."""
    spe = config.steps_per_execution
    steps = (5 if config.accelerator == "cpu" else 30) * spe
    config = dataclasses.replace(config, image_size=image_size)
    model, _ = make_compiled_model(config, topology, num_classes, image_size, steps)
    windows, _ = timed_synthetic_fit(model, config, topology, batch, steps, 2 * spe,
                                     repeats=config.repeats)
    return windows


def run(context) -> dict:
    """Times the input pipeline and the model apart; returns the summary dict."""
    context = run_context.start(context)
    run_context.create_folder(context)
    # one step per host call, as timed here (config.json keeps auto's 0, for a rerun)
    context = run_context.with_steps_per_execution(context, context.config.steps_per_execution or 1)
    config, topology, run_dir, spec = (context.config, context.topology, context.run_dir,
                                       context.spec)
    data = make_datasets(config.dataset, dataclasses.replace(spec, with_validation=False))
    batches = config.steps_per_epoch or DEFAULT_BATCHES
    print(f"[input] timing {batches} batches of {spec.batch_size} from {config.dataset} "
          f"({data.image_size}x{data.image_size}, input_pipeline={data.input_pipeline}, "
          f"preprocessing={data.preset})",
          flush=True)
    # Every process reads its own shard: the job's rate is the sum.
    rates = [rate * spec.num_processes for rate in
             pipeline_rates(data.train, batches, spec.batch_size, config.repeats)]
    rate = spread.median(rates)
    cores = cpu_cores()
    windows = model_appetite(config, topology, context.batch, data.num_classes,
                             data.image_size)
    appetite = windows.images_per_sec
    ratio = rate / appetite if appetite else None
    repeated = {}
    if config.repeats > 1:  # the median of each, and its min-max
        repeated = {"repeats": config.repeats, "spread": spread.SPREAD,
                    "input_images_per_sec_min": round(min(rates), 1),
                    "input_images_per_sec_max": round(max(rates), 1),
                    "model_windows": windows.figures().get("windows", [])}
        if windows.rates:
            repeated.update(model_images_per_sec_min=round(min(windows.rates), 1),
                            model_images_per_sec_max=round(max(windows.rates), 1))
    summary = {
        "mode": "input_benchmark", **topology.describe(), "dataset": config.dataset,
        "model": config.model, "preprocessing": data.preset,
        "input_pipeline": data.input_pipeline,
        "image_size": data.image_size, "global_batch_size": config.global_batch_size,
        "batches_timed": batches, "cpu_cores": cores,
        "input_images_per_sec": round(rate, 1),
        "input_images_per_sec_per_core": round(rate / cores, 1),
        "model_images_per_sec": round(appetite, 1) if appetite else None,
        "input_to_model_ratio": round(ratio, 3) if ratio else None,
        "bottleneck": None if ratio is None else ("input" if ratio < 1 else "accelerator"),
        **repeated, "logdir": run_dir.path,
    }
    if topology.is_chief:
        for name in ("input_benchmark.json", rundir.SUMMARY_FILE):
            rundir.write_json_atomic(os.path.join(run_dir.path, name), summary)
        input_spread, model_spread = (spread.words(summary, f"{key}_images_per_sec")
                                      for key in ("input", "model"))
        print(f"input pipeline: {rate:,.1f} images/sec ({rate / cores:,.1f} per CPU core, "
              f"{cores} cores{'; ' + input_spread if input_spread else ''})\n"
              f"model alone:    {appetite:,.1f} images/sec on {topology.num_replicas} x "
              f"{topology.device_kind}{' (' + model_spread + ')' if model_spread else ''}\n"
              f"ratio {ratio:.2f}: the {summary['bottleneck']} is the bottleneck", flush=True)
    return summary
