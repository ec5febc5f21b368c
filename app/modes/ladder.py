"""The effort ladder (`--benchmark=ladder`): how much each of the app's settings buys
on this accelerator, the same model from a plain start to the app's best, one rung at
a time, each rung keeping the ones before it (the 2018 study's open question: how much
effort does it take to use a platform well?).

RUNGS is the ladder, in order; each says what it changes. Each rung is a point
(app/modes/points.py: a short measured run on the run's --dataset, its HParams session
under <logdir>/points/) with its images/sec, its gain over the rung before (the last
one measured) and over the first. On a real dataset the rungs read it through the
host's pipeline (--input_pipeline where it names one, else grain on JAX, tf.data on
TensorFlow) until data_on_device holds it in device memory (--input_pipeline=device:
JAX; a dataset over its share of that memory is that rung's reason). A rung that
cannot apply here is kept as a row, skipped, with its reason (data on the device
needs a real dataset and JAX; XLA's kernel autotuning needs JAX on a GPU).

Outputs (process 0): ladder.json and summary.json (the same dict), ladder.png (a
waterfall of images/sec), and a table. Ctrl-C keeps the finished rungs; the same
command measures the rest; a finished ladder's rerun prints its table again.
"""

from __future__ import annotations

import dataclasses
import os
import time

from app.engine import autotune
from app.modes import points
from app.run import context as run_context
from app.run import rundir
from app.run.summary import shell_command
from callbacks.profiling import breakdown as step_breakdown
from callbacks.stops import PROCESS_STOP, Preempted
from flags.config import model_kind

LADDER_FILE = "ladder.json"
BATCH_FACTORS = (1, 2, 4, 8)  # the largest batch that fits: of --global_batch_size times these
STEPS_PER_EXECUTION = 16  # the app's own with the data on the device (app/engine/data.py)


@dataclasses.dataclass(frozen=True)
class Rung:
    name: str
    changes: str  # what this rung changes over the one before


RUNGS = (
    Rung("float32", "the plain start: float32, --global_batch_size, one step per host "
                  "call, XLA's heuristic kernels where the app may take them (its "
                  "ResNets on a GPU), a real dataset decoded on the host"),
    Rung("mixed_bfloat16", "precision float32 -> mixed_bfloat16 (bfloat16 compute, "
                           "float32 weights)"),
    Rung("largest_batch", "global batch -> the largest of "
                          f"{', '.join(f'x{f}' for f in BATCH_FACTORS)} that fits"),
    Rung("steps_per_execution", f"steps per host call 1 -> {STEPS_PER_EXECUTION}"),
    Rung("data_on_device", "the dataset held in device memory, augmented there "
                           "(--input_pipeline=device)"),
    Rung("xla_full_autotune", "XLA times every candidate kernel while compiling "
                              "(--xla_autotune=full)"),
)


def _settings(rung: Rung, before: dict, config) -> dict | str:
    """The rung's settings from the rung before's, or why it cannot apply here."""
    if rung.name == "float32":
        plain = {"precision": "float32", "global_batch_size": config.global_batch_size,
                 "steps_per_execution": 1, "xla_autotune": _plain_kernels(config)}
        return plain if config.dataset == "synthetic" else {
            **plain, "input_pipeline": _host_pipeline(config)}
    if rung.name == "mixed_bfloat16":
        return {**before, "precision": "mixed_bfloat16"}
    if rung.name == "steps_per_execution":
        return {**before, "steps_per_execution": STEPS_PER_EXECUTION}
    if rung.name == "data_on_device":
        if config.dataset == "synthetic":
            return ("skipped: synthetic data is made on the device: it has no input "
                    "pipeline to hold there (climb on a real --dataset, e.g. digits)")
        if config.backend != "jax":
            return (f"skipped: --input_pipeline=device on {config.backend} caches the "
                    "decoded images in host memory (tf.data), not on the device (JAX only)")
        return {**before, "input_pipeline": "device"}
    if rung.name == "xla_full_autotune":
        choice = autotune.choose(config.sweep_point({**before, "xla_autotune": "full"}), None)
        if choice is None:
            return (f"skipped: XLA picks no GPU kernels on {config.backend} with "
                    f"--accelerator={config.accelerator} (JAX on a GPU only)")
        if choice == autotune.FROM_XLA_FLAGS:
            return "skipped: XLA_FLAGS set the kernels' choice (the user's own)"
        if before.get("xla_autotune") == "full":
            return (f"skipped: XLA's full autotuning was on from the start: the app never "
                    f"takes the heuristic kernels for {config.model} (app/engine/autotune.py)")
        return {**before, "xla_autotune": "full"}
    raise ValueError(f"no settings for rung {rung.name!r}")


