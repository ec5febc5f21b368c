"""The price catalog (app/pricing/prices.csv, or --price_catalog): read, checked, listed.

Prices change, so they are data: one row per billable machine, with the price
options a seller offers (on-demand, spot, 1-year, 3-year), the dense bf16 peak of its
device (for MFU), where each figure came from and the date it was read
(app/pricing/PRICES.md: the columns, how to add a row). A figure that could not be
sourced is left empty, never guessed. A catalog price is per machine-hour, billed for
as many machines as the run's devices need.

The catalog is read as untrusted (`parse_catalog`): a bad file is one ConfigError
line naming the file, the line and the problem; a price outside what a device-hour
costs (PRICE_PER_DEVICE_HOUR_USD) is one such line too, never a bill of 1e297 dollars.

How a run's row is chosen and billed is app/pricing/prices.py's. Pure Python: no
framework is imported here.
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

from callbacks.figures.bill import PRICINGS, usd

CATALOG_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prices.csv")
# One column per pricing option (the Bill's PRICINGS): on_demand_usd_per_hour, ...
PRICE_COLUMNS = {option: f"{option}_usd_per_hour" for option in PRICINGS}
COLUMNS = ("machine", "accelerator", "device", "devices_per_machine", "device_kind_pattern",
           "provider", "region", *PRICE_COLUMNS.values(), "host_usd_per_hour",
           "peak_bf16_tflops_per_device", "memory_gib_per_device", "pricing_page", "source",
           "date", "note")
# What one device-hour costs, US dollars: a small CPU VM's vCPU-hours cost cents, the
# dearest accelerator a few tens of dollars (an H100 on Azure, $12.29 a GPU); a price
# past these bounds per device is a typo or a damaged file (a row at $1e300 an hour was
# billed: tests/test_catalog.py).
PRICE_PER_DEVICE_HOUR_USD = (0.001, 1000.0)
HOST_USD_PER_HOUR_MAX = 1000.0  # a host VM billed apart, per machine-hour
# The sellers whose list prices hold for a year or more, and how old a price may be
# before the banner and the decision say to check it: the three clouds change list
# prices about yearly; the neoclouds (Lambda, CoreWeave, Nebius, RunPod, Crusoe,
# Together...) moved theirs by 30% within months in 2026 (Nebius's H200: $3.50/h in
# May, $4.50 in August).
HYPERSCALERS = ("aws", "gcp", "azure")
STALE_AFTER_MONTHS = 12  # a hyperscaler's price: calendar months, the day of the month kept
STALE_AFTER_DAYS = 90  # any other seller's
MAX_CATALOG_BYTES = 1 << 20
NO_MATCH = "no machine in the price catalog matches"  # list_machines's answer to a miss
_NUMBER = re.compile(r"\d+(\.\d+)?([eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
_DATE = re.compile(r"(\d{4})-(\d{2})(-(\d{2}))?")
_URL = re.compile(r"https://([^\s,;)\"']+)")


@dataclasses.dataclass(frozen=True)
class Machine:
    """One row of the catalog (see PRICES.md for each column)."""

    machine: str
    accelerator: str
    devices_per_machine: int
    device_kind_pattern: str
    provider: str
    region: str
    prices_usd_per_hour: dict  # pricing option -> dollars per machine-hour, or None
    host_usd_per_hour: float
    peak_bf16_tflops_per_device: float | None
    source: str
    date: str
    device: str = ""
    pricing_page: str = ""
    note: str = ""
    memory_gib_per_device: float | None = None

    def price_per_hour_usd(self, pricing: str) -> float | None:
        """Dollars per machine-hour under `pricing` (host VM included), None if not sold."""
        price = self.prices_usd_per_hour.get(pricing)
        return None if price is None else price + self.host_usd_per_hour

    def price_per_device_hour_usd(self, pricing: str) -> float | None:
        """Dollars per device-hour under `pricing`, None if not sold."""
        price = self.price_per_hour_usd(pricing)
        return None if price is None else price / self.devices_per_machine

    def pricings(self) -> list[str]:
        """The pricing options this row has a price for, in PRICE_COLUMNS' order."""
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

    def read_on(self) -> datetime.date:
        """The day the prices were read (a YYYY-MM date: the month's first day)."""
        match = _DATE.fullmatch(self.date)
        return datetime.date(int(match[1]), int(match[2]), int(match[4] or 1))

    def source_short(self) -> str:
        """Where the prices were read, in a few words: the first page `source` names
        (a GitHub file as its repository), without the scheme."""
        found = _URL.search(self.source) or _URL.search(self.pricing_page)
        if not found:
            return "-"
        text = found.group(1).rstrip(".:").removeprefix("www.")
        parts = text.split("/")
        if parts[0] == "github.com" and len(parts) > 3:
            return "/".join(parts[:3])
        return text if len(text) <= 44 else text[:43] + "…"


