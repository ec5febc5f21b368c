"""The effort ladder (`--benchmark=ladder`): how much each of the app's settings buys
on this accelerator, the same model from a plain start to the app's best, one rung at
a time (the 2018 study's open question: how much effort does it take to use a
platform well?).

RUNGS is the ladder, in order; each says what it changes. Each rung is a point
(app/modes/bench.py: a short measured run on the run's --dataset, its HParams session
under <logdir>/points/; with --repeats=N, the median of N windows) with its images/sec
and its gain over the rung it builds on and over the first. A rung builds on the best
rung before it: one that loses (mixed bfloat16 on a CPU runs at a few per cent of
float32) is reported, marked "not built on", and the next rung starts from the better
settings; the largest_batch rung tries x1..x8 of the batch and keeps the fastest that
fits. On a real dataset the rungs read it through the host's pipeline
(preprocessing/streams.py's host_pipeline: --input_pipeline where it names one, else
what auto takes off the device) until data_on_device holds it in device memory
(--input_pipeline=device: JAX; a dataset over its share of that memory is that rung's
reason). A rung that cannot apply here is kept as a row, skipped, with its reason
(data on the device needs a real dataset and JAX; XLA's kernel autotuning needs JAX
on a GPU).

Outputs (process 0): ladder.json and summary.json (the same dict), ladder.png (a
waterfall of images/sec, each bar from the rung it builds on), and a table. The
campaign (resume, stop, complete) is app/modes/points.py's, which the sweep shares.
"""

from __future__ import annotations

import dataclasses
import os
import time

from app.engine import autotune
from app.modes import bench, points
from app.run import context as run_context
from app.run import rundir
from app.run.summary import shell_command
from callbacks.figures import spread
from callbacks.profiling import breakdown as step_breakdown
from callbacks.profiling import difference
from flags.config import model_kind
from preprocessing import streams

LADDER_FILE = "ladder.json"
BATCH_FACTORS = (1, 2, 4, 8)  # the batches tried: --global_batch_size times these
STEPS_PER_EXECUTION = 16  # the app's own with the data on the device (app/engine/data.py)
# The settings the rungs change (HParams lists them first).
VARYING = ("precision", "global_batch_size", "steps_per_execution", "input_pipeline",
           "xla_autotune")


@dataclasses.dataclass(frozen=True)
class Rung:
    name: str
    changes: str  # what this rung changes over the one it builds on


RUNGS = (
    Rung("float32", "the plain start: float32, --global_batch_size, one step per host "
                  "call, XLA's heuristic kernels where the app may take them (its "
                  "ResNets on a GPU), a real dataset decoded on the host"),
    Rung("mixed_bfloat16", "precision float32 -> mixed_bfloat16 (bfloat16 compute, "
                           "float32 weights)"),
    Rung("largest_batch", "global batch -> the fastest of "
                          f"{', '.join(f'x{f}' for f in BATCH_FACTORS)} that fits (on a "
                          "GPU, the largest)"),
    Rung("steps_per_execution", f"steps per host call 1 -> {STEPS_PER_EXECUTION}"),
    Rung("data_on_device", "the dataset held in device memory, augmented there "
                           "(--input_pipeline=device)"),
    Rung("xla_full_autotune", "XLA times every candidate kernel while compiling "
                              "(--xla_autotune=full)"),
)


def _settings(rung: Rung, before: dict, config) -> dict | str:
    """The rung's settings from those of the rung it builds on, or why it cannot apply."""
    if rung.name == "float32":
        plain = {"precision": "float32", "global_batch_size": config.global_batch_size,
                 "steps_per_execution": 1, "xla_autotune": _plain_kernels(config)}
        return plain if config.dataset == "synthetic" else {
            **plain, "input_pipeline": streams.host_pipeline(config.backend,
                                                             config.input_pipeline)}
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


def _plain_kernels(config) -> str:
    """The plain start's kernel choice: the heuristic one where the app may take it (its
    own ResNets: autotune.HEURISTIC_MODEL_KINDS), else XLA's default, full (the ViTs'
    attention, a user's model: the heuristic mode is unmeasured there and may not
    compile, e.g. ViT-B/16's bf16 attention on an H200)."""
    return ("heuristic" if model_kind(config.model) in autotune.HEURISTIC_MODEL_KINDS
            else "full")


