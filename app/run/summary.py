"""The run's summary: one dict (summary.json, and run()'s return value), and the
lines printed at the end.

Every figure is the run's: over every epoch of every attempt (the callbacks carry
their sums across attempts in the checkpoints), never the last epoch's nor the
last attempt's; per-epoch figures are metrics.jsonl's, named `epoch_*`. The bill
(`billed_seconds`, `cost_usd`: the run's Bill, callbacks/figures/bill.py) covers
every attempt from its process's start (app/main.py's first line) to the moment
this summary is made (a killed attempt: to its last heartbeat, at most
app/run/ledger.py's HEARTBEAT_SECONDS before the kill); the interpreter's start
before that and the process's exit after it are not in it.

A figure that was not measured is null, never 0: a CPU run has no MFU unless a
peak is given, a run without a price has no cost, a target not reached has no
epoch.
"""

from __future__ import annotations

import math
import os
import platform
import shlex
import sys

from app.run import provenance
from callbacks.figures.bill import (
    PRICING_WORDS,
    hours,
    projected_cost_usd,
    usd,
    usd_per_hour,
)
from callbacks.profiling.breakdown import line as breakdown_line
from callbacks.profiling.timed import reconcile
from preprocessing import augment
from preprocessing.spec import skipped_line

STATUS_BY_EXCEPTION = {"Preempted": "preempted", "Diverged": "diverged",
                       "KeyboardInterrupt": "interrupted"}


def status_of(error: BaseException) -> str:
    """completed / preempted / diverged / interrupted / failed, from how fit ended."""
    return STATUS_BY_EXCEPTION.get(type(error).__name__, "failed")


def _round(value, digits=6):
    return None if value is None else round(float(value), digits)


def _significant(value, digits=6):
    """`value` to `digits` significant digits (a small model's TFLOP/s or MFU is
    1e-5, which decimals would round to 0)."""
    return None if value is None else float(f"{float(value):.{digits}g}")


def first_start(attempts: list, started_at: float) -> float:
    """When the run's first attempt started (an attempt recovered from a checkpoint
    has no start time)."""
    return min([a["started_at"] for a in attempts if a.get("pid")] + [started_at])


