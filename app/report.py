"""The study's side-by-side view of any runs: `python app/report.py RUN [RUN ...] --out DIR`.

Reads each run folder's summary.json, metrics.jsonl and sweep.json, and writes
report.md, a self-contained report.html (charts embedded) and the PNG charts:
images/sec vs global batch size; top-1 vs epoch, vs wall-clock hours and vs
dollars; the tables of speed, price, MFU, topology, and hours and dollars to each
target top-1, with the runs ranked as the study ranked its two platforms. A piece a
run lacks (no sweep, a target never reached, no price) is shown as such, never 0.
"""

from __future__ import annotations

import base64
import html
import json
import os
import sys

if __name__ == "__main__":  # `python app/report.py`: the packages live one level up
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from callbacks.money import usd_per_million_images  # noqa: E402

MISSING = "—"


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
    summary = summary or sweep
    from callbacks.metrics_file import read_metrics

    return {"folder": folder, "summary": summary, "metrics": read_metrics(folder),
            "sweep": (sweep or {}).get("sweep") or (summary.get("sweep") if summary else None)}


def label_of(run: dict) -> str:
    s = run["summary"]
    kind = s.get("device_kind") or s.get("accelerator", "?")
    machine = f", {s['machine']}" if s.get("machine") else ""
    return f"{s.get('num_replicas', '?')} x {kind}{machine} [{os.path.basename(run['folder'].rstrip('/'))}]"


def target_rows(run: dict, targets) -> list[dict]:
    """Hours and dollars to each target, from the run's own per-epoch log
    (reached=None where the run measured no accuracy, e.g. a sweep)."""
    from callbacks.targets import targets_reached

    history = [{"epoch": r["epoch"], "top1": r.get("val_top1"), "hours": r.get("billed_hours"),
                "cost_usd": r.get("cost_usd")} for r in run["metrics"]]
    if any(h["top1"] is not None for h in history):
        return targets_reached(history, targets)
    return [{"top1": t, "reached": None, "epoch": None, "hours": None, "cost_usd": None,
             "interpolated": None} for t in targets]


def _fmt(value, spec=",.1f", prefix="", suffix=""):
    return MISSING if value is None else f"{prefix}{value:{spec}}{suffix}"


def _money(value):
    """Dollars with the precision the amount needs (CPU runs cost fractions of a cent)."""
    if value is None:
        return MISSING
    return f"${value:,.2f}" if abs(value) >= 1 else f"${value:.4f}"


def _target_cell(t):
    if t["reached"] is None:
        return "no accuracy measured"
    if not t["reached"]:
        return "not reached"
    hours = MISSING if t["hours"] is None else (
        f"{t['hours']:.2f} h" if t["hours"] >= 0.1 else f"{t['hours'] * 60:.1f} min")
    return f"{t['epoch']} / {hours} / {_money(t['cost_usd'])}"


def build(runs: list[dict], targets) -> dict:
    """The report's content: rows per run, rankings, and the chart series."""
    rows = []
    for run in runs:
        s = run["summary"]
        rate = s.get("images_per_sec") or (s.get("best") or {}).get("images_per_sec")
        price = s.get("price_per_hour_usd")
        rows.append({
            "label": label_of(run), "backend": s.get("backend"), "precision": s.get("precision"),
            "accelerator": s.get("accelerator"), "device_kind": s.get("device_kind"),
            "num_processes": s.get("num_processes"), "num_replicas": s.get("num_replicas"),
            "machine": s.get("machine"), "pricing": s.get("pricing"),
            "price_per_hour_usd": price, "global_batch_size": s.get("global_batch_size"),
            "images_per_sec": rate,
            "images_per_sec_per_device": rate / s["num_replicas"] if rate and s.get(
                "num_replicas") else None,
            "usd_per_million_images": usd_per_million_images(rate, price)
            if price and rate else None,
            "mfu": s.get("mfu") if s.get("mfu") is not None else (s.get("best") or {}).get("mfu"),
            "best_val_top1": s.get("best_val_top1"), "epochs": s.get("epochs_completed"),
            "cost_usd": s.get("cost_usd"), "has_sweep": bool(run["sweep"]),
            "targets": target_rows(run, targets),
        })
    rankings = {"images_per_sec": _rank(rows, lambda r: r["images_per_sec"], reverse=True),
                "usd_per_million_images": _rank(rows, lambda r: r["usd_per_million_images"])}
    for index, target in enumerate(targets):
        rankings[f"usd_to_{target}"] = _rank(rows, lambda r: r["targets"][index]["cost_usd"])
        rankings[f"hours_to_{target}"] = _rank(rows, lambda r: r["targets"][index]["hours"])
    return {"rows": rows, "targets": list(targets), "rankings": rankings}


def _rank(rows, key, reverse=False):
    """Labels ordered best first; runs without the figure are left out."""
    known = [r for r in rows if key(r) is not None]
    return [r["label"] for r in sorted(known, key=key, reverse=reverse)]


