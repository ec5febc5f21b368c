"""Two runs' step breakdowns set side by side: which kind of work made one slower.

`largest_change` names the kind of work whose time an image changed most between two
runs (or sweep points, ladder rungs, repeats) in the direction of their measured speed
(images/sec): where the second is faster, the kind whose time fell most; where it is
slower, the one whose time rose most; with both times and both achieved rates:
"convolutions 14.5 -> 21.3 ms a step (at 310 -> 210 TFLOP/s, 31% -> 21% of peak), the
kind whose time an image rose most as images/sec fell to 0.92x" (the same batch), or
"... 56.6 -> 83.2 us an image ..." (batches that differ). The change largest either
way could point against the speed: TensorFlow ran 1.08x as fast as JAX, and the named
change was JAX's normalization 19.9 -> 3.9 ms a step; a bf16 rung ran 1.08x as fast,
and its why read elementwise and other 3.9 -> 13.6 ms. Each breakdown is first set
against its run's timed step where it was not yet (callbacks/profiling/timed.py), so
idle is the timed step's in both.

Two runs of different backends split their steps into kinds differently (TensorFlow's
executor by its own ops, a fused BatchNorm op among them; XLA by its fused ops): no
kind is named, and the words say the kinds are not comparable.

`checked` reads a breakdown from someone else's record (summary.json, a sweep's or a
ladder's row) as untrusted input (callbacks/records/untrusted.py): the fields above,
each of its kind and in range, or RecordError.
"""

from __future__ import annotations

from callbacks.profiling import breakdown, timed
from callbacks.records import untrusted

RATES = ("tflops_per_sec", "gb_per_sec")  # a kind of work's achieved rate, if any
_FIGURES = ("traced_step_ms", "busy_ms", "profiler_ms", "over_step_ms")


def checked(found) -> dict:
    """A breakdown as a record holds it, checked: its step, each known kind of work's
    ms, share and rate, the traced step's figures where reconciled, the devices.

    Raises:
        untrusted.RecordError: a field missing, of the wrong kind or out of range; a
            kind the app does not write.
    """
    out = {"step_ms": untrusted.field(found, "step_ms", "number", low=0, high=1e9),
           "parts": {}}
    for kind, part in untrusted.field(found, "parts", "object").items():
        if kind not in breakdown.CATEGORIES:
            raise untrusted.RecordError(f"kind {ascii(kind)[:60]} is not one the app writes")
        out["parts"][kind] = {
            "ms": untrusted.field(part, "ms", "number", low=0, high=1e9),
            "share": untrusted.field(part, "share", "number", low=0, high=1)}
        for rate in RATES:  # where the run had them: achieved TFLOP/s or GB/s
            value = untrusted.field(part, rate, "number", low=0, high=1e9, required=False)
            if value is not None:
                out["parts"][kind][rate] = value
    for name in _FIGURES:
        value = untrusted.field(found, name, "number", low=0, high=1e9, required=False)
        if value is not None:
            out[name] = value
    out["devices"] = untrusted.field(found, "devices", "integer", low=1, high=1 << 24,
                                     required=False, default=1)
    kind = untrusted.field(found, "device_kind", "text", required=False)
    if kind is not None:
        out["device_kind"] = kind[:80]
    return out


def of_timed_step(figures: dict) -> dict | None:
    """A run's (a row's) breakdown set against its timed step (`step_time_ms`) where it
    was not yet (timed.py); as it is where it was, or where the step is unknown."""
    if not isinstance(figures, dict):
        return None
    found = figures.get("breakdown")  # a row's; summary.json keeps it under "profile"
    if found is None and isinstance(figures.get("profile"), dict):
        found = figures["profile"].get("breakdown")
    if not isinstance(found, dict) or "traced_step_ms" in found:
        return found
    return timed.reconcile(found, figures.get("step_time_ms"))


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _side(figures: dict) -> dict | None:
    """One run's breakdown against its timed step, its batch, its devices' peaks, its
    measured speed (images/sec; else the batch over its timed step; None unknown) and
    its backend."""
    found = of_timed_step(figures)
    batch = figures.get("global_batch_size") if isinstance(figures, dict) else None
    if not isinstance(found, dict) or not found.get("parts") or not isinstance(batch, int) \
            or isinstance(batch, bool) or batch < 1:
        return None
    peak, memory = breakdown.whole_device(found, figures.get("peak_tflops_per_device"))
    speed, step = figures.get("images_per_sec"), figures.get("step_time_ms")
    if not _number(speed):
        speed = batch / step * 1e3 if _number(step) else None
    backend = figures.get("backend")
    return {"parts": found["parts"], "batch": batch, "peak": peak, "memory": memory,
            "speed": speed, "backend": backend if isinstance(backend, str) else None}


def _rate(part: dict, peak, memory) -> dict:
    for key, whole, share in (("tflops_per_sec", peak, "share_of_peak"),
                              ("gb_per_sec", memory, "share_of_bandwidth")):
        rate = part.get(key)
        if isinstance(rate, (int, float)) and rate > 0:
            return {key: rate, **({share: round(rate / whole, 4)} if whole else {})}
    return {}


