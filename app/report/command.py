"""The report's command: `python app/report.py RUN [RUN ...] --out DIR` (app/report.py
is its thin entry): reads each run folder, skips a bad one with one line, checks the
options, writes the report and, with --target, the decision."""

from __future__ import annotations

import os
import sys

from app.report import page
from app.report.charts import charts
from app.report.content import build
from app.report.reading import SkippedRun, load_run, one_line
from callbacks.records.durable import dumps
from flags.config import ConfigError

def write(runs: list[dict], targets, out: str, decision: dict | None = None) -> dict:
    """Writes report.html, report.md, report.json and the charts to `out`; returns the
    content. `targets`: as `build`'s (None = the runs' own); `decision`: the verdict the
    report opens with (app/report.py --target)."""
    os.makedirs(out, exist_ok=True)
    content = build(runs, targets, decision)
    made = charts(runs, content, out)
    page.write(content, made, out)
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
    parser.add_argument("--target", type=float, default=None,
                        help="the decision: hours and dollars to this top-1 on every machine "
                             "measured (full runs, --benchmark=probe folders) and every catalog "
                             "row that sells its device, under each pricing option "
                             "(decision.md, decision.json, decision.png)")
    parser.add_argument("--price_catalog", default="",
                        help="the decision's price catalog, as app/main.py's --price_catalog "
                             "(default app/pricing/prices.csv)")
    parser.add_argument("--interruptions_per_hour", type=float, default=0.0,
                        help="the decision's spot interruptions expected an hour (default 0)")
    args = parser.parse_args(argv)
    runs = []
    for folder in args.runs:  # each folder is someone's: a bad one is skipped, not fatal
        try:
            runs.append(load_run(folder))
        except SkippedRun as why:
            sys.stderr.write(f"warning: skipped {one_line(folder)}: {why}\n")
    if not runs:
        sys.stderr.write(f"error: no run to report: the {len(args.runs)} folder(s) given were "
                         "skipped (above); accepted: run folders holding a readable "
                         "summary.json or sweep.json\n")
        return 2
    try:
        if args.targets:
            targets = [float(t) for t in args.targets.split(",")]
            if not all(0 < t <= 1 for t in targets):  # NaN fails this too
                raise ValueError(f"--targets={args.targets!r}: accepted: numbers in (0, 1]")
        else:
            targets = None  # the runs' own
        if os.path.exists(args.out) and not os.path.isdir(args.out):
            raise ValueError(f"--out={args.out} is a file; accepted: a folder")
        if args.target is not None and not 0 < args.target <= 1:
            raise ValueError(f"--target={args.target}: accepted: a top-1 in (0, 1]")
        if not 0 <= args.interruptions_per_hour <= 1e3:  # NaN fails this too
            raise ValueError(f"--interruptions_per_hour={args.interruptions_per_hour}: "
                             "accepted: a number from 0 to 1000")
    except (ValueError, OSError) as error:
        sys.stderr.write(f"error: {error}\n")
        return 2
    try:
        decided = None
        if args.target is not None:  # app/report/decision/predict.py: the cheapest and the fastest
            from app.report.decision import page as decision_page

            decided, warnings = decision_page.decide(args.runs, args.target, args.price_catalog,
                                                     args.interruptions_per_hour)
            sys.stderr.write("".join(f"{line}\n" for line in warnings))
        write(runs, targets, args.out, decided)
        if decided is not None:  # the report opens with the same verdict (one, said once)
            print(decision_page.text(decided, decision_page.write(decided, args.out)))
    except OSError as error:
        sys.stderr.write(f"error: cannot write the report to {args.out}: {error}\n")
        return 2
    except ConfigError as error:  # the --price_catalog cannot be used: one line
        sys.stderr.write(f"error: {error}\n")
        return 2
    print(f"report: {os.path.join(args.out, 'report.html')} (and report.md, PNG charts)")
    return 0

