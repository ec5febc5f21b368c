"""The study's write-up of any runs: `python app/report.py RUN [RUN ...] --out DIR`.

Reads each run folder's summary.json, metrics.jsonl and sweep.json and writes a
page a person could publish: report.html (self-contained), report.md, report.json
and the PNG charts. It is titled by what differs between the runs (accelerators,
backends, batch sizes, precisions), says per run what ran (model, dataset, image
size, date, versions), warns when runs did not do the same work, and states the
rankings in words: fastest (with speedups and standard errors), cheapest per
image, cheapest and quickest to each target top-1. A piece a run lacks (no sweep,
a target never reached, no price) is shown as such, never as 0. Each run's status
and epochs (completed of planned) are shown, and a run that stopped early is named
in the caveats.

Run folders are other people's files, read as untrusted
(callbacks/records/untrusted.py): only the fields the report uses are kept, each
checked for its kind and range (SUMMARY_FIELDS, NESTED, METRICS_FIELDS), text made
one printable line. What is wrong decides what happens:
- a file that cannot be used (not UTF-8, not JSON, nested too deep, not an object,
  not a regular file, too large) skips the whole run folder with one line
  (`warning: skipped RUN: why`) and the others are reported; with none left, one
  `error:` line and exit 2;
- a field of the wrong kind or out of range inside a good file does not drop the
  run: that figure is shown as "n/a" (never as 0), is left out of the rankings and
  charts, and a caveat names the field; a bad metrics record is left out likewise.
Everything the report did not write itself is escaped where it lands: HTML, Markdown
(report_page.md_text) and matplotlib's text (app/engine/plots.py's plain_text).
"""

from __future__ import annotations

import datetime
import math
import os
import re
import sys

if __name__ == "__main__":  # `python app/report.py`: the packages live one level up
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from app import report_page  # noqa: E402
from app.run import differences  # noqa: E402
from callbacks.figures import spread  # noqa: E402
from callbacks.figures.bill import PRICINGS, usd_per_million_images  # noqa: E402
from callbacks.profiling import difference  # noqa: E402
from callbacks.records import untrusted  # noqa: E402
from callbacks.records.durable import dumps, strict  # noqa: E402
from flags.config import ConfigError  # noqa: E402

MODEL_NAMES = {"small_resnet": "small ResNet", "resnet18": "ResNet-18",
               "resnet34": "ResNet-34", "resnet50": "ResNet-50"}
DATASET_NAMES = {"imagenet2012": "ImageNet 2012", "digits": "handwritten digits",
                 "synthetic": "synthetic images"}
BACKEND_NAMES = {"tensorflow": "TensorFlow", "jax": "JAX"}
# What may differ between runs, and how each is named in titles and labels.
ASPECTS = {
    "device": lambda s: f"{s.get('num_replicas', '?')} x {s.get('device_kind') or '?'}",
    "backend": lambda s: BACKEND_NAMES.get(s.get("backend"), s.get("backend") or "?"),
    "batch": lambda s: (f"batches {s['sweep'][0]['global_batch_size']}-"
                        f"{s['sweep'][-1]['global_batch_size']}" if s.get("sweep")
                        else f"batch {s.get('global_batch_size')}"),
    "precision": lambda s: s.get("precision") or "?",
}
# What must be equal for runs to be ranked against each other.
SAME_WORK = {"model": "model", "dataset": "dataset", "image_size": "image size"}


# Every run folder is someone else's file until checked: each is read through
# callbacks/records/untrusted.py, and only the fields below are kept, each checked for
# its kind and range. (kind, low, high) per field, as untrusted.field takes them.
_TEXT = ("text", None, None)
_SPEED = {"images_per_sec": ("number", 0, 1e12), "step_time_ms": ("number", 0, 1e9),
          "step_time_stderr_ms": ("number", 0, 1e9), "mfu": ("number", 0, 1e3),
          "global_batch_size": ("integer", 1, 1 << 40)}
