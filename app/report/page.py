"""The report's words and page: the findings in sentences, the tables, and the HTML
and Markdown that hold them (the content comes from app/report/content.py's `build`).

Labels, names and any text read from a run folder are someone else's: in the HTML
every piece of text is escaped (html.escape); in the Markdown the report's own words
stay as written and every piece taken from a run passes through `md_text` (HTML
entities for < > &, backslashes before Markdown's punctuation, one line), which is
why `findings` and `tables` take a `quote` function.
"""

from __future__ import annotations

import base64
import datetime
import html
import math
import os
import re

from app.run import differences
from app.run.summary import percent
from callbacks.figures.bill import PRICING_WORDS, dollars, usd
from callbacks.profiling import breakdown, difference

MISSING = "—"
INVALID = "n/a"  # a figure the run folder holds, but of the wrong kind or out of range
# Markdown's inline punctuation (code, emphasis, links, tables, headings, math,
# strikethrough), escaped with a backslash; < > & become HTML entities.
_MD_PUNCTUATION = re.compile(r"([\\`*_\[\]|#$~!{}])")
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


def md_text(text) -> str:
    """`text` as plain text in Markdown (a paragraph or a table cell): one line, no
    HTML, no emphasis, links, code, math or cell breaks."""
    text = "".join(c if c.isprintable() else " " for c in str(text))
    return _MD_PUNCTUATION.sub(r"\\\1", html.escape(text, quote=False))


def _same(text) -> str:
    return text


def money(value) -> str:
    """Dollars as the app writes them (callbacks/figures/bill.py's `usd`: CPU runs cost
    fractions of a cent), MISSING where there are none."""
    return MISSING if value is None else usd(value)


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
def _ladder_findings(rows: dict, quote) -> list[str]:
    """The effort ladders side by side (--benchmark=ladder): for each rung, what it
    gives on each run's machine, "mixed_bfloat16 gives 1.85x on A and 1.10x on B"
    (images/sec over the rung it builds on, the best before it, as ladder.json has it)."""
    ladders = [r for r in rows.values() if r.get("ladder")]
    names = []
    for row in ladders:
        names += [step["rung"] for step in row["ladder"] if step["rung"] not in names]
    out = []
    for name in names:
        gains = []
        for row in ladders:
            step = next((s for s in row["ladder"] if s["rung"] == name), None)
            if step is not None and step.get("gain_over_previous") is not None:
                gains.append(f"{step['gain_over_previous']:.2f}x on {quote(row['label'])}")
        if gains:
            out.append(f"Effort ladder: {quote(name)} gives " + " and ".join(gains)
                       + " (images/sec over the rung it builds on).")
    return out


def _breakdown_findings(rows: dict, quote) -> list[str]:
    """Two or more profiled runs: each against the first, the kind of work whose time an
    image changed most, with both times and rates (callbacks/profiling/difference.py),
    and both steps' lines."""
    profiled = [r for r in rows.values() if r.get("breakdown")]
    out = []
    for other in profiled[1:]:
        first = profiled[0]
        change = difference.largest_change(first, other)
        if change is None:  # a breakdown without parts, or no batch: nothing to compare
            continue
        lines = [f"{quote(row['label'])}: " + breakdown.line(
            difference.of_timed_step(row),
            peak_tflops_per_device=row.get("peak_tflops_per_device")) for row in (first, other)]
        out.append(f"Step breakdown: from {quote(first['label'])} to {quote(other['label'])} "
                   f"the largest change is {change['words']} ({'; '.join(lines)}).")
    return out


STEADY = "start-up, evaluation and checkpoints excluded"


def verdict(content: dict, quote=_same) -> list[str]:
    """The decision's verdict, where app/report.py was given --target: its cheapest and
    fastest lines (or why there is none), and where the steady state below ranks
    another machine first, one sentence saying why the two differ."""
    decision = content.get("decision")
    if not decision:
        return []
    return [quote(line) for line in decision["lines"]] + [
        quote(line) for line in decision.get("differs") or []]


