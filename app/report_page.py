"""The report's words and page: the findings in sentences, the tables, and the HTML
and Markdown that hold them (the content comes from app/report.py's `build`)."""

from __future__ import annotations

import base64
import datetime
import html
import math
import os

from app.run.summary import percent

MISSING = "—"
BACKENDS = {"tensorflow": "TensorFlow", "jax": "JAX", "python": "Python", "keras": "Keras"}
STYLE = """
body{font-family:Georgia,serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222;
line-height:1.5}
h1{font-size:1.9em;margin-bottom:.2em}.byline{color:#666;margin-top:0}
h2{font-family:sans-serif;font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
.warning{background:#fff4ce;border-left:4px solid #e0a800;padding:.6em 1em}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-family:sans-serif;font-size:.9em}
td,th{border-bottom:1px solid #ddd;padding:4px 10px;text-align:right;white-space:nowrap}
td:first-child,th:first-child{text-align:left}td:last-child{white-space:normal}
th{background:#f5f5f5}
.charts{display:flex;flex-wrap:wrap;gap:2%}figure{width:49%;margin:0 0 1.5em}
figure img{width:100%}figcaption{font-family:sans-serif;font-size:.85em;color:#555}
"""


def money(value) -> str:
    """Dollars with the precision the amount needs (CPU runs cost fractions of a cent)."""
    if value is None:
        return MISSING
    return f"${value:,.2f}" if abs(value) >= 1 else f"${value:.4f}"


def hours(value) -> str:
    if value is None:
        return MISSING
    return f"{value:.2f} h" if value >= 0.1 else f"{value * 60:.1f} min"


def _fmt(value, spec=",.1f", suffix=""):
    return MISSING if value is None else f"{value:{spec}}{suffix}"


def _rate(row) -> str:
    error = row["images_per_sec_stderr"]
    return _fmt(row["images_per_sec"]) + ("" if error is None else f" ± {error:,.1f}")


# One run per setting measures that run, not the setting: the ± of a rate is the
# spread of its own step times, and a second run on a loaded or shared machine can
# differ by far more (a pair on a busy 2-core CPU: 2.01x under load, 1.16x quiet).
SINGLE_RUNS = ("Each figure is one run: its ± is the spread of that run's step times, "
               "not of runs, and runs of one setting can differ by more than that on a "
               "loaded or shared machine; repeat them before trusting a ratio.")


def accuracy_gap(first: dict, second: dict) -> str:
    """What a gap in top-1 between two rows is in images, and whether it is within
    binomial noise (two standard errors of the difference of two proportions); ""
    where the validation sizes are not known."""
    n1, n2 = first.get("validation_examples"), second.get("validation_examples")
    if not n1 or not n2:
        return ""
    p1, p2 = first["best_val_top1"], second["best_val_top1"]
    noise = 2 * math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)
    images = round((p1 - p2) * n1) if n1 == n2 else None
    apart = (f"{images} of {n1:,} images apart" if images is not None
             else f"{p1 - p2:.2%} apart")
    if p1 - p2 <= noise:
        return (f" ({apart}: within binomial noise, two standard errors being "
                f"{noise:.2%}, so this order could go either way)")
    return f" ({apart}: beyond two standard errors of binomial noise, {noise:.2%})"


# ---------------------------------------------------------------------- findings
def findings(content: dict) -> list[str]:
    """The rankings in words: fastest, cheapest per image, cheapest and quickest to
    each target, each with its figures, and how far noise can explain them."""
    rows = {r["label"]: r for r in content["rows"]}
    ranks = content["rankings"]
    out = []
    order = ranks["images_per_sec"]
    if len(order) > 1:
        top = rows[order[0]]
        out.append(f"Fastest: {top['label']} at {top['images_per_sec']:,.0f} images/sec, "
                   + ", ".join(f"{top['images_per_sec'] / rows[o]['images_per_sec']:.2f}x as "
                               f"fast as {o} ({rows[o]['images_per_sec']:,.0f})"
                               for o in order[1:]) + ". " + SINGLE_RUNS)
    order = ranks["usd_per_million_images"]
    if len(order) > 1:
        top = rows[order[0]]
        cheapest = top["usd_per_million_images"]
        out.append(f"Cheapest per million training images: {top['label']} at "
                   f"{money(cheapest)}; " + ", ".join(
                       f"{o} costs {rows[o]['usd_per_million_images'] / cheapest:.2f}x as much "
                       f"({money(rows[o]['usd_per_million_images'])})" for o in order[1:]) + ".")
    accurate = sorted((r for r in rows.values() if r["best_val_top1"] is not None),
                      key=lambda r: -r["best_val_top1"])
    if len(accurate) > 1:
        best = accurate[0]
        out.append(f"Most accurate: {best['label']}, {best['best_val_top1']:.2%} "
                   f"top-1 (epoch {best['best_epoch']}); "
                   + "; ".join(f"{r['label']} {r['best_val_top1']:.2%} (epoch {r['best_epoch']})"
                               + accuracy_gap(best, r) for r in accurate[1:]) + ".")
    for index, target in enumerate(content["targets"]):
        out.append(_target_finding(rows, ranks, index, target))
    return out or ["One run: the tables below give its figures."]


