"""The decision written out (app/report.py --target): its lines, its table, decision.md,
decision.json and decision.png (dollars against hours, the Pareto frontier marked).

The figures are app/report/decision/predict.py's; the folders are read by decision_inputs.py
(a folder it cannot use is one warning line, the others are decided on). Everything a
folder supplied (its name, device kind) is escaped where it lands: one printable line
here, Markdown's specials in decision.md, matplotlib's `$` in the chart (plots.py).
"""

from __future__ import annotations

import html
import os
import re

from app.report.decision import predict as decision
from app.report.decision.inputs import InputError, read_folder
from callbacks.figures.bill import OPTION_WORDS, usd

DECISION_FILES = ("decision.md", "decision.json", "decision.png")
TABLE_ROWS = 40  # options shown in the table and the Markdown (all are in decision.json)


def _hours(value) -> str:
    return "n/a" if value is None else f"{value:,.4f}" if value < 1 else f"{value:,.2f}"


def _epoch_either_way(machine: dict) -> str:
    """The hours a few epochs sooner and later (predict.py's), where the epochs are
    another run's."""
    either = machine.get("epochs_either_way")
    if not either:
        return ""
    (fewest, most), (low, high) = either["epochs"], either["hours"]
    return f"; at {fewest}-{most} epochs, {_hours(low)}-{_hours(high)} h"


def _line(text) -> str:
    """`text` as one printable line (a folder's name as the user typed it)."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(text))


def _md(text) -> str:
    """`text` as plain text in Markdown (as app/report/page.py's md_text): one printable line,
    no HTML, no emphasis, links, code, math or cell breaks."""
    text = "".join(c if c.isprintable() else " " for c in " ".join(str(text).split()))
    return re.sub(r"([\\`*_\[\]|#$~!{}])", r"\\\1", html.escape(text, quote=False))


def table(result: dict, limit: int = TABLE_ROWS) -> str:
    """The options, the measured machines' cheapest first, then the predicted: what ran,
    the row and option, hours and dollars to the target, the price, when it was read
    (* stale) and whether it is on the frontier."""
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
    """The decision's closing lines: the verdict (the cheapest and the fastest, each with
    the term that decides; or why there is none), each full run's measured hours beside
    what was predicted for it, machines without a prediction and why, what to distrust
    (busy machines, warm compile caches, borrowed overheads, probes that disagree), stale
    prices, what spot interruptions cost."""
    out = [f"decision: {result['headline']}"] if result.get("headline") else [
        result["cheapest"], result["fastest"]]
    for machine in result["machines"]:
        if machine.get("why") and not result.get("headline"):
            out.append(f"no prediction for {machine['label']}: {machine['why']}")
        for check in machine.get("checks") or []:
            out.append(f"check: {machine['label']} measured {_hours(machine['measured_hours'])} h "
                       f"to {result['target']:g}; predicted from {check['from']} "
                       f"{_hours(check['predicted_hours'])} h ({check['error']:+.1%})"
                       + (f", its rate {check['rate_ratio']:.2f}x this run's steady rate"
                          if check.get("rate_ratio") is not None else ""))
            if "rate_ratio" in check and abs(check["error"]) > decision.PROBE_APART:
                out.append(f"caveat: {check['from']} predicted {machine['label']}'s hours "
                           f"{check['error']:+.1%} off its full run (over "
                           f"{decision.PROBE_APART:.0%}): the probe's rate or start-up is not "
                           "the run's; probe again, or trust the full run")
        out += caveats(machine)
    out += predicted_lines(result)
    out += disagreeing_probes(result["machines"])
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


def predicted_lines(result: dict) -> list[str]:
    """The machines never probed (app/report/decision/predicted.py): from what they were
    predicted and with what error, or why none was; those left out; each probe's check
    of its prediction; the probe that would settle the two cheapest."""
    extra = result.get("predicted")
    if not extra:
        return []
    if extra["refused"]:
        return [f"no prediction for machines never probed: {extra['refused']}"]
    items = [m for m in result["machines"] if m["kind"] == "predicted"]
    out = [f"predicted: {len(items)} device(s) never probed, from {extra['basis']}'s work "
           f"by kind, each start-up borrowed from it (a start-up is not predicted); "
           f"{extra['error']}"]
    out += [f"left out: {device}: {why}" for device, why in extra["left_out"]]
    out += [f"check: {c['label']} measured {c['measured']:,.1f} images/sec; predicted from "
            f"{extra['basis']} {c['predicted']:,.1f} ({c['error']:+.1%})"
            for c in extra["checks"]]
    return out + ([result["settle"]] if result.get("settle") else [])


SPREAD_CAVEAT = 1.2  # a probe whose windows' fastest is this much its slowest: a caveat


def caveats(machine: dict) -> list[str]:
    """What to distrust in one machine's figures, a line each. A machine never probed
    has none of its own: its epochs, overhead and start-up are the folder's it was
    predicted from (whose caveats are said), its rate the model's (the "predicted:" line)."""
    label, out = machine["label"], []
    if machine["kind"] == "predicted":
        return out
    if machine.get("busy"):
        out.append(f"caveat: {label} was measured on a busy machine ({machine['busy']}): its "
                   "rate may be low and its start-up long; probe it again when it is idle")
    if machine.get("startup_note"):
        out.append(f"caveat: {label}: {machine['startup_note']}")
    if machine.get("overhead_whose"):
        out.append(f"caveat: {label}: its epoch overhead ({machine['overhead']:.2f}x) is "
                   f"{machine['overhead_whose']}")
    if machine.get("epochs_whose"):
        out.append(f"caveat: {label}: its {machine['epochs']} epochs to the target are "
                   f"{machine['epochs_whose']}{_epoch_either_way(machine)}")
    if machine.get("from", {}).get("precision"):
        out.append(f"caveat: {label}: {machine['from']['precision']}")
    low, high = machine.get("images_per_sec_min"), machine.get("images_per_sec_max")
    if low and high and high / low > SPREAD_CAVEAT:
        out.append(f"caveat: {label}: its {machine['repeats']} windows spread over "
                   f"{low:,.1f}-{high:,.1f} images/sec ({high / low:.2f}x): the machine's "
                   "speed moved while it was probed")
    return out


