"""PNG charts (matplotlib, headless): curves, and bars with error bars.

Used by the sweep (one curve) and by the report (one curve or bar per run). Missing
points are left out of a line and missing bars are not drawn, never drawn as zero.
Dollar axes say "$".
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no display on servers and CI

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, PercentFormatter, ScalarFormatter  # noqa: E402


def dollars(value: float, _position=None) -> str:
    """A dollar tick label: $0.0012, $55, $1,234.5."""
    return f"${value:,.6g}"


def _finish(figure, axes, path, *, title, xlabel, ylabel, money_x=False, money_y=False,
            percent_y=False, legend=False):
    if money_x:
        axes.xaxis.set_major_formatter(FuncFormatter(dollars))
    if money_y:
        axes.yaxis.set_major_formatter(FuncFormatter(dollars))
    if percent_y:
        axes.yaxis.set_major_formatter(PercentFormatter(1.0))
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    if legend:
        axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path


def line_chart(series: dict, path: str, *, title: str, xlabel: str, ylabel: str,
               log2_x: bool = False, percent_y: bool = False, hlines: dict | None = None,
               zero_y: bool = False, money_x: bool = False):
    """Draws one line per series {label: [(x, y), ...]} and saves a PNG at `path`.

    Args:
        hlines: {label: y} horizontal reference lines (e.g. target top-1).
        zero_y: start the y axis at 0 (so small differences are not blown up).
        money_x: the x axis is in dollars.
    """
    figure, axes = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    for label, points in series.items():
        points = [(x, y) for x, y in points if x is not None and y is not None]
        if not points:
            continue
        xs, ys = zip(*sorted(points))
        axes.plot(xs, ys, marker="o" if len(points) <= 30 else None, label=label)
    for label, y in (hlines or {}).items():
        axes.axhline(y, linestyle="--", linewidth=1, color="gray")
        axes.annotate(label, (axes.get_xlim()[0], y), fontsize=8, va="bottom", color="gray")
    if log2_x:
        axes.set_xscale("log", base=2)
        axes.xaxis.set_major_formatter(ScalarFormatter())
    if zero_y:
        axes.set_ylim(bottom=0)
    return _finish(figure, axes, path, title=title, xlabel=xlabel, ylabel=ylabel,
                   money_x=money_x, percent_y=percent_y, legend=len(series) > 1 or hlines)


def bar_chart(groups: dict, path: str, *, title: str, ylabel: str, money_y: bool = False,
              note: str = ""):
    """Draws bars: {group: {label: (value, error or None)}}, one color per label (a
    run), side by side within each group; a None value is left out.

    Args:
        money_y: the y axis is in dollars.
        note: a line under the chart (e.g. what the error bars are).
    """
    labels = list(dict.fromkeys(label for bars in groups.values() for label in bars))
    figure, axes = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    if len(groups) == 1:  # one measure: a bar per run, named on the x axis
        (bars,) = groups.values()
        shown = [(label, v, e) for label, (v, e) in bars.items() if v is not None]
        errors = [e or 0.0 for _, _, e in shown]
        axes.bar(range(len(shown)), [v for _, v, _ in shown], 0.6,
                 yerr=errors if any(errors) else None, capsize=6,
                 color=[f"C{labels.index(label)}" for label, _, _ in shown])
        axes.set_xticks(range(len(shown)), [label for label, _, _ in shown])
        groups, labels = {}, []
    width = 0.8 / max(len(labels), 1)
    for index, label in enumerate(labels):
        xs, ys, errors = [], [], []
        for position, bars in enumerate(groups.values()):
            value, error = bars.get(label, (None, None))
            if value is not None:
                xs.append(position + (index - (len(labels) - 1) / 2) * width)
                ys.append(value)
                errors.append(error or 0.0)
        axes.bar(xs, ys, width, yerr=errors if any(errors) else None, capsize=4, label=label)
    if groups:
        axes.set_xticks(range(len(groups)), list(groups))
    axes.set_ylim(bottom=0)
    if note:
        figure.text(0.01, 0.01, note, fontsize=7, color="gray")
    return _finish(figure, axes, path, title=title, xlabel="", ylabel=ylabel,
                   money_y=money_y, legend=len(labels) > 1)
