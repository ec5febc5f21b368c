"""The report's content: a row of figures per run, the rankings, the targets' hours
and dollars, the pairs whose speeds differ and why, the findings and caveats
(`build`; app/report/page.py writes it out)."""

from __future__ import annotations

from app.report import page
from app.report.labels import (
    comparability_warning,
    differing_settings,
    labels_of,
    title_of,
)
from app.run import differences
from callbacks.figures.bill import usd_per_million_images
from callbacks.records.durable import strict

# ------------------------------------------------------------------- the figures
def target_rows(run: dict, targets) -> list[dict]:
    """Hours and dollars to each target, from the run's own per-epoch log
    (reached=None where the run measured no accuracy, e.g. a sweep)."""
    from callbacks.figures.targets import targets_reached

    history = [{"epoch": r["epoch"], "top1": r.get("val_top1"), "hours": r.get("billed_hours"),
                "cost_usd": r.get("cost_usd")} for r in run["metrics"]]
    if any(h["top1"] is not None for h in history):
        return targets_reached(history, targets)
    return [{"top1": t, "reached": None, "epoch": None, "hours": None, "cost_usd": None,
             "interpolated": None} for t in targets]


def _speed(summary: dict) -> dict:
    """Images/sec, and its standard error from the step times' (rate ~ 1 / step time)."""
    source = summary if summary.get("images_per_sec") else (summary.get("best") or {})
    rate = source.get("images_per_sec") or None  # 0: not measured
    stderr = None
    if rate and source.get("step_time_ms") and source.get("step_time_stderr_ms") is not None:
        stderr = rate * source["step_time_stderr_ms"] / source["step_time_ms"]
    return {"images_per_sec": rate, "images_per_sec_stderr": stderr, "mfu": source.get("mfu"),
            "global_batch_size": source.get("global_batch_size")
            or summary.get("global_batch_size")}


def _best_epoch(run: dict):
    measured = [(r["epoch"], r["val_top1"]) for r in run["metrics"]
                if r.get("val_top1") is not None]
    return max(measured, key=lambda pair: pair[1])[0] if measured else None


def targets_of(runs: list[dict]) -> list[float]:
    """The target top-1 values the runs were given (--target_top1), all of them."""
    return sorted({t["target_top1"] for run in runs
                   for t in run["summary"].get("targets") or [] if "target_top1" in t})


def build(runs: list[dict], targets=None, decision: dict | None = None) -> dict:
    """The report's content: title, warning, rows per run, rankings and findings.

    Args:
        targets: top-1 values to rank the runs to; None = the runs' own (targets_of).
        decision: app/report/decision/predict.py's result for app/report.py --target, whose
            verdict the report opens with; None without --target.
    """
    targets = targets_of(runs) if targets is None else list(targets)
    rows = []
    for run, label in zip(runs, labels_of(runs)):
        s = run["summary"]
        speed = _speed(s)
        rate, price = speed["images_per_sec"], s.get("price_per_hour_usd")
        rows.append({
            "label": label, "folder": run["folder"], "date": run["date"],
            "model": s.get("model"), "dataset": s.get("dataset"), "image_size": s.get("image_size"),
            "versions": s.get("versions") or {}, "backend": s.get("backend"),
            "precision": s.get("precision"), "accelerator": s.get("accelerator"),
            "device_kind": s.get("device_kind"), "num_processes": s.get("num_processes"),
            "input_pipeline": s.get("input_pipeline"), "preprocessing": s.get("preprocessing"),
            "validation_examples": s.get("validation_examples"),
            "num_replicas": s.get("num_replicas"), "machine": s.get("machine"),
            "pricing": s.get("pricing"), "price_per_hour_usd": price, **speed,
            "price_per_hour_usd_by_pricing": s.get("price_per_hour_usd_by_pricing") or {},
            "images_per_sec_per_device": rate / s["num_replicas"] if rate and s.get(
                "num_replicas") else None,
            "usd_per_million_images": usd_per_million_images(rate, price)
            if price and rate else None,
            "best_val_top1": s.get("best_val_top1"), "best_epoch": _best_epoch(run),
            "epochs": s.get("epochs_completed"), "epochs_planned": s.get("epochs"),
            "status": s.get("status"), "complete": complete(s), "cost_usd": s.get("cost_usd"),
            "has_sweep": bool(run["sweep"]), "targets": target_rows(run, targets),
            "ladder": run.get("ladder") or [], "breakdown": s.get("breakdown"),
            "step_time_ms": s.get("step_time_ms"),
            "peak_tflops_per_device": s.get("peak_tflops_per_device"),
            "invalid": sorted(run["invalid"]), "notes": run["notes"],
        })
    slowest = min((r["images_per_sec"] for r in rows if r["images_per_sec"]), default=None)
    for row in rows:
        row["speedup"] = row["images_per_sec"] / slowest if row["images_per_sec"] else None
    rows = [strict(row) for row in rows]  # a ratio of extreme figures can overflow: None
    rankings = {"images_per_sec": _rank(rows, lambda r: r["images_per_sec"], reverse=True),
                "usd_per_million_images": _rank(rows, lambda r: r["usd_per_million_images"])}
    for index, target in enumerate(targets):
        rankings[f"usd_to_{target}"] = _rank(rows, lambda r: r["targets"][index]["cost_usd"])
        rankings[f"hours_to_{target}"] = _rank(rows, lambda r: r["targets"][index]["hours"])
    content = {"title": title_of(runs), "warning": comparability_warning(runs), "rows": rows,
               "targets": list(targets), "rankings": rankings}
    if decision is not None:
        content["decision"] = verdict_of(decision, rows, rankings)
    content["differences"] = differing_pairs(runs, rows)
    content["findings"] = page.findings(content)
    content["caveats"] = page.caveats(content)
    return content