SUMMARY_FIELDS = {
    **{name: _TEXT for name in ("model", "dataset", "backend", "precision", "accelerator",
                                "device_kind", "machine", "pricing", "input_pipeline",
                                "preprocessing", "status", "mode")},
    **_SPEED,
    "image_size": ("integer", 1, 1 << 20), "num_replicas": ("integer", 1, 1 << 24),
    "num_processes": ("integer", 1, 1 << 24), "validation_examples": ("integer", 1, 1 << 40),
    "epochs_completed": ("integer", 0, 1 << 40), "epochs": ("integer", 0, 1 << 40),
    "price_per_hour_usd": ("number", 0, 1e9), "best_val_top1": ("number", 0, 1),
    "peak_tflops_per_device": ("number", 0, 1e7),
    "cost_usd": ("number", 0, 1e12),
}
# Lists and objects: each item checked with its own fields; a bad item is left out.
# A benchmark point's spread (--repeats): its lowest and highest window (the min-max,
# callbacks/figures/spread.py), drawn as error bars.
_SPREAD = {"images_per_sec_min": _SPEED["images_per_sec"],
           "images_per_sec_max": _SPEED["images_per_sec"], "repeats": ("integer", 1, 1000)}
NESTED = {"sweep": {"global_batch_size": ("integer", 1, 1 << 40), **_SPEED, **_SPREAD},
          "targets": {"target_top1": ("number", 0, 1)},
          # --benchmark=ladder's rungs (app/modes/ladder.py): the rung's name first
          "ladder": {"rung": _TEXT, "status": _TEXT, "images_per_sec": _SPEED["images_per_sec"],
                     "gain_over_previous": ("number", 0, 1e6),
                     "gain_over_first": ("number", 0, 1e6), **_SPREAD},
          "attempts": {"started_at": ("number", 0, 4e9)}}  # 4e9 s: the year 2096
METRICS_FIELDS = {"epoch": ("integer", 0, 1 << 40), "val_top1": ("number", 0, 1),
                  "billed_hours": ("number", 0, 1e9), "cost_usd": ("number", 0, 1e12)}
MAX_TEXT = 120  # characters of a text field kept (a label is not an essay)
MAX_NOTES = 5  # notes of bad figures kept per run
DEFAULT_FOLDER = re.compile(r".+-[0-9a-f]{8}(\.old-\d{8}-\d{6})?")  # flags/config.py's logdir


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
    out["best"] = _checked(best, _SPEED, where, notes, invalid, "best.") \
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
    import stat

    from callbacks.records.metrics_file import METRICS_FILE, read_metrics

    path = os.path.join(folder, METRICS_FILE)
    if os.path.lexists(path):
        try:  # read_metrics opens it as it is: a FIFO would block, /dev/zero never ends
            info = os.stat(path)
        except OSError as error:
            raise SkippedRun(f"{METRICS_FILE}: cannot be read ({one_line(error)})") from None
        if not stat.S_ISREG(info.st_mode) or info.st_size > untrusted.MAX_BYTES:
            raise SkippedRun(f"{METRICS_FILE}: not a regular file of at most "
                             f"{untrusted.MAX_BYTES:,} bytes")
    try:
        records = read_metrics(folder)
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


# ------------------------------------------------------------ what the runs are
def differing(runs: list[dict]) -> list[str]:
    """The ASPECTS whose values differ between the runs."""
    return [name for name, of in ASPECTS.items()
            if len({of(run["summary"]) for run in runs}) > 1]


# Settings named in labels, most telling first; the config keys each ASPECT shows.
SETTINGS_FIRST = ("accelerator", "num_devices", "backend", "model", "dataset", "precision",
                  "global_batch_size", "image_size", "epochs", "optimizer",
                  "base_learning_rate", "input_pipeline", "preprocessing")
ASPECT_SETTINGS = {"device": ("accelerator", "num_devices"), "backend": ("backend",),
                   "batch": ("global_batch_size", "sweep_batch_sizes"),
                   "precision": ("precision",)}


def settings_of(run: dict) -> dict:
    """What the run was asked to do: config.json's settings over summary.json's."""
    summary = {k: run["summary"].get(k) for k in SETTINGS_FIRST if k in run["summary"]}
    return {**{k: v for k, v in summary.items() if v is not None}, **run["config"]}


def differing_settings(runs: list[dict], leave_out=()) -> list[str]:
    """The settings whose values differ between the runs, most telling first."""
    settings = [settings_of(run) for run in runs]
    names = {name for s in settings for name in s} - set(leave_out)
    differ = [n for n in names if len({repr(s.get(n)) for s in settings}) > 1]
    return sorted(differ, key=lambda n: (SETTINGS_FIRST.index(n) if n in SETTINGS_FIRST
                                         else len(SETTINGS_FIRST), n))


