"""The results JSON of the 2026-12-01 evening calls (one H200), from their raw archives.

    python benchmarks/collect_warm_up.py benchmarks/results/raw/2026-12-01-warm-up \
        benchmarks/results/2026-12-01-h200-warm-up.json

Each callN.tgz is what the device call brought back (logs, summaries, stage timelines,
nvJPEG's decode calls); call1_trace_reports.txt is benchmarks/trace_report.py on call1's
GPU traces (the traces themselves, 16 MB, are not kept). Every figure below is read
from them, nothing is typed in.
"""

from __future__ import annotations

import re
import sys

from collect_real_data_20k import Archive, real_data
from collect_real_data_20k import run as run_20k
from results_io import emit

COMMANDS = {
    "call1": "bash benchmarks/h200_first_epoch.sh (nvJPEG's decode calls and GPU traces of "
             "epochs 1 and 4; its buffers padded by 64 MiB)",
    "call2": "bash benchmarks/h200_growth.sh (benchmarks/nvjpeg_growth_probe.py: which "
             "warm-up stops nvJPEG growing its buffers)",
    "call3": "bash benchmarks/h200_warm_up.sh (the GPU tests; the app's warm-up in the probe; "
             "the gpu pipeline warmed up and not)",
    "call4": "bash benchmarks/h200_workers.sh (4, 6 and 8 planning processes)",
    "call5": "bash benchmarks/h200_real_data.sh (the app's defaults then: warm-up, 8 planning "
             "processes; synthetic, gpu, the PyTorch peer, grain)",
    "call6": "bash benchmarks/h200_gc.sh (Python's collections timed; gc.freeze at fit's "
             "first batch; app/modes/train.py now freezes just before fit)",
}


def run(archive: Archive, name: str, epochs: int = 4) -> dict:
    """collect_real_data_20k.run's figures, and per epoch what the stages recorded
    (the run's last `epochs` epochs)."""
    result = run_20k(archive, name)
    if f"{name}.stages.json" in archive.names:
        result.update(_epoch_stats(archive.json(f"{name}.stages.json"), epochs))
    return result


def _epoch_stats(stages: dict, epochs: int = 4) -> dict:
    """Per training epoch (split where fit paused over 1 s between batches; the last
    `epochs`): fit's waits for a batch, nvJPEG's decode calls that took device memory,
    and Python's full collections (generation 2) and their longest pause."""
    timeline = stages["timeline"]
    takes = [t[0] for t in timeline if t[2] == "MainThread" and t[3] == "take"]
    if not takes:  # synthetic data: no stream to wait for
        return {}
    bounds = [b for a, b in zip(takes, takes[1:]) if b - a > 1.0][-epochs:] + [float("inf")]

    def per_epoch(items, value):
        return [round(sum(value(x) for x in items if a <= x[0] < b), 4)
                for a, b in zip(bounds, bounds[1:])]

    result = {"fit_wait_seconds_by_epoch": per_epoch(
        [t for t in timeline if t[2] == "MainThread" and t[3] == "take"], lambda t: t[1])}
    calls = stages.get("nvjpeg_calls") or []
    if calls:
        result["nvjpeg_decodes_taking_memory_by_epoch"] = per_epoch(calls, lambda c: c[5] != 0)
        result["nvjpeg_memory_taken_mib_by_epoch"] = per_epoch(calls, lambda c: c[5] / 2**20)
        result["nvjpeg_decode_call_ms_mean_by_epoch"] = [
            round(1e3 * total / count, 1) if count else None
            for total, count in zip(per_epoch(calls, lambda c: c[1]),
                                    per_epoch(calls, lambda c: 1))]
    full = [t for t in timeline if t[3] == "gc 2"]
    if any(t[3].startswith("gc") for t in timeline):
        result["full_collections_by_epoch"] = per_epoch(full, lambda t: 1)
        result["full_collection_longest_ms_in_training"] = round(1e3 * max(
            [t[1] for t in full if t[0] >= bounds[0]] or [0.0]), 1)
    return result


