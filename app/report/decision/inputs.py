"""What the decision reads from run folders (app/report/decision/predict.py): each folder's
figures, checked, as untrusted input (callbacks/records/untrusted.py).

Two kinds of folder count: a probe's (`--benchmark=probe`: summary.json's mode is
"probe") says how fast a machine trains the model and how long it takes to start; a
training run's (summary.json without a mode) says that too, and, from its per-epoch
log (metrics.jsonl), at which epoch each top-1 was first reached, how long an epoch
took beside its images at the steady rate (evaluation, checkpoints), its start-up,
and, where the run was interrupted and resumed (summary.json's attempts, as the
billing ledger recorded them), what each interruption cost. A sweep, a ladder or an
input benchmark is no input: refused with why, as a folder that is not a run's is.

Only the fields below are kept, each checked for its kind and range; a folder whose
file cannot be read, or lacks a figure the decision needs, is one line (InputError),
never a traceback nor a figure out of range.
"""

from __future__ import annotations

import math
import os
import statistics

from callbacks.figures.bill import PRICINGS
from callbacks.records import summary_fields, untrusted
from callbacks.records.metrics_file import read_metrics
from flags.modes import MODES

# The modes whose folders the decision reads (flags/modes.py), as summary.json's "mode"
# names them: a training run's has none.
DECIDING = {None if m.name == "none" else m.name for m in MODES.values() if m.decides}

# summary.json's table (callbacks/records/summary_fields.py) gives each field's kind and
# range; the decision divides by a rate and counts epochs, so those must be above 0.
POSITIVE = {"images_per_sec": 1e-9, "images_per_sec_min": 1e-9, "images_per_sec_max": 1e-9,
            "epochs": 1}
FIELDS = {name: (kind, POSITIVE.get(name, low), high)
          for name, (kind, low, high) in summary_fields.DECISION_FIELDS.items()}
REQUIRED = ("model", "dataset", "image_size", "global_batch_size", "device_kind",
            "num_replicas", "images_per_sec")
# The recipe a run trained with (app/models/recipe.py's recipe_facts): a training
# run's summary.json holds them at its top, a probe's under "recipe".
RECIPE = ("optimizer", "base_learning_rate", "peak_learning_rate", "warmup_epochs",
          "weight_decay", "gradient_clip_norm", "label_smoothing", "momentum")
MAX_TEXT = 120


class InputError(ValueError):
    """A folder the decision cannot use; the message is one line saying why."""


def _text(value) -> str:
    text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(value))
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…"


def _fields(summary: dict, where: str) -> dict:
    out = {}
    for name, (kind, low, high) in FIELDS.items():
        try:
            value = untrusted.field(summary, name, kind, low=low, high=high,
                                    required=name in REQUIRED)
        except untrusted.RecordError as error:
            raise InputError(f"{where}: {_text(error)}") from None
        out[name] = _text(value) if isinstance(value, str) else value
    facts = summary.get("recipe") if summary.get("mode") == "probe" else summary
    out["recipe"] = {k: _text(v) if isinstance(v, str) else v for k, v in (
        (k, facts.get(k) if isinstance(facts, dict) else None) for k in RECIPE)
        if v is None or isinstance(v, str) or (isinstance(v, (int, float))
                                               and not isinstance(v, bool) and math.isfinite(v))}
    prices = summary.get("price_per_hour_usd_by_pricing")
    out["prices"] = {k: float(v) for k, v in prices.items()
                     if k in PRICINGS and isinstance(v, (int, float)) and not isinstance(v, bool)
                     and math.isfinite(v) and 0 < v <= 1e9} if isinstance(prices, dict) else {}
    return out


