"""The study's first experiment: images/second against global batch size, on
synthetic data (`--sweep_batch_sizes=64,128,256,...`).

One process measures every size, smallest first, with the same model: for each,
a short fit compiles and warms up, then a timed fit runs `--steps_per_epoch` steps
(default 100) under the throughput, MFU and energy callbacks. A size that does not
fit in device memory is reported as such and the sweep goes on. Peak device memory
is JAX's/TensorFlow's high-water mark, which only grows, so with sizes in ascending
order it is each size's own peak.

Outputs (process 0): sweep.json, sweep.png (images/sec vs batch), TensorBoard
scalars under <logdir>/sweep (step = global batch size), summary.json, and a table,
all rewritten after each size, so a sweep that is stopped keeps its finished points.

SIGTERM or Ctrl-C stops the sweep at the next step boundary (exit 75): the size
being measured is dropped, the finished ones are kept, and rerunning the same
command measures only the sizes left. A rerun of a finished sweep says it is
complete and prints its table again.
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
from app.run.summary import percent, shell_command
from callbacks.energy import EnergyMeter, gpu_energy_readers
from callbacks.figures.money import usd_per_million_images
from callbacks.mfu import ModelFlopsUtilization
from callbacks.records import events
from callbacks.records.dashboard import SWEEP_FIGURES
from callbacks.stop_on_request import StopOnRequest
from callbacks.stops import PROCESS_STOP, Preempted
from preprocessing.datasets import synthetic

DEFAULT_STEPS = 100
SWEEP_FILE = "sweep.json"
# A size's row is final once it was measured, did not fit, or cannot be run.
FINAL = ("ok", "out of memory", "skipped")


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
                     f"{percent(r['mfu']) if r.get('mfu') is not None else '-':>6} "
                     f"{f('step_time_ms', '>8.2f')} "
                     f"{f('step_time_stderr_ms', '>5.2f')} {f('peak_memory_gib', '>8.2f')} "
                     f"{f('joules_per_image', '>8.3f')}  {r['status']}")
    return "\n".join(lines)


def finished_rows(logdir: str) -> dict:
    """{global batch: row} of the sizes an earlier attempt of this sweep finished."""
    try:
        earlier = rundir.read_json(os.path.join(logdir, SWEEP_FILE))
        rows = earlier["sweep"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {r["global_batch_size"]: r for r in rows
            if isinstance(r, dict) and str(r.get("status", "")).startswith(FINAL)}


def run(context) -> dict:
    """Measures throughput at each --sweep_batch_sizes; returns the summary dict.

    Raises:
        callbacks.stops.Preempted: SIGTERM or Ctrl-C; the finished sizes are kept.
    """
    context = run_context.start(context)
    config, topology, billing = context.config, context.topology, context.billing
    run_dir = context.run_dir
    sizes = sorted(config.sweep_batch_sizes)
    done = finished_rows(run_dir.path) if run_dir.resuming else {}
    started_at = context.started_at
    if done:
        started_at = rundir.read_json(os.path.join(run_dir.path, SWEEP_FILE)).get(
            "started_at", started_at)
    run_context.create_folder(context)
    # one step per host call, as timed here (config.json keeps auto's 0, for a rerun)
    context = run_context.with_steps_per_execution(context, config.steps_per_execution or 1)
    config = context.config
    spe = config.steps_per_execution
    steps = config.steps_per_epoch or DEFAULT_STEPS - DEFAULT_STEPS % spe
    warmup_steps = max(2 * spe, config.throughput_warmup_steps)
    image_size = config.image_size or synthetic.IMAGE_SIZE
    summary = {
        "mode": "sweep", **topology.describe(), "model": config.model,
        "dataset": "synthetic", "image_size": image_size, "precision": config.policy,
        "steps_per_execution": spe, "timed_steps_per_size": steps,
        "peak_tflops_per_device": billing.peak_tflops_per_device,
        "machine": billing.machine, "price_per_hour_usd": billing.price_per_hour_usd,
        "started_at": started_at, "logdir": run_dir.path,
    }
    if all(size in done for size in sizes):
        print(f"sweep is complete: {run_dir.path} holds its {SWEEP_FILE} (kept as it is); "
              "pass --fresh to run it again", flush=True)
        summary = rundir.read_json(os.path.join(run_dir.path, SWEEP_FILE))
        if topology.is_chief:
            print(_format_table(summary["sweep"]))
            _print_closing(summary, run_dir.path)
        return summary
    if done:
        print(f"[sweep] resuming: {len(done)} of {len(sizes)} sizes measured before "
              f"({', '.join(map(str, sorted(done)))})", flush=True)
    model, flops = make_compiled_model(config, topology, synthetic.NUM_CLASSES, image_size,
                                       steps)
    summary["train_flops_per_image"] = flops
    readers = gpu_energy_readers(config.accelerator, topology.devices_per_process)
    print(f"[sweep] {config.model} {image_size}x{image_size} on {topology.num_replicas} x "
          f"{topology.device_kind} ({config.backend}, {config.policy}), {steps} timed steps "
          f"per size after {warmup_steps} warm-up steps", flush=True)

    rows = {size: done[size] for size in sizes if size in done}
    for batch in sizes:
        if batch in rows:
            continue
        try:
            PROCESS_STOP.raise_if_requested()
            rows[batch] = _measure(batch, model, flops, config, topology, billing, readers,
                                   steps, warmup_steps)
        except Preempted as error:
            kept = [r for r in rows.values() if r["status"] == "ok"]
            _finish(summary, rows, sizes, context, "preempted")
            raise Preempted(None, None, error.signal_name, kept=(
                f"stopped at global batch {batch}; {len(kept)} finished size(s) kept in "
                f"{os.path.join(run_dir.path, SWEEP_FILE)}; rerun the same command for the "
                "rest")) from None
        _finish(summary, rows, sizes, context, "running")  # each finished point is kept
    summary = _finish(summary, rows, sizes, context, "completed")
    if topology.is_chief:
        print(_format_table(summary["sweep"]))
        _print_closing(summary, run_dir.path)
    return summary


def _measure(batch, model, flops, config, topology, billing, readers, steps,
             warmup_steps) -> dict:
    """One size's row: its steady-state figures, or why it has none.

    Raises:
        callbacks.stops.Preempted: SIGTERM or Ctrl-C, at a step boundary.
    """
    row = {"global_batch_size": batch, "status": "ok"}
    try:
        shape = topology.batch_shape(batch)
    except TopologyError:
        row["status"] = f"skipped: not divisible by {topology.num_replicas} replicas"
        return row
    row["per_device_batch_size"] = shape.per_replica
    utilization = ModelFlopsUtilization(flops, topology.num_replicas,
                                        billing.peak_tflops_per_device)
    energy = EnergyMeter(**readers, images_per_step=shape.per_process,
                         warmup_steps=config.steps_per_execution) if readers else None
    try:
        meter, warmup_seconds = timed_synthetic_fit(
            model, config, topology, shape, steps, warmup_steps,
            [c for c in (energy, StopOnRequest(PROCESS_STOP)) if c is not None])
    except Exception as error:  # noqa: BLE001 - an OOM must not end the sweep
        if not is_out_of_memory(error):
            raise
        row["status"] = "out of memory"
        print(f"[sweep] global batch {batch}: does not fit in device memory", flush=True)
        return row
    rate = meter.images_per_sec
    mfu = utilization.utilization(rate)
    row.update({
        "images_per_sec": round(rate, 2),
        "images_per_sec_per_device": round(rate / topology.num_replicas, 2),
        "mfu": float(f"{mfu:.6g}") if mfu is not None else None,
        "model_tflops_per_sec": float(f"{flops * rate / 1e12:.6g}") if flops else None,
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
    return row


def _finish(summary, rows, sizes, context, status) -> dict:
    """The summary with the rows so far, written by process 0 (sweep.json,
    summary.json, sweep.png, TensorBoard)."""
    ordered = [rows[size] for size in sizes if size in rows]
    measured = [r for r in ordered if r.get("images_per_sec")]
    summary = {**summary, "status": status, "sweep": ordered,
               "sizes_left": [size for size in sizes if size not in rows],
               "best": max(measured, key=lambda r: r["images_per_sec"]) if measured else None,
               "largest_batch_that_fits": max((r["global_batch_size"] for r in measured),
                                              default=None),
               "wall_seconds": round(time.time() - summary["started_at"], 2)}
    if context.topology.is_chief:
        _write_outputs(context.run_dir.path, summary, ordered)
    return summary


def _print_closing(summary, logdir) -> None:
    print(f"sweep: {os.path.join(logdir, SWEEP_FILE)} and sweep.png\n"
          f"view:  {shell_command('-m', 'tensorboard.main', '--logdir', logdir)}", flush=True)


def _write_outputs(logdir, summary, rows):
    from app.engine import plots

    rundir.write_json_atomic(os.path.join(logdir, SWEEP_FILE), summary)
    rundir.write_json_atomic(os.path.join(logdir, rundir.SUMMARY_FILE), summary)
    label = f"{summary['num_replicas']} x {summary['device_kind']} ({summary['backend']})"
    plots.line_chart({label: [(r["global_batch_size"], r.get("images_per_sec")) for r in rows]},
                     os.path.join(logdir, "sweep.png"), log2_x=True,
                     title=f"{summary['model']}: training throughput vs global batch size",
                     xlabel="global batch size", ylabel="images/sec", zero_y=True)
    folder = os.path.join(logdir, "sweep")
    older = events.event_files(folder) if os.path.isdir(folder) else []
    writer = events.EventWriter(folder)  # every point once: a new file, the older ones go
    for row in rows:
        for key, figure in SWEEP_FIGURES.items():
            if row.get(key) is not None:
                writer.scalar(figure.tag(), row[key], row["global_batch_size"],
                              description=figure.text)
    writer.close()
    for path in older:
        os.remove(path)
