"""The results JSON of the 2026-12-01 night calls (one H200), from their raw archives.

    python benchmarks/collect_step.py benchmarks/results/raw/2026-12-01-step \
        benchmarks/results/2026-12-01-h200-step.json

Each callN.tgz is what the device call brought back (logs, summaries, stage timelines);
step_kernels.txt is benchmarks/step_kernels.py on two GPU traces of the step at batch 256
(before and after the max-pool's hand-written gradient; the traces are not kept). Every
figure below is read from them, nothing is typed in.
"""

from __future__ import annotations

import json
import re
import sys

from collect_real_data_20k import Archive, real_data
from collect_warm_up import run
from results_io import emit

COMMANDS = {
    "call3": "bash benchmarks/h200_stem.sh (the layer checks on the GPU; layer variants, "
             "one process each, at batch 256 and 1,024; the 1,024 sweep's last variant was "
             "cut by the script's time limit)",
    "call4": "bash benchmarks/h200_real_data.sh (the app at commit bb86dba, the new layers "
             "the default: the GPU tests, synthetic, gpu, the PyTorch peer, grain)",
    "call5": "bash benchmarks/h200_step.sh (the app, every callback on, at 1,024 and 256; "
             "the torch.compile peer at 256; a trace of steps 20-25 at 256)",
    "call7": "bash benchmarks/h200_feed.sh (the gpu pipeline's knobs: hw_share 0.9 and 1.0, "
             "prefetch 3, through benchmarks/gpu_stages.py)",
}


def _variants(archive: Archive, name: str) -> dict:
    rows = [json.loads(line) for line in archive.text(name).splitlines()
            if line.startswith('{"variant"')]
    first = rows[0]["images_per_sec"]
    return {f"{i}:{r['variant']}": {"layer_set": r["layer_set"],
                                     "images_per_sec": r["images_per_sec"],
                                     "vs_first": round(r["images_per_sec"] / first, 4)}
            for i, r in enumerate(rows)}


def _profiles(text: str) -> dict:
    """step_kernels.txt: per traced step, the GPU time and its split by kernel kind."""
    out, current = {}, None
    for line in text.splitlines():
        if line.startswith("=== "):
            current = line.split()[1].rstrip(":")
            out[current] = {"source": line[4:], "by_category_ms": {}}
        elif current and "GPU kernel time per step" in line:
            out[current]["ms_per_step"] = float(re.findall(r"([\d.]+) ms", line)[0])
        elif current and re.match(r"\s{2}\S.*\s+[\d.]+ ms\s+[\d.]+%$", line):
            name, ms = re.match(r"\s{2}(.+?)\s+([\d.]+) ms", line).groups()
            out[current]["by_category_ms"][name] = float(ms)
    return out


def _app(archive: Archive, name: str) -> dict:
    summary = archive.json(f"{name}.json")
    return {k: summary[k] for k in ("global_batch_size", "images_per_sec", "mfu",
                                    "step_time_ms", "step_time_jitter",
                                    "usd_per_million_images")}


def main(raw: str, out: str) -> None:
    calls = {n: Archive(f"{raw}/{n}.tgz") for n in COMMANDS}
    head = {n: run(calls["call4"], n) for n in ["synthetic", "gpu", "grain"]}
    feed = {n: run(calls["call7"], n, epochs=3)
            for n in ["syn", "gpu", "gpu_hw09", "gpu_pf3", "gpu_hw1"]}
    for name, row in feed.items():
        row["fraction_of_synthetic"] = round(
            row["images_per_sec"] / feed["syn"]["images_per_sec"], 4)
    peer4 = calls["call4"].json("peer.json")["rows"][0]["images_per_sec"]
    app = {b: _app(calls["call5"], f"app{b}") for b in (1024, 256)}
    peer = calls["call5"].json("peer.json")["rows"][0]
    result = {
        "what": "ResNet-50 v1.5 bf16, Keras 3.15.1 on JAX, one H200 (16 cores): the step "
                "after the max-pool's hand-written gradient and the 16-channel "
                "space-to-depth stem (app/engine/layers.py), and real JPEGs at that speed",
        "date": "2026-12-01",
        "commands": COMMANDS,
        "one_gpu": {
            "note": "call5: every callback on, synthetic data, one call with the peer",
            "app_best_batch": app[1024],
            "app_batch_256": app[256],
            "peer_batch_256": {"images_per_sec": peer["images_per_sec"],
                               "step_time_ms": peer["step_time_ms"],
                               "what": "torchvision resnet50, channels_last, bf16 autocast, "
                                       "torch.compile"},
            "ratio_app_over_peer_at_256": round(
                app[256]["images_per_sec"] / peer["images_per_sec"], 4),
        },
        "layer_variants": {
            "batch_256": _variants(calls["call3"], "variants_256.log"),
            "batch_1024": _variants(calls["call3"], "variants_1024.log"),
        },
        "step_profile_batch_256": _profiles(open(f"{raw}/step_kernels.txt").read()),
        "real_data": {
            **real_data(head["synthetic"], head["gpu"], head["grain"], peer4),
            "notes": [
                "call4, the app's defaults at commit bb86dba: the step is faster than in "
                "2026-12-01-h200-warm-up.json (its synthetic figure), and fit waited "
                f"{calls['call4'].json('gpu.json')['input_wait_seconds']} s for the gpu "
                "pipeline's batches in its 4 epochs",
                "call7 (feed) tries the pipeline's knobs against synthetic data in one call",
                "two-GPU scaling not run: only the one-H200 kind was lent",
            ],
        },
        "feed": feed,
    }
    emit(result, out)


if __name__ == "__main__":
    main(*sys.argv[1:3])
