"""The report's reading of run folders: summary.json, sweep.json, config.json and
metrics.jsonl, each someone else's file until checked.

Each is read through callbacks/records/untrusted.py, and only the fields below are
kept (summary.json's: its table, callbacks/records/summary_fields.py), each checked
for its kind and range (SUMMARY_FIELDS, NESTED, METRICS_FIELDS), text made one
printable line (`one_line`). A file that cannot be used skips its run
folder (`SkippedRun`, one line); a field of the wrong kind or out of range inside a
good file is None (shown as n/a) and a note (a caveat) says so.
"""

from __future__ import annotations

import datetime
import math
import os

from callbacks.figures.bill import PRICINGS
from callbacks.profiling import difference
from callbacks.records import summary_fields, untrusted

# Every run folder is someone else's file until checked: each is read through
# callbacks/records/untrusted.py, and only the fields of summary.json's table
# (callbacks/records/summary_fields.py, which its writers share) are kept, each checked
# for its kind and range: (kind, low, high) per field, as untrusted.field takes them.
# sweep.json holds a sweep's summary: the same table.
SUMMARY_FIELDS = summary_fields.FIELDS
# Lists: each item checked with its own fields; a bad item is left out. A benchmark
# point's spread (--repeats) is drawn as error bars.
NESTED = {name: summary_fields.LISTS[name] for name in ("sweep", "targets", "ladder",
                                                        "attempts")}
METRICS_FIELDS = {"epoch": ("integer", 0, 1 << 40), "val_top1": ("number", 0, 1),
                  "billed_hours": ("number", 0, 1e9), "cost_usd": ("number", 0, 1e12)}
MAX_TEXT = 120  # characters of a text field kept (a label is not an essay)
MAX_NOTES = 5  # notes of bad figures kept per run


class SkippedRun(ValueError):
    """A run folder the report cannot use; the message is one line saying why."""


def one_line(text) -> str:
    """`text` with what is not printable (newlines, controls, bidi overrides) shown as
    escapes, and cut to MAX_TEXT characters: safe in a message or a label."""
    text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(text))
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…"


def _checked(record, fields: dict, where: str, notes: list, invalid: set, prefix="") -> dict:
    """The `fields` of `record`, each checked; a wrong one becomes None, and one line
    of `notes` and its name in `invalid` say so (the report shows it as n/a)."""
    out = {}
    for name, (kind, low, high) in fields.items():
        try:
            value = untrusted.field(record, name, kind, low=low, high=high, required=False)
            if isinstance(value, float) and not math.isfinite(value):  # metrics' NaN
                raise untrusted.RecordError(f"{name!r} holds {value}; accepted: a finite "
                                            f"{kind}")
        except untrusted.RecordError as error:
            notes.append(f"{where}: {prefix}{one_line(error)}; "
                         + ("left out" if prefix else "shown as n/a"))
            invalid.add((prefix or name).rstrip("."))
            value = None
        out[name] = one_line(value) if isinstance(value, str) else value
    return out


def _figures(record: dict, where: str, notes: list, invalid: set) -> dict:
    """summary.json's or sweep.json's fields, checked (see SUMMARY_FIELDS, NESTED)."""
    out = _checked(record, SUMMARY_FIELDS, where, notes, invalid)
    for name, fields in NESTED.items():
        items = record.get(name)
        if items is not None and not isinstance(items, list):
            notes.append(f"{where}: {name!r} holds {type(items).__name__}; accepted: list")
            invalid.add(name)
            items = None
        if items:  # an item without its first field (a sweep's batch size) is left out
            items = [_checked(item, fields, where, notes, invalid, f"{name}.")
                     for item in items if isinstance(item, dict)]
            items = [item for item in items if item[next(iter(fields))] is not None]
        out[name] = items
    best = record.get("best")
    out["best"] = _checked(best, summary_fields.SPEED, where, notes, invalid, "best.") \
        if isinstance(best, dict) else None
    prices = record.get("price_per_hour_usd_by_pricing")  # {pricing: $/h}: the good ones
    out["price_per_hour_usd_by_pricing"] = {
        k: v for k, v in prices.items() if k in PRICINGS and isinstance(v, (int, float))
        and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 1e9} \
        if isinstance(prices, dict) else {}
    versions = record.get("versions")
    out["versions"] = {one_line(k): one_line(v) for k, v in versions.items()
                       if isinstance(v, (str, int, float)) and not isinstance(v, bool)} \
        if isinstance(versions, dict) else {}
    return out


def _breakdown(record: dict, where: str, notes: list) -> dict | None:
    """summary.json's profile.breakdown, checked (callbacks/profiling/difference.py's
    `checked`); a wrong one is a caveat and no breakdown."""
    profile = record.get("profile") if isinstance(record, dict) else None
    found = profile.get("breakdown") if isinstance(profile, dict) else None
    if found is None:
        return None
    try:
        return difference.checked(found)
    except untrusted.RecordError as error:
        notes.append(f"{where}: its step breakdown: {one_line(error)}; left out")
        return None