def read_folder(folder: str) -> dict:
    """The figures of one run folder, checked: {"kind": "probe" or "run", "folder",
    "name", the FIELDS, "prices", "billed_devices", and for a run: "epochs" (one
    record per epoch logged: {"epoch", "top1", "hours"}), "attempts" (where each
    resumed)}.

    Raises:
        InputError: one line: no summary.json, not JSON, another mode, a needed
            figure missing or out of range.
    """
    where = f"{_text(folder)}: summary.json"
    path = os.path.join(folder, "summary.json")
    if not os.path.lexists(path):
        raise InputError(f"{_text(folder)}: holds no summary.json (not a run folder)")
    try:
        summary = untrusted.read_json(path)
    except (untrusted.RecordError, OSError) as error:
        raise InputError(f"{where}: {_text(getattr(error, 'strerror', None) or error)}") \
            from None
    if not isinstance(summary, dict):
        raise InputError(f"{where} holds a {type(summary).__name__}, not an object")
    mode = summary.get("mode")
    if mode not in DECIDING:
        raise InputError(f"{where}: a {_text(mode)} is no input to the decision; accepted: "
                         "a training run's folder or a --benchmark=probe's")
    found = {"kind": "probe" if mode == "probe" else "run", "folder": folder,
             "name": _text(os.path.basename(os.path.normpath(folder))),
             **_fields(summary, where)}
    # The step breakdown (a run's under profile, a probe's at the top), untrusted: the
    # device model takes only finite figures in range from it.
    profile = summary.get("profile") if isinstance(summary.get("profile"), dict) else {}
    traced = summary.get("breakdown") if mode == "probe" else profile.get("breakdown")
    found["breakdown"] = traced if isinstance(traced, dict) else None
    found["billed_devices"] = (found["num_processes"] or 1) if found["accelerator"] == "cpu" \
        else found["num_replicas"]
    # A probe's snapshots of its machine, before and after (app/modes/probe.py); a probe
    # written before they were named so kept them under machine_state, the name a
    # training run gives its NVML samples (no "before" there: nothing is read).
    found["busy"] = _busy(summary.get("machine_snapshots") or summary.get("machine_state"))
    if found["kind"] == "probe":
        if found["startup_seconds"] is None:
            raise InputError(f"{where}: 'startup_seconds' is missing (a probe measures it)")
        return found
    found["compile_cache"] = compile_cache(summary)
    if found["steps_per_epoch"] is None:
        raise InputError(f"{where}: 'steps_per_epoch' is missing")
    found["epochs_logged"] = _epochs(folder, where)
    found["attempts"] = _attempts(summary)
    return found


def compile_cache(summary: dict) -> str | None:
    """Whether a training run's start found its programs in JAX's persistent compilation
    cache: "warm" (a program was read from it: its start-up is shorter than a fresh
    machine's), "cold" (every program compiled), None where it does not say (TensorFlow
    keeps no compiled step between processes; a run from before the start-up block)."""
    block = summary.get("startup")
    programs = block.get("programs") if isinstance(block, dict) else None
    if summary.get("backend") != "jax" or not isinstance(programs, list) or not programs:
        return None
    reads = [p.get("cache_reads") for p in programs if isinstance(p, dict)]
    return "warm" if any(isinstance(n, int) and not isinstance(n, bool) and n > 0
                         for n in reads) else "cold"


def _busy(state) -> str | None:
    """Why a probe's machine was not its own while it measured, from its machine_snapshots:
    a CPU load average over its cores (other jobs), other processes on its GPUs; None
    where it was idle or nothing was read."""
    reads = [state.get(k) for k in ("before", "after")] if isinstance(state, dict) else []
    reads = [r for r in reads if isinstance(r, dict)]

    def number(value, low, high):
        return (isinstance(value, (int, float)) and not isinstance(value, bool)
                and low <= value < high)
    loads = [r["load_average_1m"] for r in reads if number(r.get("load_average_1m"), 0, 1e6)]
    cores = next((r["cpu_cores"] for r in reads if isinstance(r.get("cpu_cores"), int)
                  and number(r["cpu_cores"], 1, 1e6)), None)
    others = [g.get("other_processes") for r in reads for g in (
        r.get("gpus") if isinstance(r.get("gpus"), list) else []) if isinstance(g, dict)]
    others = [n for n in others if isinstance(n, int) and number(n, 1, 1e9)]
    why = []
    if loads and cores and max(loads) > cores:
        seen = f"{min(loads):g}" + (f"-{max(loads):g}" if max(loads) > min(loads) else "")
        why.append(f"the CPU's load average was {seen} on {cores} cores")
    if others:
        why.append(f"{max(others)} other process(es) on a GPU")
    return "; ".join(why) or None