def _host_pipeline(config) -> str:
    """The plain start's input pipeline on a real dataset: --input_pipeline where it
    names a host's, else the one auto takes when the data is not held on the device
    (preprocessing/streams.py: grain on JAX, tf.data on TensorFlow)."""
    if config.input_pipeline not in ("auto", "device"):
        return config.input_pipeline
    return "grain" if config.backend == "jax" else "tf.data"


def _plain_kernels(config) -> str:
    """The plain start's kernel choice: the heuristic one where the app may take it (its
    own ResNets: autotune.HEURISTIC_MODEL_KINDS), else XLA's default, full (the ViTs'
    attention, a user's model: the heuristic mode is unmeasured there and may not
    compile, e.g. ViT-B/16's bf16 attention on an H200)."""
    return ("heuristic" if model_kind(config.model) in autotune.HEURISTIC_MODEL_KINDS
            else "full")


def _largest_batch(bench, before: dict, config) -> dict:
    """The largest_batch rung: each candidate measured, smallest first; the rung's
    row is the largest that fitted, with every candidate's outcome under `tried`."""
    tried, best = [], None
    for factor in BATCH_FACTORS:
        settings = {**before, "global_batch_size": config.global_batch_size * factor}
        row = points.measure(bench, settings, f"largest_batch-x{factor}")
        tried.append({"global_batch_size": settings["global_batch_size"],
                      "status": row["status"], "images_per_sec": row.get("images_per_sec")})
        if row["status"] == "ok":
            best = row
        elif row["status"] == "out of memory":
            break  # a larger batch will not fit either
    row = dict(best) if best else {"settings": before, "status": "skipped: no batch fits"}
    return {**row, "tried": tried}


def run(context) -> dict:
    """Measures the ladder's rungs; returns the summary dict.

    Raises:
        callbacks.stops.Preempted: SIGTERM or Ctrl-C; the finished rungs are kept.
    """
    context = run_context.start(context)
    config, topology = context.config, context.topology
    run_dir = context.run_dir
    done = points.finished_rows(run_dir.path, LADDER_FILE, "ladder") if run_dir.resuming else {}
    run_context.create_folder(context)
    summary = {
        "mode": "ladder", **topology.describe(), "model": config.model,
        "dataset": config.dataset, "image_size": points.image_size_of(context),
        "rungs": [dataclasses.asdict(r) for r in RUNGS],
        "timed_steps_per_rung": config.steps_per_epoch or points.DEFAULT_STEPS,
        "machine": context.billing.machine,
        "price_per_hour_usd": context.billing.price_per_hour_usd,
        "started_at": context.started_at, "logdir": run_dir.path,
    }
    if all(r.name in done for r in RUNGS):
        print(f"ladder is complete: {run_dir.path} holds its {LADDER_FILE} (kept as it is); "
              "pass --fresh to run it again", flush=True)
        summary = rundir.read_json(os.path.join(run_dir.path, LADDER_FILE))
        if topology.is_chief:
            print(format_table(summary["ladder"]))
        return summary
    summary["started_at"] = (rundir.read_json(os.path.join(run_dir.path, LADDER_FILE))
                             .get("started_at", context.started_at) if done else
                             context.started_at)
    if done:
        print(f"[ladder] resuming: {len(done)} of {len(RUNGS)} rungs measured before "
              f"({', '.join(r.name for r in RUNGS if r.name in done)})", flush=True)
    bench = points.open_bench(
        context, f"[ladder] {config.model} on {topology.num_replicas} x {topology.device_kind} "
        f"({config.backend}): {len(RUNGS)} rungs, each {summary['timed_steps_per_rung']} "
        "timed steps after a warm-up")
    rows, before = {}, {}
    for rung in RUNGS:
        if rung.name in done:
            rows[rung.name] = done[rung.name]
        else:
            try:
                PROCESS_STOP.raise_if_requested()
                rows[rung.name] = _climb(bench, rung, before, config)
            except Preempted as error:
                _finish(summary, rows, context, "preempted")
                raise Preempted(None, None, error.signal_name, where=(
                    f"at rung {len(rows) + 1} of {len(RUNGS)} ({rung.name})"), kept=(
                    f"{len(rows)} of {len(RUNGS)} rungs done, kept in "
                    f"{os.path.join(run_dir.path, LADDER_FILE)}")) from None
            _finish(summary, rows, context, "running")
        if rows[rung.name]["status"] == "ok":
            before = rows[rung.name]["settings"]  # the next rung keeps this one's
    summary = _finish(summary, rows, context, "completed")
    if topology.is_chief:
        print(format_table(summary["ladder"]))
        print(f"ladder: {os.path.join(run_dir.path, LADDER_FILE)} and ladder.png\n"
              f"view:   {shell_command('-m', 'tensorboard.main', '--logdir', run_dir.path)}",
              flush=True)
    return summary


