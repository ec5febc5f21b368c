"""The study's write-up of any runs: `python app/report.py RUN [RUN ...] --out DIR`.

Reads each run folder's summary.json, metrics.jsonl and sweep.json and writes a
page a person could publish: report.html (self-contained), report.md, report.json
and the PNG charts. It is titled by what differs between the runs (accelerators,
backends, batch sizes, precisions), says per run what ran (model, dataset, image
size, date, versions), warns when runs did not do the same work, and states the
rankings in words: fastest (with speedups and standard errors), cheapest per
image, cheapest and quickest to each target top-1. A piece a run lacks (no sweep,
a target never reached, no price) is shown as such, never as 0. Each run's status
and epochs (completed of planned) are shown, and a run that stopped early is named
in the caveats.

Run folders are other people's files, read as untrusted
(callbacks/records/untrusted.py): only the fields the report uses are kept, each
checked for its kind and range (SUMMARY_FIELDS, NESTED, METRICS_FIELDS), text made
one printable line. What is wrong decides what happens:
- a file that cannot be used (not UTF-8, not JSON, nested too deep, not an object,
  not a regular file, too large) skips the whole run folder with one line
  (`warning: skipped RUN: why`) and the others are reported; with none left, one
  `error:` line and exit 2;
- a field of the wrong kind or out of range inside a good file does not drop the
  run: that figure is shown as "n/a" (never as 0), is left out of the rankings and
  charts, and a caveat names the field; a bad metrics record is left out likewise.
Everything the report did not write itself is escaped where it lands: HTML, Markdown
(page.md_text) and matplotlib's text (app/engine/plots.py's plain_text).

The package's rooms: reading.py (the run folders, checked), labels.py (what the runs
are: labels, title, comparability), content.py (the figures, rankings and pairs),
charts.py (the PNGs), page.py (the findings in words, the tables, the HTML and
Markdown) and command.py (the command line); decision/, the decision it makes with
--target. app/report.py is the command's entry.
"""

from app.report.charts import charts
from app.report.command import main, write
from app.report.content import build, complete, target_rows, targets_of
from app.report.labels import comparability_warning, labels_of, title_of
from app.report.reading import (
    METRICS_FIELDS,
    NESTED,
    SUMMARY_FIELDS,
    SkippedRun,
    load_run,
    one_line,
)

__all__ = ["METRICS_FIELDS", "NESTED", "SUMMARY_FIELDS", "SkippedRun", "build", "charts",
           "comparability_warning", "complete", "labels_of", "load_run", "main", "one_line",
           "target_rows", "targets_of", "title_of", "write"]