def verdict_of(decision: dict, rows: list[dict], rankings: dict) -> dict:
    """What the report opens with: the decision's lines, and where the steady state
    (images/sec; dollars per million images) ranks another machine's folder first than
    the decision's fastest (cheapest), one sentence each: the term of the hours to the
    target that the steady state leaves out decides (app/report/decision/why.py)."""
    import os

    from app.report.decision import why as decision_why

    lines = ([f"decision: {decision['headline']}"] if decision.get("headline")
             else [decision["cheapest"], decision["fastest"]])
    by_folder = {os.path.realpath(r["folder"]): r["label"] for r in rows}
    # the label of each folder's machine: a run and a probe of one machine are one choice
    machine_of = {by_folder.get(os.path.realpath(o["folder"])): o.get("machine")
                  for o in decision["options"]}
    differs = []
    for by, ranking, words in (("hours", "images_per_sec", "fastest"),
                               ("dollars", "usd_per_million_images", "cheapest")):
        best, other = decision_why.pick(decision["options"], by)
        steady = rankings[ranking][0] if rankings[ranking] else None
        # a machine predicted, never probed, is no folder's steady state to set it against
        chosen = by_folder.get(os.path.realpath(best["folder"])) if best and not best.get(
            "predicted") else None
        if best is None or steady is None or chosen is None or chosen == steady \
                or machine_of.get(steady, ()) == best.get("machine"):
            continue
        why = (decision_why.deciding(best, other, by)["words"] if other is not None
               and not other.get("predicted")
               and by_folder.get(os.path.realpath(other["folder"])) == steady else
               "its hours to the target count what the steady state leaves out")
        differs.append(f"The steady state below ranks {steady} {words}; to top-1 "
                       f"{decision['target']:g} the decision's {words} is {chosen}: {why}.")
    return {"target": decision["target"], "lines": lines, "differs": differs}


def differing_pairs(runs: list[dict], rows: list[dict]) -> list[dict]:
    """Each pair of runs of the same work and settings whose images/sec differ by more
    than differences.APART, with what their records show differed (app/run/differences.py:
    one line each; the step breakdown's comparison, where both were profiled, is the
    second of the pair's `lines`)."""
    import itertools

    pairs = []
    for (a, row_a), (b, row_b) in itertools.combinations(zip(runs, rows), 2):
        rates = (row_a["images_per_sec"], row_b["images_per_sec"])
        if (not all(rates) or comparability_warning([a, b]) or differing_settings([a, b])
                or differences.apart(*rates) <= differences.APART):
            continue
        pairs.append(differences.compare((a["folder"], b["folder"]),
                                         (row_a["label"], row_b["label"]), rates))
    return pairs


def complete(summary: dict):
    """Whether the run did all it planned: True, False, or None where it does not say
    (a summary.json from before `status`, or a sweep)."""
    status, done, planned = (summary.get(k) for k in ("status", "epochs_completed", "epochs"))
    if status is not None:
        return status == "completed" and (done is None or planned is None or done >= planned)
    if done is not None and planned is not None:
        return done >= planned
    return None


def _rank(rows, key, reverse=False):
    """Labels ordered best first; runs without the figure are left out."""
    known = [r for r in rows if key(r) is not None]
    return [r["label"] for r in sorted(known, key=key, reverse=reverse)]