def findings(content: dict, quote=_same) -> list[str]:
    """The rankings in words: fastest, cheapest per image, cheapest and quickest to
    each target, each with its figures, and how far noise can explain them.

    Args:
        quote: what each label goes through (md_text for Markdown).
    """
    rows = {r["label"]: r for r in content["rows"]}
    ranks = content["rankings"]
    out = []
    order = ranks["images_per_sec"]
    if len(order) > 1:
        top = rows[order[0]]
        out.append(f"Fastest at the steady state ({STEADY}): {quote(top['label'])} at "
                   f"{top['images_per_sec']:,.0f} images/sec, "
                   + ", ".join(f"{_ratio(top['images_per_sec'], rows[o]['images_per_sec'])} as "
                               f"fast as {quote(o)} ({rows[o]['images_per_sec']:,.0f})"
                               for o in order[1:]) + ". " + SINGLE_RUNS)
    order = ranks["usd_per_million_images"]
    if len(order) > 1:
        top = rows[order[0]]
        cheapest = top["usd_per_million_images"]
        out.append(f"Cheapest per million training images at the steady state: "
                   f"{quote(top['label'])} at "
                   f"{money(cheapest)}; " + ", ".join(
                       f"{quote(o)} costs {_ratio(rows[o]['usd_per_million_images'], cheapest)} "
                       f"as much ({money(rows[o]['usd_per_million_images'])})"
                       for o in order[1:]) + ".")
    out += _ladder_findings(rows, quote)
    out += _breakdown_findings(rows, quote)
    out += differences.findings(content.get("differences") or [], quote)  # what differed
    accurate = sorted((r for r in rows.values() if r["best_val_top1"] is not None),
                      key=lambda r: -r["best_val_top1"])
    if len(accurate) > 1:
        best = accurate[0]
        out.append(f"Most accurate: {quote(best['label'])}, {best['best_val_top1']:.2%} "
                   f"top-1 (epoch {best['best_epoch']}); "
                   + "; ".join(f"{quote(r['label'])} {r['best_val_top1']:.2%} "
                               f"(epoch {r['best_epoch']})" + accuracy_gap(best, r)
                               for r in accurate[1:]) + ".")
    for index, target in enumerate(content["targets"]):
        out.append(_target_finding(rows, ranks, index, target, quote))
    return out or ["One run: the tables below give its figures."]


def _ratio(value, to) -> str:
    """"1.02x"; a figure so small that its float is 0 (a hand-made file) has no ratio."""
    return f"{value / to:.2f}x" if to else f"{MISSING}x"


def _target_finding(rows, ranks, index, target, quote) -> str:
    def reached(label):
        t = rows[label]["targets"][index]
        return f"{money(t['cost_usd'])}, {hours(t['hours'])}, epoch {t['epoch']}"

    cheapest = ranks[f"usd_to_{target}"]
    quickest = ranks[f"hours_to_{target}"]
    text = f"To {target:.1%} top-1: "
    if cheapest:
        text += f"cheapest {quote(cheapest[0])} ({reached(cheapest[0])})"
        text += "".join(f", then {quote(label)} ({reached(label)})" for label in cheapest[1:])
        if quickest and quickest[0] != cheapest[0]:
            text += (f"; quickest {quote(quickest[0])} "
                     f"({hours(rows[quickest[0]]['targets'][index]['hours'])})")
    missed = [quote(r["label"]) for r in rows.values()
              if r["targets"][index]["reached"] is False]
    unmeasured = [quote(r["label"]) for r in rows.values()
                  if r["targets"][index]["reached"] is None]
    if missed:
        text += ("; " if cheapest else "") + f"not reached by {', '.join(missed)}"
    if unmeasured:
        text += (("; " if cheapest or missed else "")
                 + f"no accuracy measured by {', '.join(unmeasured)}")
    return text + "."


def caveats(content: dict) -> list[str]:
    """What a reader must know before trusting a row: runs that stopped before their
    planned epochs, and figures a run folder holds of the wrong kind (shown as n/a)."""
    out = []
    for row in content["rows"]:
        if row["complete"] is False:
            out.append(f"Incomplete: {row['label']} {_status(row)} after "
                       f"{_epochs(row)} epochs; its accuracy, time and cost are those of "
                       "the epochs it ran, not of a finished run.")
        out += [f"{row['label']}: {note}." for note in row["notes"]]
    return out


