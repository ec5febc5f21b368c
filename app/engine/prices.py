"""The price catalog (app/engine/prices.csv) and how a run's price is chosen.

Prices change, so they are data: one row per billable machine, with the price
models a cloud sells (on-demand, spot, 1-year, 3-year), the dense bf16 peak of its
device (for MFU), where each figure came from and the date it was read
(app/engine/PRICES.md: the columns, how a row is chosen, how to add one). A figure
that could not be sourced is left empty, never guessed. A catalog price is per
machine-hour, billed for as many machines as the run's devices need;
--price_per_hour_usd is the price of everything the run uses, never multiplied.
The catalog is read as untrusted (`parse_catalog`): a bad file is one ConfigError
line naming the file, the line and the problem.

What the rest of the app calls:
  load_catalog()                  {machine: Machine}, validated
  pick_machine(kind, count)       the row for this host's devices, and a banner note
  resolve_billing(...) -> Billing what the run is charged; Billing.notes for the banner
  list_machines(pattern)          the catalog as a table (--list_machines)
  stale(row, today)               a price read over 12 months ago
  dollars_by_option(row, hours)   dollars under every pricing the row sells

Pure Python: no framework is imported here. The arithmetic of dollars is in
callbacks/figures/money.py.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import functools
import io
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
COLUMNS = ("machine", "accelerator", "device", "devices_per_machine", "device_kind_pattern",
           "provider", "region", *PRICE_COLUMNS.values(), "host_usd_per_hour",
           "peak_bf16_tflops_per_device", "pricing_page", "source", "date", "note")
# Where several providers sell a device, the row taken by default: fewest devices per
# machine first (a GPU sold alone, not the machine of 8 that holds it), then this
# order (AWS first: the study's GPU machine was AWS's, and a run's auto row keeps the
# meaning it had before other clouds were listed), then the file's order.
PROVIDER_ORDER = ("aws", "gcp", "azure")
STALE_AFTER_MONTHS = 12
MAX_CATALOG_BYTES = 1 << 20
_NUMBER = re.compile(r"\d+(\.\d+)?([eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
_DATE = re.compile(r"(\d{4})-(\d{2})(-(\d{2}))?")


@dataclasses.dataclass(frozen=True)
class Machine:
    """One row of the catalog (see PRICES.md for each column)."""

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
    device: str = ""
    pricing_page: str = ""
    note: str = ""

    def price_per_hour_usd(self, pricing: str) -> float | None:
        """Dollars per machine-hour under `pricing` (host VM included), None if not sold."""
        price = self.prices_usd_per_hour.get(pricing)
        return None if price is None else price + self.host_usd_per_hour

    def pricings(self) -> list[str]:
        """The pricing models this row has a price for, in PRICE_COLUMNS' order."""
        return [p for p in PRICE_COLUMNS if self.prices_usd_per_hour.get(p) is not None]

    def machines_for(self, total_devices: int) -> int:
        """Machines billed for a run on `total_devices` devices."""
        return max(1, math.ceil(total_devices / self.devices_per_machine))

    def matches(self, device_kind: str) -> bool:
        """Whether this row's device is `device_kind` (as the framework names it)."""
        return bool(self.device_kind_pattern and re.search(self.device_kind_pattern, device_kind))

    def devices_text(self) -> str:
        """"4 x V100 16GB": what one machine of this row holds."""
        return f"{self.devices_per_machine} x {self.device or self.accelerator}"


def _error(path: str, line: int | None, problem: str):
    from flags import ConfigError  # lazily: flags imports absl

    where = f"{path}, line {line}" if line else path
    return ConfigError(f"the price catalog {where}: {problem}")


