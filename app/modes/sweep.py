"""The study's first experiment: images/second against global batch size, on
synthetic data (`--sweep_batch_sizes=64,128,256,...`).

One process measures every size, smallest first, with the same model: for each,
a short fit compiles and warms up, then a timed fit runs `--steps_per_epoch` steps
(default 100) under the throughput, MFU and energy callbacks. A size that does not
fit in device memory is reported as such and the sweep goes on. Peak device memory
is JAX's/TensorFlow's high-water mark, which only grows, so with sizes in ascending
order it is each size's own peak.

Outputs (process 0): sweep.json, sweep.png (images/sec vs batch), TensorBoard
scalars under <logdir>/sweep (step = global batch size), summary.json, and a table.
"""

from __future__ import annotations

import os
import re
import time

from app.engine.distribute import TopologyError
from app.engine.measure import timed_synthetic_fit
from app.engine.memory import is_out_of_memory, peak_memory_gib
from app.engine.recipe import make_compiled_model
from app.run import context as run_context
from app.run import rundir
from app.run.summary import shell_command
from callbacks.energy import EnergyMeter, gpu_energy_readers
from callbacks.figures.money import usd_per_million_images
from callbacks.mfu import ModelFlopsUtilization
from callbacks.records.dashboard import figure_of
from callbacks.records.events import EventWriter
from preprocessing.datasets import synthetic

DEFAULT_STEPS = 100
def _format_table(rows: list[dict]) -> str:
    header = (f"{'global batch':>12} {'per device':>10} {'images/sec':>11} {'per device':>11} "
              f"{'MFU':>6} {'step ms':>8} {'+-':>5} {'peak GiB':>8} {'J/image':>8}  status")
    lines = [header, "-" * len(header)]
    for r in rows:
        def f(key, spec):
            width = re.match(r">(\d+)", spec).group(1)
            return format(r[key], spec) if r.get(key) is not None else format("-", f">{width}")
        lines.append(f"{r['global_batch_size']:>12} {f('per_device_batch_size', '>10')} "
                     f"{f('images_per_sec', '>11,.1f')} {f('images_per_sec_per_device', '>11,.1f')} "
                     f"{f('mfu', '>6.1%')} {f('step_time_ms', '>8.2f')} "
                     f"{f('step_time_stderr_ms', '>5.2f')} {f('peak_memory_gib', '>8.2f')} "
                     f"{f('joules_per_image', '>8.3f')}  {r['status']}")
    return "\n".join(lines)