def _largest_batch(bench_, before: dict, config) -> dict:
    """The largest_batch rung: each candidate measured, smallest first; the rung's row
    is the fastest that fitted (ties: the larger), every candidate's outcome under
    `tried`. On a CPU a larger batch can be slower: the fastest is what a later rung
    should build on."""
    tried, best = [], None
    for factor in BATCH_FACTORS:
        settings = {**before, "global_batch_size": config.global_batch_size * factor}
        row = bench.measure(bench_, settings, f"largest_batch-x{factor}",
                            label=f"largest_batch x{factor} (global batch "
                                  f"{settings['global_batch_size']})")
        tried.append({"global_batch_size": settings["global_batch_size"],
                      "status": row["status"], "images_per_sec": row.get("images_per_sec")})
        if row["status"] == "ok" and (best is None or
                                      row["images_per_sec"] >= best["images_per_sec"]):
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
    run_context.create_folder(context)
    head = {
        "mode": "ladder", **topology.describe(), "model": config.model,
        "dataset": config.dataset, "image_size": bench.image_size_of(context),
        "rungs": [dataclasses.asdict(r) for r in RUNGS],
        "timed_steps_per_rung": config.steps_per_epoch or bench.DEFAULT_STEPS,
        "repeats": config.repeats, "spread": spread.SPREAD,
        "machine": context.billing.machine,
        "price_per_hour_usd": context.billing.price_per_hour_usd,
        "started_at": context.started_at, "logdir": run_dir.path,
    }
    windows = (f"{config.repeats} timed windows of {head['timed_steps_per_rung']} steps, "
               "each after a fresh compile" if config.repeats > 1 else
               f"{head['timed_steps_per_rung']} timed steps after a warm-up")
    campaign = points.Campaign(
        mode="ladder", unit="rung", names=[r.name for r in RUNGS], head=head,
        measure=lambda bench_, name, rows: _climb(bench_, name, rows, config),
        summarize=_summarize, write=lambda summary: _write(run_dir.path, summary),
        closing=lambda summary: _print_closing(summary, run_dir.path),
        first_line=(f"[ladder] {config.model} on {topology.num_replicas} x "
                    f"{topology.device_kind} ({config.backend}): {len(RUNGS)} rungs, each "
                    f"{windows}"),
        varying=tuple(name for name in VARYING if not (
            (name == "input_pipeline" and config.dataset == "synthetic")  # none to vary
            or (name == "xla_autotune" and autotune.choose(config, None) is None))))
    return points.run(context, campaign)


def foundation(rows: list[dict]) -> dict | None:
    """The row the next rung builds on: the first measured rung, replaced by each later
    one that is at least as fast (a rung that loses is not built on)."""
    best = None
    for row in rows:
        rate = row.get("images_per_sec") if row.get("status") == "ok" else None
        if rate and (best is None or rate >= best["images_per_sec"]):
            best = row
    return best


def base_of(rung: Rung, rows: dict) -> tuple[dict, dict]:
    """(the settings `rung` starts from, {"built_on": that rung's name} or {}): the
    foundation of the rungs measured before it (rows read back included)."""
    base = foundation([{**rows[r.name], "rung": r.name} for r in RUNGS[:RUNGS.index(rung)]
                       if r.name in rows])
    return (base.get("settings") or {}, {"built_on": base["rung"]}) if base else ({}, {})


def _climb(bench_, name: str, rows: dict, config) -> dict:
    rung = next(r for r in RUNGS if r.name == name)
    before, built_on = base_of(rung, rows)
    if rung.name == "largest_batch":
        return {**_largest_batch(bench_, before, config), "point": rung.name,
                "rung": rung.name, "changes": rung.changes, **built_on}
    settings = _settings(rung, before, config)
    if isinstance(settings, str):
        row = {"settings": before, "status": settings}
    else:
        row = bench.measure(bench_, settings, rung.name, label=rung.name)
    return {**row, "point": rung.name, "rung": rung.name, "changes": rung.changes,
            **built_on}


def with_gains(rows: list[dict]) -> list[dict]:
    """The rows with each measured rung's gain over the rung it builds on (the best
    measured before it, `foundation`) and over the first (images/sec ratios, 3
    decimals), and `kept`: whether the rungs after it build on it; None where not
    measured. And why: `largest_change`, the kind of work whose time an image moved most
    with the rung's speed since the rung it builds on (fell most where it gained, rose
    most where it lost: callbacks/profiling/difference.py's `largest_change`, the sentence
    the report uses), where both have a breakdown."""
    out, first, base = [], None, None
    for row in rows:
        rate = row.get("images_per_sec") if row.get("status") == "ok" else None
        gains = {"gain_over_previous": None, "gain_over_first": None, "largest_change": None,
                 "kept": None}
        if rate:
            if base:
                gains["gain_over_previous"] = round(rate / base["images_per_sec"], 3)
                if row.get("breakdown") and base.get("breakdown"):
                    gains["largest_change"] = difference.largest_change(base, row)
            first = first or rate
            gains["gain_over_first"] = round(rate / first, 3)
            gains["kept"] = base is None or rate >= base["images_per_sec"]
            base = row if gains["kept"] else base
        out.append({**row, **gains})
    return out


