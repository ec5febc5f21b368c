"""The step on a device never measured, predicted from one run's work by kind.

The model, per kind of work k of the step breakdown (callbacks/profiling/breakdown.py):

    W_k      the work an image does: FLOPs (convolutions, matrix products, attention)
             or bytes (normalization, elementwise and other); a kind's achieved rate
             times its time over the images of the step (its unrated ops included);
             a CPU run's bytes times the table's cpu_bytes ratio (its compiler fuses
             less and computes bfloat16 in float32); FLOPs over the MFU count (a CPU
             compiler rewrites grouped convolutions as dense ones) cut to it
    s_k      the kind's achieved share of the target's peak or bandwidth, from the
             rates table (app/report/decision/device_rates.csv), first found of: the job's
             family measured on the target; the family's share on another device,
             carried (the run's own, on its accelerator; for a CPU run, the nearest
             class that measured the family): a compute kind's as it is (the same
             kernel reaches the same share of a peak), a memory kind's times the
             target's share over that device's, measured on other families; the
             target's median over the families measured; where the target's class has
             no row, all this from the nearest class measured (by peak and bandwidth),
             said so
    t_k      = W_k x images per device a step / (s_k x peak or bandwidth)
    step     = sum of t_k + what the run's accelerator spent outside rated kinds (idle,
             copies, collectives; a CPU's own idle is not carried: the target's host is
             assumed to keep its device fed)
    images/sec = the step's images (all devices) / step

Whether the job fits: a lower bound of the step's memory (app/models/memory.py: the
kept layer outputs of an image, the weights' copies) against the device's memory. What
the model cannot see is written in BUILD.md ("Which machine, before renting it").
Pure Python; the catalog is app/pricing/catalog.py's, the table device_rates.py's.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics

from app.models import memory
from app.report.decision.device_rates import COMPUTE_KINDS, KINDS, MEMORY_KINDS, Rate
from callbacks.profiling import bandwidth

# Memory of one device as the framework counts devices (a TPU v2 or v3 core: half its
# chip's), GB as the vendors' datasheets give them (read 2026-12); where a catalog row
# gives memory_gib_per_device, that is taken.
MEMORY_GB = (
    (r"\bH100", 80.0, "https://www.nvidia.com/en-us/data-center/h100/ (80 GB)"),
    (r"\bH200", 141.0, "https://www.nvidia.com/en-us/data-center/h200/ (141 GB)"),
    (r"\bB200\b", 180.0, "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200: 1.4 TB "
                         "over 8 GPUs)"),
    (r"A100.*80GB", 80.0, "https://www.nvidia.com/en-us/data-center/a100/ (80 GB)"),
    (r"A100", 40.0, "https://www.nvidia.com/en-us/data-center/a100/ (40 GB)"),
    (r"V100", 16.0, "the catalog's rows: V100 16GB"),
    (r"\bL4\b", 24.0, "https://www.nvidia.com/en-us/data-center/l4/ (24 GB)"),
    (r"\bT4\b", 16.0, "https://www.nvidia.com/en-us/data-center/tesla-t4/ (16 GB)"),
    (r"MI300X", 192.0, "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"),
    (r"TPU v5 ?lite|TPU v5e", 16.0, "https://cloud.google.com/tpu/docs/v5e (16 GiB a chip)"),
    (r"TPU v5p|TPU v5$", 95.0, "https://cloud.google.com/tpu/docs/v5p (95 GiB a chip)"),
    (r"TPU v6", 32.0, "https://cloud.google.com/tpu/docs/v6e (32 GiB a chip)"),
    (r"TPU v4", 32.0, "https://cloud.google.com/tpu/docs/v4 (32 GiB a chip)"),
    (r"TPU v3", 16.0, "https://cloud.google.com/tpu/docs/v3 (32 GiB a chip of 2 cores)"),
    (r"TPU v2", 8.0, "https://cloud.google.com/tpu/docs/v2 (16 GiB a chip of 2 cores)"),
)
MFU_SLACK = 1.02  # a breakdown's FLOPs within this of the MFU count are its own
# What a breakdown's figures may be (larger: a damaged or hostile summary.json): a part
# of a step up to a day, a rate up to 1,000 times the fastest chip's.
MAX_MS, MAX_TFLOPS, MAX_GB_PER_SEC = 86_400_000.0, 3e6, 1e7
CARRY_MAX = 0.05  # a CPU run's unrated kinds above this share of its busy time: refused


class WorkError(ValueError):
    """A run whose breakdown gives no work to predict from; one line saying why."""


@dataclasses.dataclass(frozen=True)
class Device:
    """A device to predict on (a catalog row's) or measured on (a run's)."""

    name: str  # "H100 80GB SXM": the catalog row's device, or the framework's kind
    pattern: str  # a regex that the framework's kind of this device matches
    peak_tflops: float | None
    bandwidth_gb_per_sec: float | None
    memory_gib: float | None = None

    def matches(self, device_kind: str) -> bool:
        return bool(self.pattern) and bool(re.search(self.pattern, device_kind))


def memory_gb(device_kind: str) -> float | None:
    """Datasheet memory of one device of `device_kind` (MEMORY_GB), None if unknown."""
    return next((gb for pattern, gb, _ in MEMORY_GB if re.search(pattern, device_kind)), None)


def device_of_row(row) -> Device:
    """The device a catalog row sells: its peak, its bandwidth (callbacks/profiling/
    bandwidth.py, by the row's device name), its memory (the row's, else MEMORY_GB)."""
    name = row.device or row.accelerator
    return Device(name, row.device_kind_pattern, row.peak_bf16_tflops_per_device,
                  bandwidth.memory_gb_per_sec(name),
                  row.memory_gib_per_device or memory_gb(name))


def device_of_kind(device_kind: str, catalog: dict) -> Device:
    """The device a run measured on: the first catalog row whose pattern matches its
    kind gives its pattern and peak."""
    row = next((r for r in catalog.values() if r.matches(device_kind)), None)
    return Device(device_kind, row.device_kind_pattern if row else re.escape(device_kind),
                  row.peak_bf16_tflops_per_device if row else None,
                  bandwidth.memory_gb_per_sec(device_kind), memory_gb(device_kind))


def _finite(value, low=0.0, high=1e18) -> bool:
    """A number > `low` and <= `high` (a breakdown is untrusted: 1e300 is no rate)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value) and low < value <= high