def _probe(text: str) -> dict:
    rows = {}
    for line in text.splitlines():
        match = re.match(r"(\w+)\s+warm-up took\s+([\d.]+) MiB.*then (\d+)/(\d+) decodes took "
                         r"memory \(([\d.]+) MiB", line)
        if match:
            name, warm, grew, total, taken = match.groups()
            rows[name] = {"warm_up_mib": float(warm), "decodes_taking_memory": int(grew),
                          "decodes": int(total), "memory_taken_mib": float(taken)}
    return rows


def _trace_lines(text: str) -> dict:
    """From call1's trace reports: cuMemFree calls and GPU idle per traced stretch."""
    out, current = {}, None
    for line in text.splitlines():
        if line.startswith("=== "):
            current = line.split()[1]
            out[current] = {"cuMemFree_calls": 0, "cuMemFree_ms": 0.0}
        elif current and "cuMemFree_v2" in line and "calls, longest" in line:
            ms, calls = re.findall(r"([\d.]+) ms\s+(\d+) calls", line)[0]
            out[current].update(cuMemFree_calls=int(calls), cuMemFree_ms=float(ms))
        elif current and line.startswith("GPU idle"):
            out[current]["gpu_idle_ms"] = float(re.findall(r"\): ([\d.]+) ms", line)[0])
    return out


def main(raw: str, out: str) -> None:
    calls = {n: Archive(f"{raw}/{n}.tgz") for n in COMMANDS}
    head = {n: run(calls["call5"], n) for n in ["synthetic", "gpu", "grain"]}
    gc_runs = {n: run(calls["call6"], n) for n in ["syn", "gpu", "gpu_freeze"]}
    peer = calls["call5"].json("peer.json")["rows"][0]
    syn5, gpu5 = head["synthetic"]["images_per_sec"], head["gpu"]["images_per_sec"]
    result = {
        "what": "ResNet-50 v1.5 bf16, Keras 3.15.1 on JAX, batch 256, every callback on, "
                "one H200 (16 cores); 20,480 training JPEGs with ImageNet's spread of sizes "
                "(benchmarks/make_jpegs.py, mean 109.5 KiB); 4 epochs of 80 steps, synthetic "
                "data with the same epochs and steps",
        "date": "2026-12-01",
        "commands": COMMANDS,
        "real_data": {
            **real_data(gc_runs["syn"], gc_runs["gpu_freeze"], head["grain"],
                        peer["images_per_sec"]),
            "same_call_as_the_peer": {
                "call": "call5", "images_per_sec_synthetic": syn5,
                "images_per_sec_gpu_pipeline": gpu5,
                "fraction_of_synthetic": round(gpu5 / syn5, 4),
                "epochs_gpu_pipeline": head["gpu"]["epochs_images_per_sec"],
                "speedup_over_peer": round(gpu5 / peer["images_per_sec"], 3)},
            "notes": [
                "The headline pair is call6 (synthetic and the gpu pipeline in one call, "
                "through benchmarks/gpu_stages.py, which runs app/main.py inside): the gpu "
                "pipeline with nvJPEG warmed up, 8 planning processes, and the heap frozen "
                "when fit asks for its first batch (GC_FREEZE); app/modes/train.py now "
                "freezes it just before fit (frozen_heap); the app with that commit did "
                "not run on a GPU: the session's device time was spent.",
                "The peer (PyTorch, torch.compile, DataLoader of 16 workers) and grain ran "
                "in call5 beside the app's defaults before the freeze (same_call_as_the_peer); "
                "speedup_over_peer divides call6's gpu figure by call5's peer.",
                "two-GPU scaling not run: only the one-H200 kind was lent",
            ],
        },
        "diagnosis": {
            "call1_first_epoch": {n: run(calls["call1"], n) for n in ["syn", "gpu", "gpu_pad64"]},
            "call1_traces": _trace_lines(open(f"{raw}/call1_trace_reports.txt").read()),
            "call2_growth_probe": _probe(calls["call2"].text("growth.log")),
            "call3_warm_up": {n: run(calls["call3"], n) for n in ["syn", "gpu", "gpu_nowarm"]},
            "call3_growth_probe": _probe(calls["call3"].text("growth.log")),
            "call4_workers": {n: run(calls["call4"], n) for n in ["gpu_w4", "gpu_w6", "gpu_w8"]},
            "call5_defaults": head,
            "call6_gc": gc_runs,
        },
    }
    emit(result, out)


if __name__ == "__main__":
    main(*sys.argv[1:3])