def _epochs(folder: str, where: str) -> list[dict]:
    """metrics.jsonl's epochs, each once (the last record of it), in order, with a
    finite top-1 in [0, 1] or None and billed hours >= 0."""
    try:
        records = read_metrics(folder)
    except (untrusted.RecordError, OSError) as error:
        raise InputError(f"{_text(folder)}: metrics.jsonl: "
                         f"{_text(getattr(error, 'strerror', None) or error)}") from None
    by_epoch = {}
    for record in records if isinstance(records, list) else []:
        try:
            epoch = untrusted.field(record, "epoch", "integer", low=1, high=1 << 40)
            hours = untrusted.field(record, "billed_hours", "number", low=0, high=1e9)
            top1 = untrusted.field(record, "val_top1", "number", low=0, high=1,
                                   required=False)
        except untrusted.RecordError:
            continue  # a damaged record is left out, as the report leaves it
        by_epoch[epoch] = {"epoch": epoch, "top1": top1, "hours": hours}
    return [by_epoch[e] for e in sorted(by_epoch)]


def _attempts(summary: dict) -> list[dict]:
    """The billing ledger's attempts as summary.json carries them: where each started
    ({"index": its place in the ledger, "epoch", "step"}); an attempt that says nothing
    of it is left out (one killed before it restored, one recovered from a checkpoint).
    An attempt of index 1 or more resumed an interrupted run."""
    out = []
    attempts = summary.get("attempts")
    for index, attempt in enumerate(attempts if isinstance(attempts, list) else []):
        resumed = attempt.get("resumed_from") if isinstance(attempt, dict) else None
        try:
            out.append({"index": index,
                        "epoch": untrusted.field(resumed, "epoch", "integer", low=0,
                                                 high=1 << 40),
                        "step": untrusted.field(resumed, "step", "integer", low=0,
                                                high=1 << 50)})
        except untrusted.RecordError:
            continue
    return out


def epoch_seconds(run: dict) -> float | None:
    """The median duration of the run's epochs after the first that no interruption
    touched (billed hours between consecutive epoch ends), or None where there is none."""
    interrupted = {a["epoch"] + 1 for a in run["attempts"] if a["index"] > 0}
    logged = run["epochs_logged"]
    durations = [(b["hours"] - a["hours"]) * 3600 for a, b in zip(logged, logged[1:])
                 if b["epoch"] == a["epoch"] + 1 and b["epoch"] not in interrupted
                 and b["hours"] >= a["hours"]]
    return statistics.median(durations) if durations else None


def run_timing(run: dict) -> dict | None:
    """What a training run says of its machine's time, or None where it cannot say
    (fewer than two uninterrupted epochs): {"epoch_seconds", "overhead" (an epoch's
    seconds over its images at the steady rate: evaluation, checkpoints, logs),
    "startup_seconds" (epoch 1's end less one epoch), "lost_epochs" (the work each
    interruption lost, in epochs, beyond a start-up; None: never interrupted after
    epoch 1), "interruptions"}."""
    typical = epoch_seconds(run)
    logged = run["epochs_logged"]
    if typical is None or not logged or logged[0]["epoch"] != 1:
        return None
    images = run["steps_per_epoch"] * run["global_batch_size"]
    overhead = typical / (images / run["images_per_sec"])
    startup = max(0.0, logged[0]["hours"] * 3600 - typical)
    hours = {e["epoch"]: e["hours"] for e in logged}
    lost = []
    for attempt in (a for a in run["attempts"] if a["index"] > 0):
        epoch = attempt["epoch"] + 1  # the epoch the interruption fell in
        if epoch > 1 and epoch in hours and epoch - 1 in hours:
            excess = (hours[epoch] - hours[epoch - 1]) * 3600 - typical
            lost.append(max(0.0, excess - startup) / typical)
    return {"epoch_seconds": typical, "overhead": overhead, "startup_seconds": startup,
            "lost_epochs": statistics.mean(lost) if lost else None,
            "interruptions": len(lost)}


def first_epoch_at(run: dict, target: float) -> dict | None:
    """The first logged epoch whose top-1 is at least `target` ({"epoch", "top1",
    "hours"}), or None where none is."""
    return next((e for e in run["epochs_logged"] if e["top1"] is not None
                 and e["top1"] >= target), None)