def _error(path: str, line: int | None, problem: str):
    from flags import ConfigError  # lazily: flags imports absl

    where = f"{path}, line {line}" if line else path
    return ConfigError(f"the price catalog {where}: {problem}")


def _shown(text: str) -> str:
    """A value quoted for a one-line message: repr (no raw newline), cut at 40 chars."""
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _number(text: str, column: str, accepted: str, low: float, high: float) -> float | None:
    """An empty field (None) or a number from `low` to `high`.

    Raises:
        ValueError: naming the column, the value and what is accepted.
    """
    text = text.strip()
    if not text:
        return None
    value = float(text) if _NUMBER.fullmatch(text) else math.nan
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{column} is {_shown(text)}; accepted: {accepted}")
    return value


def _prices(row: dict, devices: int) -> dict:
    """{option: dollars per machine-hour or None}, each within PRICE_PER_DEVICE_HOUR_USD
    per device. Raises ValueError naming the first column out of range."""
    low, high = PRICE_PER_DEVICE_HOUR_USD
    per = f" per device ({devices} a machine)" if devices > 1 else ""
    accepted = (f"empty or {usd(low, 6)} to {usd(high, 6)} an hour{per} (US dollars per "
                "machine-hour)")
    return {p: _number(row[c], c, accepted, low * devices, high * devices)
            for p, c in PRICE_COLUMNS.items()}


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
    prices = _prices(row, int(count))
    host = _number(row["host_usd_per_hour"], "host_usd_per_hour",
                   f"empty or a number from 0 to {HOST_USD_PER_HOUR_MAX:,.0f} (US dollars)",
                   0.0, HOST_USD_PER_HOUR_MAX)
    peak = _number(row["peak_bf16_tflops_per_device"], "peak_bf16_tflops_per_device",
                   "empty or a number > 0 and at most 1e6", 1e-9, 1e6)
    memory = _number(row["memory_gib_per_device"], "memory_gib_per_device",
                     "empty or a number > 0 and at most 1e6 (GiB)", 1e-9, 1e6)
    if any(v is not None for v in prices.values()) and "https://" not in row["source"]:
        raise ValueError("the row has a price but its source names no https:// page")
    return Machine(machine=name, accelerator=row["accelerator"], devices_per_machine=int(count),
                   device_kind_pattern=pattern, provider=row["provider"], region=row["region"],
                   prices_usd_per_hour=prices, host_usd_per_hour=host or 0.0,
                   peak_bf16_tflops_per_device=peak, source=row["source"],
                   date=_check_date(row["date"]), device=row["device"],
                   pricing_page=row["pricing_page"], note=row["note"],
                   memory_gib_per_device=memory)