def _climb(bench, rung: Rung, before: dict, config) -> dict:
    if rung.name == "largest_batch":
        return {**_largest_batch(bench, before, config), "point": rung.name,
                "rung": rung.name, "changes": rung.changes}
    settings = _settings(rung, before, config)
    if isinstance(settings, str):
        row = {"settings": before, "status": settings}
    else:
        row = points.measure(bench, settings, rung.name)
    return {**row, "point": rung.name, "rung": rung.name, "changes": rung.changes}


def with_gains(rows: list[dict]) -> list[dict]:
    """The rows with each measured rung's gain over the last measured rung before it
    and over the first (images/sec ratios, 3 decimals); None where not measured. And
    why: `largest_change`, the kind of work whose time an image changed most since the
    last profiled rung (`per_image_change`), None where either has no breakdown."""
    out, first, previous, profiled = [], None, None, None
    for row in rows:
        rate = row.get("images_per_sec") if row.get("status") == "ok" else None
        gains = {"gain_over_previous": None, "gain_over_first": None, "largest_change": None}
        if rate:
            if previous:
                gains["gain_over_previous"] = round(rate / previous, 3)
            first = first or rate
            gains["gain_over_first"] = round(rate / first, 3)
            previous = rate
            if row.get("breakdown"):
                gains["largest_change"] = profiled and per_image_change(profiled, row)
                profiled = row
        out.append({**row, **gains})
    return out


def per_image_change(before: dict, after: dict) -> dict | None:
    """The kind of work whose time per image differs most between two measured rungs'
    breakdowns (each step's parts over its global batch: rungs differ in batch size):
    {"kind", "before_us", "after_us"} (microseconds an image), or None."""
    def per_image(row):
        batch = row["global_batch_size"]
        return {"parts": {kind: {"ms": part["ms"] * 1e3 / batch}
                          for kind, part in row["breakdown"].get("parts", {}).items()}}
    found = step_breakdown.largest_difference(per_image(before), per_image(after))
    if found is None:
        return None
    kind, was, now = found
    return {"kind": kind, "before_us": round(was, 3), "after_us": round(now, 3)}


def why_lines(rows: list[dict]) -> list[str]:
    """One line a rung with a largest_change: 'RUNG: KIND A -> B us an image, the
    largest change (its breakdown's line)'."""
    lines = []
    for row in rows:
        change = row.get("largest_change")
        if change:
            lines.append(f"{row['rung']}: {change['kind']} {change['before_us']:,.1f} -> "
                         f"{change['after_us']:,.1f} us an image, the largest change "
                         f"({step_breakdown.line(row['breakdown'])})")
    return lines


def format_table(rows: list[dict]) -> str:
    header = (f"{'rung':<20} {'images/sec':>11} {'vs before':>9} {'vs first':>8}  "
              "changes / status")
    lines = [header, "-" * len(header)]
    for r in rows:
        def cell(key, spec, width, unit=""):
            return (format(r[key], spec) + unit if r.get(key) is not None
                    else f"{'-':>{width}}")
        text = r["changes"] if r["status"] == "ok" else r["status"]
        lines.append(f"{r['rung']:<20} {cell('images_per_sec', '>11,.1f', 11)} "
                     f"{cell('gain_over_previous', '>8.2f', 9, 'x')} "
                     f"{cell('gain_over_first', '>7.2f', 8, 'x')}  {text}")
    why = why_lines(rows)
    if why:  # each rung's profiled steps (app/modes/points.py), split by kind of work
        lines += ["", "why (the kind of work whose time an image changed most, each rung's "
                      "profiled steps):", *(f"  {line}" for line in why)]
    return "\n".join(lines)


def _finish(summary, rows, context, status) -> dict:
    ordered = with_gains([rows[r.name] for r in RUNGS if r.name in rows])
    measured = [r for r in ordered if r.get("gain_over_first")]
    summary = {**summary, "status": status, "ladder": ordered,
               "rungs_left": [r.name for r in RUNGS if r.name not in rows],
               "total_gain": measured[-1]["gain_over_first"] if measured else None,
               "wall_seconds": round(time.time() - summary["started_at"], 2)}
    if context.topology.is_chief:
        from app.engine import plots

        logdir = context.run_dir.path
        rundir.write_json_atomic(os.path.join(logdir, LADDER_FILE), summary)
        rundir.write_json_atomic(os.path.join(logdir, rundir.SUMMARY_FILE), summary)
        plots.waterfall_chart(
            [(r["rung"], r.get("images_per_sec") if r["status"] == "ok" else None)
             for r in ordered], os.path.join(logdir, "ladder.png"),
            title=f"{summary['model']}: the effort ladder on {summary['num_replicas']} x "
                  f"{summary['device_kind']} ({summary['backend']})", ylabel="images/sec")
    return summary
