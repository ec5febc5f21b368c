"""The report's PNG charts (app/engine/plots.py draws them): throughput, price per
million images, sweeps, ladders, top-1 against epochs, hours and dollars, and the
cost to each target."""

from __future__ import annotations

import os

from callbacks.figures import spread

# --------------------------------------------------------------------- the charts
def charts(runs: list[dict], content: dict, out: str) -> dict:
    """Writes the PNG charts; returns {name: (caption, path)}."""
    from app.engine import plots

    rows, targets = content["rows"], content["targets"]
    made = {}

    def add(name, caption, draw, *args, **kwargs):
        made[name] = (caption, draw(*args, os.path.join(out, name + ".png"), **kwargs))

    if any(r["images_per_sec"] for r in rows):
        add("throughput", "Training throughput, steady state (error bars, where the run "
            "recorded its step times: one standard error)", plots.bar_chart,
            {"images/sec": {r["label"]: (r["images_per_sec"], r["images_per_sec_stderr"])
                            for r in rows}},
            title="Training throughput (steady state)", ylabel="images/sec",
            note="error bars: +-1 standard error of the mean step time"
            if any(r["images_per_sec_stderr"] for r in rows) else "")
    if any(r["usd_per_million_images"] for r in rows):
        add("usd_per_million_images", "Dollars per million training images at full speed",
            plots.bar_chart, {"$ per million images": {
                r["label"]: (r["usd_per_million_images"], None) for r in rows}},
            title="Price of a million training images", ylabel="dollars", money_y=True)
    labels = [r["label"] for r in rows]
    sweeps = {label: [(p["global_batch_size"], p.get("images_per_sec"),
                       p.get("images_per_sec_min"), p.get("images_per_sec_max"))
                      for p in run["sweep"]] for run, label in zip(runs, labels) if run["sweep"]}
    spread_note = (f"error bars: {spread.SPREAD} of each point's timed windows (--repeats)"
                   if any(p.get("images_per_sec_min") is not None for run in runs
                          for p in (run["sweep"] or []) + (run["ladder"] or [])) else "")
    if sweeps:  # measured curves only: a training run is one batch size, not a curve
        add("throughput_vs_batch", "Throughput against global batch size (sweeps)",
            plots.line_chart, sweeps, log2_x=True, zero_y=True,
            title="Training throughput vs global batch size", xlabel="global batch size",
            ylabel="images/sec", note=spread_note)
    ladders = {rung["rung"]: {} for run in runs for rung in run["ladder"] or []}
    for run, label in zip(runs, labels):
        for rung in run["ladder"] or []:
            ladders[rung["rung"]][label] = (rung["images_per_sec"], (
                rung["images_per_sec_min"], rung["images_per_sec_max"]))
    ladders = {rung: bars for rung, bars in ladders.items()  # skipped everywhere: no bar
               if any(value for value, _ in bars.values())}
    if ladders:
        add("ladder", "The effort ladders: each rung's images/sec (--benchmark=ladder)",
            plots.bar_chart, ladders, title="Effort ladder: images/sec at each rung",
            ylabel="images/sec", note=spread_note)
    lines = {f"target {t:.1%}": t for t in targets}
    for name, key, xlabel, money in (("top1_vs_epoch", "epoch", "epoch", False),
                                     ("top1_vs_hours", "billed_hours", "hours (billed)", False),
                                     ("top1_vs_dollars", "cost_usd", "dollars (billed)", True)):
        series = {row["label"]: [(r.get(key), r.get("val_top1")) for r in run["metrics"]]
                  for run, row in zip(runs, rows) if run["metrics"]}
        if any(y is not None for points in series.values() for _, y in points):
            add(name, f"Validation top-1 against {xlabel}", plots.line_chart, series,
                title=f"Top-1 vs {xlabel}", xlabel=xlabel, ylabel="top-1 (validation)",
                percent_y=True, hlines=lines, money_x=money)
    reached = {f"to {t:.1%}": {r["label"]: (r["targets"][i]["cost_usd"], None) for r in rows}
               for i, t in enumerate(targets)}
    if any(v for bars in reached.values() for v, _ in bars.values()):
        add("usd_to_target", "Dollars billed until each target top-1 was first reached",
            plots.bar_chart, reached, title="Cost to each target top-1", ylabel="dollars",
            money_y=True)
    return made
