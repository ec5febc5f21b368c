"""Where a profiled step's time goes: the step split by kind of work, from the trace.

Read with the profiler's own tools (xprof, which TensorBoard's Profile tab runs):
its `trace_viewer` converter gives the trace's events, each device op named by its
HLO op and module (XLA: JAX on every device, TensorFlow where it compiles with XLA)
or by its framework op ("path:Type", TensorFlow's executor on a CPU); its
`graph_viewer` gives each traced HLO module as text, from which an op's opcode, its
fused computation's opcodes, its custom-call target and its framework name (the
Keras layer it came from) are read. No kernel name is guessed at.

Each kind's achieved rate, where its work is known in full: TFLOP/s for convolutions,
matrix products and attention (FLOPs counted from each op's shapes as XLA's cost
analysis counts them, callbacks/figures/hlo_cost.py; none where an op is a library
call, cuBLAS or cuDNN, whose text does not give them), GB/s for the other kinds (each
op's operands and result). xprof's own `hlo_stats` rates are not copied: they gave an
H200's matrix products of ViT-B/16 1.49 PFLOP/s, 1.5x the chip's dense bf16 peak.

Kinds of work (CATEGORIES), decided per op in this order:
- collectives: all-reduce, all-gather, reduce-scatter, permutes, NCCL calls;
- attention: cuDNN's fused attention, or any other op that is not a convolution or a
  matrix product of an attention layer (a Keras layer whose class name has
  "Attention": its softmax, scaling, masking);
- convolutions: a convolution, a cuDNN convolution, or a fusion holding one;
- matrix products: a dot, a cuBLAS call, or a fusion holding a dot (an attention
  layer's projections and, without a fused kernel, its scores);
- normalization: an op of a normalization layer (BatchNormalization,
  LayerNormalization, the app's BatchNorm: a class name with "Norm");
- host-to-device copies: the device's copies from the host;
- elementwise and other: every other op (activations, residual adds, the loss, the
  optimizer's update, layout copies);
- idle: the step's time with no op running on the device (the host's work, the
  input, the launch of the next step).

The step is the profiler's step markers ("train N", callbacks/profiler.py): their
total length over the steps they hold. Ops running at once (a CPU's threads, a GPU's
streams) share each moment equally, so the parts sum to the step exactly; the test
of the figure is against a second clock (the Profiler's own, around the same steps).
"""

from __future__ import annotations

import collections
import contextlib
import glob
import json
import os
import re
import sys
import tempfile

from callbacks.figures import hlo_cost

CATEGORIES = ("convolutions", "matrix products", "attention", "normalization",
              "collectives", "host-to-device copies", "elementwise and other", "idle")
_COLLECTIVE = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute",
               "all-to-all", "collective-broadcast")
_TF_CONV = re.compile(r"Conv\d?D|DepthwiseConv")
_TF_MATMUL = re.compile(r"MatMul|Einsum|Gemm")
_TF_COLLECTIVE = re.compile(r"Nccl|Collective|AllReduce")
_TF_INTERNAL = ("ReadVariableOp", "AssignVariableOp", "VarHandleOp", "NoOp", "Identity",
                "_Recv", "_Send", "Const", "_Arg", "_Retval")


class ProfileError(ValueError):
    """A profile folder the breakdown cannot read (its message is one line)."""


# --- the profiler's own converters -----------------------------------------------

def _session(profile_folder: str) -> list[str]:
    """The xplane files of a trace session: `profile_folder` itself where it is one
    (the session a run wrote and named: callbacks/profiler.py), else the newest
    session under it (logdir/plugins/profile)."""
    own = sorted(glob.glob(os.path.join(profile_folder, "*.xplane.pb")))
    if own:
        return own
    sessions = sorted(glob.glob(os.path.join(profile_folder, "*", "")))
    for session in reversed(sessions):
        paths = sorted(glob.glob(os.path.join(session, "*.xplane.pb")))
        if paths:
            return paths
    raise ProfileError(f"no trace (*.xplane.pb) under {profile_folder}")


