"""PNG charts (matplotlib, headless): curves, and bars with error bars.

Used by the sweep (one curve) and by the report (one curve or bar per run). Missing
points are left out of a line and missing bars are not drawn, never drawn as zero.
Dollar axes say "$".

Every text given to matplotlib is plain text: labels come from run folders (a folder
named `$\\foo$` is someone's choice), and matplotlib reads text between two `$` as
mathtext, which raises on what it cannot parse, and with a matplotlibrc's
`text.usetex` hands text to LaTeX. So each label goes through `plain_text` (its `$`
escaped, which matplotlib shows as `$`; one line, cut to MAX_LABEL characters), and
charts are drawn with usetex off. Values that are not finite are left out like
missing ones.
"""

from __future__ import annotations

import functools
import math

import matplotlib

matplotlib.use("Agg")  # no display on servers and CI

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, PercentFormatter, ScalarFormatter  # noqa: E402

from callbacks.figures.bill import usd  # noqa: E402


MAX_LABEL = 60  # characters of a label drawn (a legend is not a page)


def plain_text(text, limit: int = MAX_LABEL) -> str:
    """`text` as matplotlib shows it literally: `$` escaped (no mathtext), one line,
    at most `limit` characters."""
    text = "".join(c if c.isprintable() else " " for c in str(text))
    if len(text) > limit:
        text = text[:limit - 1] + "…"
    return text.replace("$", r"\$")


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def _plain_rc(draw):
    """Runs a drawing function with usetex off, whatever a matplotlibrc says."""
    @functools.wraps(draw)
    def drawn(*args, **kwargs):
        with matplotlib.rc_context({"text.usetex": False}):
            return draw(*args, **kwargs)
    return drawn


def dollars(value: float, _position=None) -> str:
    """A dollar tick label: $0.0012, $55, $1,234.5 (matplotlib's formatter signature;
    six significant digits of callbacks/figures/bill.py's `usd`)."""
    return usd(value, significant=6)


def _finish(figure, axes, path, *, title, xlabel, ylabel, money_x=False, money_y=False,
            percent_y=False, legend=False):
    if money_x:
        axes.xaxis.set_major_formatter(FuncFormatter(dollars))
    if money_y:
        axes.yaxis.set_major_formatter(FuncFormatter(dollars))
    if percent_y:
        axes.yaxis.set_major_formatter(PercentFormatter(1.0))
    axes.set_title(plain_text(title, 3 * MAX_LABEL))
    axes.set_xlabel(plain_text(xlabel, 3 * MAX_LABEL))
    axes.set_ylabel(plain_text(ylabel, 3 * MAX_LABEL))
    axes.grid(True, alpha=0.3)
    if legend:
        axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path


@_plain_rc
def line_chart(series: dict, path: str, *, title: str, xlabel: str, ylabel: str,
               log2_x: bool = False, percent_y: bool = False, hlines: dict | None = None,
               zero_y: bool = False, money_x: bool = False, note: str = ""):
    """Draws one line per series {label: [(x, y), ...]} and saves a PNG at `path`; a
    point (x, y, low, high) gets an error bar from low to high (a measured spread).

    Args:
        hlines: {label: y} horizontal reference lines (e.g. target top-1).
        zero_y: start the y axis at 0 (so small differences are not blown up).
        money_x: the x axis is in dollars.
        note: a line under the chart (e.g. what the error bars are).
    """
    figure, axes = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    for label, points in series.items():
        points = sorted((*point[:2], *_bar(point)) for point in points
                        if _finite(point[0]) and _finite(point[1]))
        if not points:
            continue
        xs, ys, lows, highs = zip(*points)
        drawn = axes.plot(xs, ys, marker="o" if len(points) <= 30 else None,
                          label=plain_text(label))
        if any(low != y or high != y for y, low, high in zip(ys, lows, highs)):
            axes.errorbar(xs, ys, yerr=[[y - low for y, low in zip(ys, lows)],
                                        [high - y for y, high in zip(ys, highs)]],
                          fmt="none", capsize=4, color=drawn[0].get_color())
    for label, y in (hlines or {}).items():
        axes.axhline(y, linestyle="--", linewidth=1, color="gray")
        axes.annotate(plain_text(label), (axes.get_xlim()[0], y), fontsize=8, va="bottom",
                      color="gray")
    if log2_x:
        axes.set_xscale("log", base=2)
        axes.xaxis.set_major_formatter(ScalarFormatter())
    if zero_y:
        axes.set_ylim(bottom=0)
    _note(figure, note)
    return _finish(figure, axes, path, title=title, xlabel=xlabel, ylabel=ylabel,
                   money_x=money_x, percent_y=percent_y, legend=len(series) > 1 or hlines)


def _bar(point) -> tuple:
    """(low, high) of a point (x, y, low, high): its error bar's ends, the value itself
    where it has none (or a bound that is not finite or leaves the value outside)."""
    y = point[1]
    low, high = (point[2], point[3]) if len(point) >= 4 else (y, y)
    if not (_finite(low) and _finite(high) and low <= y <= high):
        return y, y
    return low, high


def _note(figure, note: str) -> None:
    if note:
        figure.text(0.01, 0.01, plain_text(note, 3 * MAX_LABEL), fontsize=7, color="gray")


