"""How a run's price is chosen: the catalog row it is billed as, and under which option.

The catalog itself (its rows, read as untrusted, and --list_machines) is
app/pricing/catalog.py's. Here: `pick_machine` finds the row for this host's devices,
`resolve_billing` turns --machine, --pricing and --price_per_hour_usd into one
`Billing` (with the banner's notes), and `check_config` refuses at the door what can
be refused before any device is known. A catalog price is per machine-hour, billed
for as many machines as the run's devices need; --price_per_hour_usd is the price of
everything the run uses, never multiplied.

The pricing option is checked once, where the row is known: a row named by
--machine at the door (`check_config`), the row found for the device in
`resolve_billing`.

Pure Python: no framework is imported here. The arithmetic of dollars is the Bill's
(callbacks/figures/bill.py), which `Billing.bill` makes once the run's earlier
attempts are known.
"""

from __future__ import annotations

import dataclasses
import datetime
import sys

from app.pricing.catalog import Machine, load_catalog, stale, stale_why
from callbacks.figures.bill import Bill

# Where several providers sell a device, the row taken by default: fewest devices per
# machine first (a GPU sold alone, not the machine of 8 that holds it), then this
# order (AWS first: the study's GPU machine was AWS's, and a run's auto row keeps the
# meaning it had before other clouds were listed), then the file's order.
PROVIDER_ORDER = ("aws", "gcp", "azure")


@dataclasses.dataclass(frozen=True)
class Pick:
    """The row found for a host's devices, and what the banner says of it."""

    row: Machine
    others: tuple  # names of the other priced rows that sell this device
    note: str | None  # which row was taken and how to take another; None if no choice


def _rank(row: Machine, position: int) -> tuple:
    provider = PROVIDER_ORDER.index(row.provider) if row.provider in PROVIDER_ORDER else 99
    return (row.price_per_hour_usd("on_demand") is None, row.devices_per_machine, provider,
            position)


def pick_machine(device_kind: str, device_count: int = 1,
                 catalog: dict[str, Machine] | None = None) -> Pick | None:
    """The catalog row billed for `device_count` devices of `device_kind`, or None.

    Of the rows whose device_kind_pattern matches, a priced one before a peak-only
    one, then PROVIDER_ORDER's rule (see there). Where other priced rows sell the
    same device, `note` says which row was taken and how to choose another.

    Args:
        device_kind: what the framework calls the device, e.g. "NVIDIA H200",
            "TPU v5 lite", or "cpu".
        device_count: devices billed (over all processes).
    """
    catalog = catalog or load_catalog()
    matching = sorted((_rank(row, i), row) for i, row in enumerate(catalog.values())
                      if row.matches(device_kind))
    if not matching:
        return None
    row = matching[0][1]
    others = tuple(r.machine for _, r in matching[1:] if r.pricings())
    note = None
    if others and row.pricings():
        machines = row.machines_for(device_count)
        note = (f"billed as {machines} x catalog row {row.machine} ({row.provider} "
                f"{row.region}, {row.devices_text()}) for {device_count} x {device_kind}; "
                f"also sold as {', '.join(others[:4])}{' and more' if len(others) > 4 else ''}"
                f": choose with --machine=NAME (--list_machines lists them)")
    return Pick(row, others, note)


def foreign_machine_note(row: Machine, device_kind: str, own_peak: float | None) -> str:
    """The banner's line for --machine naming a machine this run is not on."""
    mfu = (f"MFU against this host's devices ({own_peak:g} TFLOP/s each)" if own_peak
           else f"no MFU (no peak is known for {device_kind})")
    return (f"--machine={row.machine} has {row.devices_text()} but this run is on "
            f"{device_kind}: billed at {row.machine}'s price as asked; {mfu}")


def stale_note(row: Machine, today: datetime.date | None = None) -> str | None:
    """The banner's line for a price read longer ago than its seller's rule allows
    (catalog.stale: 12 months for the three clouds, 90 days for the others), or None."""
    if not stale(row, today):
        return None
    return (f"{row.machine}'s prices were read {row.date}, {stale_why(row)}: check "
            f"{row.pricing_page or 'the source in the price catalog'}")


def unpriced_note(row: Machine) -> str | None:
    """The banner's line for a row found for the device that sells nothing (its peak
    only: TPU7x in preview, an H100 PCIe), saying why where the row says, or None."""
    if row.pricings():
        return None
    why = row.note or "no price was sourced"
    return (f"{row.machine} ({row.devices_text()}) has no price in the catalog: {why}; "
            "pass --price_per_hour_usd for a cost")


