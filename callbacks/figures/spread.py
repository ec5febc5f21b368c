"""Repeated measurements of one figure: their median and their spread, said one way.

A benchmark point measured `--repeats=N` times (N timed windows, each after a fresh
compile: app/engine/measure.py) reports the median of the N figures and, as their
spread, the min-max: the lowest and the highest. With the few windows a point
affords (3, 5), the min-max is what was seen, not an estimate (an interquartile
range of 3 values is a pair of interpolations). Everything that shows a spread
(sweep.json, ladder.json, summary.json, HParams, the tables, the charts' error bars,
the report) takes it from here, under the one name SPREAD.
"""

from __future__ import annotations

SPREAD = "min-max"  # the one name of the spread, wherever it is shown


def median(values) -> float:
    """The median of `values` (the mean of the two middle ones for an even count).

    Raises:
        ValueError: no values.
    """
    ordered = sorted(values)
    if not ordered:
        raise ValueError("the median of no values")
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def spread_fields(key: str, values, digits: int = 2) -> dict:
    """The median of `values` as `key`, and their spread as `key`_min and `key`_max,
    each rounded to `digits` decimals (a row's fields, e.g. images_per_sec)."""
    values = list(values)
    return {key: round(median(values), digits), f"{key}_min": round(min(values), digits),
            f"{key}_max": round(max(values), digits)}


def percent(low: float, high: float, middle: float) -> float | None:
    """The spread's width as a share of the median (0.064 = 6.4%), None without one."""
    return (high - low) / middle if middle else None


def words(row: dict, key: str = "images_per_sec", unit: str = "") -> str:
    """"median of 3, min-max 95.1-101.3 (6.4%)" for a row holding `key`, its _min and
    _max and `repeats`; "" for a row measured once (or without a spread)."""
    low, high, middle = (row.get(f"{key}_min"), row.get(f"{key}_max"), row.get(key))
    if not (row.get("repeats") or 1) > 1 or None in (low, high, middle):
        return ""
    share = percent(low, high, middle)
    width = f" ({share:.1%})" if share is not None else ""
    return (f"median of {row['repeats']}, {SPREAD} {low:,.1f}-{high:,.1f}{unit}{width}")