def labels_of(runs: list[dict]) -> list[str]:
    """Short, distinct names: what differs ("8 x TPU v2", "JAX, batch 256"); where
    that is not enough, the folder's name, or, where the folders have the app's
    hashed default names (small_resnet-digits-jax-1a2b3c4d), the settings that differ
    ("precision mixed_bfloat16, batch 512"; SETTING_NAMES)."""
    aspects = differing(runs)
    labels = [", ".join(ASPECTS[a](run["summary"]) for a in aspects) for run in runs]
    names = [run["name"] for run in runs]
    if aspects and len(set(labels)) == len(labels):
        return labels
    if all(DEFAULT_FOLDER.fullmatch(n) for n in names) or len(set(names)) < len(names):
        keys = differing_settings(runs, [k for a in aspects for k in ASPECT_SETTINGS[a]])
        settings = [settings_of(run) for run in runs]
        for count in range(1, len(keys) + 1):  # the fewest settings that tell them apart
            extra = [", ".join(f"{setting_name(k)} {_setting(s.get(k))}" for k in keys[:count])
                     for s in settings]
            if len(set(zip(labels, extra))) == len(runs):
                break
        else:
            extra = names
        labels = [", ".join(filter(None, pair)) for pair in zip(labels, extra)]
    else:
        labels = [f"{label} [{n}]" if label else n for label, n in zip(labels, names)]
    # The same settings twice (a folder given twice): numbered, so that each label
    # names one run (the findings look rows up by label).
    repeated = {label for label in labels if labels.count(label) > 1}
    seen = {}
    for index, label in enumerate(labels):
        if label in repeated:
            seen[label] = seen.get(label, 0) + 1
            labels[index] = f"{label} ({seen[label]})"
    return labels


# How a setting is named in a label where its flag's name says it less plainly; any
# other is its flag's name with spaces ("label_smoothing" -> "label smoothing").
SETTING_NAMES = {"global_batch_size": "batch", "base_learning_rate": "learning rate",
                 "num_devices": "devices", "sweep_batch_sizes": "batches"}


def setting_name(key: str) -> str:
    return SETTING_NAMES.get(key, key.replace("_", " "))


def _setting(value) -> str:
    return "?" if value is None else one_line(value)


def _work(summary: dict) -> str:
    model = MODEL_NAMES.get(summary.get("model"), summary.get("model") or "?")
    dataset = summary.get("dataset") or "?"
    dataset = DATASET_NAMES.get(dataset, dataset)
    size = f", {summary['image_size']} px" if summary.get("image_size") else ""
    return f"{model} on {dataset}{size}"


def title_of(runs: list[dict]) -> str:
    """E.g. "8 x TPU v2 vs 4 x GPU V100: ResNet-50 on ImageNet 2012, 224 px"."""
    parts = []
    for aspect in differing(runs) or ["device", "backend"]:
        values = list(dict.fromkeys(ASPECTS[aspect](run["summary"]) for run in runs))
        parts.append(" vs ".join(values))
    works = list(dict.fromkeys(_work(run["summary"]) for run in runs))
    return f"{', '.join(parts)}: {works[0] if len(works) == 1 else 'different work'}"


def comparability_warning(runs: list[dict]) -> str | None:
    """Why the runs should not be ranked against each other, or None."""
    differences = []
    for key, name in SAME_WORK.items():
        values = list(dict.fromkeys(str(run["summary"].get(key)) for run in runs))
        if len(values) > 1:
            differences.append(f"{name} ({' vs '.join(values)})")
    if not differences:
        return None
    return ("These runs did not do the same work: they differ in " + ", ".join(differences)
            + ". Their speeds, prices and accuracies are shown side by side, but the "
              "rankings compare unlike things.")


# ------------------------------------------------------------------- the figures
def target_rows(run: dict, targets) -> list[dict]:
    """Hours and dollars to each target, from the run's own per-epoch log
    (reached=None where the run measured no accuracy, e.g. a sweep)."""
    from callbacks.figures.targets import targets_reached

    history = [{"epoch": r["epoch"], "top1": r.get("val_top1"), "hours": r.get("billed_hours"),
                "cost_usd": r.get("cost_usd")} for r in run["metrics"]]
    if any(h["top1"] is not None for h in history):
        return targets_reached(history, targets)
    return [{"top1": t, "reached": None, "epoch": None, "hours": None, "cost_usd": None,
             "interpolated": None} for t in targets]


