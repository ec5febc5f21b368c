"""How long the GPU was busy in each execution of the training step: a second measure of
a step's device time, apart from the step breakdown's (callbacks/profiling/).

    python benchmarks/busy_time.py RUN/plugins/profile/<time>/<host>.xplane.pb \
        [--module=jit_train_step] [--json=OUT.json]

The breakdown splits the time between the app's host step markers ("train N") by the
ops XLA names; this reads the same trace by other lines: the device's "XLA Modules" line
(each execution of the step's module, as the GPU ran it) and every "Stream #" line's
kernels and copies, and takes for each execution the union of the streams' busy time
inside it. The models recipe of benchmarks/device_run.sh sets that against the
unprofiled run's timed step (the step time less the busy time is the idle the
breakdown must find, within 2 points: benchmarks/breakdown_checks.py). Needs xprof (with
tensorboard-plugin-profile).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys


def load(path: str) -> list[dict]:
    """The trace's spans, each with its thread's name as "thread"."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from trace_report import load as load_spans

    return load_spans(path)


def busy_per_execution(spans: list[dict], module: str = "jit_train_step") -> list[dict]:
    """For each execution of `module` on the device's XLA Modules line: its length and
    the union of every stream's busy time inside it, in ms."""
    executions = sorted((e for e in spans if e.get("thread", "").startswith("XLA Modules")
                         and str(e.get("name", "")).split("(")[0] == module),
                        key=lambda e: e["ts"])
    streams = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in spans
                     if e.get("thread", "").startswith("Stream #") and e.get("dur"))
    out = []
    for execution in executions:
        start, end = execution["ts"], execution["ts"] + execution.get("dur", 0)
        busy, reach = 0.0, start
        for a, b in streams:
            a, b = max(a, reach), min(b, end)
            if b > a:
                busy += b - a
                reach = b
        out.append({"ms": round((end - start) / 1e3, 4), "busy_ms": round(busy / 1e3, 4)})
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="a profiler trace, *.xplane.pb")
    parser.add_argument("--module", default="jit_train_step")
    parser.add_argument("--json", default="", help="write the figures here")
    args = parser.parse_args(argv)
    executions = busy_per_execution(load(args.trace), args.module)
    if not executions:
        raise SystemExit(f"{args.trace}: no execution of {args.module} on an XLA Modules line")
    figures = {"executions": executions,
               "median_busy_ms": statistics.median(e["busy_ms"] for e in executions),
               "median_ms": statistics.median(e["ms"] for e in executions)}
    print(f"{len(executions)} executions of {args.module}: median {figures['median_ms']:.2f} "
          f"ms on the device, {figures['median_busy_ms']:.2f} ms of it busy")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main(sys.argv[1:])
