"""The arithmetic of money: billed time, dollars from it, and the two per-image figures.

Pure Python (no framework), shared by the cost callback, the summary, the sweep and
the report. Two different "dollars per million images" exist and are named apart:

- `usd_per_million_images`: price / steady-state images per second. What a million
  images cost at full speed: the figure that compares accelerators (the study's
  "dollars per image/second"), and the only one called by this name anywhere.
- `billed_usd_per_million_images`: dollars billed so far / images trained so far.
  What this run actually paid per image, compile, evaluation and stalls included.
"""

from __future__ import annotations

import time


def billed_seconds(start_time: float, billed_seconds_before: float = 0.0) -> float:
    """Wall-clock seconds billed so far: since `start_time` (a `time.time()`), plus
    those of earlier attempts. Known with or without a price."""
    return billed_seconds_before + (time.time() - start_time)


def cost_usd(billed_seconds: float, price_per_hour_usd: float) -> float:
    """Dollars for `billed_seconds` of wall-clock time at `price_per_hour_usd`."""
    return billed_seconds / 3600.0 * price_per_hour_usd


def projected_cost_usd(billed_usd: float, usd_per_epoch: float | None,
                       epochs_left: int) -> float | None:
    """The whole run's cost: billed so far, plus the epochs left at `usd_per_epoch`
    (the last epoch's). With none left it is the bill itself."""
    if epochs_left <= 0:
        return billed_usd
    return None if usd_per_epoch is None else billed_usd + usd_per_epoch * epochs_left


def hours_for_images(images: float, images_per_sec: float) -> float:
    """Wall-clock hours to process `images` at a steady `images_per_sec`."""
    return images / images_per_sec / 3600.0


def usd_per_million_images(images_per_sec: float, price_per_hour_usd: float) -> float:
    """Dollars per million training images at a steady rate (price / rate)."""
    return price_per_hour_usd / (images_per_sec * 3600.0) * 1e6


def billed_usd_per_million_images(billed_usd: float, images: int) -> float:
    """Dollars billed per million training images processed (bill / images)."""
    return billed_usd / images * 1e6
