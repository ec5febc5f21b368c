"""A profiled family's step breakdown, as the models recipe's result keeps it, and
two checks that its idle is the model's, not the profiler's (benchmarks/collect.py's
models).

The profiled run traces steps dispatched synchronously; its unprofiled twin run of the
same model times the model's own step. So the breakdown is set against that step (its
idle the model's, not the profiler's: callbacks/profiling/timed.py), and checked: the
FLOPs it counted a step against the app's MFU count of the same batch (within 2%),
and its idle share against the same step less the GPU's busy time read apart from it
(benchmarks/busy_time.py: the median execution's, per step; within 2 points).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from callbacks.profiling.breakdown import line as breakdown_line  # noqa: E402
from callbacks.profiling.timed import reconcile  # noqa: E402


def _ratio(a, b, digits: int = 4):
    return round(a / b, digits) if a is not None and b else None


def explained(traced: dict, unprofiled: dict, profiled: dict, busy: dict | None) -> dict:
    """The breakdown `traced` (the profiled run's summary.json's) set against the
    `unprofiled` run's timed step, with its line, and its checks (module docstring);
    `busy`: busy_time.py's figures of the profiled run's trace, None where absent."""
    step = unprofiled.get("step_time_ms")
    result = reconcile(traced, step)
    peak = profiled.get("peak_tflops_per_device")
    mfu_gflop = (profiled["train_gflops_per_image"] * profiled["global_batch_size"]
                 if profiled.get("train_gflops_per_image") and profiled.get("global_batch_size")
                 else None)
    counted = result.get("gflop")
    checks = {"counted_gflop_per_step": counted, "mfu_gflop_per_step": mfu_gflop,
              "counted_over_mfu": _ratio(counted, mfu_gflop),
              "ops_without_flops_per_step": result.get("ops_without_flops")}
    checks["flops_within_2_percent"] = (abs(checks["counted_over_mfu"] - 1) <= 0.02
                                        if checks["counted_over_mfu"] else None)
    if busy and busy.get("median_busy_ms") is not None and step:
        busy_ms = busy["median_busy_ms"] / (profiled.get("steps_per_execution") or 1)
        idle = result["parts"].get("idle", {}).get("share", 0.0)
        apart = max(step - busy_ms, 0.0) / step
        checks.update({"busy_ms_read_apart": round(busy_ms, 4), "idle_share": idle,
                       "idle_share_read_apart": round(apart, 4),
                       "idle_within_2_points": abs(idle - apart) <= 0.02})
    return {"breakdown": {**result, "line": breakdown_line(result, peak_tflops_per_device=peak)},
            "breakdown_checks": checks}
