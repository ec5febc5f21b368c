"""The traced steps' breakdown set against the timed steps' time: idle that is real.

A traced step is not a timed one. Tracing slows what it traces: on JAX the Profiler
callback is not `async_safe`, so a profiled fit dispatches each step only once the one
before has finished, and the trace's own bookkeeping adds to every op on a CPU (there
a sweep point's traced steps ran 0.85x-2.44x the timed ones). Measured on one H100, a
profiled ConvNeXt-T step took 69.8 ms where an unprofiled one took 57.1, and the
breakdown called the 12.7 ms difference the model's idle time (both by hand in
tests/callbacks/profiling/test_timed.py).

So the breakdown is reconciled with the step the speed comes from (the timed window's
step time, callbacks/throughput.py): each kind's device time stays as the trace measured
it; idle is the timed step less the device's busy time (the kinds' time summed), never
below 0; where the busy time exceeds the timed step (the traced ops themselves ran
slower), the parts are shares of the busy time and `over_step_ms` says by how much.
The traced step stays as `traced_step_ms`; what it took beyond the timed step is the
profiler's (`profiler_ms`), not the model's.

A profiled JAX run's own timed steps dispatch synchronously too (the Profiler is in
their fit): its idle is that of such steps. A sweep point or ladder rung times its steps
without the Profiler and traces after them, and benchmarks/collect.py sets a profiled
run against an unprofiled run of the same model: their idle is the model's.
"""

from __future__ import annotations

import math


def reconcile(result: dict, timed_step_ms: float | None) -> dict:
    """The breakdown `result` (breakdown.breakdown's, or one reconciled before) of the
    timed step; `result` itself where there is no timed step (None, 0, not finite) or
    no part was traced (a timed step alone would read as all idle).

    Returns:
        A new dict: `step_ms` the timed step, `traced_step_ms` the traced one,
        `busy_ms` the kinds' time, `profiler_ms` the traced step less the timed one
        (where positive), `over_step_ms` the busy time less the timed step (where
        positive); each part's `ms` as traced but idle's, and its `share` of the timed
        step (of the busy time where that is longer).
    """
    if not isinstance(timed_step_ms, (int, float)) or not math.isfinite(timed_step_ms) \
            or timed_step_ms <= 0 or not isinstance(result, dict) \
            or not result.get("parts"):
        return result
    traced = result.get("traced_step_ms", result.get("step_ms"))
    parts = {kind: part for kind, part in (result.get("parts") or {}).items()
             if kind != "idle"}
    busy = sum(part.get("ms", 0.0) for part in parts.values())
    idle = max(timed_step_ms - busy, 0.0)
    whole = max(timed_step_ms, busy)
    reconciled = {kind: {**part, "share": round(part.get("ms", 0.0) / whole, 4)}
                  for kind, part in parts.items()}
    if idle > 0:
        reconciled["idle"] = {"ms": round(idle, 4), "share": round(idle / whole, 4)}
    out = {**result, "step_ms": round(timed_step_ms, 4), "traced_step_ms": traced,
           "busy_ms": round(busy, 4), "parts": reconciled}
    for key in ("profiler_ms", "over_step_ms"):
        out.pop(key, None)
    if isinstance(traced, (int, float)) and traced > timed_step_ms:
        out["profiler_ms"] = round(traced - timed_step_ms, 4)
    if busy > timed_step_ms:
        out["over_step_ms"] = round(busy - timed_step_ms, 4)
    return out


def step_words(result: dict) -> str:
    """'step 57.1 ms' for a traced breakdown; for a reconciled one 'step 57.1 ms timed
    (traced 69.8 ms, 12.7 ms of it the profiler's)', or '(traced 48.2 ms, 0.85x)', and
    '; its ops 3.1 ms over the timed step' where they are."""
    step = f"step {result['step_ms']:.1f} ms"
    traced = result.get("traced_step_ms")
    if not isinstance(traced, (int, float)):
        return step
    words = f"{step} timed (traced {traced:.1f} ms"
    if isinstance(result.get("profiler_ms"), (int, float)):
        words += f", {result['profiler_ms']:.1f} ms of it the profiler's"
    elif result["step_ms"] > 0:
        words += f", {traced / result['step_ms']:.2f}x"
    if isinstance(result.get("over_step_ms"), (int, float)):
        words += f"; its ops {result['over_step_ms']:.1f} ms over the timed step"
    return words + ")"
