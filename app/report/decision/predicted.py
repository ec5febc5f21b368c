"""Machines never probed, in the decision: every priced catalog device that
no folder measured, its rate predicted from the job's breakdown by the device model
(app/report/decision/device_model.py), ranked beside the measured ones.

A predicted machine is a folder's figures with the rate replaced: the job's epochs and
epoch overhead as for any machine (app/report/decision/predict.py), its start-up borrowed from
the folder it was predicted from (a start-up is not predicted), its rate the model's,
marked "predicted from NAME (device)" with the model's measured error (the newest
benchmarks/results/*-predict-check.json). A device that a folder measured is not
predicted: its probe replaces the prediction, and a check line gives the prediction's
error against it. Refused in one line each: no folder with a breakdown (how to get one),
a breakdown of another model or dataset than the job, a breakdown with no work.
"""

from __future__ import annotations

import glob
import json
import os

from app.report.decision import device_model
from callbacks.figures.bill import dollars, hours, usd

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))  # the repo
CHECKS = os.path.join(ROOT, "benchmarks", "results", "*-predict-check.json")
SAME_WORK = ("model", "dataset", "image_size")
HOW = ("rerun the job with --profile_steps=START,STOP (a few steps after the first, "
       "e.g. --profile_steps=10,12) and --backend=jax, or probe it (--benchmark=probe "
       "traces its steps)")


def measured_error(pattern: str = CHECKS) -> dict:
    """The model's measured error of images/sec by source, from the newest result of
    benchmarks/predict_check.py: {"accelerator": (min, max) from an accelerator's run,
    "cpu": from a CPU run of a family the table measured on another device,
    "cpu_unseen": of a family it never measured, "source": its path}; {} where there is
    none or it cannot be read."""
    paths = sorted(glob.glob(pattern))
    if not paths:
        return {}
    try:
        with open(paths[-1], encoding="utf-8") as f:
            ranges = json.load(f)["errors"]["range"]
        out = {side: (float(r["min"]), float(r["max"])) for side, r in ranges.items()
               if side in ("accelerator", "cpu", "cpu_unseen")}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
    return {**out, "source": os.path.relpath(paths[-1], ROOT)} if out else {}


def _job(found: list[dict]) -> dict | None:
    runs = [f for f in found if f["kind"] == "run"] or found
    return runs[0] if runs else None


def basis(found: list[dict], table: dict) -> tuple[dict | None, dict | None, str | None]:
    """(the folder to predict from, its work, None) or (None, None, why in one line):
    a folder of the job (the first full run's model, dataset and image size) whose
    breakdown gives work, an accelerator's before a CPU's."""
    job = _job(found)
    with_breakdown = [f for f in found if f.get("breakdown")]
    if not with_breakdown:
        return None, None, ("no folder given has a step breakdown (no traced steps): "
                            f"{HOW}")
    same = [f for f in with_breakdown if job and all(f[k] == job[k] for k in SAME_WORK)]
    if not same:
        other = with_breakdown[0]
        return None, None, (f"{other['name']} traced {other['model']} on {other['dataset']} "
                            f"at {other['image_size']} px, the job is {job['model']} on "
                            f"{job['dataset']} at {job['image_size']} px: {HOW}")
    whys = []
    for item in sorted(same, key=lambda f: f["device_kind"] == "cpu"):
        try:
            return item, work_of(item, table), None
        except device_model.WorkError as why:
            whys.append(f"{item['name']}: {why}")
    return None, None, "; ".join(whys)


def work_of(item: dict, catalog: dict) -> dict:
    """The work an image of a folder's breakdown (device_model.work_per_image)."""
    device = device_model.device_of_kind(item["device_kind"], catalog)
    return device_model.work_per_image(
        item["breakdown"], item["global_batch_size"],
        item.get("per_replica_batch_size") or item["global_batch_size"], device,
        item.get("train_flops_per_image"))


def _devices(table: dict) -> dict:
    """{device name: its first priced catalog row} (each device predicted once)."""
    out = {}
    for row in table.values():
        if row.pricings() and (row.device or row.accelerator) not in out:
            out[row.device or row.accelerator] = row
    return out


