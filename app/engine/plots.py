"""PNG charts (matplotlib, headless): the throughput curve and accuracy curves.

Used by the sweep (one curve) and by the report (one curve per run). Missing
points are left out of a line, never drawn as zero.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no display on servers and CI

import matplotlib.pyplot as plt  # noqa: E402


def line_chart(series: dict, path: str, *, title: str, xlabel: str, ylabel: str,
               log2_x: bool = False, percent_y: bool = False, hlines: dict | None = None,
               zero_y: bool = False):
    """Draws one line per series {label: [(x, y), ...]} and saves a PNG at `path`.

    Args:
        hlines: {label: y} horizontal reference lines (e.g. target top-1).
        zero_y: start the y axis at 0 (so small differences are not blown up).
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
        axes.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    if zero_y:
        axes.set_ylim(bottom=0)
    if percent_y:
        axes.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    if len(series) > 1 or hlines:
        axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path
