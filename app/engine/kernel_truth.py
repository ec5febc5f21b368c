"""The per-op truth behind a choice of kernels: where the trace shows a library call far
slower than XLA's autotuner measured the kernel it chose.

Why: XLA's autotuner times each candidate once, alone, after one warm-up. On an H100 a
ConvNeXt-T step lost about 20 ms to six calls of one depthwise convolution whose cuDNN
engine had timed fast alone (its data takes about 46 µs to move); that was found by
hand, reading the autotuner's log against the trace. This does it for a run:

- XLA's autotune log (`--xla_gpu_dump_autotune_logs_to`, which --keep_kernels keeps as
  <run>/kernels/autotune_log.textproto: an AutotuningLogs message, xla/autotuning.proto)
  holds, per instruction XLA tuned, every candidate's measured time and scratch.
- The step's optimized HLO (the program fit ran) says which candidate each instruction
  took: a cuDNN call's algorithm (engine and knobs), a cuBLAS call's algorithm.
- A profiled run's trace (xprof's trace_viewer events) says how long each instruction
  ran on the device a step.

An instruction whose time a step in the trace is over SLOWER times what the autotuner
measured for its chosen kernel is a finding; findings of one signature (the library
call, its result shape, its groups and window: what XLA tunes once for all of them)
are one line: the op (its shape), the engine and the ms a step it costs. The log names
one instruction per signature (XLA tunes identical instructions once), so instructions
are matched to it by signature, not by name. Library calls only (cuDNN, cuBLAS): a
fusion's Triton tiling is timed whole by the trace too, but its log entry's instruction
is a fusion XLA renames afterwards.
"""

from __future__ import annotations

import os
import re

from app.engine import kernels, textproto