def _shown(text: str) -> str:
    """A value quoted for a one-line message: repr (no raw newline), cut at 40 chars."""
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _price(text: str, column: str, positive: bool = False) -> float | None:
    """An empty field (None) or a finite number >= 0 (> 0 if `positive`).

    Raises:
        ValueError: naming the column, the value and what is accepted.
    """
    text = text.strip()
    if not text:
        return None
    value = float(text) if _NUMBER.fullmatch(text) else math.nan
    if not math.isfinite(value) or (positive and value <= 0):
        accepted = "a number > 0" if positive else "empty or a number >= 0 (US dollars)"
        raise ValueError(f"{column} is {_shown(text)}; accepted: {accepted}")
    return value


def _check_date(text: str) -> str:
    match = _DATE.fullmatch(text)
    try:
        datetime.date(int(match[1]), int(match[2]), int(match[4] or 1))
    except (TypeError, ValueError):
        raise ValueError(f"date is {_shown(text)}; accepted: an ISO date, "
                         "YYYY-MM-DD or YYYY-MM (when the price was read)") from None
    return text


def _machine(row: dict) -> Machine:
    """One validated row. Raises ValueError naming the first problem."""
    for column, text in row.items():
        if any(ord(c) < 32 or ord(c) == 127 for c in text):
            raise ValueError(f"{column} holds a control character")
    name = row["machine"]
    if not _NAME.fullmatch(name):
        raise ValueError(f"machine is {_shown(name)}; accepted: letters, digits, '.', '_' "
                         "and '-' (it is a --machine value)")
    count = row["devices_per_machine"].strip()
    if not (count.isascii() and count.isdigit() and 0 < int(count) <= 100_000):
        raise ValueError(f"devices_per_machine is {_shown(count)}; accepted: an integer "
                         "from 1 to 100000")
    pattern = row["device_kind_pattern"]
    try:
        if len(pattern) > 200:
            raise re.error("longer than 200 characters")
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as error:
        raise ValueError(f"device_kind_pattern {_shown(pattern)} is not a regular "
                         f"expression ({error})") from None
    prices = {p: _price(row[c], c) for p, c in PRICE_COLUMNS.items()}
    host = _price(row["host_usd_per_hour"], "host_usd_per_hour")
    peak = _price(row["peak_bf16_tflops_per_device"], "peak_bf16_tflops_per_device",
                  positive=True)
    if any(v is not None for v in prices.values()) and "https://" not in row["source"]:
        raise ValueError("the row has a price but its source names no https:// page")
    return Machine(machine=name, accelerator=row["accelerator"], devices_per_machine=int(count),
                   device_kind_pattern=pattern, provider=row["provider"], region=row["region"],
                   prices_usd_per_hour=prices, host_usd_per_hour=host or 0.0,
                   peak_bf16_tflops_per_device=peak, source=row["source"],
                   date=_check_date(row["date"]), device=row["device"],
                   pricing_page=row["pricing_page"], note=row["note"])


def parse_catalog(data: bytes | str, path: str = CATALOG_PATH) -> dict[str, Machine]:
    """The catalog in `data` (the CSV's bytes or text) as {machine: Machine}, in order.

    Every row is checked: all COLUMNS present, prices empty or finite >= 0, peaks
    finite > 0, device counts positive integers, dates ISO, machine names unique.

    Raises:
        ConfigError: one line naming `path`, the line and the problem.
    """
    if isinstance(data, bytes):
        if len(data) > MAX_CATALOG_BYTES:
            raise _error(path, None, f"{len(data):,} bytes, more than a catalog's "
                         f"{MAX_CATALOG_BYTES:,}")
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise _error(path, data.count(b"\n", 0, error.start) + 1,
                         f"not UTF-8 text (byte {error.start})") from None
    reader = csv.reader(io.StringIO(data, newline=""), strict=True)
    rows, header, end = {}, None, 0
    try:
        for fields in reader:
            # A quoted field may hold a newline: a row is named by the line it starts on.
            line, end = end + 1, reader.line_num
            if header is None:
                header = [f.strip() for f in fields]
                missing = [c for c in COLUMNS if c not in header]
                doubled = sorted({c for c in header if header.count(c) > 1})
                if missing or doubled:
                    raise _error(path, line, f"the header lacks {', '.join(missing)}" if missing
                                 else f"the header names {', '.join(doubled)} twice")
                continue
            if not any(f.strip() for f in fields):
                continue  # a blank line
            if len(fields) != len(header):
                count = len(fields)
                raise _error(path, line, f"{count} field{'s' * (count != 1)} where the header "
                             f"has {len(header)}")
            try:
                row = _machine(dict(zip(header, fields)))
            except ValueError as error:
                raise _error(path, line, str(error)) from None
            if row.machine in rows:
                raise _error(path, line, f"machine {row.machine!r} is listed twice")
            rows[row.machine] = row
    except csv.Error as error:
        raise _error(path, reader.line_num, f"not CSV ({error})") from None
    if not rows:
        raise _error(path, None, "no machine is listed" if header else "the file is empty")
    return rows