# What xprof's converters log on every call through absl to the process's stderr
# (e.g. "No UnifiedProfileProcessor registered for tool: trace_viewer": it then takes
# its older path, which serves): not a fault, and a ladder prints it for every rung.
CONVERTER_NOISE = re.compile(r"No (Unified)?ProfileProcessor registered for tool|"
                             r"All log messages before absl::InitializeLog")


@contextlib.contextmanager
def _converter_log():
    """Within the block, what is written to file descriptor 2 (the converters' C++
    logging) is caught; afterwards every line but CONVERTER_NOISE is passed on."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            for text in caught.read().decode("utf-8", "replace").splitlines(keepends=True):
                if not CONVERTER_NOISE.search(text):
                    sys.stderr.write(text)


def _tool(paths: list[str], tool: str, options: dict | None = None):
    from xprof.convert import raw_to_tool_data

    with _converter_log():
        data, _ = raw_to_tool_data.xspace_to_tool_data(paths, tool, options or {})
    if data is None:
        return None
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def _modules_text(paths: list[str], names: set[str]) -> dict[str, str]:
    """Each named HLO module's text (with metadata) from graph_viewer, by module name."""
    from xprof.convert import raw_to_tool_data

    with _converter_log():  # writes NAME(ID).hlo_proto.pb beside them
        raw_to_tool_data.xspace_to_tool_names(paths)
    folder = os.path.dirname(paths[0])
    texts = {}
    for file in sorted(os.listdir(folder)):
        if not file.endswith(".hlo_proto.pb"):
            continue
        module = file[:-len(".hlo_proto.pb")]
        if module.split("(")[0] not in names:
            continue
        try:
            texts[module.split("(")[0]] = _tool(paths, "graph_viewer", {
                "graph_viewer_options": {"type": "pbtxt", "module_name": module}}) or ""
        except ValueError:
            continue
    return texts


# --- HLO modules ------------------------------------------------------------------

class Op:
    """An HLO instruction: what it computes, where it came from, what it costs
    (callbacks/figures/hlo_cost.py: FLOPs and bytes, None where unknown)."""

    __slots__ = ("opcode", "target", "op_name", "fused", "flops", "bytes")

    def __init__(self, opcode="", target="", op_name="", fused=(), flops=None, bytes=None):
        self.opcode, self.target, self.op_name, self.fused = opcode, target, op_name, fused
        self.flops, self.bytes = flops, bytes


def parse_module(text: str) -> dict[str, Op]:
    """Instruction name -> Op, from a module's HloProto text (graph_viewer's pbtxt).

    A fusion's `fused` is the set of opcodes of the computations it calls (nested).
    """
    module = hlo_cost.computations(text)
    costs = hlo_cost.Costs(module)
    first = hlo_cost.first

    def opcodes(computation_id: str, seen: frozenset = frozenset()) -> set:
        found = set()
        for item in module.get(computation_id, ()):
            found.add(first(item, "opcode"))
            if first(item, "custom_call_target"):
                found.add("custom-call:" + first(item, "custom_call_target"))
            for called in hlo_cost.calls(item):
                if called not in seen:
                    found |= opcodes(called, seen | {called})
        return found

    ops = {}
    for instructions in module.values():
        for item in instructions:
            fused = set()
            if first(item, "opcode") == "fusion":
                for called in hlo_cost.calls(item):
                    fused |= opcodes(called, frozenset({called}))
            ops[first(item, "name")] = Op(
                first(item, "opcode"), first(item, "custom_call_target"),
                first(first(item, "metadata", {}), "op_name"), frozenset(fused),
                costs.flops(item), costs.bytes(item))
    return ops


# --- which kind of work an op is ----------------------------------------------------