def _status(row) -> str:
    return {"completed": "completed", None: "stopped"}.get(row["status"], row["status"])


def _epochs(row) -> str:
    """"4 of 15" (completed of planned), "4" where the plan is not known."""
    done, planned = _fmt(row["epochs"], "d"), row["epochs_planned"]
    return done if planned is None else f"{done} of {planned:d}"


# ------------------------------------------------------------------------ tables
def _versions(row, quote) -> str:
    return ", ".join(f"{quote(BACKENDS.get(k, k))} {quote(v)}" for k, v in row["versions"].items()
                     if v) or MISSING


def _input(row, quote) -> str:
    """The input pipeline and its augmentation, e.g. "tf.data (small)"."""
    if not row.get("input_pipeline"):
        return MISSING
    preset = row.get("preprocessing")
    return quote(row["input_pipeline"]) + (f" ({quote(preset)})" if preset and preset != "none"
                                           else "")


def _target_cell(t, row) -> str:
    if t["reached"] is None:
        return "no accuracy measured"
    if not t["reached"]:
        return "not reached" if row["complete"] is not False else (
            f"not reached in {_epochs(row)} epochs (incomplete)")
    cell = f"epoch {t['epoch']}, {hours(t['hours'])}, {money(t['cost_usd'])}"
    others = {k: v for k, v in (row.get("price_per_hour_usd_by_pricing") or {}).items()
              if k != row.get("pricing")}
    if others and t["hours"] is not None:  # the same hours under the row's other pricings
        cell += " (" + ", ".join(f"{money(dollars(t['hours'], price))} {PRICING_WORDS.get(k, k)}"
                                 for k, price in others.items()) + ")"
    return cell