@functools.lru_cache(maxsize=4)
def load_catalog(path: str = CATALOG_PATH) -> dict[str, Machine]:
    """Reads and checks the catalog CSV: {machine name: Machine}, in file order.

    Raises:
        ConfigError: the file cannot be read, or a row is wrong (one line).
    """
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CATALOG_BYTES + 1)
    except OSError as error:
        raise _error(path, None, f"cannot be read ({error.strerror})") from None
    return parse_catalog(data, path)


def stale(row: Machine, today: datetime.date | None = None) -> bool:
    """Whether `row` has a price read more than STALE_AFTER_MONTHS months before
    `today` (a date of YYYY-MM counts from the month's first day)."""
    if not row.pricings():
        return False
    today = today or datetime.date.today()
    match = _DATE.fullmatch(row.date)
    read = datetime.date(int(match[1]), int(match[2]), int(match[4] or 1))
    months = (today.year - read.year) * 12 + today.month - read.month
    return months > STALE_AFTER_MONTHS or (months == STALE_AFTER_MONTHS and today.day > read.day)


def dollars_by_option(row: Machine, billed_hours: float, machines: int = 1) -> dict[str, float]:
    """{pricing: dollars} for `billed_hours` on `machines` of `row`, for every pricing
    the row sells (host VM included): the study's on-demand vs 12-month table."""
    return {p: billed_hours * machines * row.price_per_hour_usd(p) for p in row.pricings()}


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


def machine_for_device(device_kind: str, catalog: dict[str, Machine] | None = None):
    """The catalog row billed for one `device_kind` device, or None (see pick_machine)."""
    pick = pick_machine(device_kind, 1, catalog)
    return pick.row if pick else None


def foreign_machine_note(row: Machine, device_kind: str, own_peak: float | None) -> str:
    """The banner's line for --machine naming a machine this run is not on."""
    mfu = (f"MFU against this host's devices ({own_peak:g} TFLOP/s each)" if own_peak
           else f"no MFU (no peak is known for {device_kind})")
    return (f"--machine={row.machine} has {row.devices_text()} but this run is on "
            f"{device_kind}: billed at {row.machine}'s price as asked; {mfu}")


def stale_note(row: Machine, today: datetime.date | None = None) -> str | None:
    """The banner's line for a price read over 12 months ago, or None."""
    if not stale(row, today):
        return None
    return (f"{row.machine}'s prices were read {row.date}, over {STALE_AFTER_MONTHS} months "
            f"ago: check {row.pricing_page or 'the source in app/engine/prices.csv'}")


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

    def dollars_by_option(self, billed_hours: float) -> dict[str, float]:
        """{pricing: dollars} for `billed_hours` of this run under each pricing."""
        return {p: billed_hours * price for p, price in self.price_per_hour_by_option.items()}


