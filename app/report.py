"""The study's write-up of any runs: `python app/report.py RUN [RUN ...] --out DIR`.

Reads each run folder's summary.json, metrics.jsonl and sweep.json and writes a
page a person could publish: report.html (self-contained), report.md, report.json
and the PNG charts. It is titled by what differs between the runs (accelerators,
backends, batch sizes, precisions), says per run what ran (model, dataset, image
size, date, versions), warns when runs did not do the same work, and states the
rankings in words: fastest (with speedups and standard errors), cheapest per
image, cheapest and quickest to each target top-1. A piece a run lacks (no sweep,
a target never reached, no price) is shown as such, never as 0.
"""

from __future__ import annotations

import datetime
import json
import os
import sys

if __name__ == "__main__":  # `python app/report.py`: the packages live one level up
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from app import report_page  # noqa: E402
from callbacks.figures.money import usd_per_million_images  # noqa: E402
from callbacks.records.durable import dumps  # noqa: E402

MODEL_NAMES = {"small_resnet": "small ResNet", "resnet18": "ResNet-18",
               "resnet34": "ResNet-34", "resnet50": "ResNet-50"}
DATASET_NAMES = {"imagenet2012": "ImageNet 2012", "digits": "handwritten digits",
                 "synthetic": "synthetic images"}
BACKEND_NAMES = {"tensorflow": "TensorFlow", "jax": "JAX"}
# What may differ between runs, and how each is named in titles and labels.
ASPECTS = {
    "device": lambda s: f"{s.get('num_replicas', '?')} x {s.get('device_kind') or '?'}",
    "backend": lambda s: BACKEND_NAMES.get(s.get("backend"), s.get("backend") or "?"),
    "batch": lambda s: (f"batches {s['sweep'][0]['global_batch_size']}-"
                        f"{s['sweep'][-1]['global_batch_size']}" if s.get("sweep")
                        else f"batch {s.get('global_batch_size')}"),
    "precision": lambda s: s.get("precision") or "?",
}
# What must be equal for runs to be ranked against each other.
SAME_WORK = {"model": "model", "dataset": "dataset", "image_size": "image size"}


def load_run(folder: str) -> dict:
    """The figures of one run folder (a training run, a sweep, or both).

    Raises:
        ValueError: if the folder holds no summary.json or sweep.json.
    """
    def read(name):
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    summary, sweep = read("summary.json"), read("sweep.json")
    if summary is None and sweep is None:
        raise ValueError(f"{folder} holds no summary.json or sweep.json (not a run folder)")
    for name, value in (("summary.json", summary), ("sweep.json", sweep)):
        if value is not None and not isinstance(value, dict):
            raise ValueError(f"{folder}/{name} holds a {type(value).__name__}, not a run's "
                             "figures")
    summary = summary or sweep
    from callbacks.records.metrics_file import read_metrics

    started = [a["started_at"] for a in summary.get("attempts") or [] if a.get("started_at")]
    written = os.path.getmtime(os.path.join(folder, "summary.json" if os.path.exists(
        os.path.join(folder, "summary.json")) else "sweep.json"))
    return {"folder": folder, "summary": summary, "metrics": read_metrics(folder),
            "sweep": (sweep or {}).get("sweep") or summary.get("sweep"),
            "date": datetime.date.fromtimestamp(min(started, default=written)).isoformat()}


# ------------------------------------------------------------ what the runs are
def differing(runs: list[dict]) -> list[str]:
    """The ASPECTS whose values differ between the runs."""
    return [name for name, of in ASPECTS.items()
            if len({of(run["summary"]) for run in runs}) > 1]


def labels_of(runs: list[dict]) -> list[str]:
    """Short names: what differs ("8 x TPU v2", "JAX, batch 256"), else the folder."""
    aspects = differing(runs)
    labels = [", ".join(ASPECTS[a](run["summary"]) for a in aspects) for run in runs]
    if not aspects or len(set(labels)) < len(labels):
        labels = [f"{label} [{os.path.basename(os.path.normpath(run['folder']))}]".lstrip(", ")
                  if label else os.path.basename(os.path.normpath(run["folder"]))
                  for label, run in zip(labels, runs)]
    return labels


def _work(summary: dict) -> str:
    model = MODEL_NAMES.get(summary.get("model"), summary.get("model") or "?")
    dataset = summary.get("dataset") or "?"
    dataset = DATASET_NAMES.get(dataset, dataset)
    size = f", {summary['image_size']} px" if summary.get("image_size") else ""
    return f"{model} on {dataset}{size}"


def title_of(runs: list[dict]) -> str:
    """E.g. "8 x TPU v2 vs 4 x GPU V100: ResNet-50 on ImageNet 2012, 224 px"."""
    parts = []
    for aspect in differing(runs) or ["device", "backend"]:
        values = list(dict.fromkeys(ASPECTS[aspect](run["summary"]) for run in runs))
        parts.append(" vs ".join(values))
    works = list(dict.fromkeys(_work(run["summary"]) for run in runs))
    return f"{', '.join(parts)}: {works[0] if len(works) == 1 else 'different work'}"