def parse_catalog(data: bytes | str, path: str = CATALOG_PATH) -> dict[str, Machine]:
    """The catalog in `data` (the CSV's bytes or text) as {machine: Machine}, in order.

    Every row is checked: all COLUMNS present, prices empty or within
    PRICE_PER_DEVICE_HOUR_USD a device, peaks and memory finite > 0, device counts
    positive integers, dates ISO, machine names unique.

    Raises:
        ConfigError: one line naming `path`, the line and the problem.
    """
    rows = {}
    for line, values in csv_table(data, path, COLUMNS, MAX_CATALOG_BYTES, _error,
                                  "a catalog's "):
        try:
            row = _machine(values)
        except ValueError as error:
            raise _error(path, line, str(error)) from None
        if row.machine in rows:
            raise _error(path, line, f"machine {row.machine!r} is listed twice")
        rows[row.machine] = row
    if not rows:
        raise _error(path, None, "no machine is listed")
    return rows


def csv_table(data: bytes | str, path: str, columns, max_bytes: int, error, limit_of=""):
    """(line, {column: field}) of each row of a CSV table given as its bytes or text,
    past a header holding every one of `columns` once: the catalog's and the rates
    table's door (app/report/decision/device_rates.py). A row is named by the line it
    starts on (a quoted field may hold a newline); blank lines are passed over.

    Raises:
        whatever `error(path, line or None, problem)` returns: over `max_bytes` ("N
        bytes, more than {limit_of}M"), not UTF-8, not CSV, a header without a column
        or with one twice, a row of another length, no header at all ("the file is
        empty").
    """
    if isinstance(data, bytes):
        if len(data) > max_bytes:
            raise error(path, None, f"{len(data):,} bytes, more than {limit_of}{max_bytes:,}")
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as decode:
            raise error(path, data.count(b"\n", 0, decode.start) + 1,
                        f"not UTF-8 text (byte {decode.start})") from None
    reader = csv.reader(io.StringIO(data, newline=""), strict=True)
    header, end = None, 0
    try:
        for fields in reader:
            line, end = end + 1, reader.line_num
            if header is None:
                header = [f.strip() for f in fields]
                missing = [c for c in columns if c not in header]
                doubled = sorted({c for c in header if header.count(c) > 1})
                if missing or doubled:
                    raise error(path, line, f"the header lacks {', '.join(missing)}" if missing
                                else f"the header names {', '.join(doubled)} twice")
                continue
            if not any(f.strip() for f in fields):
                continue  # a blank line
            if len(fields) != len(header):
                count = len(fields)
                raise error(path, line, f"{count} field{'s' * (count != 1)} where the header "
                            f"has {len(header)}")
            yield line, dict(zip(header, fields))
    except csv.Error as failed:
        raise error(path, reader.line_num, f"not CSV ({failed})") from None
    if header is None:
        raise error(path, None, "the file is empty")


@functools.lru_cache(maxsize=4)
def load_catalog(path: str = "") -> dict[str, Machine]:
    """Reads and checks the catalog CSV at `path` ("": the app's own, CATALOG_PATH):
    {machine name: Machine}, in file order.

    Raises:
        ConfigError: the file cannot be read, or a row is wrong (one line).
    """
    from callbacks.records.untrusted import FileRefused, read_regular

    path = path or CATALOG_PATH
    try:
        data, _ = read_regular(path, MAX_CATALOG_BYTES)
    except OSError as error:
        raise _error(path, None, f"cannot be read ({error.strerror})") from None
    except FileRefused as refused:  # its size, not the bytes a bounded read took
        raise _error(path, None, f"{refused.size:,} bytes, more than a catalog's "
                     f"{MAX_CATALOG_BYTES:,}" if refused.why == "too large" else
                     "not a regular file; accepted: a CSV file of prices") from None
    return parse_catalog(data, path)


def stale(row: Machine, today: datetime.date | None = None) -> bool:
    """Whether `row` has a price read longer ago than its seller's rule allows: over
    STALE_AFTER_MONTHS calendar months for AWS, Google Cloud and Azure, over
    STALE_AFTER_DAYS days for anyone else (a date of YYYY-MM counts from the month's
    first day)."""
    if not row.pricings():
        return False
    today = today or datetime.date.today()
    read = row.read_on()
    if row.provider not in HYPERSCALERS:
        return (today - read).days > STALE_AFTER_DAYS
    months = (today.year - read.year) * 12 + today.month - read.month
    return months > STALE_AFTER_MONTHS or (months == STALE_AFTER_MONTHS and today.day > read.day)


