"""Where a profiled step's time goes: the step split by kind of work, from the trace.

Read with the profiler's own tools (callbacks/profiling/xprof.py): the trace's events,
each device op named by its HLO op and module (XLA: JAX on every device, TensorFlow
where it compiles with XLA) or by its framework op ("path:Type", TensorFlow's executor
on a CPU), and each traced HLO module, whose ops are sorted into kinds of work
(callbacks/profiling/kinds.py: CATEGORIES, and idle).

Each kind's achieved rate, where the work of its ops is known (of those holding at
least MIN_RATED of its time: their rate): TFLOP/s for convolutions, matrix products
and attention (FLOPs counted from each op's shapes as XLA's cost analysis counts them,
callbacks/profiling/hlo_cost.py, a GPU's cuDNN and cuBLAS calls included:
library_calls.py), GB/s for the other kinds (each op's operands and result). xprof's
own `hlo_stats` rates are not copied: they gave an H200's matrix products of ViT-B/16
1.49 PFLOP/s, 1.5x the chip's dense bf16 peak.

The step is the profiler's step markers ("train N", callbacks/profiler.py): their
total length over the steps they hold. Ops running at once (a CPU's threads, a GPU's
streams) share each moment equally, so the parts sum to the step exactly; the test
of the figure is against a second clock (the Profiler's own, around the same steps).
"""

from __future__ import annotations

import collections

from callbacks.profiling import bandwidth, timed, xprof
from callbacks.profiling.kinds import (
    CATEGORIES,
    TF_INTERNAL,
    Op,
    category_of_hlo,
    category_of_tf_op,
    parse_module,
)
from callbacks.profiling.xprof import ProfileError

# TensorFlow's executor ops: the trace names their type and layer, not their shapes.
TF_OP = Op("tensorflow")

__all__ = ["CATEGORIES", "COMPUTE", "Op", "ProfileError", "breakdown", "category_of_hlo",
           "category_of_tf_op", "line", "parse_module", "rate_words"]

# --- the trace --------------------------------------------------------------------

def _steps(events: list[dict]) -> list[tuple[float, float, int]]:
    """(start, end, step) of each host step marker 'train N', in microseconds."""
    marks = {}
    for event in events:
        args = event.get("args") or {}
        if event.get("ph") == "X" and "step_num" in args and str(
                event.get("name", "")).startswith("train"):
            step = int(args["step_num"])
            start, end = float(event["ts"]), float(event["ts"]) + float(event.get("dur", 0))
            if step not in marks or end - start > marks[step][1] - marks[step][0]:
                marks[step] = (start, end)
    return sorted((start, end, step) for step, (start, end) in marks.items())


def _device_pids(events: list[dict]) -> set:
    """The trace's device processes (/device:GPU:0, ...); none on a CPU."""
    return {event.get("pid") for event in events
            if event.get("ph") == "M" and event.get("name") == "process_name"
            and str((event.get("args") or {}).get("name", "")).startswith("/device:")}


def _hlo_op(args: dict, modules: dict[str, dict[str, Op]]) -> Op | None:
    """The HLO op an event names (hlo_op in hlo_module), None where no module holds it."""
    module = str(args.get("hlo_module", "")).split("(")[0]
    return modules.get(module, {}).get(args.get("hlo_op"))


def _hlo_span(start, end, args, modules, layer_classes) -> tuple:
    """An HLO op's span, with the run of its module it belongs to (the trace's run_id,
    None where it gives none); an op the modules do not hold is elementwise and other."""
    op = _hlo_op(args, modules)
    return (start, end, category_of_hlo(op, layer_classes) if op else
            "elementwise and other", op, args.get("run_id"))


# An XLA trace whose ops' time is mostly in ops no module names cannot be split.
MAX_UNNAMED = 0.5