def charts(runs: list[dict], targets, out: str) -> dict:
    """Writes the PNG charts; returns {name: path}."""
    from app.engine import plots

    paths = {}
    throughput = {}
    for run in runs:
        if run["sweep"]:
            throughput[label_of(run)] = [(r["global_batch_size"], r.get("images_per_sec"))
                                         for r in run["sweep"]]
        elif run["summary"].get("images_per_sec"):
            s = run["summary"]
            throughput[label_of(run) + " (training run)"] = [
                (s.get("global_batch_size"), s["images_per_sec"])]
    paths["throughput"] = plots.line_chart(
        throughput, os.path.join(out, "throughput_vs_batch.png"), log2_x=True,
        title="Training throughput vs global batch size", xlabel="global batch size",
        ylabel="images/sec", zero_y=True)
    lines = {f"target {t:.1%}": t for t in targets}
    for name, key, xlabel in (("top1_vs_epoch", "epoch", "epoch"),
                              ("top1_vs_hours", "billed_hours", "wall-clock hours (billed)"),
                              ("top1_vs_dollars", "cost_usd", "dollars")):
        series = {label_of(run): [(r.get(key), r.get("val_top1")) for r in run["metrics"]]
                  for run in runs if run["metrics"]}
        paths[name] = plots.line_chart(series, os.path.join(out, name + ".png"),
                                       title=f"Top-1 vs {xlabel}", xlabel=xlabel,
                                       ylabel="top-1 (validation)", percent_y=True,
                                       hlines=lines)
    return paths


def _tables(content) -> list[tuple[str, list[str], list[list[str]]]]:
    rows, targets = content["rows"], content["targets"]
    # usd_per_million_images: price / steady-state images/sec (callbacks/money.py), not
    # the run's bill over its images (billed_usd_per_million_images, in metrics.jsonl).
    speed = ("Speed and price", ["run", "backend", "precision", "global batch", "images/sec",
                                 "per device", "MFU", "$/hour",
                                 "$/million images (price / steady-state images/sec)", "sweep"],
             [[r["label"], r["backend"] or MISSING, r["precision"] or MISSING,
               _fmt(r["global_batch_size"], "d"), _fmt(r["images_per_sec"]),
               _fmt(r["images_per_sec_per_device"]), _fmt(r["mfu"], ".1%"),
               _money(r["price_per_hour_usd"]), _money(r["usd_per_million_images"]),
               "yes" if r["has_sweep"] else "no sweep"] for r in rows])
    accuracy = ("Accuracy and time to target", ["run", "epochs", "best top-1", "total cost"] + [
        f"to {t:.1%}: epoch / hours / $" for t in targets],
        [[r["label"], _fmt(r["epochs"], "d"), _fmt(r["best_val_top1"], ".2%"),
          _money(r["cost_usd"])] + [_target_cell(t) for t in r["targets"]] for r in rows])
    topology = ("Topology and prices used", ["run", "accelerator", "device", "processes",
                                             "replicas", "machine", "pricing"],
                [[r["label"], r["accelerator"] or MISSING, r["device_kind"] or MISSING,
                  _fmt(r["num_processes"], "d"), _fmt(r["num_replicas"], "d"),
                  r["machine"] or "no price", r["pricing"] or MISSING] for r in rows])
    ranking = ("Rankings (best first)", ["measure", "order"],
               [[name.replace("_", " "), " > ".join(order) if order else MISSING]
                for name, order in content["rankings"].items()])
    return [speed, accuracy, topology, ranking]


def write(runs: list[dict], targets, out: str) -> dict:
    """Writes report.md, report.html and the charts to `out`; returns the content."""
    os.makedirs(out, exist_ok=True)
    content = build(runs, targets)
    paths = charts(runs, targets, out)
    tables = _tables(content)
    md = ["# Accelerator comparison", ""]
    for title, header, body in tables:
        md += [f"## {title}", "", "| " + " | ".join(header) + " |",
               "|" + "---|" * len(header)] + ["| " + " | ".join(row) + " |" for row in body] + [""]
    md += ["## Charts", ""] + [f"![{name}]({os.path.basename(p)})" for name, p in paths.items()]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    page = ["<!doctype html><html><head><meta charset='utf-8'><title>Accelerator comparison"
            "</title><style>body{font-family:sans-serif;margin:2em;max-width:1200px}"
            "table{border-collapse:collapse;margin-bottom:2em}td,th{border:1px solid #ccc;"
            "padding:4px 8px;text-align:right}td:first-child,th:first-child{text-align:left}"
            "img{max-width:48%;margin:1%}</style></head><body><h1>Accelerator comparison</h1>"]
    for title, header, body in tables:
        page.append(f"<h2>{html.escape(title)}</h2><table><tr>"
                    + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"
                    + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row)
                              + "</tr>" for row in body) + "</table>")
    page.append("<h2>Charts</h2>")
    for name, path in paths.items():
        with open(path, "rb") as f:
            data = base64.b64encode(f.read()).decode()
        page.append(f"<img alt='{name}' src='data:image/png;base64,{data}'>")
    page.append("</body></html>")
    with open(os.path.join(out, "report.html"), "w") as f:
        f.write("\n".join(page))
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(content, f, indent=2, default=str)
    return content


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python app/report.py",
        description="Side-by-side report of runs (tables, charts, Markdown and HTML).")
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
            targets = sorted({t["top1"] for run in runs
                              for t in run["summary"].get("targets") or []})
    except (ValueError, OSError) as error:
        sys.stderr.write(f"error: {error}\n")
        return 2
    write(runs, targets, args.out)
    print(f"report: {os.path.join(args.out, 'report.html')} (and report.md, PNG charts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