def work_per_image(breakdown: dict, images_per_step: int, images_per_device: int,
                   device: Device, mfu_flops_per_image: float | None = None) -> dict:
    """A run's work an image by kind, from its breakdown: {"flops": {kind: FLOPs},
    "bytes": {kind: bytes}, "carried_ms": {part: ms a step}, "shares": {kind: the run's
    share of its device's peak or bandwidth}, "cpu": bool, "device": Device,
    "images_per_step", "images_per_device", "notes"}.

    Raises:
        WorkError: no part has a rate (TensorFlow's executor ops carry no shapes), or
            a CPU run's unrated kinds hold over CARRY_MAX of its busy time.
    """
    parts = breakdown.get("parts") if isinstance(breakdown, dict) else None
    if not isinstance(parts, dict) or not parts:
        raise WorkError("its breakdown has no parts")
    cpu = device.name.lower() == "cpu" or device.pattern == "^cpu$"
    flops, moved, carried, shares, unrated, notes = {}, {}, {}, {}, {}, []
    for kind, part in parts.items():
        if not isinstance(part, dict) or not _finite(part.get("ms"), -1e-12, MAX_MS):
            continue
        ms = part["ms"]
        tflops, gb = part.get("tflops_per_sec"), part.get("gb_per_sec")
        if kind in COMPUTE_KINDS and _finite(tflops, high=MAX_TFLOPS):
            flops[kind] = tflops * 1e12 * ms / 1e3 / images_per_step
            if device.peak_tflops:
                shares[kind] = tflops / device.peak_tflops
        elif kind in MEMORY_KINDS and _finite(gb, high=MAX_GB_PER_SEC):
            moved[kind] = moved.get(kind, 0.0) + gb * 1e9 * ms / 1e3 / images_per_step
            if device.bandwidth_gb_per_sec:
                shares[kind] = gb / device.bandwidth_gb_per_sec
        elif kind in COMPUTE_KINDS and _finite(gb, high=MAX_GB_PER_SEC) and cpu:
            # No FLOPs: a CPU ran attention's softmax alone, its score products being
            # matrix products (no fused attention kernel); its bytes count as elementwise.
            other = "elementwise and other"
            moved[other] = moved.get(other, 0.0) + gb * 1e9 * ms / 1e3 / images_per_step
            notes.append(f"{kind}'s bytes counted as {other} (the CPU ran no {kind} kernel: "
                         "its products are matrix products)")
        elif kind in KINDS:
            unrated[kind] = ms
        elif not cpu:
            carried[kind] = ms  # idle, copies, collectives: the run's device's, a step
    if not flops and not moved:
        raise WorkError("its breakdown gives no kind's work (a TensorFlow run's executor ops "
                        "carry no shapes): profile the job with --backend=jax")
    busy = sum(p["ms"] for k, p in parts.items() if k in KINDS and isinstance(p, dict)
               and _finite(p.get("ms"), -1e-12, MAX_MS)) or 1.0
    if unrated and cpu and sum(unrated.values()) > CARRY_MAX * busy:
        raise WorkError(f"its breakdown gives no work for {sum(unrated.values()) / busy:.0%} "
                        f"of its busy time ({', '.join(sorted(unrated))}): profile the job "
                        "with --backend=jax")
    if unrated and not cpu:
        carried.update(unrated)
        notes.append(f"{', '.join(sorted(unrated))} carried as measured (no rate)")
    elif unrated:
        notes.append(f"{', '.join(sorted(unrated))} left out (no rate, "
                     f"{sum(unrated.values()) / busy:.0%} of the CPU's busy time)")
    counted = sum(flops.values())
    if _finite(mfu_flops_per_image) and counted > MFU_SLACK * mfu_flops_per_image:
        others = counted - flops.get("convolutions", 0.0)
        if "convolutions" in flops and others <= mfu_flops_per_image:
            flops["convolutions"] = mfu_flops_per_image - others
        else:
            flops = {k: v * mfu_flops_per_image / counted for k, v in flops.items()}
        notes.append(f"its compiled step counted {counted / 1e9:,.2f} GFLOP an image, the "
                     f"MFU count {mfu_flops_per_image / 1e9:,.2f}: cut to the MFU count "
                     "(a CPU compiler rewrites grouped convolutions as dense ones)")
    return {"flops": flops, "bytes": moved, "carried_ms": carried, "shares": shares,
            "cpu": cpu, "device": device, "images_per_step": images_per_step,
            "images_per_device": images_per_device, "notes": notes}


