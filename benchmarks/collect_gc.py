"""The results JSON of the 2026-12-01 night calls (one H200): why the gpu pipeline
trailed synthetic data by 3-8%, Python's full garbage collections, and the figures
after the heap is frozen again once fit has compiled (callbacks/heap.py).

    python benchmarks/collect_gc.py benchmarks/results/raw/2026-12-01-gc \
        benchmarks/results/2026-12-01-h200-gc.json

Each callN_*.tgz is what a device call brought back, call1_trace_report_*.txt what
benchmarks/trace_report.py printed for call 1's traces (the traces themselves, 5 MB,
are not kept); every figure below is read from them, nothing is typed in.
"""

from __future__ import annotations

import re
import sys

from collect_real_data_20k import Archive, real_data_of, run
from gc_pauses import full_collections
from results_io import emit

COMMANDS = {
    "call1": "bash benchmarks/h200_lane_trace.sh (10,240 JPEGs, 3 epochs; traces of batches "
             "100-106 on synthetic data and with the gpu pipeline, then 6, 3 and 2 "
             "decoding lanes untraced)",
    "call2": "bash benchmarks/h200_real_data.sh at commit 0e55a4c (before the change)",
    "call3": "bash benchmarks/h200_real_timeline.sh (20,480 JPEGs, 4 epochs, the stage "
             "timeline with Python's collections: synthetic, the pipeline twice, 8 lanes)",
    "call4": "GC_TIMELINE=1 bash benchmarks/h200_real_data.sh with callbacks/heap.py "
             "(FreezeAfterCompile), before it was committed",
}


def _timed(archive: Archive, name: str) -> dict:
    row = run(archive, name)
    found = full_collections(archive.json(f"{name}.stages.json"))
    if found is not None:
        row.update(found)
    return row


def _with_fractions(rows: dict, base: str, key: str = "fraction_of_synthetic") -> dict:
    for row in rows.values():
        row[key] = round(
            row["images_per_sec"] / rows[base]["images_per_sec"], 4)
    return rows


def _trace(text: str) -> dict:
    modules = re.search(r"^modules: (.*)$", text, re.M).group(1).split(", ")
    train = [float(m.split()[-1]) for m in modules if m.startswith("jit_train_step")]
    crop = [float(m.split()[-1]) for m in modules if m.startswith("jit_step")]
    return {"train_step_ms": train, "crop_resize_step_ms": crop,
            "other_streams_busy_ms": float(
                re.search(r"^other streams busy ([\d.]+) ms", text, re.M).group(1)),
            "report": text.splitlines()[:8]}


def main(raw: str, out: str) -> None:
    call1, call3 = Archive(f"{raw}/call1_logs.tgz"), Archive(f"{raw}/call3_logs.tgz")
    call2, call4 = (Archive(f"{raw}/call2_real_data.tgz"),
                    Archive(f"{raw}/call4_real_data.tgz"))
    traces = {}
    for name in ("syn", "gpu"):
        with open(f"{raw}/call1_trace_report_{name}.txt") as f:
            traces[name] = _trace(f.read())
    after = real_data_of(call4)
    timed = _timed(call4, "gpu_t")
    timed["fraction_of_synthetic"] = round(
        timed["images_per_sec"] / after["images_per_sec_synthetic"], 4)
    result = {
        "what": "ResNet-50 v1.5 bf16, Keras 3.15.1 on JAX, one H200 (16 cores), batch 256, "
                "every callback, real JPEGs (ImageNet's spread of sizes) through the gpu "
                "pipeline: where its last 3-8% against synthetic data went, and the "
                "figures once the heap is frozen again after fit's compile",
        "date": "2026-12-01",
        "commands": COMMANDS,
        "real_data": after,
        "real_data_timed_inside": {
            "note": "call4: the gpu run again through benchmarks/gpu_stages.py (TIMELINE, "
                    "GC_LOG); its first full collection is the refreeze itself, in warm-up",
            **timed},
        "real_data_before": real_data_of(call2),
        "lanes_call1": _with_fractions(
            {n: run(call1, n) for n in ["lanes6", "lanes3", "lanes2"]}, "lanes6",
            "fraction_of_lanes6"),
        "full_collections_call3": _with_fractions(
            {n: _timed(call3, n) for n in ["syn", "gpu", "gpu_b", "lanes8"]}, "syn"),
        "trace_call1": {
            "note": "batches 100-106, GPU and CUDA calls only, without the profiler "
                    "callback; XLA's modules on its compute stream in ms",
            **traces},
    }
    emit(result, out)


if __name__ == "__main__":
    main(*sys.argv[1:3])
