"""Reading back a run's kernels and machine state, trusting none of it (a helper).

kernels.json (app/engine/kernels.py's list) and summary.json's `kernels` and
`machine_state` blocks (app/run/provenance.py) are read again by a resumed attempt and
by the report of two runs (app/run/differences.py). They may have been cut short,
edited, or written by someone else's machine: every value goes through
callbacks/records/untrusted.py, and what is wrong is left out, never believed.
"""

from __future__ import annotations

import re

from callbacks.records import untrusted

DIGEST = re.compile(r"[0-9a-f]{64}")
SOURCES = ("autotuned", "compiled", "heuristic", "autotune_cache", "jax_cache", "loaded")
# (app/engine/kernels.py's SOURCES: tests/app/engine/test_kernels.py holds them equal)
KINDS = ("library", "fusion")
MAX_KERNELS = 100_000  # a large model's step holds a few thousand
MAX_TEXT = 400  # an op_name or a shape; longer is not one XLA wrote
_COUNT = (0, 1 << 24)


def _text(record, name: str, required=True, longest=MAX_TEXT):
    value = untrusted.field(record, name, "text", required=required)
    if value is not None and len(value) > longest:
        raise untrusted.RecordError(f"{name!r} is {len(value):,} characters; accepted: at "
                                    f"most {longest}")
    return value


def kernels_block(record) -> dict:
    """summary.json's or kernels.json's block (without the list), checked.

    Raises:
        RecordError: one line naming the field.
    """
    digest = untrusted.field(record, "digest", "text", required=False)
    if digest is None:
        return {"digest": None, "not_known": _text(record, "not_known", required=False)}
    if not DIGEST.fullmatch(digest):
        raise untrusted.RecordError(f"'digest' holds {digest[:20]!r}; accepted: 64 hex digits")
    source = _text(record, "source")
    if source not in SOURCES:
        raise untrusted.RecordError(f"'source' holds {source[:20]!r}; accepted: "
                                    f"{', '.join(SOURCES)}")
    return {"digest": digest, "source": source,
            "library_calls": untrusted.field(record, "library_calls", "integer", low=_COUNT[0],
                                             high=_COUNT[1]),
            "fusions": untrusted.field(record, "fusions", "integer", low=_COUNT[0],
                                       high=_COUNT[1]),
            "loaded_from": _text(record, "loaded_from", required=False, longest=4096)}


def kernel(entry) -> dict:
    """One entry of kernels.json's list, checked (its config kept as the object it is)."""
    kind = _text(entry, "kind")
    if kind not in KINDS:
        raise untrusted.RecordError(f"'kind' holds {kind[:20]!r}; accepted: {', '.join(KINDS)}")
    return {"instruction": _text(entry, "instruction", required=False),
            "op_name": _text(entry, "op_name"), "target": _text(entry, "target"),
            "shape": _text(entry, "shape"), "kind": kind,
            "config": untrusted.field(entry, "config", "object")}


def read_kernels(path: str) -> dict | None:
    """kernels.json at `path`: its block and its list (`kernels`), checked; None if the
    file is absent.

    Raises:
        RecordError: not JSON, too large or deep, a field of the wrong kind, a list
            longer than MAX_KERNELS (OSError: it cannot be read).
    """
    import os

    if not os.path.lexists(path):
        return None
    record = untrusted.read_json(path)
    block = kernels_block(record)
    if block["digest"] is None:
        raise untrusted.RecordError("kernels.json without a digest")
    found = untrusted.field(record, "kernels", "list")
    if len(found) > MAX_KERNELS:
        raise untrusted.RecordError(f"'kernels' lists {len(found):,}; accepted: at most "
                                    f"{MAX_KERNELS:,}")
    return {**block, "kernels": [kernel(entry) for entry in found]}


