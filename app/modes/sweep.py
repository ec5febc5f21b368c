"""Sweep any setting: images/second at each point of a grid of settings, on the
run's --dataset (`--sweep=FLAG=v1,v2,...`, repeatable: the grid is the product of the
axes; `--sweep_batch_sizes=64,128,...` is the study's first experiment, the axis
global_batch_size alone). On a real dataset each point reads it through its input
pipeline, so `--sweep=input_pipeline=device,grain` asks whether holding the data on
the device matters for it; synthetic data (made on the device) has no pipeline to vary.

One process measures every point (app/modes/bench.py): the model built for the
point's settings (reused while only the batch or pipeline changes), a warm-up fit that
compiles, then `--steps_per_epoch` timed steps (default 100, a multiple of the point's
steps per execution; auto is 1, as in the other modes) under the throughput, MFU and
energy callbacks; with --repeats=N, N such windows, each after a fresh compile, the
point's figure their median and its spread their min-max. A point that does not fit
in device memory, or whose settings cannot run (a batch the replicas do not divide, a
combination a plain run would refuse), is recorded as such and the sweep goes on. The batch axis runs ascending, so with it alone peak device memory (a
high-water mark, which only grows) is each size's own; a point where it did not
rise has none.

Outputs (process 0): sweep.json (every point), a chart per axis, sweep-<axis>.png
(the other axes held at the best point's values; sweep.png is the first axis's),
an HParams session per point under <logdir>/points/ (TensorBoard's HParams table
compares them), TensorBoard scalars under <logdir>/sweep for a batch-only sweep
(step = global batch size), summary.json, and a table, all rewritten after each
point, so a sweep that is stopped keeps its finished points.

SIGTERM or Ctrl-C stops the sweep at the next step boundary (exit 75): the point
being measured is dropped, the finished ones are kept, and rerunning the same
command measures only the points left (app/modes/points.py, the campaign loop the
ladder shares). A rerun of a finished sweep says it is complete and prints its table
again.
"""

from __future__ import annotations

import itertools
import os
import re
import time

from app.modes import bench, points
from app.modes.point_folders import POINTS_FOLDER, point_name
from app.run import context as run_context
from app.run import machine_block, rundir
from app.run.summary import percent, shell_command
from callbacks.figures import spread
from callbacks.records import events
from callbacks.records.dashboard import SWEEP_FIGURES
from flags.config import ConfigError

SWEEP_FILE = "sweep.json"


def grid(axes) -> list[dict]:
    """Every point of the axes' product, as {flag: value} in the axes' order (the
    last axis varies fastest)."""
    names = [name for name, _ in axes]
    return [dict(zip(names, values)) for values in itertools.product(*(v for _, v in axes))]


def _cell(row, key, spec):
    width = re.match(r">(\d+)", spec).group(1)
    return format(row[key], spec) if row.get(key) is not None else format("-", f">{width}")


def _axis_value(row: dict, axis: str) -> str:
    """A point's value of `axis` as asked, and what it resolved to where that differs
    (input_pipeline auto>device: the pipeline auto picked)."""
    asked = row.get("settings", {}).get(axis, row.get(axis, "-"))
    ran = row.get(axis)
    return f"{asked}>{ran}" if axis == "input_pipeline" and ran not in (None, asked) \
        else str(asked)


def _range(row: dict) -> str:
    """The row's spread of images/sec, "95.1-101.3", or "-" where it has none."""
    low, high = row.get("images_per_sec_min"), row.get("images_per_sec_max")
    return f"{low:,.1f}-{high:,.1f}" if None not in (low, high) else "-"