def build(context, plan, parts, status: str, attempts: list, ended_at: float) -> dict:
    """Assembles the summary from the run context, the training plan and the
    callbacks' figures.

    Args:
        context: the app.run.context.RunContext.
        plan: the app.modes.train.Plan.
        parts: the app.modes.train_callbacks.RunCallbacks.
        status: how training ended (status_of).
        attempts: the billing ledger's attempts.
        ended_at: `time.time()` where the bill of this attempt ends (the ledger's
            end of this attempt).
    """
    config, topology, billing, data = context.config, context.topology, context.billing, plan.data
    bill = plan.bill
    train_flops_per_image, steps_per_epoch = plan.train_flops_per_image, plan.steps_per_epoch
    history = parts.targets.history
    measured = [h for h in history if h.get("top1") is not None]
    throughput = parts.throughput
    images_per_sec = throughput.images_per_sec
    cost = parts.cost
    epochs_completed = max([h["epoch"] for h in history], default=0)
    # Billed time comes from the ledger's earlier attempts whether or not there is a price.
    billed_usd = bill.cost_usd(ended_at)
    summary = {
        # What ran, and where.
        **topology.describe(),
        "model": config.model, **plan.model_facts,
        "dataset": config.dataset, "num_classes": data.num_classes,
        "image_size": data.image_size, "precision": config.policy,
        "input_pipeline": data.input_pipeline, "preprocessing": data.preset,
        "global_batch_size": context.batch.global_size,
        "per_replica_batch_size": context.batch.per_replica,
        "steps_per_execution": config.steps_per_execution,
        "xla_autotune": context.xla_autotune,  # app/engine/autotune.py; None: no GPU kernels
        "steps_per_epoch": steps_per_epoch, "epochs": config.epochs,
        "train_examples": data.train_examples,
        "validation_examples": data.validation_examples, "seed": context.seed,
        "status": status, "logdir": context.logdir,
        # Accuracy.
        "epochs_completed": epochs_completed,
        "val_top1": measured[-1]["top1"] if measured else None,
        "best_val_top1": parts.targets.best_top1,
        "val_top1_by_epoch": [h["top1"] for h in history],
        "val_top1_at_chance": at_chance(measured[-1]["top1"], data.num_classes,
                                        data.validation_examples) if measured else None,
        "val_top5_by_epoch": [h.get("top5") for h in history]
        if data.num_classes >= 100 else None,
        # Each target with its billed hours priced under every pricing the row sells
        # (the study's on-demand vs 12-month table): billed hours x that price.
        "targets": [_priced(target, bill) for target in parts.targets.targets()],
        # Speed: the steady state of every epoch of every attempt, as one window.
        "images_per_sec": _round(images_per_sec, 2),
        "images_per_sec_per_device": _round(images_per_sec / topology.num_replicas, 2)
        if images_per_sec else None,
        **{k: _round(v, 4) for k, v in throughput.step_time().items()},  # the same window
        # Every image since each attempt's first window started, over the wall clock:
        # what evaluation, checkpoints and summaries cost in time.
        "images_per_sec_wall": _round(throughput.images_per_sec_wall, 2),
        "eval_images_per_sec": _round(throughput.eval_images_per_sec, 2),
        "train_flops_per_image": train_flops_per_image,
        # The model's FLOPs at the run's rate, and that over the devices' peak.
        "model_tflops_per_sec": _significant(train_flops_per_image * images_per_sec / 1e12)
        if images_per_sec and train_flops_per_image else None,
        "mfu": _significant(parts.mfu.utilization(images_per_sec) if images_per_sec else None),
        "peak_tflops_per_device": billing.peak_tflops_per_device,
        # --profile_steps: the steps traced and where TensorBoard's Profile tab reads them.
        # The breakdown is set against the timed steps the profiler did not slow.
        "profile": _profile(parts.profiler, context.logdir,
                            throughput.untraced_step_time_ms
                            or throughput.step_time().get("step_time_ms")),
        # Energy (GPUs with NVML only), over the same windows as images_per_sec.
        **_energy(parts.energy),
        # Money.
        "machine": billing.machine, "pricing": billing.pricing, "machines": billing.machines,
        "price_per_hour_usd": bill.price_per_hour_usd, "price_source": billing.source,
        "price_per_hour_usd_by_pricing": dict(bill.price_per_hour_by_option),
        "billed_seconds": _round(bill.seconds(ended_at), 2),
        "cost_usd": _round(billed_usd),
        "cost_usd_by_pricing": {k: _round(v) for k, v in
                                bill.dollars_by_option(bill.hours(ended_at)).items()},
        "usd_per_million_images": _round(bill.usd_per_million_images(images_per_sec)),
        # The bill, plus the epochs left at the last epoch's cost: the bill at the end.
        "projected_cost_usd": _round(projected_cost_usd(
            billed_usd, cost.usd_per_epoch, config.epochs - epochs_completed))
        if billed_usd is not None else None,
        # Time and provenance: from the first attempt's start to now, the time
        # between attempts included (billed_seconds leaves it out).
        "wall_seconds": _round(ended_at - first_start(attempts, context.started_at), 2),
        "attempts": attempts,
        "corrupt_images_skipped": data.skipped_images() if data.skipped_images else 0,
        # The first of them by name, relative to the dataset's root (with why, where
        # the listing refused a file): the closing lines show them.
        "skipped_image_names": list(data.skipped_names()) if data.skipped_names else [],
        # Seconds fit waited for training batches (pipelines fed from Python only):
        # near 0 when the accelerator, not the input, sets the pace.
        "input_wait_seconds": _round(data.input_wait_seconds(), 2)
        if data.input_wait_seconds else None,
        # What the input pipeline says of itself (preprocessing.spec.Datasets.facts).
        "input": dict(data.facts),
        "versions": _versions(config.backend),
        "command": " ".join(sys.argv),
        # Where the seconds before the first step went (app/engine/startup.py).
        "startup": startup_block(context, parts, ended_at),
        # The kernels the step ran and the machine's state (app/run/provenance.py).
        **provenance.fields(context, plan, parts, write=topology.is_chief),
    }
    return summary