def _speed(summary: dict) -> dict:
    """Images/sec, and its standard error from the step times' (rate ~ 1 / step time)."""
    source = summary if summary.get("images_per_sec") else (summary.get("best") or {})
    rate = source.get("images_per_sec") or None  # 0: not measured
    stderr = None
    if rate and source.get("step_time_ms") and source.get("step_time_stderr_ms") is not None:
        stderr = rate * source["step_time_stderr_ms"] / source["step_time_ms"]
    return {"images_per_sec": rate, "images_per_sec_stderr": stderr, "mfu": source.get("mfu"),
            "global_batch_size": source.get("global_batch_size")
            or summary.get("global_batch_size")}


def _best_epoch(run: dict):
    measured = [(r["epoch"], r["val_top1"]) for r in run["metrics"]
                if r.get("val_top1") is not None]
    return max(measured, key=lambda pair: pair[1])[0] if measured else None


def targets_of(runs: list[dict]) -> list[float]:
    """The target top-1 values the runs were given (--target_top1), all of them."""
    return sorted({t["target_top1"] for run in runs
                   for t in run["summary"].get("targets") or [] if "target_top1" in t})


def build(runs: list[dict], targets=None) -> dict:
    """The report's content: title, warning, rows per run, rankings and findings.

    Args:
        targets: top-1 values to rank the runs to; None = the runs' own (targets_of).
    """
    targets = targets_of(runs) if targets is None else list(targets)
    rows = []
    for run, label in zip(runs, labels_of(runs)):
        s = run["summary"]
        speed = _speed(s)
        rate, price = speed["images_per_sec"], s.get("price_per_hour_usd")
        rows.append({
            "label": label, "folder": run["folder"], "date": run["date"],
            "model": s.get("model"), "dataset": s.get("dataset"), "image_size": s.get("image_size"),
            "versions": s.get("versions") or {}, "backend": s.get("backend"),
            "precision": s.get("precision"), "accelerator": s.get("accelerator"),
            "device_kind": s.get("device_kind"), "num_processes": s.get("num_processes"),
            "input_pipeline": s.get("input_pipeline"), "preprocessing": s.get("preprocessing"),
            "validation_examples": s.get("validation_examples"),
            "num_replicas": s.get("num_replicas"), "machine": s.get("machine"),
            "pricing": s.get("pricing"), "price_per_hour_usd": price, **speed,
            "price_per_hour_usd_by_pricing": s.get("price_per_hour_usd_by_pricing") or {},
            "images_per_sec_per_device": rate / s["num_replicas"] if rate and s.get(
                "num_replicas") else None,
            "usd_per_million_images": usd_per_million_images(rate, price)
            if price and rate else None,
            "best_val_top1": s.get("best_val_top1"), "best_epoch": _best_epoch(run),
            "epochs": s.get("epochs_completed"), "epochs_planned": s.get("epochs"),
            "status": s.get("status"), "complete": complete(s), "cost_usd": s.get("cost_usd"),
            "has_sweep": bool(run["sweep"]), "targets": target_rows(run, targets),
            "ladder": run.get("ladder") or [], "breakdown": s.get("breakdown"),
            "step_time_ms": s.get("step_time_ms"),
            "peak_tflops_per_device": s.get("peak_tflops_per_device"),
            "invalid": sorted(run["invalid"]), "notes": run["notes"],
        })
    slowest = min((r["images_per_sec"] for r in rows if r["images_per_sec"]), default=None)
    for row in rows:
        row["speedup"] = row["images_per_sec"] / slowest if row["images_per_sec"] else None
    rows = [strict(row) for row in rows]  # a ratio of extreme figures can overflow: None
    rankings = {"images_per_sec": _rank(rows, lambda r: r["images_per_sec"], reverse=True),
                "usd_per_million_images": _rank(rows, lambda r: r["usd_per_million_images"])}
    for index, target in enumerate(targets):
        rankings[f"usd_to_{target}"] = _rank(rows, lambda r: r["targets"][index]["cost_usd"])
        rankings[f"hours_to_{target}"] = _rank(rows, lambda r: r["targets"][index]["hours"])
    content = {"title": title_of(runs), "warning": comparability_warning(runs), "rows": rows,
               "targets": list(targets), "rankings": rankings}
    content["differences"] = differing_pairs(runs, rows)
    content["findings"] = report_page.findings(content)
    content["caveats"] = report_page.caveats(content)
    return content