def largest_change(before: dict, after: dict) -> dict | None:
    """The kind of work whose time an image changed most from `before` to `after`, in
    the direction of the measured speed (module docstring).

    Args:
        before, after: each a run's figures (summary.json's, a sweep or ladder row):
            its `breakdown` (summary.json's `profile.breakdown`) and
            `global_batch_size`; where known its `images_per_sec`, `step_time_ms` (the
            timed step), `peak_tflops_per_device` and `backend`.

    Returns:
        {"comparable": True, "kind", "before_us", "after_us" (microseconds an image),
        "before_ms", "after_ms" (a step), "same_batch", "before_rate", "after_rate" (the
        kind's achieved rate and its share of peak or bandwidth, {} where none),
        "speed_ratio" (after's images/sec over before's; None unknown), "direction"
        ("fell": the kind whose time fell most, after being faster; "rose": slower;
        None: the speed unknown or equal, the largest change either way), "words"};
        {"comparable": False, "kind": None, "backends", "words"} for two backends; a
        "kind" of None where no kind moved with the speed; None where either has no
        breakdown or batch.
    """
    a, b = _side(before), _side(after)
    if a is None or b is None:
        return None
    if a["backend"] and b["backend"] and a["backend"] != b["backend"]:
        return {"comparable": False, "kind": None, "backends": [a["backend"], b["backend"]],
                "words": (f"not named: the kinds of work are not comparable between "
                          f"{a['backend']} and {b['backend']} (each backend splits its "
                          "step into ops its own way: TensorFlow's executor by its own "
                          "ops, XLA by its fused ones)")}

    def per_image(side, kind):
        return side["parts"].get(kind, {}).get("ms", 0.0) * 1e3 / side["batch"]

    kinds = sorted(set(a["parts"]) | set(b["parts"]))
    moved = {k: per_image(b, k) - per_image(a, k) for k in kinds}
    ratio = b["speed"] / a["speed"] if a["speed"] and b["speed"] else None
    direction = None if ratio is None or ratio == 1 else ("fell" if ratio > 1 else "rose")
    if direction is not None:  # a kind moved with the speed: its time fell as it rose
        sign = -1.0 if direction == "fell" else 1.0
        kinds = [k for k in kinds if moved[k] * sign > 0]
        if not kinds:
            return {"comparable": True, "kind": None, "speed_ratio": round(ratio, 3),
                    "direction": direction,
                    "words": (f"none: no kind of work's time an image {direction} as "
                              f"images/sec went to {ratio:.2f}x")}
        kind = max(kinds, key=lambda k: moved[k] * sign)
    else:
        kind = max(kinds, key=lambda k: abs(moved[k]))
    change = {"comparable": True, "kind": kind,
              "before_us": round(per_image(a, kind), 3), "after_us": round(per_image(b, kind), 3),
              "before_ms": a["parts"].get(kind, {}).get("ms", 0.0),
              "after_ms": b["parts"].get(kind, {}).get("ms", 0.0),
              "same_batch": a["batch"] == b["batch"],
              "before_rate": _rate(a["parts"].get(kind, {}), a["peak"], a["memory"]),
              "after_rate": _rate(b["parts"].get(kind, {}), b["peak"], b["memory"]),
              "speed_ratio": round(ratio, 3) if ratio is not None else None,
              "direction": direction}
    change["words"] = change_words(change)
    return change


def _figure(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def change_words(change: dict) -> str:
    """'convolutions 14.5 -> 21.3 ms a step (at 310 -> 210 TFLOP/s, 31% -> 21% of peak),
    the kind whose time an image rose most as images/sec fell to 0.92x'."""
    words = _figures_words(change)
    if change.get("direction") and change.get("speed_ratio"):
        went = "rose to" if change["direction"] == "fell" else "fell to"
        words += (f", the kind whose time an image {change['direction']} most as "
                  f"images/sec {went} {change['speed_ratio']:.2f}x")
    return words


def _figures_words(change: dict) -> str:
    if change["same_batch"]:
        words = (f"{change['kind']} {change['before_ms']:,.1f} -> {change['after_ms']:,.1f} "
                 "ms a step")
    else:
        words = (f"{change['kind']} {change['before_us']:,.1f} -> {change['after_us']:,.1f} "
                 "us an image")
    was, now = change["before_rate"], change["after_rate"]
    for key, unit, share, of in (("tflops_per_sec", "TFLOP/s", "share_of_peak", "peak"),
                                 ("gb_per_sec", "GB/s", "share_of_bandwidth", "bandwidth")):
        if key in was or key in now:
            rates = " -> ".join(_figure(side[key]) if key in side else "unknown"
                                for side in (was, now))
            words += f" (at {rates} {unit}"
            if share in was and share in now:
                words += f", {was[share]:.0%} -> {now[share]:.0%} of {of}"
            return words + ")"
    return words