# The machine state's vocabulary (callbacks/machine_state.py writes it), here so that its
# readers (the report) import no Keras. NVML's clock throttle ("clocks event") reasons:
# bit -> name (nvml.h, nvmlClocksThrottleReason*); gpu_idle: the clock resting between
# kernels.
THROTTLE_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# What a reason means for the run's speed, in the closing line's words (others: none).
SLOWING = {"sw_power_cap": "power-throttled", "hw_power_brake_slowdown": "power-throttled",
           "sw_thermal_slowdown": "thermally throttled",
           "hw_thermal_slowdown": "thermally throttled",
           "hw_slowdown": "slowed by the hardware (HW slowdown)"}

# summary.json's machine_state: the fields the report compares, each (kind, low, high).
FACTS = {"device_kind": "text", "driver": "text", "cuda_driver": "text"}
SOFTWARE = ("jax", "jaxlib", "xla_extension_version", "cuda_runtime", "cudnn", "cublas",
            "libtpu", "tensorflow", "cuda_build", "cudnn_build", "keras", "python")
FIGURE_RANGES = {"sm_clock_mhz": (0, 1e5), "memory_clock_mhz": (0, 1e5),
                 "power_watts": (0, 1e5), "temperature_c": (-300, 1e4)}
DEVICE_FACTS = {"name": ("text", None, None), "max_sm_clock_mhz": ("number", 0, 1e5),
                "max_memory_clock_mhz": ("number", 0, 1e5),
                "power_limit_watts": ("number", 0, 1e5), "ecc": ("text", None, None)}


def machine_state(record) -> tuple[dict, list[str]]:
    """summary.json's `machine_state`, checked: (what is good, one note per field left
    out). A wrong field is left out and named; the rest is kept."""
    notes, out = [], {}
    if not isinstance(record, dict):
        return {}, [f"machine_state holds {type(record).__name__}; accepted: object"]

    def keep(target: dict, source, name, kind, low=None, high=None, where=""):
        try:
            value = untrusted.field(source, name, kind, low=low, high=high, required=False)
            if isinstance(value, str) and len(value) > MAX_TEXT:
                raise untrusted.RecordError(f"{name!r} is {len(value):,} characters")
        except untrusted.RecordError as error:
            notes.append(f"{where}{error}")
            return
        if value is not None:
            target[name] = value

    for name, kind in FACTS.items():
        keep(out, record, name, kind)
    software = record.get("software")
    if isinstance(software, dict):
        out["software"] = {}
        for name in SOFTWARE:
            value = software.get(name)
            kind = "integer" if isinstance(value, int) and not isinstance(value, bool) else "text"
            keep(out["software"], software, name, kind, where="software: ")
    devices = record.get("devices")
    out["devices"] = []
    for device in devices if isinstance(devices, list) else []:
        checked = {}
        for name, (kind, low, high) in DEVICE_FACTS.items():
            keep(checked, device, name, kind, low, high, where="devices: ")
        out["devices"].append(checked)
    window = record.get("timed_window")
    windows = window.get("devices") if isinstance(window, dict) else None
    out["window"] = []
    for device in windows if isinstance(windows, list) else []:
        out["window"].append(_window(device, notes))
    return out, notes


def _window(device, notes: list) -> dict:
    """One device's timed window: its figures' means and its throttle shares."""
    checked = {}
    if not isinstance(device, dict):
        notes.append(f"timed_window: a device holds {type(device).__name__}")
        return checked
    for name, (low, high) in FIGURE_RANGES.items():
        try:
            figure = device.get(name)
            if figure is not None:
                checked[name] = untrusted.field(figure, "mean", "number", low=low, high=high)
        except untrusted.RecordError as error:
            notes.append(f"timed_window: {name}: {error}")
    shares = device.get("throttle_share")
    if isinstance(shares, dict):
        checked["throttle_share"] = {}
        for reason in list(shares)[:32]:
            try:
                if len(reason) > 64:
                    raise untrusted.RecordError("a reason's name is too long")
                checked["throttle_share"][reason] = untrusted.field(
                    shares, reason, "number", low=0, high=1)
            except untrusted.RecordError as error:
                notes.append(f"timed_window: throttle_share: {error}")
    others = device.get("other_processes")
    if isinstance(others, list):
        checked["other_processes"] = [p for p in others[:64]
                                      if isinstance(p, int) and not isinstance(p, bool)
                                      and 0 < p < 1 << 31]
    return checked
