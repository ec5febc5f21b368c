"""What differed between two runs of the same model and settings whose speeds differ.

The same command gave 3,290 and 4,440 images/sec on two H100s (XLA's autotuner's kernel
choice: benchmarks/results/2026-12-06-h100-autotune-spread.json). The report of
such a pair (app/report.py: same work, same settings, images/sec more than APART apart)
says what the runs' records show differed between them, in one line: the device, the
NVIDIA driver, the libraries' versions (app/engine/machine.py), the kernels the training
step ran (their digests, and from both kernels.json how many kernels differ:
app/engine/kernels.py) and the GPUs' state through the timed window (throttling, SM
clock, other processes: callbacks/machine_state.py). Where nothing recorded differs,
the line says that too: the cause is then in what no run records.

Every run folder is someone else's: read through callbacks/records/state_records.py;
a field that is wrong is left out, so it can never be named as a difference.
"""

from __future__ import annotations

import os

from app.run import provenance
from callbacks.records import untrusted
from callbacks.records.state_records import (
    SLOWING,
    kernels_block,
    machine_state,
    read_kernels,
)

APART = 0.05  # images/sec further apart than this (the larger over the smaller - 1)
CLOCK_APART = 0.03  # SM clocks averaging further apart than this are named
SOFTWARE_NAMES = {"jax": "JAX", "jaxlib": "jaxlib", "xla_extension_version": "XLA (jaxlib's)",
                  "cuda_runtime": "CUDA runtime", "cudnn": "cuDNN", "cublas": "cuBLAS",
                  "libtpu": "libtpu", "tensorflow": "TensorFlow", "cuda_build": "TF's CUDA",
                  "cudnn_build": "TF's cuDNN", "keras": "Keras", "python": "Python"}


def read(folder: str) -> dict:
    """A run folder's machine state and kernels (the block, and the list where
    kernels.json holds one), checked; what cannot be read is None."""
    out = {"state": None, "kernels": None, "kernel_list": None}
    try:
        summary = untrusted.read_json(os.path.join(folder, "summary.json"))
    except (OSError, untrusted.RecordError):
        return out
    if not isinstance(summary, dict):
        return out
    if summary.get("machine_state") is not None:
        out["state"] = machine_state(summary["machine_state"])[0]
    try:
        out["kernels"] = kernels_block(summary.get("kernels")) if summary.get("kernels") \
            else None
    except untrusted.RecordError:
        pass
    try:
        recorded = read_kernels(os.path.join(folder, "kernels.json"))
    except (OSError, untrusted.RecordError):
        recorded = None
    if recorded and out["kernels"] and recorded["digest"] == out["kernels"]["digest"]:
        out["kernel_list"] = recorded["kernels"]
    return out


def apart(a: float, b: float) -> float:
    """How far apart two rates are: the larger over the smaller, less one."""
    return max(a, b) / min(a, b) - 1


def differences(a: dict, b: dict) -> list[tuple[str, str, str]]:
    """What differed between two runs' records (`read`'s), as (what, a's, b's)."""
    from app.engine.kernels import differing

    out = []
    state_a, state_b = a.get("state") or {}, b.get("state") or {}
    for name, what in (("device_kind", "device"), ("driver", "NVIDIA driver"),
                       ("cuda_driver", "the driver's CUDA")):
        _differ(out, what, state_a.get(name), state_b.get(name))
    soft_a, soft_b = state_a.get("software") or {}, state_b.get("software") or {}
    for name, what in SOFTWARE_NAMES.items():
        _differ(out, what, soft_a.get(name), soft_b.get(name))
    for index, (one, other) in enumerate(zip(state_a.get("devices") or [],
                                             state_b.get("devices") or [])):
        gpu = "" if len(state_a["devices"]) == 1 else f"GPU {index}'s "
        for name, what in (("name", "GPU"), ("max_sm_clock_mhz", "maximum SM clock"),
                           ("power_limit_watts", "power limit"), ("ecc", "ECC")):
            _differ(out, gpu + what, one.get(name), other.get(name))
    kernels_a, kernels_b = a.get("kernels") or {}, b.get("kernels") or {}
    if kernels_a.get("digest") and kernels_b.get("digest") and (
            kernels_a["digest"] != kernels_b["digest"]):
        count = ""
        if a.get("kernel_list") is not None and b.get("kernel_list") is not None:
            total = max(len(a["kernel_list"]), len(b["kernel_list"]))
            count = f" ({differing(a['kernel_list'], b['kernel_list'])} of {total} differ)"
        out.append(("kernels", kernels_a["digest"][:12], kernels_b["digest"][:12] + count))
    for index, (one, other) in enumerate(zip(state_a.get("window") or [],
                                             state_b.get("window") or [])):
        out += _window_differences(one, other, "" if len(state_a["window"]) == 1
                                   else f"GPU {index}: ")
    return out