def resolve_billing(machine: str, pricing: str, price_override: float | None,
                    peak_override: float | None, device_kind: str,
                    total_devices: int, *, warn: bool = True,
                    today: datetime.date | None = None) -> Billing:
    """Chooses the catalog row and price for a run.

    An explicit --machine that is not the device the run is on is billed as asked,
    with a note (written to stderr too when `warn`), and MFU keeps the peak of this
    host's own devices.

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

    Raises:
        ConfigError: the row sells other pricings but not `pricing` (and no
            override): the same line whether the row was named or found.
    """
    catalog = load_catalog()
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
    _check_pricing(row, pricing, f"--machine={machine}" if machine != "auto" else
                   f"--machine=auto (catalog row {row.machine}, for {device_kind!r})",
                   require_price=machine != "auto")
    if stale_note(row, today):
        notes.append(stale_note(row, today))
    machines = row.machines_for(total_devices)
    by_option = {p: row.price_per_hour_usd(p) * machines for p in row.pricings()}
    return Billing(row.machine, pricing, by_option.get(pricing), machines, peak, row.source,
                   by_option, tuple(notes))


def _check_pricing(row: Machine, pricing: str, named: str, require_price: bool) -> None:
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
    anything starts).

    Raises:
        ConfigError: a bad catalog (one line), or naming the catalog's machines, or
            the pricings sold for one.
    """
    from flags import ConfigError
    from flags.config import did_you_mean

    catalog = load_catalog()  # a damaged catalog is refused even for --machine=auto
    if config.machine == "auto":
        return
    if config.machine not in catalog:
        raise ConfigError(f"--machine={config.machine!r} is not in the price catalog"
                          f"{did_you_mean(config.machine, sorted(catalog))} (accepted: auto, "
                          + ", ".join(sorted(catalog)) + "; --list_machines shows them)")
    if config.price_per_hour_usd is not None:
        return
    _check_pricing(catalog[config.machine], config.pricing, f"--machine={config.machine}",
                   require_price=True)


NO_MATCH = "no machine in the price catalog matches"  # list_machines's answer to a miss


def list_machines(pattern: str | None = None, today: datetime.date | None = None,
                  catalog: dict[str, Machine] | None = None) -> str:
    """The catalog as a text table for --list_machines[=PATTERN]: machine, devices,
    dollars per machine-hour under each pricing, peak, the date read; prices read
    over 12 months ago are marked "*".

    Args:
        pattern: keeps rows whose machine, accelerator, device or provider contains
            it (case-insensitive; a regular expression where it is one).
    """
    catalog = catalog or load_catalog()
    try:
        wanted = re.compile(pattern or "", re.IGNORECASE)
    except re.error:
        wanted = re.compile(re.escape(pattern), re.IGNORECASE)
    rows = [r for r in catalog.values()
            if wanted.search(" ".join((r.machine, r.accelerator, r.device, r.provider)))]
    if not rows:
        return f"{NO_MATCH} {pattern!r}"

    def money(row, pricing):
        price = row.price_per_hour_usd(pricing)
        return "-" if price is None else f"{price:,.4f}".rstrip("0").rstrip(".")

    table = [("machine", "devices", "on_demand", "spot", "one_year", "three_year",
              "peak TF", "read")]
    for row in rows:
        mark = "*" if stale(row, today) else ""
        peak = row.peak_bf16_tflops_per_device
        table.append((row.machine, row.devices_text(), *(money(row, p) for p in PRICE_COLUMNS),
                      "-" if peak is None else f"{peak:g}", row.date + mark))
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(w) if i < 2 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(line, widths))).rstrip()
             for line in table]
    lines.append("US dollars per machine-hour (host VM included); peak: dense bf16 TFLOP/s "
                 "per device; - : not sold, not published or not sourced (the row's note in "
                 "app/engine/prices.csv says which)")
    if any(stale(r, today) for r in rows):
        lines.append(f"* read over {STALE_AFTER_MONTHS} months ago: check the provider's page")
    return "\n".join(lines)