def startup_block(context, parts, ended_at: float) -> dict | None:
    """summary.json's `startup`: the start-up timeline to the first step, each part's
    seconds (app/engine/startup.py); None where no training step ran."""
    from app.engine import cold_start, startup

    return startup.block(startup.TIMELINE, getattr(parts, "first_step", None), ended_at,
                         context.config.backend, cold_start.cuts())


def startup_lines(summary: dict) -> list[str]:
    """A closing line when the start was more than half the run: its seconds and its
    largest parts."""
    block = summary.get("startup")
    if not block or not block.get("share_of_run") or block["share_of_run"] <= 0.5:
        return []
    largest = ", ".join(f"{row['part']} {row['seconds']:.1f} s" for row in
                        sorted(block["parts"], key=lambda row: -row["seconds"])[:3])
    count = block.get("programs_compiled")
    compiled = (f"; XLA compiled {count} program{'s' if count != 1 else ''} in "
                f"{block['compile_seconds']:.1f} s" if count else "")
    return [f"start-up: {block['seconds_to_first_step']:.1f} s before the first step, "
            f"{block['share_of_run']:.0%} of the run's {block['run_seconds']:.1f} s: "
            f"{largest}{compiled} (summary.json's startup, TensorBoard's Text tab)"]


def _priced(target: dict, bill) -> dict:
    """A target's entry with `cost_usd_by_pricing`: its billed hours under each pricing."""
    billed_hours = target.get("hours")
    return {**target, "cost_usd_by_pricing": None if billed_hours is None else {
        k: _round(v) for k, v in bill.dollars_by_option(billed_hours).items()}}


def _energy(meter) -> dict:
    """The energy figures of process 0's GPUs, how they were measured, and each
    epoch's window (to check against another meter, benchmarks/energy_check.py)."""
    return {
        "power_watts": _round(meter.power_watts, 1) if meter else None,
        "joules_per_image": _round(meter.joules_per_image, 4) if meter else None,
        "kwh_per_epoch": _round(meter.kwh_per_epoch, 6) if meter else None,
        "energy_method": meter.method if meter else None,
        "energy_windows": [{k: _round(v, 3) for k, v in w.items()} for w in meter.windows]
        if meter else None,
    }


def weights_checksum(model) -> float:
    """Sum of |w| over the trainable weights (this process's copy, on the host)."""
    import keras
    import numpy as np

    return float(sum(np.abs(keras.ops.convert_to_numpy(v.value).astype("float64")).sum()
                     for v in model.trainable_variables))


def _versions(backend: str) -> dict:
    versions = {"python": platform.python_version()}
    for name in ("keras", "jax" if backend == "jax" else "tensorflow"):
        module = sys.modules.get(name)
        versions[name] = getattr(module, "__version__", None)
    return versions


def percent(fraction: float) -> str:
    """A fraction as a percentage with the digits it needs: "21.9%", "0.031%"."""
    if fraction == 0 or abs(fraction) >= 0.1:
        return f"{fraction:.1%}"
    return f"{fraction * 100:.2g}%"


def _from_here(path: str) -> str:
    """`path` as typed from the current folder: relative inside it, else absolute."""
    relative = os.path.relpath(path)
    if relative.startswith(".."):
        return os.path.abspath(path)
    return relative if os.sep in relative else os.path.join(".", relative)


def shell_command(*args: str) -> str:
    """A command that works as printed, from the current folder: the running
    interpreter (an unactivated venv's `python` would not be on PATH), then `args`,
    quoted for a POSIX shell."""
    return " ".join(shlex.quote(a) for a in (_from_here(sys.executable), *args))