def _differ(out: list, what: str, a, b) -> None:
    if a is not None and b is not None and a != b:
        out.append((what, str(a), str(b)))


def _window_differences(a: dict, b: dict, gpu: str) -> list[tuple[str, str, str]]:
    out = []
    for words in sorted(set(SLOWING.values())):
        share_a, share_b = (max([s for r, s in (w.get("throttle_share") or {}).items()
                                 if SLOWING.get(r) == words], default=0.0) for w in (a, b))
        if max(share_a, share_b) >= provenance.OFF_SHARE and share_a != share_b:
            out.append((f"{gpu}{words} in the timed window", f"{share_a:.0%}", f"{share_b:.0%}"))
    clock_a, clock_b = a.get("sm_clock_mhz"), b.get("sm_clock_mhz")
    if clock_a and clock_b and apart(clock_a, clock_b) > CLOCK_APART:
        out.append((f"{gpu}SM clock's mean in the timed window", f"{clock_a:,.0f} MHz",
                    f"{clock_b:,.0f} MHz"))
    others_a, others_b = (len(w.get("other_processes") or []) for w in (a, b))
    if others_a != others_b:
        out.append((f"{gpu}other processes on the GPU", str(others_a), str(others_b)))
    return out


def compare(folders: tuple[str, str], labels: tuple[str, str],
            images_per_sec: tuple[float, float]) -> dict:
    """The report's entry for a pair of runs: their labels and rates, what differed
    (`differences`) and the lines said of them (`lines`: this module's first; the step
    breakdown's comparison, where both were profiled, is added after it by the report)."""
    found = differences(read(folders[0]), read(folders[1]))
    return {"labels": list(labels), "images_per_sec": list(images_per_sec),
            "differs": [list(item) for item in found], "lines": []}


def line(pair: dict, quote=str) -> str:
    """One sentence: the two rates and what differed, e.g. "A (3,290 images/sec) and B
    (4,440, 1.35x) ran the same model and settings; they differ in kernels (5c1e2f3a9b0d
    against 9a0b4c2d1e3f, 31 of 348 differ)". Every value read from a run folder goes
    through `quote` (the page's escaping), as the labels do."""
    (label_a, label_b), (rate_a, rate_b) = pair["labels"], pair["images_per_sec"]
    head = (f"{quote(label_a)} ({rate_a:,.0f} images/sec) and {quote(label_b)} "
            f"({rate_b:,.0f}, {max(rate_a, rate_b) / min(rate_a, rate_b):.2f}x) ran the same "
            "model and settings")
    if not pair["differs"]:
        return (f"{head}; nothing their records hold differs (device, driver, libraries, "
                "kernels, the GPU's state): the cause is in what no run records.")
    return f"{head}; they differ in " + "; ".join(
        f"{quote(what)} ({quote(a)} against {quote(b)})" for what, a, b in pair["differs"]) + "."


def findings(pairs: list[dict], quote=str) -> list[str]:
    """The report's lines for its differing pairs: each pair's own, then the others said
    of it (`lines`)."""
    out = []
    for pair in pairs:
        out += [line(pair, quote), *pair.get("lines", [])]
    return out