def _innermost_layer(name: str, layer_classes: dict[str, str]) -> str:
    """The class of the innermost Keras layer named in a framework op name ('' if none)."""
    best = ""
    for part in re.split(r"[/()]", name):
        # TensorFlow's name scopes add "_1" to a layer's name: stage1_bn1_1 is stage1_bn1
        for candidate in (part, re.sub(r"_\d+$", "", part)):
            if candidate in layer_classes:
                best = layer_classes[candidate]
                break
    return best


def _by_layer(name: str, layer_classes: dict[str, str]) -> str | None:
    layer = _innermost_layer(name, layer_classes)
    if "Attention" in layer:
        return "attention"
    if "Norm" in layer:
        return "normalization"
    return None


def category_of_hlo(op: Op, layer_classes: dict[str, str]) -> str:
    """The kind of work of one HLO op (see the module docstring for the order)."""
    opcodes = {op.opcode} | set(op.fused)
    targets = {op.target} | {code.split(":", 1)[1] for code in op.fused
                             if code.startswith("custom-call:")}
    target_text = " ".join(t.lower() for t in targets if t)
    base = {code.removesuffix("-start").removesuffix("-done") for code in opcodes}
    if base & set(_COLLECTIVE) or "nccl" in target_text:
        return "collectives"
    if "fmha" in target_text or "attention" in target_text:
        return "attention"
    if "convolution" in base or "conv" in target_text:
        return "convolutions"
    if "dot" in base or "gemm" in target_text or "matmul" in target_text:
        return "matrix products"
    return _by_layer(op.op_name, layer_classes) or "elementwise and other"


def category_of_tf_op(long_name: str, layer_classes: dict[str, str]) -> str:
    """The kind of work of one TensorFlow op, named "path/to/op:Type"."""
    path, _, op_type = long_name.rpartition(":")
    if _TF_COLLECTIVE.search(op_type):
        return "collectives"
    if _TF_CONV.search(op_type):
        return "convolutions"
    if _TF_MATMUL.search(op_type):
        return "matrix products"
    return _by_layer(path, layer_classes) or "elementwise and other"


# --- the trace --------------------------------------------------------------------

def _events(paths: list[str]) -> list[dict]:
    text = _tool(paths, "trace_viewer")
    if not text:
        raise ProfileError("the profiler's trace viewer returned no events")
    trace = json.loads(text)
    return trace.get("traceEvents", []) if isinstance(trace, dict) else trace


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
    """An HLO op's span; an op the modules do not hold is elementwise and other."""
    op = _hlo_op(args, modules)
    return (start, end, category_of_hlo(op, layer_classes) if op else
            "elementwise and other", op)


# An XLA trace whose ops' time is mostly in ops no module names cannot be split.
MAX_UNNAMED = 0.5