def tables(content: dict, quote=_same) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(id, title, header, rows) of each table.

    Args:
        quote: what each piece of text from a run folder goes through (md_text for
            Markdown); a figure the folder holds of the wrong kind is INVALID.
    """
    rows, targets = content["rows"], content["targets"]

    def text(row, key):
        return INVALID if key in row["invalid"] else quote(row[key]) if row[key] else MISSING

    def cell(row, fields, shown):
        return INVALID if set(fields) & set(row["invalid"]) else shown

    runs = ("runs", "What ran", ["run", "model", "dataset", "image size", "input pipeline",
                                 "devices", "backend", "precision", "global batch", "date",
                                 "versions"],
            [[quote(r["label"]), text(r, "model"), text(r, "dataset"),
              cell(r, ["image_size"], _fmt(r["image_size"], "d", " px")),
              cell(r, ["input_pipeline", "preprocessing"], _input(r, quote)),
              cell(r, ["num_replicas", "device_kind"],
                   f"{_fmt(r['num_replicas'], 'd')} x {quote(r['device_kind'] or MISSING)}"),
              cell(r, ["backend"], quote(BACKENDS.get(r["backend"], r["backend"] or MISSING))),
              text(r, "precision"),
              cell(r, ["global_batch_size"], _fmt(r["global_batch_size"], "d")),
              quote(r["date"]), _versions(r, quote)] for r in rows])
    rate = ["images_per_sec", "best"]
    speed = ("speed", f"Speed at the steady state ({STEADY})",
             ["run", "images/sec ± s.e.", "speedup", "per device", "MFU", "sweep"],
             [[quote(r["label"]), cell(r, rate, _rate(r)),
               cell(r, rate, _fmt(r["speedup"], ".2f", "x")),
               cell(r, rate + ["num_replicas"], _fmt(r["images_per_sec_per_device"])),
               cell(r, ["mfu"], MISSING if r["mfu"] is None else percent(r["mfu"])),
               cell(r, ["sweep"], "yes" if r["has_sweep"] else "no sweep")] for r in rows])
    # usd_per_million_images: price / steady-state images/sec (callbacks/figures/bill.py), not
    # the run's bill over its images (billed_usd_per_million_images, in metrics.jsonl).
    price = ("price", "Price", ["run", "machine", "pricing", "$/hour",
                                "$/million images (price / steady-state images/sec)",
                                "billed in all"],
             [[quote(r["label"]), cell(r, ["machine"], quote(r["machine"] or "no price")),
               text(r, "pricing"),
               cell(r, ["price_per_hour_usd"], money(r["price_per_hour_usd"])),
               cell(r, rate + ["price_per_hour_usd"], money(r["usd_per_million_images"])),
               cell(r, ["cost_usd"], money(r["cost_usd"]))] for r in rows])
    accuracy = ("accuracy", "Accuracy, and time and money to each target",
                ["run", "status", "epochs (done of planned)", "best top-1"]
                + [f"to {t:.1%}" for t in targets],
                [[quote(r["label"]), text(r, "status"),
                  cell(r, ["epochs_completed", "epochs"], _epochs(r)),
                  cell(r, ["best_val_top1"], MISSING if r["best_val_top1"] is None
                       else f"{r['best_val_top1']:.2%} (epoch {r['best_epoch']})")]
                 + [_target_cell(t, r) for t in r["targets"]]
                 for r in rows])
    return [runs, speed, price, accuracy]


# ------------------------------------------------------------------------- pages
def write(content: dict, charts: dict, out: str) -> None:
    """Writes report.html (charts embedded) and report.md beside the PNG charts.

    Args:
        charts: {name: (caption, path)} from app/report.py's `charts`.
    """
    made = datetime.date.today().isoformat()
    byline = f"{len(content['rows'])} run(s), report made {made} by app/report.py"
    title, warning, notes = content["title"], content["warning"], content.get("caveats") or []
    md = [f"# {md_text(title)}", "", f"*{byline}*", ""]
    page = [f"<!doctype html><html><head><meta charset='utf-8'><title>"
            f"{html.escape(title)}</title><style>{STYLE}</style></head><body>",
            f"<h1>{html.escape(title)}</h1><p class='byline'>{html.escape(byline)}</p>"]
    decided = verdict(content)
    if decided:  # the verdict first: what app/report.py --target printed, said once
        heading = (f"Decision: to top-1 {content['decision']['target']:g}, start-up, "
                   "evaluation and checkpoints included")
        md += [f"## {heading}", ""] + [f"- {line}" for line in verdict(content, md_text)] + [""]
        page.append(f"<h2>{html.escape(heading)}</h2><ul id='decision'>"
                    + "".join(f"<li>{html.escape(line)}</li>" for line in decided) + "</ul>")
    if warning:
        md += [f"> **Not comparable.** {md_text(warning)}", ""]
        page.append(f"<p class='warning' id='warning'><b>Not comparable.</b> "
                    f"{html.escape(warning)}</p>")
    if notes:  # the caveats hold no dollar amounts of the report's own: quoted whole
        md += ["> **Caveats.**", ">"] + [f"> - {md_text(line)}" for line in notes] + [""]
        page.append("<div class='warning' id='caveats'><b>Caveats.</b><ul>"
                    + "".join(f"<li>{html.escape(line)}</li>" for line in notes)
                    + "</ul></div>")
    md += ["## In short", ""] + [f"- {line}" for line in findings(content, md_text)] + [""]
    page.append("<h2>In short</h2><ul id='findings'>"
                + "".join(f"<li>{html.escape(line)}</li>" for line in content["findings"])
                + "</ul>")
    for (key, title, header, body), (_, _, _, md_body) in zip(tables(content),
                                                               tables(content, md_text)):
        md += [f"## {title}", "", "| " + " | ".join(header) + " |",
               "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in md_body] + [""]
        page.append(f"<h2>{html.escape(title)}</h2><table id='{key}'><tr>"
                    + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"
                    + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r)
                              + "</tr>" for r in body) + "</table>")
    md += ["## Charts", ""]
    page.append("<h2>Charts</h2><div class='charts'>")
    for name, (caption, path) in charts.items():
        md += [f"![{md_text(caption)}]({os.path.basename(path)})", ""]
        with open(path, "rb") as f:
            data = base64.b64encode(f.read()).decode()
        page.append(f"<figure><img alt='{html.escape(name)}' src='data:image/png;base64,{data}'>"
                    f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    page.append("</div></body></html>")
    with open(os.path.join(out, "report.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(out, "report.html"), "w", encoding="utf-8") as f:
        f.write("\n".join(page))