def differing_pairs(runs: list[dict], rows: list[dict]) -> list[dict]:
    """Each pair of runs of the same work and settings whose images/sec differ by more
    than differences.APART, with what their records show differed (app/run/differences.py:
    one line each; the step breakdown's comparison, where both were profiled, is the
    second of the pair's `lines`)."""
    import itertools

    pairs = []
    for (a, row_a), (b, row_b) in itertools.combinations(zip(runs, rows), 2):
        rates = (row_a["images_per_sec"], row_b["images_per_sec"])
        if (not all(rates) or comparability_warning([a, b]) or differing_settings([a, b])
                or differences.apart(*rates) <= differences.APART):
            continue
        pairs.append(differences.compare((a["folder"], b["folder"]),
                                         (row_a["label"], row_b["label"]), rates))
    return pairs


def complete(summary: dict):
    """Whether the run did all it planned: True, False, or None where it does not say
    (a summary.json from before `status`, or a sweep)."""
    status, done, planned = (summary.get(k) for k in ("status", "epochs_completed", "epochs"))
    if status is not None:
        return status == "completed" and (done is None or planned is None or done >= planned)
    if done is not None and planned is not None:
        return done >= planned
    return None


def _rank(rows, key, reverse=False):
    """Labels ordered best first; runs without the figure are left out."""
    known = [r for r in rows if key(r) is not None]
    return [r["label"] for r in sorted(known, key=key, reverse=reverse)]


# --------------------------------------------------------------------- the charts
def charts(runs: list[dict], content: dict, out: str) -> dict:
    """Writes the PNG charts; returns {name: (caption, path)}."""
    from app.engine import plots

    rows, targets = content["rows"], content["targets"]
    made = {}

    def add(name, caption, draw, *args, **kwargs):
        made[name] = (caption, draw(*args, os.path.join(out, name + ".png"), **kwargs))

    if any(r["images_per_sec"] for r in rows):
        add("throughput", "Training throughput, steady state (error bars, where the run "
            "recorded its step times: one standard error)", plots.bar_chart,
            {"images/sec": {r["label"]: (r["images_per_sec"], r["images_per_sec_stderr"])
                            for r in rows}},
            title="Training throughput (steady state)", ylabel="images/sec",
            note="error bars: +-1 standard error of the mean step time"
            if any(r["images_per_sec_stderr"] for r in rows) else "")
    if any(r["usd_per_million_images"] for r in rows):
        add("usd_per_million_images", "Dollars per million training images at full speed",
            plots.bar_chart, {"$ per million images": {
                r["label"]: (r["usd_per_million_images"], None) for r in rows}},
            title="Price of a million training images", ylabel="dollars", money_y=True)
    labels = [r["label"] for r in rows]
    sweeps = {label: [(p["global_batch_size"], p.get("images_per_sec"),
                       p.get("images_per_sec_min"), p.get("images_per_sec_max"))
                      for p in run["sweep"]] for run, label in zip(runs, labels) if run["sweep"]}
    spread_note = (f"error bars: {spread.SPREAD} of each point's timed windows (--repeats)"
                   if any(p.get("images_per_sec_min") is not None for run in runs
                          for p in (run["sweep"] or []) + (run["ladder"] or [])) else "")
    if sweeps:  # measured curves only: a training run is one batch size, not a curve
        add("throughput_vs_batch", "Throughput against global batch size (sweeps)",
            plots.line_chart, sweeps, log2_x=True, zero_y=True,
            title="Training throughput vs global batch size", xlabel="global batch size",
            ylabel="images/sec", note=spread_note)
    ladders = {rung["rung"]: {} for run in runs for rung in run["ladder"] or []}
    for run, label in zip(runs, labels):
        for rung in run["ladder"] or []:
            ladders[rung["rung"]][label] = (rung["images_per_sec"], (
                rung["images_per_sec_min"], rung["images_per_sec_max"]))
    ladders = {rung: bars for rung, bars in ladders.items()  # skipped everywhere: no bar
               if any(value for value, _ in bars.values())}
    if ladders:
        add("ladder", "The effort ladders: each rung's images/sec (--benchmark=ladder)",
            plots.bar_chart, ladders, title="Effort ladder: images/sec at each rung",
            ylabel="images/sec", note=spread_note)
    lines = {f"target {t:.1%}": t for t in targets}
    for name, key, xlabel, money in (("top1_vs_epoch", "epoch", "epoch", False),
                                     ("top1_vs_hours", "billed_hours", "hours (billed)", False),
                                     ("top1_vs_dollars", "cost_usd", "dollars (billed)", True)):
        series = {row["label"]: [(r.get(key), r.get("val_top1")) for r in run["metrics"]]
                  for run, row in zip(runs, rows) if run["metrics"]}
        if any(y is not None for points in series.values() for _, y in points):
            add(name, f"Validation top-1 against {xlabel}", plots.line_chart, series,
                title=f"Top-1 vs {xlabel}", xlabel=xlabel, ylabel="top-1 (validation)",
                percent_y=True, hlines=lines, money_x=money)
    reached = {f"to {t:.1%}": {r["label"]: (r["targets"][i]["cost_usd"], None) for r in rows}
               for i, t in enumerate(targets)}
    if any(v for bars in reached.values() for v, _ in bars.values()):
        add("usd_to_target", "Dollars billed until each target top-1 was first reached",
            plots.bar_chart, reached, title="Cost to each target top-1", ylabel="dollars",
            money_y=True)
    return made


