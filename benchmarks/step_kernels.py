"""Where a training step's GPU time goes, kernel by kernel, from a profiler trace.

    python benchmarks/step_kernels.py RUN/plugins/profile/<time>/<host>.trace.json.gz \
        [--top=25] [--json=OUT.json]

(the trace the app writes with --profile_steps, beside its xplane.pb). It takes the
busiest GPU stream (XLA's compute stream), keeps its whole steps (a step starts where a
forward-pass kernel, scope `jvp(...)`, follows a backward one, `transpose(jvp(...))`;
the stretch before the first start and after the last is dropped), and prints per step: the time in convolutions and matrix products (cuDNN, cuBLAS, CUTLASS
kernels), in XLA's reduction fusions, and in its other fusions (elementwise: BatchNorm's
apply, ReLU, residual adds, and their gradients), then the TOP (25) kernels with the
layer XLA names for them where it does (fusions carry no layer name); --json writes the
per-step figures (steps, ms_per_step, by_category_ms) for benchmarks/collect.py. The
step recipe of benchmarks/device_run.sh runs it on its trace. Needs only the standard
library.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import re
import sys

_MATMUL = ("xmma", "nvjet", "cutlass", "gemm", "cudnn", "cublas", "splitKreduce",
           "nhwcAddPadding")


def category(kernel: str) -> str:
    if any(word in kernel for word in _MATMUL):
        return "convolution/matmul"
    if "reduce" in kernel:
        return "reduction fusion"
    if kernel.startswith(("Memset", "Memcpy", "memcpy")):
        return "copies/memsets"
    return "other fusion (elementwise)"


def load(path: str):
    """The compute stream's kernels of the trace's whole steps, and how many steps."""
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X"]
    gpu_pids = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") ==
                "process_name" and "GPU" in str(e["args"].get("name", ""))}
    busy = collections.Counter((e["pid"], e["tid"]) for e in spans if e["pid"] in gpu_pids)
    if not busy:
        raise SystemExit(f"{path}: no GPU kernels in this trace")
    stream = busy.most_common(1)[0][0]
    kernels = sorted((e for e in spans if (e["pid"], e["tid"]) == stream),
                     key=lambda e: e["ts"])
    starts, backward = [], False
    for i, e in enumerate(kernels):
        scope = e.get("args", {}).get("name", "")
        if "transpose(jvp(" in scope:
            backward = True
        elif "jvp(" in scope and backward:
            starts.append(i)
            backward = False
    if len(starts) < 2:
        raise SystemExit(f"{path}: fewer than one whole train step in this trace")
    return kernels[starts[0]:starts[-1]], len(starts) - 1


def report(kernels, steps: int, top: int = 25) -> dict:
    per_kernel, count, layer = collections.Counter(), collections.Counter(), {}
    for e in kernels:
        name = e["name"]
        per_kernel[name] += e.get("dur", 0) / 1000.0
        count[name] += 1
        scope = e.get("args", {}).get("name", "")
        if scope:
            layer[name] = re.sub(r"^jit\(train_step\)/", "", scope)
    by_category = collections.Counter()
    for name, ms in per_kernel.items():
        by_category[category(name)] += ms
    total = sum(per_kernel.values()) / steps
    print(f"{steps} steps in the trace; GPU kernel time per step {total:.2f} ms")
    for name, ms in by_category.most_common():
        print(f"  {name:28s} {ms / steps:7.2f} ms  {ms / steps / total:6.1%}")
    print(f"top {top} kernels (ms per step, launches per step, layer):")
    for name, ms in per_kernel.most_common(top):
        print(f"  {ms / steps:7.3f}  x{count[name] / steps:5.1f}  {name[:60]:60s} "
              f"{layer.get(name, '')[:70]}")
    return {"steps": steps, "ms_per_step": round(total, 3),
            "by_category_ms": {k: round(v / steps, 3) for k, v in by_category.items()}}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="a profiler trace, *.trace.json.gz")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--json", default="", help="write the per-step figures here")
    args = parser.parse_args(argv)
    figures = report(*load(args.trace), args.top)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main(sys.argv[1:])