def _op_spans(events, devices: set, layer_classes, modules: dict[str, dict[str, Op]]):
    """(start, end, category, its Op or None, its run or None) of every op the device
    ran (the run: see _hlo_span).

    On a device (`devices`: the trace's, _device_pids; a GPU, a TPU): its stream
    lines' kernels, each named by its HLO op; on a CPU (none): the host threads' XLA
    ops, or TensorFlow's executor ops.

    Raises:
        ProfileError: over MAX_UNNAMED of the XLA ops' time is in ops no module holds.
    """
    stream_tids = set()
    for event in events:
        if (event.get("ph") == "M" and event.get("name") == "thread_name"
                and event.get("pid") in devices
                and str((event.get("args") or {}).get("name", "")).startswith("Stream")):
            stream_tids.add((event["pid"], event["tid"]))
    spans, hlo_us, unnamed_us = [], 0.0, 0.0
    for event in events:
        if event.get("ph") != "X" or not event.get("dur"):
            continue
        args = event.get("args") or {}
        start = float(event["ts"])
        end = start + float(event["dur"])
        where = (event.get("pid"), event.get("tid"))
        if devices:
            if where not in stream_tids:
                continue
            name = str(event.get("name", ""))
            if name.startswith("MemcpyH2D") or "kind_src:pinned" in str(
                    args.get("memcpy_details", "")) or "kind_src:pageable" in str(
                    args.get("memcpy_details", "")):
                spans.append((start, end, "host-to-device copies", None))
                continue
        elif "hlo_op" not in args:  # not XLA on the host CPU: TensorFlow's executor?
            long_name = str(args.get("long_name", ""))
            if (":" in long_name and str(args.get("is_eager")) == "0"
                    and long_name.rpartition(":")[2] not in TF_INTERNAL):
                spans.append((start, end, category_of_tf_op(long_name, layer_classes),
                              TF_OP))
            continue
        spans.append(_hlo_span(start, end, args, modules, layer_classes))
        hlo_us += end - start
        unnamed_us += (end - start) if spans[-1][3] is None else 0.0
    if hlo_us and unnamed_us / hlo_us > MAX_UNNAMED:
        raise ProfileError(f"{unnamed_us / hlo_us:.0%} of the device's op time is in ops no "
                           "traced HLO module names (e.g. kernels inside a CUDA graph): "
                           "their kinds are unknown")
    return spans


def _share(spans, windows) -> tuple[dict, float]:
    """Each category's time inside the windows, ops running at once splitting each
    moment equally; and the time with no op at all (idle)."""
    totals, idle = collections.Counter(), 0.0
    for window_start, window_end in windows:
        points = []
        for start, end, category, *_ in spans:
            start, end = max(start, window_start), min(end, window_end)
            if end > start:
                points += [(start, 1, category), (end, -1, category)]
        points.sort(key=lambda point: (point[0], point[1]))  # ends first at a tie
        active, last = collections.Counter(), window_start
        for time, delta, category in points:
            if time > last:
                running = sum(active.values())
                if running:
                    for name, count in active.items():
                        totals[name] += (time - last) * count / running
                else:
                    idle += time - last
                last = time
            active[category] += delta
        idle += window_end - last  # every span was clipped to the window
    return totals, idle


# Kinds whose rate is FLOP/s (where every op's FLOPs are known); the others' is bytes/s.
COMPUTE = ("convolutions", "matrix products", "attention")


def _unknown(op: Op | None) -> str:
    """Why an op's work is not known: the words a kind without a rate gets."""
    if op is TF_OP:
        return "TensorFlow's own ops: the trace gives their names, not their shapes"
    if op is None:
        return "kernels or copies that no traced HLO op names"
    if op.opcode == "custom-call":
        return f"a library call whose work is not known ({op.target})"
    if op.opcode in ("while", "conditional"):
        return "a loop, whose trip count the module's text does not give"
    return f"an op ({op.opcode}) whose shapes the module's text does not give"


# A kind's rate is that of its ops whose work is known, where they hold at least this
# share of its ops' time (a memset or copy that no HLO op names does not take a kind's
# GB/s away); below it, none: the rate of a small part of the work would mislead.
MIN_RATED = 0.9


def _window(start: float, windows) -> int | None:
    """The index of the traced step whose window holds `start`, or None."""
    for index, (a, b) in enumerate(windows):
        if a <= start < b:
            return index
    return None


def _runs_counted(span, window: int, seen: set, steps_per_mark: int) -> int:
    """How many runs of its op a span's work counts for (see _work), recorded in
    `seen`: a span of an op already met in the same run of its module in traced step
    marker `window`, none; else one, the op's run being the trace's run_id; where the
    trace gives no run, `steps_per_mark` (each training step in the marker ran the
    step's module once, its op once: JAX's multi-step function calls the compiled step
    once a step, keras/src/backend/jax/trainer.py). No op, or TF_OP (which stands
    for every TensorFlow op), always counts one."""
    op, run = span[3], span[4] if len(span) > 4 else None
    if op is None or op is TF_OP:
        return 1
    key = (window, run, id(op))
    if key in seen:
        return 0
    seen.add(key)
    return 1 if run is not None else max(int(steps_per_mark), 1)


