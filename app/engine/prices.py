"""The price catalog (app/engine/prices.csv) and how a run's price is chosen.

Prices change, so they are data: one row per billable machine, with the price
models a cloud sells (on-demand, spot, 1-year, 3-year), the dense bf16 peak of its
device (for MFU), where each figure came from (a public page, or a public catalog
file at a fixed commit with its row) and the date it was read (for the 2018 study's
row, the date of the price). A figure that could not be sourced publicly is left
empty, never guessed: a device without a sourced price has a row carrying its peak
only (MFU works, the cost asks for --price_per_hour_usd). A catalog price is per
machine-hour, billed for as many machines as the run's devices need;
--price_per_hour_usd is the price of everything the run uses, never multiplied.

Pure Python: no framework is imported here. The arithmetic of dollars is in
callbacks/figures/money.py.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import math
import os
import re
import sys

CATALOG_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prices.csv")
PRICE_COLUMNS = {
    "on_demand": "on_demand_usd_per_hour",
    "spot": "spot_usd_per_hour",
    "one_year": "one_year_usd_per_hour",
    "three_year": "three_year_usd_per_hour",
}


@dataclasses.dataclass(frozen=True)
class Machine:
    """One row of the catalog."""

    machine: str
    accelerator: str
    devices_per_machine: int
    device_kind_pattern: str
    provider: str
    region: str
    prices_usd_per_hour: dict  # pricing model -> dollars per machine-hour, or None
    host_usd_per_hour: float
    peak_bf16_tflops_per_device: float | None
    source: str
    date: str

    def price_per_hour_usd(self, pricing: str) -> float | None:
        """Dollars per machine-hour under `pricing` (host VM included), None if not sold."""
        price = self.prices_usd_per_hour.get(pricing)
        return None if price is None else price + self.host_usd_per_hour

    def machines_for(self, total_devices: int) -> int:
        """Machines billed for a run on `total_devices` devices."""
        return max(1, math.ceil(total_devices / self.devices_per_machine))


def _number(text):
    return float(text) if text.strip() else None


@functools.lru_cache(maxsize=4)
def load_catalog(path: str = CATALOG_PATH) -> dict[str, Machine]:
    """Reads the catalog CSV into {machine name: Machine}, in file order."""
    rows = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            rows[row["machine"]] = Machine(
                machine=row["machine"],
                accelerator=row["accelerator"],
                devices_per_machine=int(row["devices_per_machine"]),
                device_kind_pattern=row["device_kind_pattern"],
                provider=row["provider"],
                region=row["region"],
                prices_usd_per_hour={k: _number(row[c]) for k, c in PRICE_COLUMNS.items()},
                host_usd_per_hour=_number(row["host_usd_per_hour"]) or 0.0,
                peak_bf16_tflops_per_device=_number(row["peak_bf16_tflops_per_device"]),
                source=row["source"],
                date=row["date"],
            )
    return rows


def machine_for_device(device_kind: str, catalog: dict[str, Machine] | None = None):
    """The catalog row billed for one `device_kind` device, or None: of the rows whose
    device_kind_pattern matches it, the one with the fewest devices per machine (a
    GPU sold alone, not the machine of 8 that holds it), the first of equals.

    Args:
        device_kind: what the framework calls the device, e.g. "NVIDIA H200",
            "TPU v4", or "cpu".
    """
    catalog = catalog or load_catalog()
    matching = [row for row in catalog.values()
                if row.device_kind_pattern and re.search(row.device_kind_pattern, device_kind)]
    return min(matching, key=lambda row: row.devices_per_machine, default=None)


@dataclasses.dataclass(frozen=True)
class Billing:
    """What the run is charged: resolved once, reported in the summary."""

    machine: str | None
    pricing: str
    price_per_hour_usd: float | None  # dollars per wall-clock hour of the whole run
    machines: int | None  # catalog machines in that price; None: --price_per_hour_usd
    peak_tflops_per_device: float | None
    source: str


def resolve_billing(machine: str, pricing: str, price_override: float | None,
                    peak_override: float | None, device_kind: str,
                    total_devices: int) -> Billing:
    """Chooses the catalog row and price for a run; warns (one line on stderr) when
    an explicit --machine is not the device the run is on, and bills it all the same.

    Args:
        machine: catalog row name, or "auto" for the row matching `device_kind`.
        pricing: "on_demand", "spot", "one_year" or "three_year".
        price_override: dollars per hour for everything the run uses, as one bill
            (--price_per_hour_usd): it replaces the catalog's price and is never
            multiplied by a machine count.
        peak_override: dense bf16 TFLOP/s per device that replaces the catalog's.
        device_kind: the detected device, for "auto".
        total_devices: devices over all processes.

    Raises:
        ConfigError: the row sells other pricings but not `pricing` (and no
            override): the same line whether the row was named or found.
    """
    catalog = load_catalog()
    row = catalog[machine] if machine != "auto" else machine_for_device(device_kind, catalog)
    if row is None:
        return Billing(None, pricing, price_override, None, peak_override,
                       "--price_per_hour_usd" if price_override is not None
                       else f"no catalog row matches device kind {device_kind!r}")
    peak = peak_override if peak_override is not None else row.peak_bf16_tflops_per_device
    if machine != "auto" and not re.search(row.device_kind_pattern or "(?!)", device_kind):
        sys.stderr.write(f"warning: billing --machine={machine} ({row.accelerator}) as asked, "
                         f"but this run is on {device_kind}, not on that machine: its cost is "
                         "what that machine would charge for this run's time\n")
    if price_override is not None:
        return Billing(row.machine, pricing, price_override, None, peak,
                       "--price_per_hour_usd")
    _check_pricing(row, pricing, f"--machine={machine}" if machine != "auto" else
                   f"--machine=auto (catalog row {row.machine}, for {device_kind!r})",
                   require_price=machine != "auto")
    price = row.price_per_hour_usd(pricing)
    machines = row.machines_for(total_devices)
    return Billing(row.machine, pricing, None if price is None else price * machines,
                   machines, peak, row.source)


def _check_pricing(row: Machine, pricing: str, named: str, require_price: bool) -> None:
    """Refuses a pricing the row does not sell, where it sells another or where a
    price is required (a row named by --machine). A row found for the device that
    sells nothing (its peak only) leaves the cost unknown.

    Raises:
        ConfigError: naming the pricings sold.
    """
    from flags import PRICINGS, ConfigError

    sold = [p for p in PRICINGS if row.price_per_hour_usd(p) is not None]
    if pricing not in sold and (sold or require_price):
        accepted = f"{', '.join(sold)}, or " if sold else ""
        raise ConfigError(f"--pricing={pricing} has no price for {named} in the catalog; "
                          f"accepted: {accepted}--price_per_hour_usd")


def check_config(config) -> None:
    """Checks --machine and --pricing against the catalog (before anything starts).

    Raises:
        ConfigError: naming the catalog's machines, or the pricings sold for one.
    """
    from flags import ConfigError
    from flags.config import did_you_mean

    if config.machine == "auto":
        return
    catalog = load_catalog()
    if config.machine not in catalog:
        raise ConfigError(f"--machine={config.machine!r} is not in the price catalog"
                          f"{did_you_mean(config.machine, sorted(catalog))} (accepted: auto, "
                          + ", ".join(sorted(catalog)) + ")")
    if config.price_per_hour_usd is not None:
        return
    _check_pricing(catalog[config.machine], config.pricing, f"--machine={config.machine}",
                   require_price=True)
