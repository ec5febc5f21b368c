"""The bill: what a run is charged, and every figure of money, in one place.

A cloud bills every second a machine is held. So a run's billed seconds are every
attempt's, each from its process's start (app/main.py's first line) to its summary
or its last heartbeat (app/run/ledger.py); hours are those seconds over 3,600;
dollars are hours times the price per hour of everything the run uses, under the
run's pricing option and under every other option its catalog row sells. `Bill`
holds one attempt's clock and prices: it is built once per attempt, as soon as the
billing ledger knows what the earlier attempts billed, and handed to the cost and
checkpoint callbacks and to the summary; each checkpoint saves its seconds
(`Bill.state`), and the next attempt reads them back (`saved_seconds`) as a floor
for a ledger that was damaged.

The same module holds the rest of money's arithmetic, so that nothing else
multiplies hours by a price (tests/test_layout.py searches for it): a prediction's
dollars (`dollars`), the per-image figures, and how dollars are written (`usd`,
`usd_per_hour`) and each pricing option named (`PRICING_WORDS`, `OPTION_WORDS`).
Two different "dollars per million images" exist and are named apart:

- `usd_per_million_images`: price / steady-state images per second. What a million
  images cost at full speed: the figure that compares accelerators (the study's
  "dollars per image/second"), and the only one called by this name anywhere.
- `billed_usd_per_million_images`: dollars billed so far / images trained so far.
  What this run actually paid per image, compile, evaluation and stalls included.

Pure Python (no framework, nothing of ours).
"""

from __future__ import annotations

import dataclasses
import math
import time

# The pricing options a seller may offer, in the catalog's column order
# (app/pricing/catalog.py's PRICE_COLUMNS, --pricing's choices).
PRICINGS = ("on_demand", "spot", "one_year", "three_year")
# How a sentence names an amount's option: "$0.0100 on spot".
PRICING_WORDS = {"on_demand": "on demand", "spot": "on spot", "one_year": "with 1-year commitment",
                 "three_year": "with 3-year commitment"}
# How a table's column or a row's name says the option itself: "gcp-n2 spot".
OPTION_WORDS = {"on_demand": "on demand", "spot": "spot", "one_year": "1-year commitment",
                "three_year": "3-year commitment"}
SECONDS_PER_HOUR = 3600.0


def hours(seconds: float) -> float:
    """`seconds` in hours."""
    return seconds / SECONDS_PER_HOUR


def dollars(hours_: float, price_per_hour_usd: float) -> float:
    """Dollars for `hours_` of wall-clock time at `price_per_hour_usd`: a bill's, or a
    prediction's (app/report/decision/predict.py)."""
    return hours_ * price_per_hour_usd


def attempt_seconds(attempt: dict) -> float:
    """One ledger attempt's billed seconds: from its start to when it was last seen
    alive (never below 0)."""
    return max(0.0, attempt["last_seen"] - attempt["started_at"])


def attempts_seconds(attempts: list[dict]) -> float:
    """The billed seconds of the ledger's `attempts` ({"started_at", "last_seen"})."""
    return sum(attempt_seconds(a) for a in attempts)


def unbilled_seconds(attempts: list[dict], floor_seconds: float) -> float:
    """How far the `attempts` fall short of `floor_seconds` (what the newest checkpoint
    billed), 0 where they do not."""
    return max(0.0, floor_seconds - attempts_seconds(attempts))


def saved_seconds(state: dict) -> float:
    """The billed seconds a checkpoint's state saved (`Bill.state`), 0 if none."""
    return float(state.get("billed_seconds") or 0.0)


def projected_cost_usd(billed_usd: float, usd_per_epoch: float | None,
                       epochs_left: int) -> float | None:
    """The whole run's cost: billed so far, plus the epochs left at `usd_per_epoch`
    (the last epoch's). With none left it is the bill itself."""
    if epochs_left <= 0:
        return billed_usd
    return None if usd_per_epoch is None else billed_usd + usd_per_epoch * epochs_left


def hours_for_images(images: float, images_per_sec: float) -> float:
    """Wall-clock hours to process `images` at a steady `images_per_sec`."""
    return hours(images / images_per_sec)


def usd_per_million_images(images_per_sec: float, price_per_hour_usd: float) -> float:
    """Dollars per million training images at a steady rate (price / rate)."""
    return dollars(hours_for_images(1e6, images_per_sec), price_per_hour_usd)


