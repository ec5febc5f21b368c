"""The campaign that the sweep (app/modes/sweep.py) and the ladder (ladder.py) share:
points measured one after another in one process, each kept as it finishes.

A mode describes its campaign (`Campaign`: its points in order, how one is measured,
what its summary holds, its table) and `run` does the rest, the same for both:
- resume: the rows an earlier attempt finished (`<mode>.json`, read back as untrusted
  input: `read_finished`) are kept and not measured again; the same command after a
  finished campaign says it is complete and prints its table;
- each point's row is written as it finishes (`<mode>.json`, summary.json, the charts),
  so a campaign that is stopped keeps its finished points;
- SIGTERM or Ctrl-C at a step boundary: the point being measured is dropped, the rest
  kept, and Preempted goes up with where it stopped and what is kept (exit 75, the
  command that resumes);
- every point's data must be the data the others were measured on (app/modes/bench.py).

A row read back is checked field by field (`checked_row`: each field's kind and range,
text printable): a row that fails is not trusted as a measurement, said in one
warning line and measured again; a file that cannot be read is the same for all its
rows. Nothing an edited file holds reaches a format string unchecked.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from typing import Callable

from app.modes import bench as bench_module
from app.modes.point_folders import point_name
from app.run import context as run_context
from callbacks.energy import gpu_energy_readers
from callbacks.records import untrusted
from callbacks.stops import PROCESS_STOP, Preempted
from flags.config import SWEEPABLE

# A row is final once it was measured, did not fit, or cannot be run.
FINAL = ("ok", "out of memory", "skipped")
MAX_TEXT = 400  # characters of a text field read back (a status names a reason)
MAX_WARNINGS = 5  # lines about bad rows; the rest are counted in one more


@dataclasses.dataclass
class Campaign:
    """What one mode's campaign is; `run` measures it.

    Attributes:
        mode: "sweep" or "ladder": its file is <mode>.json, its rows under that key.
        unit: what one point is called in lines ("point", "rung").
        names: the points' names, in the order they are measured.
        head: the summary's fields that are not the rows (mode, model, ...).
        measure: (bench, name, rows so far by name) -> the point's row.
        summarize: (head, rows by name, status) -> the summary dict (no writing).
        write: (summary) -> None: the mode's files, written by process 0.
        closing: (summary) -> None: its table and closing lines, printed by process 0.
        first_line: printed when the measuring starts.
        varying: the settings the campaign varies (HParams lists them first).
    """

    mode: str
    unit: str
    names: list
    head: dict
    measure: Callable
    summarize: Callable
    write: Callable
    closing: Callable
    first_line: str
    varying: tuple = ()

    @property
    def file(self) -> str:
        return f"{self.mode}.json"


def run(context, campaign: Campaign) -> dict:
    """Measures the campaign's points not measured before; returns its summary.

    Raises:
        callbacks.stops.Preempted: SIGTERM or Ctrl-C; the finished points are kept.
        RunDirError: a point's data is not what the others were measured on.
    """
    run_dir, chief = context.run_dir, context.topology.is_chief
    path = os.path.join(run_dir.path, campaign.file)
    done, started_at = read_finished(run_dir.path, campaign) if run_dir.resuming else ({}, None)
    head = {**campaign.head, "started_at": started_at or campaign.head["started_at"]}
    names = campaign.names
    if all(name in done for name in names):
        print(f"{campaign.mode} is complete: {run_dir.path} holds its {campaign.file} (kept "
              "as it is); pass --fresh to run it again", flush=True)
        summary = campaign.summarize(head, done, "completed")
        if chief:
            campaign.closing(summary)
        return summary
    if done:
        print(f"[{campaign.mode}] resuming: {len(done)} of {len(names)} {campaign.unit}s "
              f"measured before ({'; '.join(n for n in names if n in done)})", flush=True)
    bench = open_bench(context, campaign, earlier=done.values())

    def write(rows, status):
        summary = campaign.summarize(head, rows, status)
        if chief:
            campaign.write(summary)
        return summary

    rows = dict(done)
    for name in names:
        if name in rows:
            continue
        try:
            PROCESS_STOP.raise_if_requested()
            rows[name] = campaign.measure(bench, name, rows)
        except Preempted as error:  # app/main.py adds the one command that resumes
            write(rows, "preempted")
            raise Preempted(None, None, error.signal_name, where=(
                f"at {campaign.unit} {names.index(name) + 1} of {len(names)} ({name})"),
                kept=(f"{len(rows)} of {len(names)} {campaign.unit}s done, kept in "
                      f"{path}")) from None
        write(rows, "running")  # each finished point is kept
    summary = write(rows, "completed")
    if chief:
        campaign.closing(summary)
    return summary


def open_bench(context, campaign: Campaign, earlier=()) -> bench_module.Bench:
    """The campaign's Bench (this process's GPU energy readers, if any), once its first
    line and the run's billing notes are printed."""
    topology = context.topology
    bench = bench_module.Bench(
        context, gpu_energy_readers(context.config.accelerator, topology.devices_per_process),
        prefix=f"[{campaign.mode}]", varying=campaign.varying, earlier=list(earlier))
    print(campaign.first_line, flush=True)
    if context.billing.notes:
        print(run_context.billing_notes(context), flush=True)
    return bench