def stale_why(row: Machine) -> str:
    """"over 90 days ago" / "over 12 months ago": the rule `stale` applies to `row`."""
    return (f"over {STALE_AFTER_MONTHS} months ago" if row.provider in HYPERSCALERS
            else f"over {STALE_AFTER_DAYS} days ago")


def _sort_key(row: Machine, position: int) -> tuple:
    """Price per device-hour on demand (else the cheapest option sold), unpriced last."""
    prices = [row.price_per_device_hour_usd(p) for p in row.pricings()]
    on_demand = row.price_per_device_hour_usd("on_demand")
    price = on_demand if on_demand is not None else min(prices, default=None)
    return (price is None, price or 0.0, position)


def list_machines(pattern: str | None = None, today: datetime.date | None = None,
                  catalog: dict[str, Machine] | None = None, path: str = "") -> str:
    """The catalog as a text table for --list_machines[=PATTERN], cheapest device-hour
    first: machine, devices, dollars per device-hour on demand, dollars per
    machine-hour under each option, peak, the date read and where; prices read
    longer ago than their seller's rule (`stale`) are marked "*". Where at most
    three rows match, each row's full source and note follow the table.

    Args:
        pattern: keeps rows whose machine, accelerator, device or provider contains
            it (case-insensitive; a regular expression where it is one).
        path: the catalog file ("": the app's own), unless `catalog` is given.
    """
    catalog = catalog or load_catalog(path)
    try:
        wanted = re.compile(pattern or "", re.IGNORECASE)
    except re.error:
        wanted = re.compile(re.escape(pattern), re.IGNORECASE)
    rows = [r for r in catalog.values()
            if wanted.search(" ".join((r.machine, r.accelerator, r.device, r.provider)))]
    if not rows:
        return f"{NO_MATCH} {pattern!r}"
    order = {r.machine: i for i, r in enumerate(catalog.values())}
    rows.sort(key=lambda r: _sort_key(r, order[r.machine]))

    def money(value):
        return "-" if value is None else f"{value:,.4f}".rstrip("0").rstrip(".")

    table = [("machine", "devices", "$/device-h", "on_demand", "spot", "one_year", "three_year",
              "peak TF", "GiB", "read", "source")]
    for row in rows:
        mark = "*" if stale(row, today) else ""
        peak, memory = row.peak_bf16_tflops_per_device, row.memory_gib_per_device
        table.append((row.machine, row.devices_text(),
                      money(row.price_per_device_hour_usd("on_demand")),
                      *(money(row.price_per_hour_usd(p)) for p in PRICE_COLUMNS),
                      "-" if peak is None else f"{peak:g}",
                      "-" if memory is None else f"{memory:g}", row.date + mark,
                      row.source_short()))
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    left = (0, 1, 10)
    lines = ["  ".join(cell.ljust(w) if i in left else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(line, widths))).rstrip()
             for line in table]
    lines.append("US dollars per machine-hour (host VM included), cheapest device-hour on "
                 "demand first; peak: dense bf16 TFLOP/s per device; GiB: memory per device; "
                 "- : not sold, not published or not sourced (the row's note says which)")
    if any(stale(r, today) for r in rows):
        lines.append(f"* read over {STALE_AFTER_DAYS} days ago (neoclouds) or "
                     f"{STALE_AFTER_MONTHS} months ago (AWS, Google Cloud, Azure): check the "
                     "seller's page before relying on it")
    if len(rows) <= 3:
        for row in rows:
            lines += [f"{row.machine}: source: {row.source}"]
            if row.note:
                lines += [f"{row.machine}: note: {row.note}"]
    return "\n".join(lines)
