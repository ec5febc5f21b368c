"""Turns the raw outputs of the GPU calls into one results JSON (committed).

    python benchmarks/collect_results.py benchmarks/results/raw/2026-11-30 \
        benchmarks/results/2026-11-30-h200.json

Every figure comes from a file under the raw folder, written on the GPU machine by
the scripts named in "commands"; nothing is typed in.
"""

from __future__ import annotations

import json
import os
import re
import sys


def load(raw, path):
    with open(os.path.join(raw, path)) as f:
        return json.load(f)


def sweep_from_log(raw, path):
    """{batch: images/sec} from the "[sweep] global batch N: X images/sec" lines."""
    with open(os.path.join(raw, path)) as f:
        return {int(b): float(r.replace(",", "")) for b, r in
                re.findall(r"\[sweep\] global batch (\d+): ([\d,.]+) images/sec", f.read())}


def rows_by_batch(rows):
    return {r["global_batch_size"]: r for r in rows if r.get("images_per_sec")}


def main(raw, out):
    final_peer = rows_by_batch(load(raw, "call3-final/peer.json")["rows"])
    final_sweep = sweep_from_log(raw, "call3-final/sweep.log")
    app256 = load(raw, "call3-final/app256.json")
    app1024 = load(raw, "call4-app1024/app1024.json")
    peer_best = max(final_peer.values(), key=lambda r: r["images_per_sec"])
    app_best_batch = max(final_sweep, key=final_sweep.get)
    layers_sweep = rows_by_batch(load(raw, "call2-layers-overhead-sweep/sweep.json")["sweep"])
    keras_sweep = rows_by_batch(load(raw, "call1-explore/sweep_spe1.json")["sweep"])
    one = rows_by_batch(load(raw, "call5-two-gpus/one_gpu.json")["sweep"])
    two = rows_by_batch(load(raw, "call5-two-gpus/two_gpus.json")["sweep"])
    with open(os.path.join(raw, "call3-final/machine.txt")) as f:
        gpu, versions = f.read().strip().splitlines()[:2]
    jax_version, keras_version, torch_version = versions.split()
    overhead = load(raw, "call2-layers-overhead-sweep/overhead.json")

    result = {
        "date": "2026-11-30",
        "machine": {"gpu": gpu, "kind": "device tool nvidia-h200 (1 GPU) and nvidia-h200-x2"},
        "versions": {"jax": jax_version, "keras": keras_version, "torch": torch_version,
                     "torchvision": load(raw, "call3-final/peer.json")["versions"]["torchvision"],
                     "python": app256["versions"]["python"]},
        "workload": "ResNet-50 v1.5 training step, 224x224, 1000 classes, synthetic data "
                    "already on the GPU, SGD + momentum, label smoothing 0.1",
        "app": "python app/main.py --accelerator=gpu --backend=jax --model=resnet50 "
               "--dataset=synthetic (Keras 3 model.fit, mixed_bfloat16, app/engine/layers.py)",
        "peer": load(raw, "call3-final/peer.json")["peer"],
        "commands": {
            "call3 (one call: app and peer)": "bash benchmarks/h200_final.sh",
            "call4 (next call, same warm machine)": "app/main.py ... --global_batch_size=1024 "
                                                    "--epochs=1 --steps_per_epoch=30 "
                                                    "--validation_steps=-1",
            "call5 (two GPUs)": "bash benchmarks/h200x2_scaling.sh",
            "call2 (callbacks, layers)": "bash benchmarks/h200_b1.sh",
            "call1 (Keras layers baseline)": "bash benchmarks/h200_explore.sh",
        },
        "one_gpu_same_call": {
            "note": "call3: app and peer measured in one call on one H200",
            "batch_256": {
                "app_all_callbacks_images_per_sec": app256["images_per_sec"],
                "peer_images_per_sec": final_peer[256]["images_per_sec"],
                "ratio_app_over_peer": round(app256["images_per_sec"]
                                             / final_peer[256]["images_per_sec"], 4),
            },
            "each_best_batch": {
                "app": {"global_batch_size": app_best_batch,
                        "images_per_sec": final_sweep[app_best_batch],
                        "callbacks": "sweep (throughput, MFU, energy)"},
                "peer": {"global_batch_size": peer_best["global_batch_size"],
                         "images_per_sec": peer_best["images_per_sec"]},
                "ratio_app_over_peer": round(final_sweep[app_best_batch]
                                             / peer_best["images_per_sec"], 4),
            },
            "app_sweep_images_per_sec": final_sweep,
            "peer_images_per_sec": {b: r["images_per_sec"] for b, r in final_peer.items()},
            "app_sweep_note": "the 2048 size was cut off by the script's own time limit "
                              "while compiling (not out of memory)",
        },
        "app_all_callbacks_at_best_batch": {
            "note": "call4, the next call on the same warm machine (not the same call as "
                    "the peer)",
            "global_batch_size": 1024, "images_per_sec": app1024["images_per_sec"],
            "ratio_over_peer_best_of_call3": round(app1024["images_per_sec"]
                                                   / peer_best["images_per_sec"], 4),
            "mfu": app1024["mfu"], "step_time_ms": app1024["step_time_ms"],
            "step_time_jitter": app1024["step_time_jitter"],
            "usd_per_million_images": app1024["usd_per_million_images"],
        },
        "callback_overhead": {k: overhead[k] for k in (
            "global_batch_size", "timing", "images_per_sec_no_callbacks",
            "images_per_sec_all_callbacks", "ratio_all_over_none", "rates",
            "fixed_seconds_per_fit")},
        "layers": {
            "note": "batch 256, separate calls (call1: Keras's BatchNormalization, "
                    "MaxPooling2D and 7x7 Conv2D stem; call2: app/engine/layers.py)",
            "keras_layers_images_per_sec": keras_sweep[256]["images_per_sec"],
            "app_layers_images_per_sec": layers_sweep[256]["images_per_sec"],
            "speedup": round(layers_sweep[256]["images_per_sec"]
                             / keras_sweep[256]["images_per_sec"], 4),
            "in_process_variant_table": "call2/variants.json measured all variants in one "
                                        "process; every variant after the first ran ~40% "
                                        "slower there, so it is not used "
                                        "(benchmarks/model_variants.py now forks per variant)",
        },
        "memory": {
            "app_peak_gib": {b: r["peak_memory_gib"] for b, r in layers_sweep.items()},
            "peer_peak_gib": {b: r["peak_memory_gib"] for b, r in final_peer.items()},
            "app_gib_per_1024_images_over_peer": round(
                layers_sweep[1024]["peak_memory_gib"] / final_peer[1024]["peak_memory_gib"], 4),
        },
        "energy_app_sweep": {b: {"power_watts": r["power_watts"],
                                 "joules_per_image": r["joules_per_image"]}
                             for b, r in layers_sweep.items()},
        "two_gpus": {
            "note": "call5: one call on two H200s (NVLink, NV18); 1 GPU via "
                    "CUDA_VISIBLE_DEVICES=0; same per-GPU batch",
            "per_gpu_256": {"one_gpu": one[256]["images_per_sec"],
                            "two_gpus": two[512]["images_per_sec"],
                            "scaling": round(two[512]["images_per_sec"]
                                             / (2 * one[256]["images_per_sec"]), 4)},
            "per_gpu_1024": {"one_gpu": one[1024]["images_per_sec"],
                             "two_gpus": two[2048]["images_per_sec"],
                             "scaling": round(two[2048]["images_per_sec"]
                                              / (2 * one[1024]["images_per_sec"]), 4)},
        },
    }
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main(*sys.argv[1:3])