# ------------------------------------------------------------ rows read back
def read_finished(logdir: str, campaign: Campaign) -> tuple[dict, float | None]:
    """({point name: checked row} of the points an earlier attempt finished, the
    campaign's first start), from <logdir>/<mode>.json; rows that fail their checks,
    or name no point of this campaign, are left to be measured again, with a warning."""
    path = os.path.join(logdir, campaign.file)
    try:
        record = untrusted.read_json(path)
    except FileNotFoundError:
        return {}, None
    except (OSError, untrusted.RecordError) as error:
        _warn([f"{path} cannot be read ({error}); every {campaign.unit} is measured again"])
        return {}, None
    rows = record.get(campaign.mode) if isinstance(record, dict) else None
    if not isinstance(rows, list):
        _warn([f"{path} holds no list of {campaign.unit}s; every {campaign.unit} is "
               "measured again"])
        return {}, None
    done, warnings = {}, []
    for index, raw in enumerate(rows):
        try:
            row = checked_row(raw)
        except untrusted.RecordError as error:
            warnings.append(f"{path}: {campaign.unit} {index + 1}'s row {error}; it is "
                            "measured again")
            continue
        if row["point"] in campaign.names and row["status"].startswith(FINAL):
            done[row["point"]] = row
    _warn(warnings)
    try:
        started_at = untrusted.field(record, "started_at", "number", low=0, high=4e9,
                                     required=False)
    except untrusted.RecordError:
        started_at = None
    return done, started_at


def _warn(lines: list) -> None:
    if len(lines) > MAX_WARNINGS:
        lines = lines[:MAX_WARNINGS] + [f"and {len(lines) - MAX_WARNINGS} more such rows"]
    for line in lines:
        sys.stderr.write(f"warning: {line}\n")


# (kind, low, high) of each field a row may hold, as untrusted.field takes them; a row
# keeps these fields only.
_RATE = ("number", 0, 1e12)
ROW_FIELDS = {
    **{name: ("text", None, None) for name in (
        "precision", "input_pipeline", "xla_autotune", "model", "batchnorm_statistics",
        "rung", "changes", "energy_method", "built_on")},
    **{name: _RATE for name in ("images_per_sec", "images_per_sec_min", "images_per_sec_max",
                                "images_per_sec_per_device", "usd_per_million_images")},
    "mfu": ("number", 0, 1e3), "step_time_ms": ("number", 0, 1e9),
    "step_time_stderr_ms": ("number", 0, 1e9), "step_time_jitter": ("number", 0, 1e6),
    "peak_memory_gib": ("number", 0, 1e9), "power_watts": ("number", 0, 1e9),
    "joules_per_image": ("number", 0, 1e9), "train_flops_per_image": ("number", 0, 1e21),
    "model_tflops_per_sec": ("number", 0, 1e9),
    "compile_and_warmup_seconds": ("number", 0, 1e8),
    "gain_over_previous": ("number", 0, 1e6), "gain_over_first": ("number", 0, 1e6),
    "global_batch_size": ("integer", 1, 1 << 40), "per_device_batch_size": ("integer", 1, 1 << 40),
    "image_size": ("integer", 1, 1 << 20), "steps_per_execution": ("integer", 1, 1 << 20),
    "timed_steps": ("integer", 1, 1 << 40), "warmup_steps": ("integer", 0, 1 << 40),
    "repeats": ("integer", 1, 1000), "kept": ("bool", None, None),
}
WINDOW_FIELDS = {"images_per_sec": _RATE, "step_time_ms": ("number", 0, 1e9),
                 "compile_and_warmup_seconds": ("number", 0, 1e8),
                 "steps_per_call": ("integer", 1, 1 << 20)}
TRIED_FIELDS = {"global_batch_size": ("integer", 1, 1 << 40), "status": ("text", None, None),
                "images_per_sec": _RATE}


