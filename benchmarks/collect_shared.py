"""The results JSON of the 2026-12-01 evening calls (one H200): JPEG bytes through shared
memory, and BatchNorm with its ReLU inside, from their raw archives.

    python benchmarks/collect_shared.py benchmarks/results/raw/2026-12-01-shared \
        benchmarks/results/2026-12-01-h200-shared.json

Each callN.tgz is what a device call brought back; every figure below is read from
them, nothing is typed in.
"""

from __future__ import annotations

import sys

from collect_real_data_20k import Archive, real_data_of
from collect_step import _variants
from collect_warm_up import run
from results_io import emit

COMMANDS = {
    "call1": "bash benchmarks/h200_real_data.sh at commit 5ecb4d9 (the bytes through the "
             "planning pool's pipe), then python3 benchmarks/plan_transfer.py /tmp/jpegs "
             "--workers=8 (and 4) --batches=300 on its 21,504 files",
    "call2": "bash benchmarks/h200_real_data.sh with read_in='shared' the default (the "
             "change of commit 8e5d049, before it was committed)",
    "call3": "BN_RELU=1 bash benchmarks/h200_shared.sh (shared, pipe, shared again beside "
             "synthetic data through benchmarks/gpu_stages.py; then BatchNorm with its "
             "ReLU inside against the default layers at 256, A B A B)",
    "call4": "bash benchmarks/h200_shadow.sh (synthetic training beside a GpuJpegStream "
             "decoding as fast as it can; both shadow runs were cut by the script's 80 s "
             "limit: the first after one epoch, the second at its first step)",
}


def _transfer(archive: Archive) -> dict:
    return {f"workers_{w}": {k: v for k, v in archive.json(f"plan_transfer_w{w}.json").items()
                             if k != "workers"} for w in (8, 4)}


def main(raw: str, out: str) -> None:
    calls = {n: Archive(f"{raw}/{n}.tgz") for n in COMMANDS}
    feed = {n: run(calls["call3"], n, epochs=3) for n in ["syn", "shared", "pipe", "shared2"]}
    for row in feed.values():
        row["fraction_of_synthetic"] = round(
            row["images_per_sec"] / feed["syn"]["images_per_sec"], 4)
    shadow = calls["call4"].json("syn_shadow.json")
    stages = calls["call4"].json("syn_shadow.stages.json")
    result = {
        "what": "ResNet-50 v1.5 bf16, Keras 3.15.1 on JAX, one H200 (16 cores), real JPEGs "
                "(ImageNet's spread of sizes) through the gpu pipeline at batch 256: the "
                "bytes of each batch handed from the planning processes through shared "
                "memory instead of the process pool's pipe",
        "date": "2026-12-01",
        "commands": COMMANDS,
        "plan_transfer": {
            "note": "call1: 300 batches of 256 of the call's files; what the training "
                    "process can receive a second and its CPU a batch",
            **_transfer(calls["call1"]),
        },
        "real_data_pipe": real_data_of(calls["call1"]),
        "real_data": real_data_of(calls["call2"]),
        "feed": feed,
        "shadow": {
            "note": "call4, cut by its time limit after its first epoch: synthetic training "
                    "beside a pipeline decoding unthrottled (more than training takes)",
            "images_per_sec_synthetic": calls["call4"].json("syn.json")["images_per_sec"],
            "images_per_sec_beside_shadow": shadow["images_per_sec"],
            "shadow_batches_decoded": stages["calls"].get("shadow/batches"),
        },
        "batchnorm_relu_batch_256": _variants(calls["call3"], "variants_256.log"),
    }
    emit(result, out)


if __name__ == "__main__":
    main(*sys.argv[1:3])