def disagreeing_probes(machines: list[dict]) -> list[str]:
    """Probes of the same machine, backend and job whose rates disagree by more than
    their windows' spreads (min-max) allow: one line each pair."""
    probes = [m for m in machines if m["kind"] == "probe"]
    out = []
    for index, a in enumerate(probes):
        for b in probes[index + 1:]:
            if a["job"] != b["job"]:
                continue
            spans = [(m.get("images_per_sec_min") or m["images_per_sec"],
                      m.get("images_per_sec_max") or m["images_per_sec"]) for m in (a, b)]
            if spans[0][1] < spans[1][0] or spans[1][1] < spans[0][0]:
                out.append(f"caveat: probes {a['name']} ({a['images_per_sec']:,.1f} images/sec, "
                           f"{spans[0][0]:,.1f}-{spans[0][1]:,.1f}) and {b['name']} "
                           f"({b['images_per_sec']:,.1f}, {spans[1][0]:,.1f}-{spans[1][1]:,.1f}) "
                           "of one machine disagree beyond their spreads: its speed moved "
                           "between them; probe again when it is idle")
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
           interruptions_per_hour: float = 0.0, today=None, rates_path: str = "",
           errors: dict | None = None) -> tuple[dict, list[str]]:
    """Reads the folders (a bad one is a warning line) and predicts, machines never
    probed too (the rates table at `rates_path`, "": the app's; `errors`: the device
    model's measured error, None: the newest predict_check result's). Returns (the
    result, the warning lines).

    Raises:
        ConfigError: the catalog or the rates table cannot be read (one line).
    """
    from app.pricing.catalog import load_catalog
    from app.report.decision.predicted import measured_error
    from app.report.decision.device_rates import load_rates

    table_ = load_catalog(catalog_path)
    rates = load_rates(rates_path)
    errors = measured_error() if errors is None else errors
    found, warnings, seen = [], [], {}
    for folder in folders:
        real = os.path.realpath(folder)
        if real in seen:
            warnings.append(f"warning: {_line(folder)} is {_line(seen[real])} given again: "
                            "read once")
            continue
        seen[real] = folder
        try:
            found.append(read_folder(folder))
        except InputError as why:
            warnings.append(f"warning: the decision leaves out {why}")
    result = decision.predict(found, target, table_, interruptions_per_hour, today,
                              rates=rates, errors=errors)
    result["catalog"] = catalog_path or "app/pricing/prices.csv"
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


def text(result: dict, written: dict) -> str:
    """What app/report.py --target prints: the verdict's table and lines (or, where
    nothing could be predicted, why, first), and where the files are."""
    head = [] if result.get("headline") else [
        f"decision: hours and dollars to top-1 {result['target']:g}, the machines measured "
        f"cheapest first, then those predicted (prices: {result['catalog']})", table(result)]
    return "\n".join([*head, *lines(result),
                      f"decision: {written['decision.md']} (and "
                      f"{', '.join(n for n in written if n != 'decision.md')})"])


def report(folders: list[str], target: float, out: str, catalog_path: str = "",
           interruptions_per_hour: float = 0.0) -> tuple[str, list[str]]:
    """app/report.py --target's part: decides, writes the files into `out`; returns
    (the text for stdout, the warning lines).

    Raises:
        ConfigError: the catalog cannot be read (one line).
        OSError: `out` cannot be written.
    """
    result, warnings = decide(folders, target, catalog_path, interruptions_per_hour)
    return text(result, write(result, out)), warnings