def checked_row(raw) -> dict:
    """A row read back, each field checked (ROW_FIELDS; its settings plain values; its
    breakdown one the breakdown's line can say; its windows' and tried batches' fields);
    fields not listed are left out. An "ok" row must hold its images/sec.

    Raises:
        untrusted.RecordError: one line naming the field, what it held and what is
            accepted.
    """
    row = {"point": _text(_point_name(raw), "point"),
           "status": _text(untrusted.field(raw, "status", "text"), "status")}
    for name, (kind, low, high) in ROW_FIELDS.items():
        value = untrusted.field(raw, name, kind, low=low, high=high,
                                required=name == "images_per_sec" and row["status"] == "ok")
        if name in raw:  # a null stays (a figure not measured), as it was written
            row[name] = _text(value, name) if kind == "text" and value is not None else value
    settings = untrusted.field(raw, "settings", "object", required=False, default={})
    for key, value in settings.items():  # a ladder's next rung starts from these
        if key not in SWEEPABLE or not isinstance(value, (str, int, float, bool)):
            raise untrusted.RecordError(
                f"'settings' holds {_text(key[:40], 'settings')!r}: {type(value).__name__}; "
                f"accepted: {', '.join(SWEEPABLE)}, each text, a number or a bool")
        if isinstance(value, str):
            _text(value, f"settings.{key}")
    row["settings"] = dict(settings)
    for name, fields in (("windows", WINDOW_FIELDS), ("tried", TRIED_FIELDS)):
        items = untrusted.field(raw, name, "list", required=False)
        if items is not None:
            row[name] = [_checked_item(item, fields, name) for item in items]
    for name in ("breakdown", "largest_change", "data_fingerprint", "machine_state"):
        value = untrusted.field(raw, name, "object", required=False)
        if name in raw:
            row[name] = value
    if row.get("machine_state") is not None:  # kept only where every field of it is good
        from callbacks.records.state_records import machine_state

        if machine_state(row["machine_state"])[1] or not _printable(row["machine_state"]):
            row["machine_state"] = None
    if row.get("breakdown") is not None:
        _check_breakdown(row["breakdown"])
    change = row.get("largest_change")
    if change is not None:  # a null kind: no kind moved with the speed, or two backends
        kind = untrusted.field(change, "kind", "text", required=False)
        words = untrusted.field(change, "words", "text", required=False)
        row["largest_change"] = {
            "kind": kind and _text(kind, "kind"),
            "words": words and _text(words, "largest_change.words"),
            **{k: untrusted.field(change, k, "number", low=0, high=1e12,
                                  required=kind is not None) for k in ("before_us", "after_us")}}
    return row


def _check_breakdown(found: dict) -> None:
    """Refuses a breakdown holding what its line (callbacks/profiling/breakdown.py) or the
    ladder's per-image change could not use: the step's ms, each kind's ms and share
    (and rate, where given), the kinds' names one printable line each."""
    untrusted.field(found, "step_ms", "number", low=0, high=1e9)
    untrusted.field(found, "devices", "integer", low=1, high=1 << 24, required=False)
    for kind, part in untrusted.field(found, "parts", "object").items():
        _text(kind, "breakdown.parts")
        untrusted.field(part, "ms", "number", low=0, high=1e9)
        untrusted.field(part, "share", "number", low=0, high=1e3)
        for rate in ("tflops_per_sec", "gb_per_sec"):
            untrusted.field(part, rate, "number", low=0, high=1e12, required=False)


def _checked_item(item, fields: dict, where: str) -> dict:
    out = {name: untrusted.field(item, name, kind, low=low, high=high, required=False)
           for name, (kind, low, high) in fields.items()}
    if where == "windows":
        series = untrusted.field(item, "step_ms", "list", required=False, default=[])
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                   and math.isfinite(v) and 0 <= v <= 1e9 for v in series):
            raise untrusted.RecordError("'windows.step_ms' holds a value that is not a "
                                        "step's milliseconds")
        out["step_ms"] = list(series)
    return out


def _printable(value, depth: int = 0) -> bool:
    """Whether every text in `value` (a JSON value read back) is one printable line of
    at most MAX_TEXT characters, at most 8 levels deep."""
    if depth > 8:
        return False
    if isinstance(value, str):
        return len(value) <= MAX_TEXT and value.isprintable()
    if isinstance(value, dict):
        return all(_printable(k, depth + 1) and _printable(v, depth + 1)
                   for k, v in value.items())
    if isinstance(value, list):
        return all(_printable(v, depth + 1) for v in value)
    return True


def _point_name(raw):
    """A row's point name (rows of a batch sweep before --sweep had none)."""
    if isinstance(raw, dict) and not raw.get("point") and "global_batch_size" in raw:
        size = untrusted.field(raw, "global_batch_size", "integer", low=1, high=1 << 40)
        return point_name({"global_batch_size": size})
    return untrusted.field(raw, "point", "text")


def _text(value: str, name: str) -> str:
    """`value`, refused if it holds what a line must not (a terminal's escape, a newline)
    or is longer than MAX_TEXT."""
    if len(value) > MAX_TEXT or not value.isprintable():
        raise untrusted.RecordError(f"{name!r} holds text that is not one printable line "
                                    f"of at most {MAX_TEXT} characters")
    return value
