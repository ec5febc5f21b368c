"""The decision written out (app/report.py --target): its lines, its table, decision.md,
decision.json and decision.png (dollars against hours, the Pareto frontier marked).

The figures are app/engine/decision.py's; the folders are read by decision_inputs.py
(a folder it cannot use is one warning line, the others are decided on). Everything a
folder supplied (its name, device kind) is escaped where it lands: one printable line
here, Markdown's specials in decision.md, matplotlib's `$` in the chart (plots.py).
"""

from __future__ import annotations

import html
import os
import re

from app.engine import decision
from app.engine.decision_inputs import InputError, read_folder
from callbacks.figures.bill import OPTION_WORDS, usd

DECISION_FILES = ("decision.md", "decision.json", "decision.png")
TABLE_ROWS = 40  # options shown in the table and the Markdown (all are in decision.json)


def _hours(value) -> str:
    return "n/a" if value is None else f"{value:,.4f}" if value < 1 else f"{value:,.2f}"


def _md(text) -> str:
    """`text` as plain text in Markdown (as app/report/page.py's md_text): one printable line,
    no HTML, no emphasis, links, code, math or cell breaks."""
    text = "".join(c if c.isprintable() else " " for c in " ".join(str(text).split()))
    return re.sub(r"([\\`*_\[\]|#$~!{}])", r"\\\1", html.escape(text, quote=False))