def predicted(found: list[dict], table: dict, rates, errors: dict, startup_of) -> dict:
    """The predicted machines and what was not predicted; None where no folder left a
    priced device (but a CPU: the table holds no CPU share) unmeasured.

    Returns {"items": found-like dicts (kind "predicted"), "left_out": [(device, why)],
    "refused": one line or None, "checks": [{"label", "predicted", "measured", "error"}]
    (a measured machine against its prediction), "basis": the folder's name or None}.
    `startup_of`: decision.measured_startup (a predicted machine borrows the folder's).
    """
    devices = {name: row for name, row in _devices(table).items()
               if not any(row.matches(f["device_kind"]) for f in found)
               and not name.lower().startswith("cpu")}
    if not devices:
        return None  # every device sold was measured
    item, work, why = basis(found, table)
    out = {"items": [], "left_out": [], "refused": why, "checks": [], "basis": None,
           "error": None}
    if item is None:
        return out
    out["basis"] = f"{item['name']} ({item['device_kind']})"
    side = "accelerator" if not work["cpu"] else "cpu" if any(
        r.family == item["model"] and r.device_class != "cpu" for r in rates) else "cpu_unseen"
    error = errors.get(side)
    out["error"] = error_words(error, errors, side)
    measured = [f for f in found if f["kind"] in ("probe", "run")]
    for name, row in _devices(table).items():
        device = device_model.device_of_row(row)
        if row.matches(item["device_kind"]) or name.lower().startswith("cpu"):
            continue  # the folder's own device, or a CPU (the table holds no CPU share)
        step = device_model.predict_step(work, device, rates, item["model"], table)
        probes = [m for m in measured if row.matches(m["device_kind"])]
        if probes:
            if "why" not in step:
                out["checks"] += [{"label": f"{m['name']} ({m['device_kind']})",
                                   "predicted": step["images_per_sec"],
                                   "measured": m["images_per_sec"],
                                   "error": step["images_per_sec"] / m["images_per_sec"] - 1}
                                  for m in probes]
            continue
        if "why" in step:
            out["left_out"].append((name, step["why"]))
            continue
        fit, words = device_model.fits(device, item.get("parameters"),
                                       item.get("kept_bytes_per_image"),
                                       item.get("per_replica_batch_size")
                                       or item["global_batch_size"])
        if fit is False:
            out["left_out"].append((name, f"does not fit: {words}"))
            continue
        out["items"].append({
            **{k: v for k, v in item.items() if k not in ("breakdown", "busy")},
            "kind": "predicted", "device_kind": name, "machine": "", "prices": {},
            "images_per_sec": step["images_per_sec"], "images_per_sec_min": None,
            "images_per_sec_max": None, "repeats": None, "busy": None,
            "startup_seconds": startup_of(item), "startup_cold_seconds": None,
            "predicted_from": out["basis"], "error_range": error, "step": step,
            "errors": errors, "side": side,
            "fit": words if fit else f"memory not checked: {words}"})
    return out


def rate_words(item: dict) -> str:
    """What a predicted rate came from, in words: the step, each kind's time and share
    and where the share came from, the model's error."""
    step = item["step"]
    terms = "; ".join(f"{kind} {t['ms']:,.3g} ms at {t['share']:.1%} ({t['from']})"
                      for kind, t in step["terms"].items())
    carried = "".join(f"; {kind} {ms:,.3g} ms as measured" for kind, ms
                      in step["carried_ms"].items())
    notes = "".join(f"; {note}" for note in step["notes"])
    return (f"{item['images_per_sec']:,.1f} images/sec predicted from "
            f"{item['predicted_from']}'s work by kind: a step of {step['step_ms']:,.3g} ms = "
            f"{terms}{carried}{notes}; {item['fit']}; "
            f"{error_words(item.get('error_range'), item.get('errors') or {}, item['side'])}")


SIDES = {"accelerator": "an accelerator's run",
         "cpu": "a CPU run of a family measured on another device",
         "cpu_unseen": "a CPU run of a family no device of the table measured"}


def error_words(error: tuple | None, errors: dict, side: str = "accelerator") -> str:
    """'-13% to +4% of images/sec measured (benchmarks/results/...)' or why none."""
    if not error:
        return "its error is not measured (no benchmarks/results/*-predict-check.json)"
    return (f"the model's measured error {error[0]:+.0%} to {error[1]:+.0%} of images/sec "
            f"from {SIDES[side]} ({errors.get('source', '?')})")


def dollars_range(option: dict) -> tuple[float, float]:
    """An option's dollars at the two ends of its prediction's measured error (its rate
    off by the error: the start-up stays, training and evaluation scale with 1 / rate);
    a measured option's dollars, twice."""
    error = option.get("error_range") if option.get("predicted") else None
    if not error:
        return option["dollars"], option["dollars"]
    terms = option["terms"]
    scaled = (terms.get("training") or 0.0) + (terms.get("evaluation") or 0.0)
    fixed = sum(v or 0.0 for k, v in terms.items() if k not in ("training", "evaluation"))
    ends = [dollars(hours(fixed + scaled / (1 + e)), option["price_per_hour_usd"])
            for e in error if e > -1]
    return min(ends), max(ends)


def settle(options: list[dict]) -> str | None:
    """Whether a machine never probed could beat the verdict (the cheapest measured
    option, decision_why.pick), in one line: the cheapest predicted option, its dollars
    at both ends of the model's measured error against the verdict's, and the probe that
    would tell; or that none could. None where nothing was predicted or measured."""
    from app.report.decision import why as decision_why

    best, _ = decision_why.pick(options, "dollars")
    predicted = [o for o in options if o.get("predicted") and o["dollars"] is not None]
    if best is None or not predicted:
        return None
    cheapest = min(predicted, key=lambda o: dollars_range(o)[0])
    low, high = dollars_range(cheapest)
    span = usd(low, 4) if usd(low, 4) == usd(high, 4) else f"{usd(low, 4)}-{usd(high, 4)}"
    named = (f"{cheapest['machine_label']} as {cheapest['row']} ({span} within the model's "
             f"measured error, its start-up borrowed)")
    if low >= best["dollars"]:
        return (f"settle: no machine never probed beats the verdict's {usd(best['dollars'], 4)} "
                f"within the model's error; the nearest, {named}")
    verdict = "could beat" if high >= best["dollars"] else "beats even at its worst"
    return (f"settle: {named} {verdict} the verdict's {usd(best['dollars'], 4)} "
            f"({best['machine_label']}): probe a {cheapest['device_kind']} "
            "(`--benchmark=probe`) before renting it for the job")