def at_chance(top1: float, num_classes: int, images: int) -> bool:
    """Whether `top1` over `images` validation images cannot be told from guessing one of
    `num_classes` classes: within 3 standard errors of 1/num_classes (a binomial
    proportion). Such a figure is not yet meaningful: the model has learned nothing
    that carries to unseen images, or its BatchNorm moving statistics do not describe
    its weights yet (a one-epoch run's lagged them: app/models/recipe.py's
    MAX_WARMUP_FRACTION)."""
    if num_classes < 2 or images < 1:
        return False
    chance = 1.0 / num_classes
    return top1 <= chance + 3.0 * math.sqrt(chance * (1.0 - chance) / images)


# What a model sees: every pipeline normalizes by ImageNet's mean and standard deviation
# (preprocessing/augment.py), so pixels of 0-255 arrive as about -2.1 to 2.6.
INPUT_RANGE = (min(-m / s for m, s in zip(augment.MEAN_RGB, augment.STDDEV_RGB)),
               max((255 - m) / s for m, s in zip(augment.MEAN_RGB, augment.STDDEV_RGB)))


def _chance_advice(summary: dict) -> str:
    """What to look at when a model stays at chance, most likely first: a user's model
    written as Keras's tutorials write it (Rescaling(1/255.)) squeezed the normalized
    images to about +-0.01 and stayed at chance for 15 epochs, where "train longer" was
    the advice; then the peak learning rate; then the run's length."""
    rate, optimizer = summary.get("peak_learning_rate"), summary.get("optimizer")
    rate_words = (f"; its peak learning rate was {rate:g}"
                  f"{f' ({optimizer})' if isinstance(optimizer, str) else ''}, "
                  "--base_learning_rate sets it (per 256 images)"
                  if isinstance(rate, (int, float)) and not isinstance(rate, bool) else "")
    return (f"the images arrive normalized by ImageNet's mean and standard deviation "
            f"({INPUT_RANGE[0]:.1f} to {INPUT_RANGE[1]:.1f}): a model that rescales them "
            f"again, e.g. Rescaling(1/255.), sees almost nothing{rate_words}; or train longer")


def _accuracy(summary: dict) -> str:
    """Last and best top-1 with their epochs, then each target."""
    by_epoch = [(epoch, top1) for epoch, top1 in enumerate(summary["val_top1_by_epoch"], 1)
                if top1 is not None]
    if not by_epoch:
        return "top-1: no validation"
    last_epoch, last = by_epoch[-1]
    best_epoch, best = max(by_epoch, key=lambda pair: pair[1])  # the first of equals
    line = (f"top-1: {last:.4f} after epoch {last_epoch} (the best)" if best_epoch == last_epoch
            else f"top-1: {last:.4f} after epoch {last_epoch}; best {best:.4f} at epoch "
                 f"{best_epoch}")
    if summary.get("val_top1_at_chance"):
        line += (f" (at chance for {summary['num_classes']} classes: not yet meaningful; "
                 f"{_chance_advice(summary)})")
    for target in summary["targets"]:
        line += (f"; {target['target_top1']:.3f} reached at epoch {target['epoch']} "
                 f"({_target_cost(target, summary.get('pricing'))})" if target["reached"]
                 else f"; {target['target_top1']:.3f} not reached")
    return line


def _target_cost(target: dict, pricing: str | None) -> str:
    """'$0.0100' or, where the row sells several pricings and the hours are known,
    '0.0042 h: $0.0100 on demand, $0.0031 on spot' (the run's own pricing first)."""
    by_pricing = {k: v for k, v in (target.get("cost_usd_by_pricing") or {}).items()
                  if v is not None}
    if len(by_pricing) < 2 or target.get("hours") is None:
        return usd(target["cost_usd"])
    order = sorted(by_pricing, key=lambda k: k != pricing)
    return f"{target['hours']:.4f} h: " + ", ".join(
        f"{usd(by_pricing[k])} {PRICING_WORDS.get(k, k)}" for k in order)