def table(result: dict, limit: int = TABLE_ROWS) -> str:
    """The options, cheapest first: what ran, the row and option, hours and dollars to
    the target, the price, when it was read (* stale) and whether it is on the frontier."""
    header = ("rank", "machine measured", "sold as", "option", "hours", "dollars", "$/h",
              "read", "frontier")
    rows = [header]
    for rank, o in enumerate(result["options"][:limit], 1):
        rows.append((str(rank), o["machine_label"], o["row"],
                     OPTION_WORDS[o["option"]], _hours(o["hours"]),
                     usd(o["dollars"]), f"{o['price_per_hour_usd']:,.4g}",
                     (o["read"] or "-") + ("*" if o["stale"] else ""),
                     "yes" if o["frontier"] else ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    right = {0, 4, 5, 6}
    out = ["  ".join(c.rjust(w) if i in right else c.ljust(w)
                     for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows]
    if len(result["options"]) > limit:
        out.append(f"... and {len(result['options']) - limit} more in decision.json")
    return "\n".join(out)


def lines(result: dict) -> list[str]:
    """The decision's closing lines: the cheapest, the fastest, each full run's measured
    hours beside its own prediction, machines without a prediction and why, stale
    prices, what spot interruptions cost."""
    out = [result["cheapest"], result["fastest"]]
    for machine in result["machines"]:
        if machine.get("why"):
            out.append(f"no prediction for {machine['label']}: {machine['why']}")
        elif machine.get("measured_hours") is not None:
            error = machine["hours"] / machine["measured_hours"] - 1
            out.append(f"check: {machine['label']} predicted {_hours(machine['hours'])} h to "
                       f"{result['target']:g}, measured {_hours(machine['measured_hours'])} h "
                       f"({error:+.1%})" + (f"; {machine['same_machine']}"
                                            if machine.get("same_machine") else ""))
        if machine.get("busy"):
            out.append(f"caveat: {machine['label']} was measured on a busy machine "
                       f"({machine['busy']}): its rate may be low and its start-up long; "
                       "probe it again when it is idle")
        if machine.get("from", {}).get("precision"):
            out.append(f"caveat: {machine['label']}: {machine['from']['precision']}")
    stale = sorted({(o["row"], o["read"], o["stale_why"]) for o in result["options"]
                    if o["stale"]})
    if stale:
        out.append("stale prices (check the seller's page): " + ", ".join(
            f"{row} read {read}, {why}" for row, read, why in stale))
    spot = [o for o in result["options"] if o["option"] == "spot" and o["dollars"] is not None]
    if spot:
        best = min(spot, key=lambda o: o["dollars"])
        out.append(f"spot: each interruption adds {usd(best['dollars_per_interruption'])} to "
                   f"{best['row']} ({result['interruptions_per_hour']:g} an hour assumed; "
                   "--interruptions_per_hour sets it)")
    return out


def markdown(result: dict, chart: str | None) -> str:
    """decision.md: the lines, the table, what each machine's figures came from, the chart."""
    target = result["target"]
    parts = [f"# Hours and dollars to top-1 {target:g}", "",
             *[f"- {_md(line)}" for line in lines(result)], ""]
    if chart:
        parts += [f"![dollars against hours to {target:g}]({os.path.basename(chart)})", ""]
    header = ("rank", "machine measured", "sold as", "option", "hours", "dollars", "$/h",
              "read", "frontier")
    parts += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for rank, o in enumerate(result["options"][:TABLE_ROWS], 1):
        cells = (rank, o["machine_label"], o["row"], OPTION_WORDS[o["option"]],
                 _hours(o["hours"]), usd(o["dollars"]), f"{o['price_per_hour_usd']:,.4g}",
                 (o["read"] or "-") + (" (stale)" if o["stale"] else ""),
                 "yes" if o["frontier"] else "")
        parts.append("| " + " | ".join(_md(c) for c in cells) + " |")
    parts += ["", "## What each prediction came from", ""]
    for machine in result["machines"]:
        parts.append(f"### {_md(machine['label'])}")
        if machine.get("why"):
            parts += ["", f"No prediction: {_md(machine['why'])}", ""]
            continue
        parts += [f"- {name}: {_md(words)}" for name, words in machine["from"].items() if words]
        parts.append("")
    parts += ["Each option's price: its row, option and read date (decision.json's "
              "`price_from`); dollars = hours x machines x price per machine-hour.", ""]
    return "\n".join(parts)


def decide(folders: list[str], target: float, catalog_path: str = "",
           interruptions_per_hour: float = 0.0, today=None) -> tuple[dict, list[str]]:
    """Reads the folders (a bad one is a warning line) and predicts. Returns (the
    result, the warning lines).

    Raises:
        ConfigError: the catalog cannot be read (one line).
    """
    from app.engine.catalog import load_catalog

    table_ = load_catalog(catalog_path)
    found, warnings = [], []
    for folder in folders:
        try:
            found.append(read_folder(folder))
        except InputError as why:
            warnings.append(f"warning: the decision leaves out {why}")
    result = decision.predict(found, target, table_, interruptions_per_hour, today)
    result["catalog"] = catalog_path or "app/engine/prices.csv"
    return result, warnings


def write(result: dict, out: str) -> dict:
    """Writes decision.json, decision.md and decision.png (where an option has a
    price) into `out`; returns {name: path} of what it wrote."""
    from app.engine import plots
    from callbacks.records.durable import dumps

    os.makedirs(out, exist_ok=True)
    written = {}
    points = [(f"{o['machine_label']} | {o['row']} {OPTION_WORDS[o['option']]}",
               o["hours"], o["dollars"], o["frontier"]) for o in result["options"]]
    if any(dollars is not None for _, _, dollars, _ in points):
        written["decision.png"] = plots.frontier_chart(
            points, os.path.join(out, "decision.png"),
            title=f"Dollars against hours to top-1 {result['target']:g} (predicted)",
            xlabel="hours to the target", ylabel="dollars to the target")
    path = os.path.join(out, "decision.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(markdown(result, written.get("decision.png")))
    written["decision.md"] = path
    path = os.path.join(out, "decision.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(dumps(result, indent=2))
    written["decision.json"] = path
    return written


def report(folders: list[str], target: float, out: str, catalog_path: str = "",
           interruptions_per_hour: float = 0.0) -> tuple[str, list[str]]:
    """app/report.py --target's part: decides, writes the files into `out`; returns
    (the text for stdout: the table and the lines, the warning lines).

    Raises:
        ConfigError: the catalog cannot be read (one line).
        OSError: `out` cannot be written.
    """
    result, warnings = decide(folders, target, catalog_path, interruptions_per_hour)
    written = write(result, out)
    text = "\n".join([f"decision: hours and dollars to top-1 {target:g}, cheapest first "
                      f"(prices: {result['catalog']})", table(result), *lines(result),
                      f"decision: {written['decision.md']} (and "
                      f"{', '.join(n for n in written if n != 'decision.md')})"])
    return text, warnings