def format_table(rows: list[dict], axes=("global_batch_size",)) -> str:
    """The points as a table: the other axes' values, then global batch, per device,
    images/sec (the median window's, with the windows' min-max where repeated; per
    device too where there are several) and the other figures."""
    others = [a for a in axes if a != "global_batch_size"]
    widths = {a: max([len(a)] + [len(_axis_value(r, a)) for r in rows]) for a in others}
    repeated = any(r.get("images_per_sec_min") is not None for r in rows)
    spreads = max([len(spread.SPREAD)] + [len(_range(r)) for r in rows])
    several = any((r.get("images_per_sec_per_device") or 0) != (r.get("images_per_sec") or 0)
                  for r in rows)
    header = (" ".join(f"{a:>{widths[a]}}" for a in others) + (" " if others else "") +
              f"{'global batch':>12} {'per device':>10} {'images/sec':>11} " +
              (f"{spread.SPREAD:>{spreads}} " if repeated else "") +
              (f"{'img/s/device':>12} " if several else "") +
              f"{'MFU':>6} {'step ms':>8} {'+-':>5} {'peak GiB':>8} {'J/image':>8}  status")
    lines = [header, "-" * len(header)]
    for r in rows:
        values = {**r, **r.get("settings", {})}
        lines.append(
            " ".join(f"{_axis_value(r, a):>{widths[a]}}" for a in others) +
            (" " if others else "") +
            f"{str(values.get('global_batch_size', '-')):>12} "
            f"{_cell(r, 'per_device_batch_size', '>10')} "
            f"{_cell(r, 'images_per_sec', '>11,.1f')} " +
            (f"{_range(r):>{spreads}} " if repeated else "") +
            (f"{_cell(r, 'images_per_sec_per_device', '>12,.1f')} " if several else "") +
            f"{percent(r['mfu']) if r.get('mfu') is not None else '-':>6} "
            f"{_cell(r, 'step_time_ms', '>8.2f')} {_cell(r, 'step_time_stderr_ms', '>5.2f')} "
            f"{_cell(r, 'peak_memory_gib', '>8.2f')} {_cell(r, 'joules_per_image', '>8.3f')}"
            f"  {r['status']}")
    return "\n".join(lines)


def check_models(config) -> None:
    """Each --sweep=model=... value as a plain run's --model is checked (its file,
    function or class), before anything is written.

    Raises:
        ConfigError: one line, naming the value.
    """
    from app.models import check_model

    for name, values in config.sweep_axes:
        for value in values if name == "model" else ():
            try:
                check_model(config.sweep_point({"model": value}))
            except ConfigError as error:
                raise ConfigError(f"--sweep=model={value}: {error}") from None


def run(context) -> dict:
    """Measures throughput at each point of the sweep's grid; returns the summary dict.

    Raises:
        callbacks.stops.Preempted: SIGTERM or Ctrl-C; the finished points are kept.
    """
    check_models(context.config)
    context = run_context.start(context)
    config, topology, billing = context.config, context.topology, context.billing
    run_dir = context.run_dir
    axes = config.sweep_axes
    plan = {point_name(settings): settings for settings in grid(axes)}
    run_context.create_folder(context)
    context = run_context.with_steps_per_execution(context, config.steps_per_execution or 1)
    config = context.config
    names = [name for name, _ in axes]
    head = {
        "mode": "sweep", **topology.describe(), "model": config.model,
        "dataset": config.dataset, "image_size": bench.image_size_of(context),
        "precision": config.policy, "steps_per_execution": config.steps_per_execution,
        "axes": {name: list(values) for name, values in axes},
        "timed_steps_per_point": config.steps_per_epoch or bench.DEFAULT_STEPS,
        "repeats": config.repeats, "spread": spread.SPREAD,
        "peak_tflops_per_device": billing.peak_tflops_per_device,
        "machine": billing.machine, "price_per_hour_usd": billing.price_per_hour_usd,
        "started_at": context.started_at, "logdir": run_dir.path,
        # what every point shares; each row's machine_state holds its timed windows
        "machine_state": machine_block.campaign_block(topology, config.backend),
    }
    windows = (f"{config.repeats} timed windows of {head['timed_steps_per_point']} steps, "
               "each after a fresh compile" if config.repeats > 1 else
               f"{head['timed_steps_per_point']} timed steps after a warm-up")
    campaign = points.Campaign(
        mode="sweep", unit="point", names=list(plan), head=head,
        measure=lambda bench_, name, rows: bench.measure(bench_, plan[name], name),
        summarize=lambda head_, rows, status: _summarize(head_, rows, plan, status),
        write=lambda summary: _write_outputs(run_dir.path, summary, summary["sweep"]),
        closing=lambda summary: _print_closing(summary, run_dir.path),
        first_line=(f"[sweep] {config.model} on {topology.num_replicas} x "
                    f"{topology.device_kind} ({config.backend}, {config.policy}): "
                    f"{len(plan)} point(s) over {', '.join(names)}, each {windows}"),
        varying=tuple(names))
    return points.run(context, campaign)


