"""Where a measured choice of kernels is kept between runs, and the key it is kept under.

app/engine/measured.py times XLA's autotuned training step against its heuristic one
and keeps the faster. That choice holds for one kind of machine and one build of the
libraries: the key is the device kind, the NVIDIA driver, CUDA (runtime and driver),
cuDNN, jaxlib and XLA (jaxlib's `xla_extension_version`), and the step's shape: the
model (and, for a model from a file, the file's sha256), the batch per device, the
precision and the image side. A run with the same key, on any machine of the kind
that carries the folder, loads the choice instead of measuring it again.

The store is a folder ($BENCH_KERNEL_CHOICES; else `kernel_choices` inside JAX's
compilation cache folder, so that "empty caches" empties it too; neither: nothing is
kept). Each key has a folder of its own, named by the step and a digest of the key:

    <store>/<model>-b<batch>-<precision>-<side>px-<digest12>/
        choice.json          the key, what was kept, the measurement behind it
        autotune.textproto   XLA's autotune results of the autotuned program (loaded
                             with complete results required where it was kept)

What is read back is not trusted: a folder that is missing is a miss, one whose
choice.json is damaged, written for another key (a foreign file) or whose results
file is empty or not XLA's is refused; each is one line, and the run measures again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time

STORE_ENV = "BENCH_KERNEL_CHOICES"
CHOICE_FILE = "choice.json"
RESULTS_FILE = "autotune.textproto"
KEPT = ("autotuned", "heuristic")
# The key's fields: what makes a choice hold on another machine (see the module's docstring).
KEY_FIELDS = ("device_kind", "driver", "cuda_runtime", "cuda_driver", "cudnn", "jaxlib",
              "xla_extension_version", "model", "model_file_sha256", "per_device_batch",
              "precision", "image_size")


class ChoiceError(ValueError):
    """A kept choice that cannot be used (one line)."""


def store_folder() -> str | None:
    """The store ($BENCH_KERNEL_CHOICES, else JAX's cache folder's kernel_choices);
    None where there is none (the variable set empty, or JAX's cache off)."""
    if STORE_ENV in os.environ:
        return os.environ[STORE_ENV] or None
    from app.engine.cold_start import compilation_cache_dir

    cache = compilation_cache_dir()
    return os.path.join(cache, "kernel_choices") if cache else None


def make_key(config, device_kind: str, per_device_batch: int, image_size: int | None,
             software: dict, driver: dict) -> dict:
    """The key of this run's training step (KEY_FIELDS).

    Args:
        per_device_batch: the batch shape's per-replica share (the run context's).
        software: app/engine/machine.py's software_versions (jaxlib, XLA, CUDA, cuDNN).
        driver: {"driver", "cuda_driver"} (NVML's; None where unknown).
    """
    return {"device_kind": device_kind, "driver": driver.get("driver"),
            "cuda_runtime": software.get("cuda_runtime"),
            "cuda_driver": driver.get("cuda_driver"), "cudnn": software.get("cudnn"),
            "jaxlib": software.get("jaxlib"),
            "xla_extension_version": software.get("xla_extension_version"),
            "model": config.model, "model_file_sha256": _model_file_digest(config.model),
            "per_device_batch": per_device_batch, "precision": config.policy,
            "image_size": image_size}


def _model_file_digest(model: str) -> str | None:
    """sha256 of the file a --model names (FILE.py:FUNCTION, FILE.keras): the same name
    may hold another network tomorrow. None for the app's own models."""
    path = model.rsplit(":", 1)[0] if re.fullmatch(r".+\.py:\w+", model) else (
        model if model.endswith(".keras") else None)
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def entry_name(key: dict) -> str:
    """The key's folder name: the step in words, then 12 hex digits of the whole key."""
    text = json.dumps({k: key.get(k) for k in KEY_FIELDS}, sort_keys=True)
    model = re.sub(r"[^A-Za-z0-9]+", "_", str(key.get("model")))[-40:].strip("_") or "model"
    return (f"{model}-b{key.get('per_device_batch')}-{key.get('precision')}-"
            f"{key.get('image_size')}px-{hashlib.sha256(text.encode()).hexdigest()[:12]}")


def entry_folder(store: str, key: dict) -> str:
    return os.path.join(store, entry_name(key))


def save(store: str, key: dict, measured: dict, results: str | None) -> str:
    """Keeps `measured` (app/engine/measured.py's decision: `kept` and the timings)
    under `key`, atomically; `results` is the autotuned program's XLA autotune results
    file, moved in where the autotuned program was kept. Returns the entry's folder."""
    from callbacks.records.durable import write_json_atomic

    folder = entry_folder(store, key)
    os.makedirs(folder, exist_ok=True)
    kept_results = None
    if measured.get("kept") == "autotuned" and results:
        kept_results = os.path.join(folder, RESULTS_FILE)
        if os.path.abspath(results) != os.path.abspath(kept_results):
            os.replace(results, kept_results)
    write_json_atomic(os.path.join(folder, CHOICE_FILE), {
        "key": {k: key.get(k) for k in KEY_FIELDS}, "kept": measured["kept"],
        "results": RESULTS_FILE if kept_results else None, "measured": measured,
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return folder


def find(store: str | None, key: dict) -> tuple[dict | None, str]:
    """(the kept choice for `key`, or None; one line saying what was found). A kept
    choice is {"kept", "results" (the file's path or None), "measured", "folder"}.

    The line, where none is used: none kept for the key (and, where the store holds one
    for the same step under another key, which of its fields differ: another driver or
    XLA), or why the one there is refused (damaged, foreign, its results file unusable).
    """
    if not store:
        return None, (f"no store of kernel choices (JAX's compilation cache is off and "
                      f"${STORE_ENV} is unset): measuring, keeping nothing")
    folder = entry_folder(store, key)
    path = os.path.join(folder, CHOICE_FILE)
    if not os.path.lexists(path):
        return None, f"none kept for this step in {store}{_nearest(store, key)}: measuring"
    try:
        return _read(folder, key), f"loaded from {folder}"
    except ChoiceError as error:
        return None, f"{path} {error}: measuring again"


def _read(folder: str, key: dict) -> dict:
    """The kept choice in `folder`, checked against `key`.

    Raises:
        ChoiceError: damaged, written for another key, or its results file unusable.
    """
    from callbacks.records import untrusted
    from flags.autotune_results import AutotuneFileError, check

    try:
        record = untrusted.read_json(os.path.join(folder, CHOICE_FILE))
        kept = untrusted.field(record, "kept", "text")
        stored = untrusted.field(record, "key", "object")
        results = untrusted.field(record, "results", "text", required=False)
        measured = untrusted.field(record, "measured", "object", required=False, default={})
    except (OSError, untrusted.RecordError) as error:
        raise ChoiceError(f"is damaged ({_one_line(error)})") from None
    if kept not in KEPT:
        raise ChoiceError(f"is damaged ('kept' holds {kept[:20]!r}; accepted: "
                          f"{', '.join(KEPT)})")
    differs = differing_fields(stored, key)
    if differs:
        raise ChoiceError(f"was measured for another step or machine ({differs})")
    path = None
    if kept == "autotuned":
        if results != RESULTS_FILE:
            raise ChoiceError(f"is damaged (it kept the autotuned program but names no "
                              f"{RESULTS_FILE})")
        path = os.path.join(folder, RESULTS_FILE)
        try:
            check(path, path)
        except AutotuneFileError as error:
            raise ChoiceError(f"holds a results file XLA could not load: {error}") from None
    return {"kept": kept, "results": path, "measured": measured, "folder": folder}


def differing_fields(stored, key: dict) -> str:
    """"driver 575.57 here 580.95, ..." for the KEY_FIELDS where `stored` differs from
    `key`; "" where none does."""
    parts = []
    for name in KEY_FIELDS:
        theirs = stored.get(name) if isinstance(stored, dict) else None
        if theirs != key.get(name):
            parts.append(f"{name} {_short(theirs)}, here {_short(key.get(name))}")
    return "; ".join(parts)


def _nearest(store: str, key: dict) -> str:
    """", kept for it under another key: driver ..., here ..." where the store holds the
    same step (model, batch, precision, side) under another key; else ""."""
    prefix = entry_name(key).rsplit("-", 1)[0] + "-"
    try:
        names = sorted(n for n in os.listdir(store) if n.startswith(prefix))
    except OSError:
        return ""
    for name in names:
        try:
            with open(os.path.join(store, name, CHOICE_FILE), encoding="utf-8") as f:
                stored = json.load(f).get("key")
        except (OSError, ValueError, AttributeError):
            continue
        differs = differing_fields(stored, key)
        if differs:
            return f" (one kept for this step under another key: {differs})"
    return ""


def _short(value) -> str:
    text = "none" if value is None else str(value)
    text = text if text.isprintable() else repr(text)
    return text[:60]


def _one_line(error) -> str:
    return " ".join(str(error).split())[:200]