def write(runs: list[dict], targets, out: str) -> dict:
    """Writes report.html, report.md, report.json and the charts to `out`; returns the
    content. `targets`: as `build`'s (None = the runs' own)."""
    os.makedirs(out, exist_ok=True)
    content = build(runs, targets)
    made = charts(runs, content, out)
    report_page.write(content, made, out)
    with open(os.path.join(out, "report.json"), "w") as f:
        f.write(dumps(content, indent=2))
    return content


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python app/report.py",
        description="A side-by-side report of runs (HTML, Markdown, JSON and PNG charts).")
    parser.add_argument("runs", nargs="+", help="run folders (--logdir of each run)")
    parser.add_argument("--out", required=True, help="folder for the report")
    parser.add_argument("--targets", default="",
                        help="comma list of top-1 targets; default: those of the runs")
    parser.add_argument("--target", type=float, default=None,
                        help="the decision: hours and dollars to this top-1 on every machine "
                             "measured (full runs, --benchmark=probe folders) and every catalog "
                             "row that sells its device, under each pricing option "
                             "(decision.md, decision.json, decision.png)")
    parser.add_argument("--catalog", default="",
                        help="the decision's price catalog (default app/engine/prices.csv)")
    parser.add_argument("--interruptions_per_hour", type=float, default=0.0,
                        help="the decision's spot interruptions expected an hour (default 0)")
    args = parser.parse_args(argv)
    runs = []
    for folder in args.runs:  # each folder is someone's: a bad one is skipped, not fatal
        try:
            runs.append(load_run(folder))
        except SkippedRun as why:
            sys.stderr.write(f"warning: skipped {one_line(folder)}: {why}\n")
    if not runs:
        sys.stderr.write(f"error: no run to report: the {len(args.runs)} folder(s) given were "
                         "skipped (above); accepted: run folders holding a readable "
                         "summary.json or sweep.json\n")
        return 2
    try:
        if args.targets:
            targets = [float(t) for t in args.targets.split(",")]
            if not all(0 < t <= 1 for t in targets):  # NaN fails this too
                raise ValueError(f"--targets={args.targets!r}: accepted: numbers in (0, 1]")
        else:
            targets = None  # the runs' own
        if os.path.exists(args.out) and not os.path.isdir(args.out):
            raise ValueError(f"--out={args.out} is a file; accepted: a folder")
        if args.target is not None and not 0 < args.target <= 1:
            raise ValueError(f"--target={args.target}: accepted: a top-1 in (0, 1]")
        if not 0 <= args.interruptions_per_hour <= 1e3:  # NaN fails this too
            raise ValueError(f"--interruptions_per_hour={args.interruptions_per_hour}: "
                             "accepted: a number from 0 to 1000")
    except (ValueError, OSError) as error:
        sys.stderr.write(f"error: {error}\n")
        return 2
    try:
        write(runs, targets, args.out)
        if args.target is not None:  # app/engine/decision.py: the cheapest and the fastest
            from app.engine import decision_page

            text, warnings = decision_page.report(args.runs, args.target, args.out,
                                                  args.catalog, args.interruptions_per_hour)
            sys.stderr.write("".join(f"{line}\n" for line in warnings))
            print(text)
    except OSError as error:
        sys.stderr.write(f"error: cannot write the report to {args.out}: {error}\n")
        return 2
    except ConfigError as error:  # the --catalog cannot be used: one line
        sys.stderr.write(f"error: {error}\n")
        return 2
    print(f"report: {os.path.join(args.out, 'report.html')} (and report.md, PNG charts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