def _median(rows: list[Rate]) -> float:
    return statistics.median(r.value for r in rows)


def _families(rows: list[Rate]) -> str:
    return ", ".join(sorted({r.family or "any" for r in rows}))


def _class_of(device: Device, rates) -> str | None:
    """The table's device class of `device` (a row whose measured kind it matches)."""
    return next((r.device_class for r in rates if r.device_class != "cpu"
                 and device.matches(r.device_kind)), None)


def nearest_class(device: Device, rates, catalog: dict, among=None) -> str | None:
    """The measured device class nearest `device` by peak and bandwidth (the sum of the
    two ratios' logarithms, each way), of those `among` (None: all); None where no class
    or figure is known."""
    best = None
    for name in dict.fromkeys(r.device_class for r in rates if r.device_class != "cpu"):
        if among is not None and name not in among:
            continue
        kind = next(r.device_kind for r in rates if r.device_class == name)
        other = device_of_kind(kind, catalog)
        if not (device.peak_tflops and device.bandwidth_gb_per_sec and other.peak_tflops
                and other.bandwidth_gb_per_sec):
            continue
        distance = (abs(math.log(device.peak_tflops / other.peak_tflops))
                    + abs(math.log(device.bandwidth_gb_per_sec / other.bandwidth_gb_per_sec)))
        if best is None or distance < best[0]:
            best = (distance, name)
    return best[1] if best else None


def _moved(kind: str, value: float, target: str, other: str | None, rates) -> tuple[float, str]:
    """A share measured on class `other` as class `target` would have it: a compute
    kind's as it is (the same kernel, the same share of a peak); a memory kind's times
    the median of target's over other's share of the families measured on both."""
    if kind not in MEMORY_KINDS or not other or other == target:
        return value, ""
    pairs = [(t, s) for t in rates for s in rates if t.device_class == target
             and s.device_class == other and t.kind == s.kind == kind and t.family
             and t.family == s.family and t.measure == s.measure == "bandwidth"]
    if not pairs:
        return value, ""
    factor = statistics.median(t.value / s.value for t, s in pairs)
    return value * factor, (f" x {factor:.2f} ({target} over {other}, measured on "
                            f"{_families([t for t, _ in pairs])})")


def share(kind: str, target: str | None, work: dict, rates, family: str,
          source_class: str | None, borrowed_from: str | None = None,
          elsewhere: str | None = None) -> tuple[float, str] | None:
    """(s_k, where it came from in words) for `kind` on device class `target` (see the
    module docstring for the order; `elsewhere`: another class that measured the family,
    for a CPU run), None where the table cannot say."""
    measure = "peak" if kind in COMPUTE_KINDS else "bandwidth"
    rows = [r for r in rates if r.device_class == target and r.kind == kind
            and r.measure == measure]
    where = f" (borrowed from {target}: {borrowed_from} has no measured row)" \
        if borrowed_from else ""
    own = [r for r in rows if r.family == family]
    if own:
        return own[0].value, f"{family} measured on {target}, {own[0].source}{where}"
    carried = work["shares"].get(kind)
    if carried and not work["cpu"]:
        value, words = _moved(kind, carried, target, source_class, rates)
        return value, f"the run's own share, carried{words}{where}"
    found = [r for r in rates if r.device_class == elsewhere and r.kind == kind
             and r.measure == measure and r.family == family] if elsewhere else []
    if found:
        value, words = _moved(kind, found[0].value, target, elsewhere, rates)
        return value, f"{family} measured on {elsewhere}{words}{where}"
    if rows:
        return _median(rows), f"{target}'s median over {_families(rows)}{where}"
    return None