@_plain_rc
def bar_chart(groups: dict, path: str, *, title: str, ylabel: str, money_y: bool = False,
              note: str = ""):
    """Draws bars: {group: {label: (value, error or None)}}, one color per label (a
    run), side by side within each group; a None value is left out. An error is a
    number (a bar of +-error) or a pair (low, high): a measured spread's ends.

    Args:
        money_y: the y axis is in dollars.
        note: a line under the chart (e.g. what the error bars are).
    """
    labels = list(dict.fromkeys(label for bars in groups.values() for label in bars))
    figure, axes = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    if len(groups) == 1:  # one measure: a bar per run, named on the x axis
        (bars,) = groups.values()
        shown = [(label, v, _error(v, e)) for label, (v, e) in bars.items() if _finite(v)]
        errors = [e for _, _, e in shown]
        axes.bar(range(len(shown)), [v for _, v, _ in shown], 0.6,
                 yerr=_yerr(errors), capsize=6,
                 color=[f"C{labels.index(label)}" for label, _, _ in shown])
        axes.set_xticks(range(len(shown)), [plain_text(label) for label, _, _ in shown])
        groups, labels = {}, []
    width = 0.8 / max(len(labels), 1)
    for index, label in enumerate(labels):
        xs, ys, errors = [], [], []
        for position, bars in enumerate(groups.values()):
            value, error = bars.get(label, (None, None))
            if _finite(value):
                xs.append(position + (index - (len(labels) - 1) / 2) * width)
                ys.append(value)
                errors.append(_error(value, error))
        axes.bar(xs, ys, width, yerr=_yerr(errors), capsize=4, label=plain_text(label))
    if groups:
        axes.set_xticks(range(len(groups)), [plain_text(group) for group in groups])
    axes.set_ylim(bottom=0)
    _note(figure, note)
    return _finish(figure, axes, path, title=title, xlabel="", ylabel=ylabel,
                   money_y=money_y, legend=len(labels) > 1)


def _error(value, error):
    """A bar's error as (below, above) the value: from +-error or a (low, high) pair."""
    if isinstance(error, (tuple, list)) and len(error) == 2:
        low, high = _bar((None, value, *error))
        return value - low, high - value
    return (error, error) if _finite(error) else (0.0, 0.0)


def _yerr(errors):
    """matplotlib's asymmetric yerr of (below, above) pairs, or None where all are 0."""
    if not any(below or above for below, above in errors):
        return None
    return [[below for below, _ in errors], [above for _, above in errors]]


@_plain_rc
def waterfall_chart(steps: list, path: str, *, title: str, ylabel: str, note: str = ""):
    """Draws a waterfall: [(label, value or None)] in order, the first a bar from 0,
    each next one a bar from the value it is compared with to its own, green where it
    rose, red where it fell, labeled with its ratio; a None is a gap marked "skipped".
    A step (label, value, base, low, high) is compared with `base` (default: the
    value of the step drawn before it) and gets an error bar from low to high.

    Args:
        note: a line under the chart (e.g. what the error bars are).
    """
    figure, axes = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    previous = None
    for index, step in enumerate(steps):
        value = step[1]
        if not _finite(value):
            axes.annotate("skipped", (index, previous or 0), ha="center", va="bottom",
                          fontsize=8, color="gray")
            continue
        base = step[2] if len(step) > 2 and _finite(step[2]) else previous
        if base is None:
            axes.bar(index, value, 0.6, color="C0")
        else:
            low, high = sorted((base, value))
            axes.bar(index, high - low, 0.6, bottom=low, color="C2" if value >= base
                     else "C3")
            axes.annotate(f"{value / base:.2f}x", (index, high), ha="center",
                          va="bottom", fontsize=8)
        below, above = _bar((None, value, *step[3:5]))
        if below != value or above != value:
            axes.errorbar([index], [value], yerr=[[value - below], [above - value]],
                          fmt="none", capsize=4, color="black")
        previous = value
    axes.set_xticks(range(len(steps)), [plain_text(step[0], 20) for step in steps],
                    rotation=20, ha="right")
    axes.set_ylim(bottom=0)
    _note(figure, note)
    return _finish(figure, axes, path, title=title, xlabel="", ylabel=ylabel)


@_plain_rc
def frontier_chart(points: list, path: str, *, title: str, xlabel: str, ylabel: str):
    """Draws dollars against hours: [(label, hours, dollars, on_frontier)], one marker
    color per label's group (what precedes " | ", e.g. a machine), the Pareto frontier
    (no point both faster and cheaper) joined by a line and its points named; points
    whose hours or dollars are not finite are left out."""
    shown = [(label, x, y, best) for label, x, y, best in points if _finite(x) and _finite(y)]
    groups = list(dict.fromkeys(label.split(" | ")[0] for label, _, _, _ in shown))
    figure, axes = plt.subplots(figsize=(8.5, 5.0), dpi=110)
    for index, group in enumerate(groups):
        mine = [(x, y) for label, x, y, _ in shown if label.split(" | ")[0] == group]
        axes.scatter(*zip(*mine), s=28, color=f"C{index % 10}", alpha=0.8,
                     label=plain_text(group))
    frontier = sorted((x, y, label) for label, x, y, best in shown if best)
    if frontier:  # ringed, and joined: nothing is both faster and cheaper than these
        axes.plot([x for x, _, _ in frontier], [y for _, y, _ in frontier], color="black",
                  linewidth=1, linestyle="--", marker="o", markersize=11, fillstyle="none",
                  label="Pareto frontier", zorder=3)
        for x, y, label in frontier:
            axes.annotate(plain_text(label.split(" | ")[-1], 40), (x, y), fontsize=7,
                          xytext=(4, 4), textcoords="offset points")
    axes.set_xlim(left=0)
    axes.set_ylim(bottom=0)
    return _finish(figure, axes, path, title=title, xlabel=xlabel, ylabel=ylabel,
                   money_y=True, legend=bool(shown))