def why_lines(rows: list[dict]) -> list[str]:
    """One line a rung with a largest_change: 'RUNG: KIND A -> B ms a step, the kind
    whose time an image fell most as images/sec rose to 1.08x (its breakdown's line)'."""
    lines = []
    for row in rows:
        change = row.get("largest_change")
        if change and row.get("breakdown") and (change.get("words") or change.get("kind")):
            words = change.get("words") or (  # a row written before words were kept
                f"{change['kind']} {change['before_us']:,.1f} -> "
                f"{change['after_us']:,.1f} us an image")
            lines.append(f"{row['rung']}: {words} "
                         f"({step_breakdown.line(row['breakdown'])})")
    return lines


def format_table(rows: list[dict]) -> str:
    """The rungs: images/sec (the median window's, with their min-max where repeated),
    gains, and what each changes or why it has no figure; a rung that lost is marked."""
    repeated = any(r.get("images_per_sec_min") is not None for r in rows)
    header = (f"{'rung':<20} {'images/sec':>11} " +
              (f"{spread.SPREAD:>15} " if repeated else "") +
              f"{'vs before':>9} {'vs first':>8}  changes / status")
    lines = [header, "-" * len(header)]
    for r in rows:
        def cell(key, spec, width, unit=""):
            return (format(r[key], spec) + unit if r.get(key) is not None
                    else f"{'-':>{width}}")
        text = r.get("changes") or "" if r["status"] == "ok" else r["status"]
        if r.get("kept") is False:
            text = (f"slower than {r.get('built_on') or 'the rung before'}: not built on; "
                    f"{text}")
        low, high = r.get("images_per_sec_min"), r.get("images_per_sec_max")
        window = f"{low:,.1f}-{high:,.1f}" if None not in (low, high) else "-"
        lines.append(f"{r['rung']:<20} {cell('images_per_sec', '>11,.1f', 11)} " +
                     (f"{window:>15} " if repeated else "") +
                     f"{cell('gain_over_previous', '>8.2f', 9, 'x')} "
                     f"{cell('gain_over_first', '>7.2f', 8, 'x')}  {text}")
    why = why_lines(rows)
    if why:  # each rung's profiled steps (app/modes/bench.py), split by kind of work
        lines += ["", "why (the kind of work whose time an image moved most with the speed "
                      "since the rung built on, each rung's profiled steps):",
                  *(f"  {line}" for line in why)]
    return "\n".join(lines)


def _summarize(head, rows, status) -> dict:
    # A rung is named and described by RUNGS, whatever a row read back says
    ordered = with_gains([{**rows[r.name], "point": r.name, "rung": r.name,
                           "changes": r.changes} for r in RUNGS if r.name in rows])
    best = foundation(ordered)
    return {**head, "status": status, "ladder": ordered,
            "rungs_left": [r.name for r in RUNGS if r.name not in rows],
            "best_rung": best["rung"] if best else None,
            "total_gain": best["gain_over_first"] if best else None,
            "wall_seconds": round(time.time() - head["started_at"], 2)}


def _print_closing(summary, logdir) -> None:
    print(format_table(summary["ladder"]))
    repeats = summary.get("repeats") or 1
    if repeats > 1:
        print(f"images/sec: each rung's median of {repeats} timed windows (each after a "
              f"fresh compile); {spread.SPREAD}: the lowest and highest window")
    print(f"ladder: {os.path.join(logdir, LADDER_FILE)} and ladder.png\n"
          f"view:   {shell_command('-m', 'tensorboard.main', '--logdir', logdir)}",
          flush=True)


def _write(logdir, summary) -> None:
    from app.engine import plots

    rundir.write_json_atomic(os.path.join(logdir, LADDER_FILE), summary)
    rundir.write_json_atomic(os.path.join(logdir, rundir.SUMMARY_FILE), summary)
    rates = {r["rung"]: r.get("images_per_sec") for r in summary["ladder"]}
    plots.waterfall_chart(
        [(r["rung"], r.get("images_per_sec") if r["status"] == "ok" else None,
          rates.get(r.get("built_on")), r.get("images_per_sec_min"),
          r.get("images_per_sec_max")) for r in summary["ladder"]],
        os.path.join(logdir, "ladder.png"),
        title=f"{summary['model']}: the effort ladder on {summary['num_replicas']} x "
              f"{summary['device_kind']} ({summary['backend']})", ylabel="images/sec",
        note=(f"each bar from the rung it builds on; error bars: {spread.SPREAD} of "
              f"{summary['repeats']} timed windows" if (summary.get("repeats") or 1) > 1
              else "each bar from the rung it builds on"))