SLOWER = kernels.SLOW_OP_RATIO  # a call this many times its autotuned time is a finding
TIE_US = 4.0  # XLA's autotuner takes the least scratch among candidates this close
LOG_FILE = os.path.join("kernels", "autotune_log.textproto")
_CUSTOM_CALL = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*(.+?)\s+custom-call\(")
_GROUPS = re.compile(r"feature_group_count=(\d+)")
_WINDOW = re.compile(r"window=\{size=([\dx]+)")
_TARGET = re.compile(r'custom_call_target="([^"]*)"')


def _plain(shape: str) -> str:
    """A shape without its layouts: `bf16[8,96]{1,0}` -> `bf16[8,96]`."""
    return re.sub(r"\{[^{}]*\}", "", kernels.result_shape(shape)).replace(" ", "")


def hlo_calls(hlo_text: str) -> dict:
    """{instruction: {"signature", "op_name", "target", "shape", "config"}} of every
    library call with a chosen kernel in optimized HLO text."""
    chosen = {k["instruction"]: k for k in kernels.chosen_kernels(hlo_text)
              if k["kind"] == "library"}
    calls = {}
    for line in hlo_text.splitlines():
        match = _CUSTOM_CALL.match(line)
        if not match or match.group(1) not in chosen:
            continue
        entry = chosen[match.group(1)]
        target = _TARGET.search(line)
        groups, window = _GROUPS.search(line), _WINDOW.search(line)
        shape = _plain(match.group(2))
        signature = (target.group(1) if target else entry["target"], shape,
                     int(groups.group(1)) if groups else 1, window.group(1) if window else "")
        calls[match.group(1)] = {"signature": signature, "op_name": entry["op_name"],
                                 "target": signature[0], "shape": shape,
                                 "config": entry["config"]}
    return calls


# ----------------------------------------------------------------- the autotune log
def _proto_shape(shape: dict) -> str:
    """An HLO ShapeProto as text without layout (a tuple: its first element that is not
    a u8/s8 scratch buffer)."""
    tuple_shapes = textproto.every(shape, "tuple_shapes")
    if tuple_shapes:
        kept = [s for s in tuple_shapes
                if str(textproto.first(s, "element_type", "")).upper() not in ("U8", "S8")]
        shape = (kept or tuple_shapes)[0]
    dims = ",".join(str(d) for d in textproto.every(shape, "dimensions"))
    return f"{str(textproto.first(shape, 'element_type', '?')).lower()}[{dims}]"


def _run_time_us(result: dict) -> float | None:
    duration = textproto.first(result, "run_time")
    if not isinstance(duration, dict):
        return None
    return (textproto.first(duration, "seconds", 0) * 1e6
            + textproto.first(duration, "nanos", 0) / 1e3)


def _candidate(result: dict) -> dict:
    """One candidate's kernel (its config as the log gives it), time and scratch."""
    config, kind = {}, None
    for name in ("algorithm", "gemm", "triton", "conv", "cuda_conv_plan",
                 "custom_kernel_fusion", "other"):
        value = textproto.first(result, name)
        if isinstance(value, dict):
            kind, config = name, value
            break
    if kind == "other":  # a backend's own config, packed: {name, config: Any}
        inner = textproto.unpacked(textproto.first(config, "config")) or {}
        kind, config = str(textproto.first(config, "name", "other")), inner
    failure = textproto.first(result, "failure")
    return {"kind": kind, "config": config, "run_time_us": _run_time_us(result),
            "scratch_bytes": textproto.first(result, "scratch_bytes", 0),
            "failed": str(textproto.first(failure, "kind", "UNKNOWN")) if failure else None}


def read_log(text: str | bytes) -> dict:
    """{signature: {"instruction", "op_name", "candidates"}} of an AutotuningLogs text
    (several concatenated, as XLA appends them, read as one).

    Raises:
        textproto.TextProtoError: not the text form.
    """
    entries = {}
    for log in textproto.every(textproto.parse(text), "logs"):
        instr = textproto.unpacked(textproto.first(log, "instr")) or {}
        target = textproto.first(instr, "custom_call_target", "")
        window = textproto.first(instr, "window") or {}
        sizes = "x".join(str(textproto.first(d, "size", 1))
                         for d in textproto.every(window, "dimensions"))
        signature = (target, _proto_shape(textproto.first(instr, "shape") or {}),
                     textproto.first(instr, "feature_group_count", 1) or 1, sizes)
        entries[signature] = {
            "instruction": textproto.first(instr, "name", ""),
            "op_name": textproto.first(textproto.first(instr, "metadata"), "op_name", ""),
            "candidates": [_candidate(r) for r in textproto.every(log, "results")]}
    return entries


def chosen_candidate(candidates: list, config: dict) -> dict | None:
    """The candidate the HLO's `config` names (a cuDNN algorithm's engine and knobs, a
    cuBLAS algorithm); None where it names one the log did not time (e.g. the heuristic
    program's, which the autotuner never ran). A config that names none: the one XLA's
    rule picks, the fastest that did not fail, the least scratch among those within
    TIE_US of it."""
    algo = config.get("algo_id")
    knobs = {str(k): str(v) for k, v in (config.get("tuning_knobs") or {}).items()}
    gemm = config.get("selected_algorithm")
    for c in candidates:
        got = c["config"]
        if algo is not None and str(textproto.first(got, "algo_id")) == str(algo):
            theirs = {str(textproto.first(k, "key")): str(textproto.first(k, "value"))
                      for k in textproto.every(got, "tuning_knobs")}
            if theirs == knobs:
                return c
        if gemm is not None and c["kind"] == "gemm" and str(
                textproto.first(got, "algorithm")) == str(gemm):
            return c
    if algo is not None or gemm is not None:
        return None
    timed = [c for c in candidates if not c["failed"] and c["run_time_us"] is not None]
    if not timed:
        return None
    fastest = min(c["run_time_us"] for c in timed)
    close = [c for c in timed if c["run_time_us"] <= fastest + TIE_US]
    return min(close, key=lambda c: (c["scratch_bytes"], c["run_time_us"]))


def engine_words(candidate: dict) -> str:
    config = candidate["config"]
    if textproto.first(config, "algo_id") is not None:
        knobs = ",".join(f"{textproto.first(k, 'key')}={textproto.first(k, 'value')}"
                         for k in textproto.every(config, "tuning_knobs"))
        return f"cuDNN engine {textproto.first(config, 'algo_id')}" + (
            f" (knobs {knobs})" if knobs else "")
    if candidate["kind"] == "gemm":
        return f"cuBLAS algorithm {textproto.first(config, 'algorithm')}"
    return str(candidate["kind"])


# ------------------------------------------------------------------------- the trace
def device_us_per_step(events: list, module: str = "jit_train_step") -> tuple[dict, int]:
    """({instruction: device µs a traced step}, traced steps) from trace_viewer events:
    the device's kernels of `module`, over the host's "train N" step markers."""
    steps = {int((e.get("args") or {})["step_num"]) for e in events
             if e.get("ph") == "X" and "step_num" in (e.get("args") or {})
             and str(e.get("name", "")).startswith("train")}
    devices = {e.get("pid") for e in events if e.get("ph") == "M"
               and e.get("name") == "process_name"
               and str((e.get("args") or {}).get("name", "")).startswith("/device:")}
    total = {}
    for e in events:
        args = e.get("args") or {}
        if (e.get("ph") == "X" and e.get("pid") in devices and "hlo_op" in args
                and str(args.get("hlo_module", "")).split("(")[0] == module):
            total[args["hlo_op"]] = total.get(args["hlo_op"], 0.0) + float(e.get("dur", 0))
    count = len(steps)
    return ({op: us / count for op, us in total.items()} if count else {}), count


def findings(log: dict, calls: dict, per_step: dict, slower: float = SLOWER) -> list:
    """The library calls of `calls` (hlo_calls) whose time a step in `per_step`
    (device_us_per_step) is over `slower` times what the autotuner measured for the
    kernel each chose (`log`: read_log), one finding per signature, costliest first."""
    grouped = {}
    for name, call in calls.items():
        entry = log.get(call["signature"])
        traced = per_step.get(name)
        if entry is None or traced is None:
            continue
        chosen = chosen_candidate(entry["candidates"], call["config"])
        if chosen is None or not chosen["run_time_us"]:
            continue
        if traced > slower * chosen["run_time_us"]:
            found = grouped.setdefault(call["signature"], {
                "op_name": call["op_name"], "shape": call["shape"], "target": call["target"],
                "engine": engine_words(chosen), "autotuner_us": round(chosen["run_time_us"], 2),
                "calls_per_step": 0, "trace_us": 0.0})
            found["calls_per_step"] += 1
            found["trace_us"] += traced
    out = []
    for found in grouped.values():
        calls_ = found["calls_per_step"]
        trace_us = found.pop("trace_us")
        out.append({**found, "trace_us_per_call": round(trace_us / calls_, 2),
                    "times_autotuned": round(trace_us / calls_ / found["autotuner_us"], 1),
                    "ms_per_step": round(trace_us / 1000, 3),
                    "excess_ms_per_step": round((trace_us - calls_ * found["autotuner_us"])
                                                / 1000, 3)})
    return sorted(out, key=lambda f: -f["ms_per_step"])


words = kernels.slow_op_words  # one finding in a line's words


# ------------------------------------------------------------------------- in a run
def add_findings(block: dict, context, result: dict, compiling) -> None:
    """kernels.slow_ops in summary.json (and the closing line, through it): for a
    profiled run with --keep_kernels on a GPU. A reason instead where it cannot say."""
    config = context.config
    profile = result.get("profile") or {}
    if not (config.keep_kernels and profile.get("session")):
        return
    if getattr(compiling, "train_step", None) is None:
        block["slow_ops_not_read"] = "its step was not compiled ahead of fit"
        return
    path = os.path.join(context.logdir, LOG_FILE)
    if not os.path.isfile(path):
        block["slow_ops_not_read"] = ("XLA wrote no autotune log (it autotunes GPU kernels "
                                      "only, and nothing when its cache served the step)")
        return
    try:
        from callbacks.profiling import xprof

        with open(path, "rb") as f:
            log = read_log(f.read())
        calls = hlo_calls(compiling.train_step.as_text())
        events = xprof.events(xprof.session(os.path.join(profile["folder"],
                                                         profile["session"])))
        per_step, steps = device_us_per_step(events)
    except Exception as error:  # noqa: BLE001 - a finding is a hint: never fails the run
        block["slow_ops_not_read"] = f"{type(error).__name__}: {str(error)[:200]}"
        return
    block["slow_ops"] = findings(log, calls, per_step)
    block["slow_ops_traced_steps"] = steps