def _summarize(head, rows, plan, status) -> dict:
    """The summary with the rows so far, in the plan's order (a point's settings are its
    name's in the plan, whatever a row read back says)."""
    ordered = [{**rows[name], "settings": plan[name]} for name in plan if name in rows]
    measured = [r for r in ordered if r.get("images_per_sec")]
    summary = {**head, "status": status, "sweep": ordered,
               "points_left": [name for name in plan if name not in rows],
               "best": max(measured, key=lambda r: r["images_per_sec"]) if measured else None,
               "largest_batch_that_fits": max((r["global_batch_size"] for r in measured
                                               if r.get("global_batch_size")), default=None),
               "wall_seconds": round(time.time() - head["started_at"], 2)}
    if list(summary["axes"]) == ["global_batch_size"]:  # the batch sweep's own key
        summary["sizes_left"] = [settings["global_batch_size"]
                                 for name, settings in plan.items() if name not in rows]
    return summary


def _print_closing(summary, logdir) -> None:
    print(format_table(summary["sweep"], list(summary["axes"])))
    charts = ", ".join(f"sweep-{axis}.png" for axis in summary.get("axes", {}))
    repeats = summary.get("repeats") or 1
    if repeats > 1:
        print(f"images/sec: each point's median of {repeats} timed windows (each after a "
              f"fresh compile); {spread.SPREAD}: the lowest and highest window")
    print(f"sweep: {os.path.join(logdir, SWEEP_FILE)} and sweep.png ({charts}); each "
          f"point an HParams session under {POINTS_FOLDER}/\n"
          f"view:  {shell_command('-m', 'tensorboard.main', '--logdir', logdir)}", flush=True)


def axis_series(rows: list[dict], best: dict | None, axis: str) -> list[tuple]:
    """[(value of `axis`, images/sec, lowest, highest window)] of the points whose other
    settings are the best point's (an axis's chart holds the others at their best)."""
    if not best:
        return []
    held = {k: v for k, v in best["settings"].items() if k != axis}
    return [(r["settings"][axis], r.get("images_per_sec"), r.get("images_per_sec_min"),
             r.get("images_per_sec_max")) for r in rows
            if axis in r.get("settings", {})
            and all(r["settings"].get(k) == v for k, v in held.items())]


def _write_outputs(logdir, summary, rows):
    from app.engine import plots

    rundir.write_json_atomic(os.path.join(logdir, SWEEP_FILE), summary)
    rundir.write_json_atomic(os.path.join(logdir, rundir.SUMMARY_FILE), summary)
    label = f"{summary['num_replicas']} x {summary['device_kind']} ({summary['backend']})"
    note = (f"error bars: {spread.SPREAD} of {summary['repeats']} timed windows, each after "
            "a fresh compile" if (summary.get("repeats") or 1) > 1 else "")
    for index, axis in enumerate(summary["axes"]):
        series = axis_series(rows, summary["best"], axis)
        held = ", ".join(f"{k}={v}" for k, v in (summary["best"] or {}).get(
            "settings", {}).items() if k != axis)
        title = (f"{summary['model']}: training throughput vs {axis.replace('_', ' ')}" +
                 (f" ({held})" if held else ""))
        paths = [os.path.join(logdir, f"sweep-{axis}.png")]
        paths += [os.path.join(logdir, "sweep.png")] if index == 0 else []
        for path in paths:
            if all(isinstance(x, (int, float)) for x, *_ in series):
                plots.line_chart({label: series}, path, log2_x=axis == "global_batch_size",
                                 title=title, xlabel=axis.replace("_", " "),
                                 ylabel="images/sec", zero_y=True, note=note)
            else:
                plots.bar_chart({"images/sec": {str(x): (y, (low, high))
                                                for x, y, low, high in series}}, path,
                                title=title, ylabel="images/sec", note=note)
    if list(summary["axes"]) != ["global_batch_size"]:
        return  # several axes: the HParams sessions compare the points
    folder = os.path.join(logdir, "sweep")
    older = events.event_files(folder) if os.path.isdir(folder) else []
    writer = events.EventWriter(folder)  # every point once: a new file, the older ones go
    for row in rows:
        for key, figure in SWEEP_FIGURES.items():
            if row.get(key) is not None and row.get("global_batch_size"):
                writer.scalar(figure.tag(), row[key], row["global_batch_size"],
                              description=figure.text)
    writer.close()
    for path in older:
        os.remove(path)