def run(context) -> dict:
    """Measures throughput at each --sweep_batch_sizes; returns the summary dict."""
    context = run_context.start(context)
    run_context.create_folder(context)
    config, topology, billing = context.config, context.topology, context.billing
    chief = topology.is_chief
    run_dir = context.run_dir
    spe = config.steps_per_execution
    steps = config.steps_per_epoch or DEFAULT_STEPS - DEFAULT_STEPS % spe
    warmup_steps = max(2 * spe, config.throughput_warmup_steps)
    image_size = config.image_size or synthetic.IMAGE_SIZE
    model, flops = make_compiled_model(config, topology, synthetic.NUM_CLASSES, image_size,
                                       steps)
    readers = gpu_energy_readers(config.accelerator, topology.devices_per_process)
    print(f"[sweep] {config.model} {image_size}x{image_size} on {topology.num_replicas} x "
          f"{topology.device_kind} ({config.backend}, {config.policy}), {steps} timed steps "
          f"per size after {warmup_steps} warm-up steps", flush=True)

    rows = []
    for batch in sorted(config.sweep_batch_sizes):
        row = {"global_batch_size": batch, "status": "ok"}
        rows.append(row)
        try:
            shape = topology.batch_shape(batch)
        except TopologyError:
            row["status"] = f"skipped: not divisible by {topology.num_replicas} replicas"
            continue
        row["per_device_batch_size"] = shape.per_replica
        utilization = ModelFlopsUtilization(flops, topology.num_replicas,
                                            billing.peak_tflops_per_device)
        energy = EnergyMeter(**readers, images_per_step=shape.per_process,
                             warmup_steps=spe) if readers else None
        try:
            meter, warmup_seconds = timed_synthetic_fit(model, config, topology, shape, steps, warmup_steps,
                                        [c for c in (energy, utilization) if c is not None])
        except Exception as error:  # noqa: BLE001 - an OOM must not end the sweep
            if not is_out_of_memory(error):
                raise
            row["status"] = "out of memory"
            print(f"[sweep] global batch {batch}: does not fit in device memory", flush=True)
            continue
        rate = meter.images_per_sec
        row.update({
            "images_per_sec": round(rate, 2),
            "images_per_sec_per_device": round(rate / topology.num_replicas, 2),
            "mfu": round(utilization.mfu, 4) if utilization.mfu is not None else None,
            "model_tflops_per_sec": round(utilization.model_tflops_per_sec, 2),
            "peak_memory_gib": peak_memory_gib(config.backend),
            "power_watts": round(energy.power_watts, 1) if energy and energy.power_watts else None,
            "joules_per_image": round(energy.joules_per_image, 4)
            if energy and energy.joules_per_image else None,
            "energy_method": energy.method if energy else None,
            "usd_per_million_images": round(usd_per_million_images(
                rate, billing.price_per_hour_usd), 4) if billing.price_per_hour_usd else None,
            "compile_and_warmup_seconds": round(warmup_seconds, 2),
        })
        row.update({k: round(v, 3) for k, v in meter.step_time().items()})
        print(f"[sweep] global batch {batch}: {rate:,.1f} images/sec", flush=True)

    measured = [r for r in rows if r.get("images_per_sec")]
    best = max(measured, key=lambda r: r["images_per_sec"]) if measured else None
    summary = {
        "mode": "sweep", **topology.describe(), "model": config.model,
        "dataset": "synthetic", "image_size": image_size, "precision": config.policy,
        "steps_per_execution": spe, "timed_steps_per_size": steps,
        "train_flops_per_image": flops, "peak_tflops_per_device": billing.peak_tflops_per_device,
        "machine": billing.machine, "price_per_hour_usd": billing.price_per_hour_usd,
        "sweep": rows, "best": best,
        "largest_batch_that_fits": max((r["global_batch_size"] for r in measured), default=None),
        "wall_seconds": round(time.time() - context.started_at, 2), "logdir": run_dir.path,
    }
    table = _format_table(rows)
    if chief:
        _write_outputs(run_dir.path, summary, rows)
        print(table)
        print(f"sweep: {os.path.join(run_dir.path, 'sweep.json')} and sweep.png\n"
              f"view:  {shell_command('-m', 'tensorboard.main', '--logdir', run_dir.path)}",
              flush=True)
    return summary


def _write_outputs(logdir, summary, rows):
    from app.engine import plots

    rundir.write_json_atomic(os.path.join(logdir, "sweep.json"), summary)
    rundir.write_json_atomic(os.path.join(logdir, rundir.SUMMARY_FILE), summary)
    label = f"{summary['num_replicas']} x {summary['device_kind']} ({summary['backend']})"
    plots.line_chart({label: [(r["global_batch_size"], r.get("images_per_sec")) for r in rows]},
                     os.path.join(logdir, "sweep.png"), log2_x=True,
                     title=f"{summary['model']}: training throughput vs global batch size",
                     xlabel="global batch size", ylabel="images/sec", zero_y=True)
    writer = EventWriter(os.path.join(logdir, "sweep"))
    for row in rows:
        for key in ("images_per_sec", "images_per_sec_per_device", "mfu", "step_time_ms",
                    "peak_memory_gib", "joules_per_image"):
            if row.get(key) is not None:
                group = {"mfu": "utilization", "peak_memory_gib": "memory",
                         "joules_per_image": "energy"}.get(key, "throughput")
                writer.scalar(f"sweep_{group}/{key}_vs_batch", row[key], row["global_batch_size"],
                              description=f"{figure_of(key).text} The x axis is the global "
                                          "batch size.")
    writer.close()