def _settings(config: dict) -> dict:
    """config.json's scalar settings (lists joined), the per-attempt ones left out."""
    from flags.config import RESUMABLE_FIELDS

    out = {}
    for name, value in config.items():
        if name in RESUMABLE_FIELDS or name in ("data_dir", "manual_dir"):
            continue
        if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
            value = ",".join(map(str, value))
        if value is None or isinstance(value, (str, int, float, bool)):
            out[one_line(name)] = one_line(value) if isinstance(value, str) else value
    return out


def _read(folder: str, name: str):
    """The JSON object of `folder`/`name`, None if absent.

    Raises:
        SkippedRun: it cannot be read, is not JSON, or is not an object.
    """
    path = os.path.join(folder, name)
    if not os.path.lexists(path):
        return None
    try:
        value = untrusted.read_json(path)
    except untrusted.RecordError as error:
        raise SkippedRun(f"{name}: {one_line(error)}") from None
    except OSError as error:
        raise SkippedRun(f"{name}: cannot be read ({one_line(error.strerror or error)})") \
            from None
    if not isinstance(value, dict):
        raise SkippedRun(f"{name} holds a {type(value).__name__}, not an object")
    return value


def _metrics(folder: str, notes: list) -> list[dict]:
    """metrics.jsonl's records (read_metrics), each checked; bad records left out.

    Raises:
        SkippedRun: the file is not a regular file, too large, or cannot be read.
    """
    from callbacks.records.metrics_file import METRICS_FILE, read_metrics

    try:  # through the one file door (untrusted.read_regular): a FIFO is never waited on
        records = read_metrics(folder)
    except untrusted.RecordError:
        raise SkippedRun(f"{METRICS_FILE}: not a regular file of at most "
                         f"{untrusted.MAX_BYTES:,} bytes") from None
    except OSError as error:
        raise SkippedRun(f"{METRICS_FILE}: cannot be read ({one_line(error)})") from None
    except Exception as error:  # noqa: BLE001 - another module's failure is this run's skip
        raise SkippedRun(f"{METRICS_FILE}: {type(error).__name__} "
                         f"({one_line(str(error).split(chr(10))[0])})") from None
    if not isinstance(records, list):
        raise SkippedRun(f"{METRICS_FILE}: read as {type(records).__name__}, not records")
    kept, bad = [], set()
    for record in records:
        checked = _checked(record, METRICS_FIELDS, METRICS_FILE, [], bad) \
            if isinstance(record, dict) else {"epoch": None}
        if checked["epoch"] is not None:
            kept.append(checked)
    if len(kept) < len(records):
        notes.append(f"{METRICS_FILE}: {len(records) - len(kept)} record(s) without a good "
                     "epoch left out")
    if bad:
        notes.append(f"{METRICS_FILE}: figures of the wrong kind or range left out "
                     f"({', '.join(sorted(bad))})")
    return kept


def load_run(folder: str) -> dict:
    """The checked figures of one run folder (a training run, a sweep, or both).

    Raises:
        SkippedRun: (one line) the folder holds no summary.json or sweep.json, or one
            of its files cannot be read, is not JSON, is nested too deep or is not an
            object; a wrong field inside a good file is not a skip (module docstring).
    """
    if not os.path.isdir(folder):
        raise SkippedRun("not a folder")
    summary, sweep = _read(folder, "summary.json"), _read(folder, "sweep.json")
    if summary is None and sweep is None:
        raise SkippedRun("holds no summary.json or sweep.json (not a run folder)")
    config = _read(folder, "config.json") or {}
    notes, invalid = [], set()
    name = "summary.json" if summary is not None else "sweep.json"
    figures = _figures(summary if summary is not None else sweep, name, notes, invalid)
    figures["breakdown"] = _breakdown(summary, name, notes) if summary is not None else None
    if sweep is not None and not figures["sweep"]:
        figures["sweep"] = _figures(sweep, "sweep.json", notes, invalid)["sweep"]
    if figures["epochs"] is None:  # the planned epochs: summary.json's, else config.json's
        figures["epochs"] = _checked(config, {"epochs": SUMMARY_FIELDS["epochs"]},
                                     "config.json", notes, invalid)["epochs"]
    started = [a["started_at"] for a in figures["attempts"] or [] if a["started_at"]]
    try:
        date = datetime.date.fromtimestamp(min(started, default=os.path.getmtime(
            os.path.join(folder, name)))).isoformat()
    except (OSError, OverflowError, ValueError):  # a file dated past the year 9999
        date = "unknown"
    metrics = _metrics(folder, notes)
    if len(notes) > MAX_NOTES:  # a file full of bad items is one caveat, not thousands
        notes[MAX_NOTES:] = [f"and {len(notes) - MAX_NOTES} more such figure(s)"]
    return {"folder": folder, "name": one_line(os.path.basename(os.path.normpath(folder))),
            "summary": figures, "config": _settings(config), "metrics": metrics,
            "sweep": figures["sweep"], "ladder": figures["ladder"], "notes": notes,
            "invalid": invalid,
            "date": date}