def _work(spans, windows, steps_per_mark: int = 1) -> dict[str, dict]:
    """Per kind of work, over its ops that start inside the windows: the FLOPs and
    bytes of those whose work is known, the time those ops ran (`flops_us`,
    `bytes_us`) of all its ops' (`us`), and why the others' is not (`why_flops`,
    `why_bytes`: the first such op's reason).

    Traps: one op may run as several kernels (a cuBLASLt matrix product and its
    epilogue or split-K reduction, a cuDNN convolution and its transposes), each a
    span of the trace naming the op: its work is counted once a run of its module
    (_runs_counted), its time all its kernels' (each kernel counted the work again:
    ViT-B/16's matrix products read 153% of an H100's peak, 2.1x its MFU count,
    2026-12-06). And a step marker holds `steps_per_mark` steps, each a run: counted
    once a marker, a ladder rung at 16 steps a call read convolutions at 3.47
    GFLOP/s, where the rung before at 1 step a call read 46.7-59.9."""
    work, counted = {}, set()
    for span in spans:
        start, end, category, op = span[:4]
        window = _window(start, windows)
        if window is None:
            continue
        totals = work.setdefault(category, {"flops": 0, "bytes": 0.0, "us": 0.0,
                                            "flops_us": 0.0, "bytes_us": 0.0})
        totals["us"] += end - start
        runs = _runs_counted(span, window, counted, steps_per_mark)
        for key in ("flops", "bytes"):
            value = getattr(op, key) if op is not None else None
            if value is None:
                totals.setdefault(f"why_{key}", _unknown(op))
            else:
                totals[key] += value * runs
                totals[f"{key}_us"] += end - start
    return work


def _rates(kind: str, work: dict, steps: int, micros: float) -> dict:
    """A kind's achieved rate over its time: TFLOP/s for COMPUTE kinds (GB/s where
    their ops do no FLOPs: attention's softmax without a fused kernel), GB/s for the
    others; of its ops whose work is known, over their part of its time, where they
    hold MIN_RATED of it (`rated_share` where not all); else none, and `no_rate` says
    why."""
    seconds = micros / 1e6
    if not work or seconds <= 0 or work["us"] <= 0:
        return {}
    for key in ("flops", "bytes") if kind in COMPUTE else ("bytes",):
        known = work[f"{key}_us"] / work["us"]
        if known < MIN_RATED:
            return {"no_rate": work[f"why_{key}"]}
        if not work[key]:
            continue  # no FLOPs: the bytes say how fast
        rated = {"rated_share": round(known, 3)} if known < 1 else {}
        if key == "flops":
            return {"gflop": round(work[key] / steps / 1e9, 6), "tflops_per_sec": float(
                f"{work[key] / (seconds * known) / 1e12:.4g}"), **rated}
        return {"gb_per_sec": float(f"{work[key] / (seconds * known) / 1e9:.4g}"), **rated}
    return {}


def _counted(spans, windows, steps: int, steps_per_mark: int = 1) -> dict:
    """The FLOPs counted over the traced steps, per step (the figure set against the
    app's MFU count), and how many ops a step ran with none known; each op's once a
    run however many kernels it ran as (see _work)."""
    known, unknown, seen = 0, 0, set()
    for span in spans:
        window = _window(span[0], windows)
        runs = 0 if window is None else _runs_counted(span, window, seen, steps_per_mark)
        if not runs:
            continue
        flops = getattr(span[3], "flops", None)
        if flops is None:
            unknown += runs
        else:
            known += flops * runs
    return {"gflop": round(known / steps / 1e9, 6), "ops_without_flops": round(unknown / steps, 2)}