def _op_spans(events, devices: set, layer_classes, modules: dict[str, dict[str, Op]]):
    """(start, end, category, its Op or None) of every op the device ran.

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
                    and long_name.rpartition(":")[2] not in _TF_INTERNAL):
                spans.append((start, end, category_of_tf_op(long_name, layer_classes), None))
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
        for start, end, category, _ in spans:
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


def _work(spans, windows) -> dict[str, dict]:
    """Per kind of work: the FLOPs and bytes of its ops that start inside the windows,
    each None where any of those ops has none (a rate of part of the work would
    mislead)."""
    work = {}
    for start, _, category, op in spans:
        if not any(a <= start < b for a, b in windows):
            continue
        totals = work.setdefault(category, {"flops": 0, "bytes": 0.0})
        for key in ("flops", "bytes"):
            value = getattr(op, key) if op is not None else None
            totals[key] = None if value is None or totals[key] is None else totals[key] + value
    return work


def _rates(kind: str, work: dict, steps: int, micros: float) -> dict:
    """A kind's achieved rate over its time: TFLOP/s for COMPUTE kinds, GB/s for the
    others; none where its work is not known in full."""
    seconds = micros / 1e6
    if not work or seconds <= 0:
        return {}
    if kind in COMPUTE:
        flops = work["flops"]
        return ({"gflop": round(flops / steps / 1e9, 6),
                 "tflops_per_sec": float(f"{flops / seconds / 1e12:.4g}")} if flops else {})
    moved = work["bytes"]
    return {"gb_per_sec": float(f"{moved / seconds / 1e9:.4g}")} if moved else {}


def breakdown(profile_folder: str, layer_classes: dict[str, str] | None = None,
              steps_per_mark: int = 1) -> dict:
    """The step split by kind of work (see the module docstring), as summary.json keeps it.

    Args:
        profile_folder: a trace session's folder (logdir/plugins/profile/<session>),
            or logdir/plugins/profile (then its newest session is read).
        layer_classes: the model's layer names -> class names (normalization and
            attention are known by the layer an op came from).
        steps_per_mark: training steps in each step marker (the steps per execution).

    Raises:
        ProfileError: no trace, or no step marker in it.
    """
    layer_classes = layer_classes or {}
    paths = _session(profile_folder)
    events = _events(paths)
    marks = _steps(events)
    if not marks:
        raise ProfileError("the trace holds no step marker ('train N')")
    windows = [(start, end) for start, end, _ in marks]
    module_names = {str((e.get("args") or {}).get("hlo_module", "")).split("(")[0]
                    for e in events if (e.get("args") or {}).get("hlo_module")}
    modules = {name: parse_module(text)
               for name, text in _modules_text(paths, module_names).items()}
    devices = _device_pids(events)
    spans = _op_spans(events, devices, layer_classes, modules)
    totals, idle = _share(spans, windows)
    work = _work(spans, windows)
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
            "parts": parts}


def rate_words(part: dict, peak_tflops: float | None = None) -> str:
    """' at 41.2 TFLOP/s' (with ' (4% of peak)' where the peak is known) or ' at 812
    GB/s' (smaller units below 1), or ''."""
    for key, unit, small in (("tflops_per_sec", "TFLOP/s", "GFLOP/s"),
                             ("gb_per_sec", "GB/s", "MB/s")):
        rate = part.get(key)
        if isinstance(rate, (int, float)) and rate > 0:
            words = (f" at {rate:.3g} {unit}" if rate >= 1 else
                     f" at {rate * 1e3:.3g} {small}")
            if key == "tflops_per_sec" and peak_tflops:
                words += f" ({rate / peak_tflops:.0%} of peak)"
            return words
    return ""


def line(result: dict, largest: int = 3, peak_tflops_per_device: float | None = None) -> str:
    """One line: 'step 31.2 ms: 48% convolutions at 41.2 TFLOP/s, 27% normalization at
    812 GB/s, 9% idle' (each kind's achieved rate where its work is known, and its
    share of the traced devices' peak where `peak_tflops_per_device` is given)."""
    parts = result.get("parts", {})
    peak = (peak_tflops_per_device * result.get("devices", 1)
            if peak_tflops_per_device else None)
    ranked = sorted(((name, part) for name, part in parts.items() if name != "idle"),
                    key=lambda item: -item[1]["share"])[:largest]
    words = [f"{part['share']:.0%} {name}{rate_words(part, peak)}" for name, part in ranked]
    if "idle" in parts:
        words.append(f"{parts['idle']['share']:.0%} idle")
    return f"step {result['step_ms']:.1f} ms: " + ", ".join(words)


def largest_difference(first: dict, second: dict) -> tuple[str, float, float] | None:
    """The category whose time per step differs most between two breakdowns:
    (category, first ms, second ms), or None where either has no parts."""
    a, b = first.get("parts") or {}, second.get("parts") or {}
    if not a or not b:
        return None
    names = set(a) | set(b)
    name = max(sorted(names), key=lambda n: abs(a.get(n, {}).get("ms", 0.0)
                                                 - b.get(n, {}).get("ms", 0.0)))
    return name, a.get(name, {}).get("ms", 0.0), b.get(name, {}).get("ms", 0.0)
