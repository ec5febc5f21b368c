"""The rates table (app/report/decision/device_rates.csv): how fast each kind of work ran on each
device class measured, as data, each row citing the result JSON it came from.

A row says, for one device class and one kind of work (the step breakdown's kinds,
callbacks/profiling/kinds.py), and for one model family or for any (`family` empty):

    measure "peak"       the kind's achieved TFLOP/s over the device's dense bf16 peak
                         (convolutions, matrix products, attention)
    measure "bandwidth"  its achieved GB/s over the device's memory bandwidth
                         (normalization, elementwise and other)
    measure "cpu_bytes"  (device class "cpu") the bytes an image of the kind moves on an
                         accelerator over the bytes it moves in a CPU run of the same
                         model: the CPU's compiler fuses less and computes bfloat16 in
                         float32, so a CPU run's bytes are not a GPU's

The device model (app/report/decision/device_model.py) reads the table; benchmarks/predict_check.py
derives its rows from the result JSONs (`rows_from_breakdown`) and checks the model's
error with them. The table is read as untrusted, as the price catalog is
(app/pricing/catalog.py): a row with a share that is text, negative, over 1 or 1e300, a
kind of work the breakdown has no rate for, a source that is not a result JSON, is one
ConfigError line naming the file, the line and the problem. Pure Python.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import math
import os
import re

RATES_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "device_rates.csv")
COLUMNS = ("device_class", "device_kind", "kind", "family", "measure", "value", "source",
           "figure", "note")
COMPUTE_KINDS = ("convolutions", "matrix products", "attention")
MEMORY_KINDS = ("normalization", "elementwise and other")
KINDS = COMPUTE_KINDS + MEMORY_KINDS
# What each measure's value may be: a share is of a whole; a ratio of bytes within three
# orders of magnitude either way (a CPU run's bytes were 1.7-5x an H100's, 2026-12-07).
MEASURES = {"peak": (1e-6, 1.0, "a share of the peak, > 0 and at most 1"),
            "bandwidth": (1e-6, 1.0, "a share of the bandwidth, > 0 and at most 1"),
            "cpu_bytes": (1e-3, 1e3, "a ratio of bytes from 0.001 to 1000")}
MAX_TABLE_BYTES = 1 << 20
_NUMBER = re.compile(r"\d+(\.\d+)?([eE][+-]?\d+)?")
_CLASS = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,39}")
_FAMILY = re.compile(r"[A-Za-z0-9_:.-]{0,120}")
SOURCE = re.compile(r"benchmarks/results/\d{4}-\d{2}-\d{2}-[\w.-]+\.json")


@dataclasses.dataclass(frozen=True)
class Rate:
    """One row of the table (see the module docstring)."""

    device_class: str
    device_kind: str
    kind: str
    family: str
    measure: str
    value: float
    source: str
    figure: str = ""
    note: str = ""


def _error(path: str, line: int | None, problem: str):
    from flags import ConfigError  # lazily: flags imports absl

    where = f"{path}, line {line}" if line else path
    return ConfigError(f"the rates table {where}: {problem}")


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _rate(row: dict) -> Rate:
    """One checked row. Raises ValueError naming the first problem."""
    for column, text in row.items():
        if any(ord(c) < 32 or ord(c) == 127 for c in text):
            raise ValueError(f"{column} holds a control character")
    if not _CLASS.fullmatch(row["device_class"]):
        raise ValueError(f"device_class is {_shown(row['device_class'])}; accepted: letters, "
                         "digits, spaces, '.', '_' and '-', at most 40")
    if not row["device_kind"] or len(row["device_kind"]) > 80:
        raise ValueError(f"device_kind is {_shown(row['device_kind'])}; accepted: the "
                         "framework's name of the device measured, 1 to 80 characters")
    if row["kind"] not in KINDS:
        raise ValueError(f"kind is {_shown(row['kind'])}; accepted: {', '.join(KINDS)}")
    if not _FAMILY.fullmatch(row["family"]):
        raise ValueError(f"family is {_shown(row['family'])}; accepted: empty or a --model "
                         "value (letters, digits, '_', ':', '.', '-')")
    measure = row["measure"]
    if measure not in MEASURES:
        raise ValueError(f"measure is {_shown(measure)}; accepted: {', '.join(MEASURES)}")
    wanted = ("peak",) if row["kind"] in COMPUTE_KINDS else ("bandwidth",)
    if measure not in wanted + ("cpu_bytes",):
        raise ValueError(f"measure {measure!r} for {row['kind']}; accepted: {wanted[0]} "
                         "or cpu_bytes")
    if (measure == "cpu_bytes") != (row["device_class"] == "cpu"):
        raise ValueError("measure cpu_bytes goes with device_class cpu, and only it")
    low, high, accepted = MEASURES[measure]
    text = row["value"].strip()
    value = float(text) if _NUMBER.fullmatch(text) else math.nan
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"value is {_shown(text)}; accepted: {accepted}")
    if not SOURCE.fullmatch(row["source"]):
        raise ValueError(f"source is {_shown(row['source'])}; accepted: the result JSON the "
                         "figure came from, benchmarks/results/YYYY-MM-DD-NAME.json")
    return Rate(row["device_class"], row["device_kind"], row["kind"], row["family"], measure,
                value, row["source"], row["figure"], row["note"])


def parse_rates(data: bytes | str, path: str = RATES_PATH) -> tuple[Rate, ...]:
    """The table in `data` (the CSV's bytes or text), every row checked.

    Raises:
        ConfigError: one line naming `path`, the line and the problem.
    """
    from app.pricing.catalog import csv_table

    rows, seen = [], set()
    for line, values in csv_table(data, path, COLUMNS, MAX_TABLE_BYTES, _error):
        try:
            rate = _rate(values)
        except ValueError as error:
            raise _error(path, line, str(error)) from None
        key = (rate.device_class, rate.kind, rate.family, rate.measure)
        if key in seen:
            raise _error(path, line, f"{rate.device_class}, {rate.kind}, "
                         f"{rate.family or 'any family'} is listed twice")
        seen.add(key)
        rows.append(rate)
    if not rows:
        raise _error(path, None, "no rate is listed")
    return tuple(rows)


@functools.lru_cache(maxsize=4)
def load_rates(path: str = "") -> tuple[Rate, ...]:
    """Reads and checks the table at `path` ("": the app's own, RATES_PATH).

    Raises:
        ConfigError: the file cannot be read, or a row is wrong (one line).
    """
    from callbacks.records.untrusted import FileRefused, read_regular

    path = path or RATES_PATH
    try:  # the one file door: a FIFO is refused, never waited on
        data, _ = read_regular(path, MAX_TABLE_BYTES)
    except OSError as error:
        raise _error(path, None, f"cannot be read ({error.strerror})") from None
    except FileRefused as refused:
        raise _error(path, None, f"{refused.size:,} bytes, more than {MAX_TABLE_BYTES:,}"
                     if refused.why == "too large" else
                     "not a regular file; accepted: a CSV file of rates") from None
    return parse_rates(data, path)


def rows_from_breakdown(breakdown: dict, device_class: str, device_kind: str, family: str,
                        source: str, peak_tflops: float | None,
                        bandwidth_gb_per_sec: float | None, where: str = "") -> list[Rate]:
    """The table's rows one device run's breakdown gives: each rated kind's share of the
    device's peak or bandwidth (a device run of the app's recipes refreshes the table
    with these; benchmarks/predict_check.py writes them). Kinds without a rate give none."""
    rows = []
    for kind, part in sorted((breakdown.get("parts") or {}).items()):
        if kind not in KINDS or not isinstance(part, dict):
            continue
        tflops, gb = part.get("tflops_per_sec"), part.get("gb_per_sec")
        if kind in COMPUTE_KINDS and _positive(tflops) and peak_tflops:
            value, measure, words = tflops / peak_tflops, "peak", (
                f"{tflops:g} TFLOP/s over {peak_tflops:g}")
        elif kind in MEMORY_KINDS and _positive(gb) and bandwidth_gb_per_sec:
            value, measure, words = gb / bandwidth_gb_per_sec, "bandwidth", (
                f"{gb:g} GB/s over {bandwidth_gb_per_sec:g}")
        else:
            continue
        rows.append(Rate(device_class, device_kind, kind,
                         family, measure, float(f"{value:.4g}"), source,
                         f"{where}parts.{kind}: {words}"))
    return rows


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value) and value > 0


def to_csv(rows) -> str:
    """The rows as the table's CSV text (its header first)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for rate in rows:
        writer.writerow([getattr(rate, c) if c != "value" else f"{rate.value:.4g}"
                         for c in COLUMNS])
    return out.getvalue()