@dataclasses.dataclass(frozen=True)
class Billing:
    """What the run is charged: resolved once, reported in the summary."""

    machine: str | None
    pricing: str
    price_per_hour_usd: float | None  # dollars per wall-clock hour of the whole run
    machines: int | None  # catalog machines in that price; None: --price_per_hour_usd
    peak_tflops_per_device: float | None
    source: str
    # Whole-run dollars per hour under every pricing the row sells (host included,
    # times `machines`); with --price_per_hour_usd, that price under --pricing only.
    price_per_hour_by_option: dict = dataclasses.field(default_factory=dict)
    notes: tuple = ()  # lines for the banner: the row taken, a foreign --machine, staleness

    def bill(self, started_at: float, seconds_before: float = 0.0) -> Bill:
        """The run's Bill at these prices: this attempt's clock from `started_at` (a
        `time.time()`), and `seconds_before` billed by earlier attempts."""
        return Bill(started_at, seconds_before, self.price_per_hour_usd, self.pricing,
                    dict(self.price_per_hour_by_option))


def resolve_billing(machine: str, pricing: str, price_override: float | None,
                    peak_override: float | None, device_kind: str,
                    total_devices: int, *, warn: bool = True,
                    today: datetime.date | None = None, catalog_path: str = "") -> Billing:
    """Chooses the catalog row and price for a run.

    An explicit --machine that is not the device the run is on is billed as asked,
    with a note (written to stderr too when `warn`), and MFU keeps the peak of this
    host's own devices. A named row's pricing was checked at the door
    (`check_config`); the row found for the device is checked here.

    Args:
        machine: catalog row name, or "auto" for the row matching `device_kind`.
        pricing: "on_demand", "spot", "one_year" or "three_year".
        price_override: dollars per hour for everything the run uses, as one bill
            (--price_per_hour_usd): it replaces the catalog's price and is never
            multiplied by a machine count.
        peak_override: dense bf16 TFLOP/s per device that replaces the catalog's.
        device_kind: the detected device.
        total_devices: devices over all processes.
        warn: write the foreign --machine note to stderr (the banner prints `notes`).
        today: for the staleness note (default: today).
        catalog_path: the catalog (--price_catalog; "": the app's own).

    Raises:
        ConfigError: the row found for the device sells other pricings but not
            `pricing` (and no override).
    """
    catalog = load_catalog(catalog_path)
    here = pick_machine(device_kind, total_devices, catalog)
    notes = []
    if machine == "auto":
        row = here.row if here else None
        if here and here.note and price_override is None:
            notes.append(here.note)
    else:
        row = catalog[machine]
    if row is None:
        return Billing(None, pricing, price_override, None, peak_override,
                       "--price_per_hour_usd" if price_override is not None
                       else f"no catalog row matches device kind {device_kind!r}",
                       {pricing: price_override} if price_override is not None else {})
    peak = row.peak_bf16_tflops_per_device
    if not row.matches(device_kind):
        peak = here.row.peak_bf16_tflops_per_device if here else None
        notes.append(foreign_machine_note(row, device_kind, peak_override or peak))
        if warn:
            sys.stderr.write(f"warning: {notes[-1]}\n")
    peak = peak_override if peak_override is not None else peak
    if price_override is not None:
        return Billing(row.machine, pricing, price_override, None, peak,
                       "--price_per_hour_usd", {pricing: price_override}, tuple(notes))
    if machine == "auto":
        check_pricing(row, pricing, f"--machine=auto (catalog row {row.machine}, for "
                                    f"{device_kind!r})", require_price=False)
    notes += [n for n in (unpriced_note(row), stale_note(row, today)) if n]
    machines = row.machines_for(total_devices)
    by_option = {p: row.price_per_hour_usd(p) * machines for p in row.pricings()}
    return Billing(row.machine, pricing, by_option.get(pricing), machines, peak, row.source,
                   by_option, tuple(notes))


def check_pricing(row: Machine, pricing: str, named: str, require_price: bool) -> None:
    """Refuses a pricing the row does not sell, where it sells another or where a
    price is required (a row named by --machine). A row found for the device that
    sells nothing (its peak only) leaves the cost unknown.

    Raises:
        ConfigError: naming the pricings sold.
    """
    from flags import ConfigError

    sold = row.pricings()
    if pricing not in sold and (sold or require_price):
        accepted = f"{', '.join(sold)}, or " if sold else ""
        why = f" ({row.note})" if row.note else ""
        raise ConfigError(f"--pricing={pricing} has no price for {named} in the catalog; "
                          f"accepted: {accepted}--price_per_hour_usd{why}")


def check_config(config) -> None:
    """Checks the catalog itself, then --machine and --pricing against it (before
    anything starts): a named row's pricing is checked here, once.

    Raises:
        ConfigError: a bad catalog (one line), or naming the catalog's machines, or
            the pricings sold for one.
    """
    from flags import ConfigError
    from flags.config import did_you_mean

    # A damaged catalog is refused even for --machine=auto.
    catalog = load_catalog(config.price_catalog)
    if config.machine == "auto":
        return
    if config.machine not in catalog:
        raise ConfigError(f"--machine={config.machine!r} is not in the price catalog"
                          f"{did_you_mean(config.machine, sorted(catalog))} (accepted: auto, "
                          + ", ".join(sorted(catalog)) + "; --list_machines shows them)")
    if config.price_per_hour_usd is not None:
        return
    check_pricing(catalog[config.machine], config.pricing, f"--machine={config.machine}",
                  require_price=True)