def breakdown(profile_folder: str, layer_classes: dict[str, str] | None = None,
              steps_per_mark: int = 1, device_kind: str | None = None) -> dict:
    """The step split by kind of work (see the module docstring), as summary.json keeps it.

    Args:
        profile_folder: a trace session's folder (logdir/plugins/profile/<session>),
            or logdir/plugins/profile (then its newest session is read).
        layer_classes: the model's layer names -> class names (normalization and
            attention are known by the layer an op came from).
        steps_per_mark: training steps in each step marker (the steps per execution).
        device_kind: the traced devices' kind, as the framework names it (kept: the
            line measures memory-bound kinds against its bandwidth).

    Raises:
        ProfileError: no trace, or no step marker in it.
    """
    layer_classes = layer_classes or {}
    paths = xprof.session(profile_folder)
    events = xprof.events(paths)
    marks = _steps(events)
    if not marks:
        raise ProfileError("the trace holds no step marker ('train N')")
    windows = [(start, end) for start, end, _ in marks]
    module_names = {str((e.get("args") or {}).get("hlo_module", "")).split("(")[0]
                    for e in events if (e.get("args") or {}).get("hlo_module")}
    modules = {name: parse_module(text)
               for name, text in xprof.modules_text(paths, module_names).items()}
    devices = _device_pids(events)
    spans = _op_spans(events, devices, layer_classes, modules)
    totals, idle = _share(spans, windows)
    work = _work(spans, windows, steps_per_mark)
    steps = len(marks) * max(int(steps_per_mark), 1)
    step_us = sum(end - start for start, end in windows) / steps
    parts = {}
    for name in CATEGORIES:
        micros = idle if name == "idle" else totals.get(name, 0.0)
        if micros > 0:
            parts[name] = {"ms": round(micros / steps / 1e3, 4),
                           "share": round(micros / steps / step_us, 4) if step_us else 0.0,
                           **_rates(name, work.get(name), steps, micros)}
    return {"step_ms": round(step_us / 1e3, 4), "steps": steps,
            "traced": [marks[0][2], marks[-1][2] + max(int(steps_per_mark), 1) - 1],
            "ops": len(spans), "devices": max(len(devices), 1),
            "device_kind": device_kind, **_counted(spans, windows, steps, steps_per_mark),
            "parts": parts}


def _figure(value: float) -> str:
    """3 significant digits, whole numbers from 100 up (1,340 GB/s, not 1.34e+03)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def rate_words(part: dict, peak_tflops: float | None = None,
               memory_gb_per_sec: float | None = None) -> str:
    """' at 41.2 TFLOP/s' (with ' (4% of peak)' where the peak is known) or ' at 812
    GB/s' (with ' (24% of bandwidth)' where the memory's is known; smaller units below
    1), or ''."""
    for key, unit, small, whole, of in (
            ("tflops_per_sec", "TFLOP/s", "GFLOP/s", peak_tflops, "peak"),
            ("gb_per_sec", "GB/s", "MB/s", memory_gb_per_sec, "bandwidth")):
        rate = part.get(key)
        if isinstance(rate, (int, float)) and rate > 0:
            words = (f" at {_figure(rate)} {unit}" if rate >= 1 else
                     f" at {_figure(rate * 1e3)} {small}")
            if whole:
                words += f" ({rate / whole:.0%} of {of})"
            return words
    return ""


def whole_device(result: dict, peak_tflops_per_device: float | None = None) -> tuple:
    """(peak TFLOP/s, memory GB/s) of all the traced devices, each None where unknown:
    the peak given per device, the bandwidth of the traced device kind
    (callbacks/profiling/bandwidth.py)."""
    devices = result.get("devices", 1) if isinstance(result.get("devices"), int) else 1
    memory = bandwidth.memory_gb_per_sec(result.get("device_kind"))
    return (peak_tflops_per_device * devices if peak_tflops_per_device else None,
            memory * devices if memory else None)


def line(result: dict, largest: int = 3, peak_tflops_per_device: float | None = None) -> str:
    """One line: 'step 31.2 ms: 48% convolutions at 41.2 TFLOP/s (4% of peak), 27%
    normalization at 812 GB/s (24% of bandwidth), 9% idle' ('step 31.2 ms timed (traced
    35.0 ms, ...)' once reconciled, callbacks/profiling/timed.py; each kind's achieved rate
    where its work is known; its share of the traced devices' peak where
    `peak_tflops_per_device` is given, of their memory bandwidth where their kind's is
    known)."""
    parts = result.get("parts", {})
    peak, memory = whole_device(result, peak_tflops_per_device)
    ranked = sorted(((name, part) for name, part in parts.items() if name != "idle"),
                    key=lambda item: -item[1]["share"])[:largest]
    words = [f"{part['share']:.0%} {name}{rate_words(part, peak, memory)}"
             for name, part in ranked]
    if "idle" in parts:
        words.append(f"{parts['idle']['share']:.0%} idle")
    return f"{timed.step_words(result)}: " + ", ".join(words)