def _profile(profiler, logdir: str, step_time_ms: float | None) -> dict | None:
    """The traced steps (first, last) and the trace's folder, or None if none was taken.
    The profiler records each traced host call's first step: the last call ran its
    steps per call (at 16 a call, steps 17-32 read "steps 17-17")."""
    if profiler is None or not profiler.traced_steps:
        return None
    per_call = max(int(profiler.state().get("steps_per_call") or 1), 1)
    return {"steps": [profiler.traced_steps[0], profiler.traced_steps[-1] + per_call - 1],
            "folder": os.path.join(logdir, "plugins", "profile"),
            "session": profiler.session,  # the one this run wrote: its breakdown's
            # The traced steps split by kind of work (callbacks/profiling/breakdown.py),
            # set against the timed steps' time: its idle is theirs, the traced step's
            # excess the profiler's (callbacks/profiling/timed.py).
            "breakdown": reconcile(profiler.breakdown, step_time_ms)
            if profiler.breakdown else None}


def _priced_by(summary: dict) -> str:
    """What priced the bill: the catalog row and pricing, or, with --price_per_hour_usd,
    the user's price for the whole run (the line named the row found for the device,
    which priced nothing)."""
    if summary.get("price_source") == "--price_per_hour_usd":
        return "--price_per_hour_usd, yours"
    return f"{summary['machine']}, {summary['pricing']}"


def closing_lines(summary: dict) -> str:
    """The three lines a user wants (speed, accuracy, money) and where to look next,
    as commands that work as printed."""
    rate = summary["images_per_sec"]
    speed = (f"throughput: {rate:,.1f} images/sec ({summary['images_per_sec_per_device']:,.1f} "
             f"per device x {summary['num_replicas']})" if rate else
             "throughput: not measured (too few steps after warm-up)")
    if summary["mfu"] is not None:
        speed += f", MFU {percent(summary['mfu'])}"
    if rate and summary.get("images_per_sec_wall"):
        speed += (f"; {summary['images_per_sec_wall']:,.1f} over the wall clock "
                  "(evaluation and checkpoints included)")
    money = (f"cost: {usd(summary['cost_usd'])} for {hours(summary['billed_seconds']):.4f} "
             f"billed hours at {usd_per_hour(summary['price_per_hour_usd'])} "
             f"({_priced_by(summary)})"
             if summary["cost_usd"] is not None
             else "cost: unknown (no price for this device: pass --machine or "
                  "--price_per_hour_usd)")
    others = {k: v for k, v in (summary.get("cost_usd_by_pricing") or {}).items()
              if k != summary["pricing"] and v is not None}
    if summary["cost_usd"] is not None and others:
        money += "; " + ", ".join(f"{usd(v)} {PRICING_WORDS.get(k, k)}"
                                  for k, v in others.items())
    logdir = summary["logdir"]
    report = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "report.py")
    skipped = skipped_line(summary.get("corrupt_images_skipped") or 0,
                           summary.get("skipped_image_names"))
    profile = summary.get("profile")
    traced = ([f"profile: steps {profile['steps'][0]}-{profile['steps'][1]} traced to "
               f"{profile['folder']} (TensorBoard's Profile tab, with the view command below)"]
              if profile else [])
    if profile and profile.get("breakdown"):
        traced.append("breakdown: " + breakdown_line(
            profile["breakdown"], peak_tflops_per_device=summary.get("peak_tflops_per_device")))
    return "\n".join([
        f"status: {summary['status']}", speed, _accuracy(summary),
        *([skipped] if skipped else []), money, *traced, *startup_lines(summary),
        *provenance.closing_lines(summary),
        "view:   " + shell_command("-m", "tensorboard.main", "--logdir", logdir),
        "report: " + shell_command(_from_here(report), logdir, "--out",
                                   os.path.join(logdir, "report")),
    ])