def billed_usd_per_million_images(billed_usd: float, images: int) -> float:
    """Dollars billed per million training images processed (bill / images)."""
    return billed_usd / images * 1e6


def usd(value: float | None, significant: int | None = None) -> str:
    """Dollars as the app writes them: cents from a dollar up ("$1,234.57"), four
    decimals below (a CPU run costs fractions of a cent: "$0.0035"); with
    `significant`, that many significant digits instead ("$0.005556", where amounts
    are set against each other; a chart's ticks); None is "n/a"."""
    if value is None:
        return "n/a"
    if significant is not None:
        return f"${value:,.{significant}g}"
    return f"${value:,.2f}" if abs(value) >= 1 else f"${value:,.4f}"


def usd_per_hour(price: float) -> str:
    """A price per hour: "$0.194236/h", "$12.24/h" (six significant digits)."""
    return f"{usd(price, 6)}/h"


@dataclasses.dataclass(frozen=True)
class Bill:
    """One attempt's bill: its clock, what earlier attempts billed, and its prices.

    Args:
        started_at: `time.time()` when this attempt's process started.
        seconds_before: seconds billed by the run's earlier attempts (the ledger's).
        price_per_hour_usd: dollars per wall-clock hour for everything the run uses,
            under `pricing`; None: no price is known (hours are billed all the same).
        pricing: the option the run is billed under (PRICINGS).
        price_per_hour_by_option: {pricing: dollars per hour} for every option the
            run's catalog row sells (host included, times its machines); with
            --price_per_hour_usd, that price under `pricing` only.
    """

    started_at: float
    seconds_before: float = 0.0
    price_per_hour_usd: float | None = None
    pricing: str = "on_demand"
    price_per_hour_by_option: dict = dataclasses.field(default_factory=dict)
    # epoch: the instant its money was read at (`epoch_end`), taken by its first reader
    _epoch_ends: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        price = self.price_per_hour_usd
        if price is not None and not (math.isfinite(price) and price >= 0):
            raise ValueError(f"price_per_hour_usd must be >= 0, received {price}")
        if not (math.isfinite(self.seconds_before) and self.seconds_before >= 0):
            raise ValueError(f"seconds_before must be >= 0, received {self.seconds_before}")

    def epoch_end(self, epoch: int, at: float | None = None) -> float:
        """The instant (a `time.time()`) at which epoch `epoch`'s hours and dollars are
        read: taken by the first to ask (`at`, default now), the same for every later
        reader. So the meter (callbacks/cost.py) and the targets (callbacks/accuracy.py)
        bill one epoch at one instant, whichever of them runs first."""
        return self._epoch_ends.setdefault(epoch, time.time() if at is None else at)

    def epoch_begins(self, epoch: int) -> None:
        """Forgets the instant of an earlier epoch `epoch` (a second fit of one bill)."""
        self._epoch_ends.pop(epoch, None)

    def seconds(self, at: float | None = None) -> float:
        """Seconds billed at `at` (a `time.time()`; default now), earlier attempts
        included. Known with or without a price."""
        return self.seconds_before + ((time.time() if at is None else at) - self.started_at)

    def hours(self, at: float | None = None) -> float:
        """Hours billed at `at` (default now)."""
        return hours(self.seconds(at))

    def cost_usd(self, at: float | None = None) -> float | None:
        """Dollars billed at `at` (default now) under the run's pricing; None without
        a price."""
        if self.price_per_hour_usd is None:
            return None
        return dollars(self.hours(at), self.price_per_hour_usd)

    def dollars_by_option(self, hours_: float) -> dict[str, float]:
        """{pricing: dollars} for `hours_` under each option the run's row sells."""
        return {option: dollars(hours_, price)
                for option, price in self.price_per_hour_by_option.items()}

    def usd_per_million_images(self, images_per_sec: float | None) -> float | None:
        """A million images' dollars at a steady `images_per_sec` under the run's
        price; None without a price or a rate."""
        if self.price_per_hour_usd is None or not images_per_sec:
            return None
        return usd_per_million_images(images_per_sec, self.price_per_hour_usd)

    def state(self, at: float | None = None) -> dict:
        """What a checkpoint saves of the bill (`saved_seconds` reads it back)."""
        return {"billed_seconds": self.seconds(at)}