def predict_step(work: dict, device: Device, rates, family: str, catalog: dict) -> dict:
    """The step of `work` (work_per_image's) on `device`: {"step_ms", "images_per_sec",
    "terms" ({kind: {"ms", "share", "from"}}), "carried_ms", "device_class" (the table's
    class used), "borrowed" (the class borrowed from, or None), "notes"}; or {"why"} where
    the device's peak or bandwidth is unknown or no share is found."""
    target = _class_of(device, rates)
    source_class = _class_of(work["device"], rates)
    borrowed = None
    if target is None:
        borrowed = nearest_class(device, rates, catalog)
        if borrowed is None:
            return {"why": "no device class of the rates table is near it (its peak or "
                           "bandwidth is unknown)"}
    notes = list(work["notes"])
    terms = {}
    cpu_ratio = {}
    for kind, amount in [*work["flops"].items(), *work["bytes"].items()]:
        whole = (device.peak_tflops if kind in work["flops"] else
                 device.bandwidth_gb_per_sec) or 0.0
        whole *= 1e12 if kind in work["flops"] else 1e9
        if not whole:
            return {"why": f"its {'peak' if kind in work['flops'] else 'memory bandwidth'} "
                           "is not known"}
        others = {r.device_class for r in rates if r.family == family and r.kind == kind
                  and r.device_class not in ("cpu", target or borrowed)}
        found = share(kind, target or borrowed, work, rates, family, source_class,
                      device.name if borrowed else None,
                      nearest_class(device, rates, catalog, others) if others else None)
        if found is None:
            return {"why": f"the rates table has no share for {kind} on "
                           f"{target or borrowed}"}
        value, words = found
        if kind in work["bytes"] and work["cpu"]:
            ratio = cpu_bytes_ratio(kind, rates, family)
            if ratio is None:
                return {"why": f"the rates table has no cpu_bytes row for {kind}"}
            amount *= ratio[0]
            cpu_ratio[kind] = ratio[1]
        seconds = amount * work["images_per_device"] / (value * whole)
        terms[kind] = {"ms": seconds * 1e3, "share": value, "from": words}
    if cpu_ratio:
        notes.append("a CPU run's bytes set to an accelerator's: " + "; ".join(
            f"{k} {w}" for k, w in cpu_ratio.items()))
    step_ms = sum(t["ms"] for t in terms.values()) + sum(work["carried_ms"].values())
    return {"step_ms": step_ms, "images_per_sec": work["images_per_step"] / (step_ms / 1e3),
            "terms": terms, "carried_ms": dict(work["carried_ms"]),
            "device_class": target or borrowed, "borrowed": borrowed, "notes": notes}


def cpu_bytes_ratio(kind: str, rates, family: str) -> tuple[float, str] | None:
    """(accelerator bytes over a CPU run's, in words) for `kind`: the family's row,
    else the median over the families measured."""
    rows = [r for r in rates if r.measure == "cpu_bytes" and r.kind == kind]
    own = [r for r in rows if r.family == family]
    if own:
        return own[0].value, f"x {own[0].value:.3g} ({family}'s, {own[0].source})"
    if rows:
        return _median(rows), f"x {_median(rows):.3g} (the median of {_families(rows)})"
    return None


def fits(device: Device, parameters: int | None, kept_bytes_per_image: int | None,
         images_per_device: int) -> tuple[bool | None, str]:
    """Whether the job's step fits `device`'s memory, and why, from a lower bound of it
    (memory.step_bytes' rule: the images' kept layer outputs and WEIGHT_COPIES float32
    copies of the weights): (False, why) where even the bound is over the memory; (None,
    why) where the memory or the bound is not known."""
    if not device.memory_gib:
        return None, "its memory is not known"
    if not _finite(parameters):
        return None, "the run does not say its parameters"
    need = memory.WEIGHT_COPIES * 4 * parameters + images_per_device * (
        kept_bytes_per_image if _finite(kept_bytes_per_image) else 0)
    words = (f"its step keeps at least {need / 2**30:,.1f} GiB "
             f"({images_per_device} images a device"
             + ("" if _finite(kept_bytes_per_image) else ", the weights' copies only")
             + f"), the device holds {device.memory_gib:g} GiB")
    return need <= device.memory_gib * 2**30, words