def comparability_warning(runs: list[dict]) -> str | None:
    """Why the runs should not be ranked against each other, or None."""
    differences = []
    for key, name in SAME_WORK.items():
        values = list(dict.fromkeys(str(run["summary"].get(key)) for run in runs))
        if len(values) > 1:
            differences.append(f"{name} ({' vs '.join(values)})")
    if not differences:
        return None
    return ("These runs did not do the same work: they differ in " + ", ".join(differences)
            + ". Their speeds, prices and accuracies are shown side by side, but the "
              "rankings compare unlike things.")


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
    rate = source.get("images_per_sec")
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


def build(runs: list[dict], targets=None) -> dict:
    """The report's content: title, warning, rows per run, rankings and findings.

    Args:
        targets: top-1 values to rank the runs to; None = the runs' own (targets_of).
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
            "images_per_sec_per_device": rate / s["num_replicas"] if rate and s.get(
                "num_replicas") else None,
            "usd_per_million_images": usd_per_million_images(rate, price)
            if price and rate else None,
            "best_val_top1": s.get("best_val_top1"), "best_epoch": _best_epoch(run),
            "epochs": s.get("epochs_completed"), "cost_usd": s.get("cost_usd"),
            "has_sweep": bool(run["sweep"]), "targets": target_rows(run, targets),
        })
    slowest = min((r["images_per_sec"] for r in rows if r["images_per_sec"]), default=None)
    for row in rows:
        row["speedup"] = row["images_per_sec"] / slowest if row["images_per_sec"] else None
    rankings = {"images_per_sec": _rank(rows, lambda r: r["images_per_sec"], reverse=True),
                "usd_per_million_images": _rank(rows, lambda r: r["usd_per_million_images"])}
    for index, target in enumerate(targets):
        rankings[f"usd_to_{target}"] = _rank(rows, lambda r: r["targets"][index]["cost_usd"])
        rankings[f"hours_to_{target}"] = _rank(rows, lambda r: r["targets"][index]["hours"])
    content = {"title": title_of(runs), "warning": comparability_warning(runs), "rows": rows,
               "targets": list(targets), "rankings": rankings}
    content["findings"] = report_page.findings(content)
    return content


def _rank(rows, key, reverse=False):
    """Labels ordered best first; runs without the figure are left out."""
    known = [r for r in rows if key(r) is not None]
    return [r["label"] for r in sorted(known, key=key, reverse=reverse)]


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
    sweeps = {label: [(p["global_batch_size"], p.get("images_per_sec")) for p in run["sweep"]]
              for run, label in zip(runs, (r["label"] for r in rows)) if run["sweep"]}
    if sweeps:  # measured curves only: a training run is one batch size, not a curve
        add("throughput_vs_batch", "Throughput against global batch size (sweeps)",
            plots.line_chart, sweeps, log2_x=True, zero_y=True,
            title="Training throughput vs global batch size", xlabel="global batch size",
            ylabel="images/sec")
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


def write(runs: list[dict], targets, out: str) -> dict:
    """Writes report.html, report.md, report.json and the charts to `out`; returns the
    content. `targets`: as `build`'s (None = the runs' own)."""
    os.makedirs(out, exist_ok=True)
    content = build(runs, targets)
    made = charts(runs, content, out)
    report_page.write(content, made, out)
    with open(os.path.join(out, "report.json"), "w") as f:
        f.write(dumps(content, indent=2))
    return content


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python app/report.py",
        description="A side-by-side report of runs (HTML, Markdown, JSON and PNG charts).")
    parser.add_argument("runs", nargs="+", help="run folders (--logdir of each run)")
    parser.add_argument("--out", required=True, help="folder for the report")
    parser.add_argument("--targets", default="",
                        help="comma list of top-1 targets; default: those of the runs")
    args = parser.parse_args(argv)
    try:
        runs = [load_run(folder) for folder in args.runs]
        if args.targets:
            targets = [float(t) for t in args.targets.split(",")]
            if not all(0 < t <= 1 for t in targets):
                raise ValueError(f"--targets={args.targets!r}: accepted: numbers in (0, 1]")
        else:
            targets = None  # the runs' own
        if os.path.exists(args.out) and not os.path.isdir(args.out):
            raise ValueError(f"--out={args.out} is a file; accepted: a folder")
    except (ValueError, OSError) as error:
        sys.stderr.write(f"error: {error}\n")
        return 2
    try:
        write(runs, targets, args.out)
    except OSError as error:
        sys.stderr.write(f"error: cannot write the report to {args.out}: {error}\n")
        return 2
    print(f"report: {os.path.join(args.out, 'report.html')} (and report.md, PNG charts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