def _target_finding(rows, ranks, index, target) -> str:
    def reached(label):
        t = rows[label]["targets"][index]
        return f"{money(t['cost_usd'])}, {hours(t['hours'])}, epoch {t['epoch']}"

    cheapest = ranks[f"usd_to_{target}"]
    quickest = ranks[f"hours_to_{target}"]
    text = f"To {target:.1%} top-1: "
    if cheapest:
        text += f"cheapest {cheapest[0]} ({reached(cheapest[0])})"
        text += "".join(f", then {label} ({reached(label)})" for label in cheapest[1:])
        if quickest and quickest[0] != cheapest[0]:
            text += f"; quickest {quickest[0]} ({hours(rows[quickest[0]]['targets'][index]['hours'])})"
    missed = [r["label"] for r in rows.values() if r["targets"][index]["reached"] is False]
    unmeasured = [r["label"] for r in rows.values() if r["targets"][index]["reached"] is None]
    if missed:
        text += ("; " if cheapest else "") + f"not reached by {', '.join(missed)}"
    if unmeasured:
        text += ("; " if cheapest or missed else "") + f"no accuracy measured by {', '.join(unmeasured)}"
    return text + "."


# ------------------------------------------------------------------------ tables
def _versions(row) -> str:
    return ", ".join(f"{BACKENDS.get(k, k)} {v}" for k, v in row["versions"].items() if v) \
        or MISSING


def _input(row) -> str:
    """The input pipeline and its augmentation, e.g. "tf.data (small)"."""
    if not row.get("input_pipeline"):
        return MISSING
    preset = row.get("preprocessing")
    return row["input_pipeline"] + (f" ({preset})" if preset and preset != "none" else "")


def _target_cell(t) -> str:
    if t["reached"] is None:
        return "no accuracy measured"
    if not t["reached"]:
        return "not reached"
    return f"epoch {t['epoch']}, {hours(t['hours'])}, {money(t['cost_usd'])}"


def tables(content: dict) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(id, title, header, rows) of each table."""
    rows, targets = content["rows"], content["targets"]
    runs = ("runs", "What ran", ["run", "model", "dataset", "image size", "input pipeline",
                                 "devices", "backend", "precision", "global batch", "date",
                                 "versions"],
            [[r["label"], r["model"] or MISSING, r["dataset"] or MISSING,
              _fmt(r["image_size"], "d", " px"), _input(r),
              f"{_fmt(r['num_replicas'], 'd')} x {r['device_kind'] or MISSING}",
              BACKENDS.get(r["backend"], r["backend"] or MISSING), r["precision"] or MISSING,
              _fmt(r["global_batch_size"], "d"), r["date"], _versions(r)] for r in rows])
    speed = ("speed", "Speed", ["run", "images/sec ± s.e.", "speedup", "per device", "MFU",
                                "sweep"],
             [[r["label"], _rate(r), _fmt(r["speedup"], ".2f", "x"),
               _fmt(r["images_per_sec_per_device"]),
               MISSING if r["mfu"] is None else percent(r["mfu"]),
               "yes" if r["has_sweep"] else "no sweep"] for r in rows])
    # usd_per_million_images: price / steady-state images/sec (callbacks/figures/money.py), not
    # the run's bill over its images (billed_usd_per_million_images, in metrics.jsonl).
    price = ("price", "Price", ["run", "machine", "pricing", "$/hour",
                                "$/million images (price / steady-state images/sec)",
                                "billed in all"],
             [[r["label"], r["machine"] or "no price", r["pricing"] or MISSING,
               money(r["price_per_hour_usd"]), money(r["usd_per_million_images"]),
               money(r["cost_usd"])] for r in rows])
    accuracy = ("accuracy", "Accuracy, and time and money to each target",
                ["run", "epochs", "best top-1"] + [f"to {t:.1%}" for t in targets],
                [[r["label"], _fmt(r["epochs"], "d"),
                  MISSING if r["best_val_top1"] is None
                  else f"{r['best_val_top1']:.2%} (epoch {r['best_epoch']})"]
                 + [_target_cell(t) for t in r["targets"]] for r in rows])
    return [runs, speed, price, accuracy]


# ------------------------------------------------------------------------- pages
def write(content: dict, charts: dict, out: str) -> None:
    """Writes report.html (charts embedded) and report.md beside the PNG charts.

    Args:
        charts: {name: (caption, path)} from app/report.py's `charts`.
    """
    made = datetime.date.today().isoformat()
    byline = f"{len(content['rows'])} run(s), report made {made} by app/report.py"
    md = [f"# {content['title']}", "", f"*{byline}*", ""]
    page = [f"<!doctype html><html><head><meta charset='utf-8'><title>"
            f"{html.escape(content['title'])}</title><style>{STYLE}</style></head><body>",
            f"<h1>{html.escape(content['title'])}</h1><p class='byline'>{byline}</p>"]
    if content["warning"]:
        md += [f"> **Not comparable.** {content['warning']}", ""]
        page.append(f"<p class='warning' id='warning'><b>Not comparable.</b> "
                    f"{html.escape(content['warning'])}</p>")
    md += ["## In short", ""] + [f"- {line}" for line in content["findings"]] + [""]
    page.append("<h2>In short</h2><ul id='findings'>"
                + "".join(f"<li>{html.escape(line)}</li>" for line in content["findings"])
                + "</ul>")
    for key, title, header, body in tables(content):
        md += [f"## {title}", "", "| " + " | ".join(header) + " |",
               "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in body] + [""]
        page.append(f"<h2>{html.escape(title)}</h2><table id='{key}'><tr>"
                    + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"
                    + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r)
                              + "</tr>" for r in body) + "</table>")
    md += ["## Charts", ""]
    page.append("<h2>Charts</h2><div class='charts'>")
    for name, (caption, path) in charts.items():
        md += [f"![{caption}]({os.path.basename(path)})", ""]
        with open(path, "rb") as f:
            data = base64.b64encode(f.read()).decode()
        page.append(f"<figure><img alt='{name}' src='data:image/png;base64,{data}'>"
                    f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    page.append("</div></body></html>")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(out, "report.html"), "w") as f:
        f.write("\n".join(page))
