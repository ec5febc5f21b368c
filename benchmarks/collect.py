"""A result JSON from what `bash benchmarks/device_run.sh RECIPE` wrote.

    python benchmarks/collect.py RECIPE OUT_DIR benchmarks/results/DATE-NAME.json

OUT_DIR is the runner's $OUT (./bench-out by default) or its RECIPE folder. Every
figure is read from the logs, summaries and peer results there, nothing is typed in;
a run that failed or did not finish reads null, with its exit code under "exits". The
JSON names the command, the machine and the date the runner recorded, and under
"provenance" the git commit (the runner's, else `git rev-parse HEAD` where this runs:
collect right after the run) and whether the tree had uncommitted changes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from breakdown_checks import explained
from results_io import Folder, emit, ratio
from spread import repeat, spread
from time_to_accuracy import coldstart, fashion_mnist

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARY_KEYS = ("global_batch_size", "num_replicas", "input_pipeline", "images_per_sec",
                "images_per_sec_per_device", "images_per_sec_wall", "step_time_ms",
                "step_time_jitter", "mfu", "input_wait_seconds", "epochs_completed",
                "wall_seconds", "usd_per_million_images", "device_kind")
RESNET = "ResNet-50 v1.5 bf16, Keras on JAX, every callback on"


def rate(row):
    return row.get("images_per_sec") if row else None


def epochs(log: str | None) -> list[float]:
    """images/sec of each epoch line the app printed (--verbose=2)."""
    return [float(m.replace(",", "")) for m in
            re.findall(r"^epoch \d+/\d+ .* - ([\d,]+) images/sec", log or "", re.M)]


def run(folder: Folder, name: str) -> dict | None:
    """One app run: its summary's figures and its epochs' images/sec."""
    summary = folder.json(f"{name}.json")
    if summary is None:
        return None
    return {**{k: summary.get(k) for k in SUMMARY_KEYS},
            "epochs_images_per_sec": epochs(folder.text(f"{name}.log"))}


def peer(folder: Folder, name: str = "peer") -> dict | None:
    result = folder.json(f"{name}.json")
    return result["rows"][0] if result and result.get("rows") else None


def sweep_rate(folder: Folder, name: str, batch: int):
    sweep = folder.json(f"{name}.sweep.json")
    rows = [r for r in (sweep or {}).get("sweep", []) if r.get("global_batch_size") == batch]
    return rows[0].get("images_per_sec") if rows else None


def step(folder: Folder) -> dict:
    app = {b: run(folder, f"app{b}") for b in (1024, 256)}
    row = peer(folder)
    return {
        "what": f"{RESNET}, synthetic data, one GPU: the app at batch 1,024 and 256 "
                "against the torch.compile peer at 256 in the same call",
        "one_gpu": {
            "app_best_batch": app[1024],
            "app_batch_256": app[256],
            "peer_batch_256": row and {"images_per_sec": row.get("images_per_sec"),
                                       "step_time_ms": row.get("step_time_ms"),
                                       "what": "torchvision resnet50, channels_last, bf16 "
                                               "autocast, torch.compile"},
            "ratio_app_over_peer_at_256": ratio(rate(app[256]), rate(row)),
        },
        "step_profile_batch_256": folder.json("step_kernels.json"),
    }


def real_data(folder: Folder) -> dict:
    runs = {n: run(folder, n) for n in ("synthetic", "gpu", "grain")}
    syn, gpu, grain = (rate(runs[n]) for n in ("synthetic", "gpu", "grain"))
    row = peer(folder)
    tests = (folder.text("gpu_tests.log") or "").strip().splitlines()
    return {
        "what": f"{RESNET}, one GPU, real JPEGs with ImageNet's spread of sizes "
                "(benchmarks/make_jpegs.py) through the gpu and grain pipelines, "
                "synthetic data with the same epochs and steps, and the PyTorch peer "
                "(DataLoader into torch.compile) on the same files, in one call",
        "gpu_tests": tests[-1] if tests else None,
        "real_data": {
            "images_per_sec_synthetic": syn,
            "images_per_sec_gpu_pipeline": gpu,
            "fraction_of_synthetic": ratio(gpu, syn),
            "epochs_gpu_pipeline": runs["gpu"] and runs["gpu"]["epochs_images_per_sec"],
            "epochs_synthetic": runs["synthetic"] and runs["synthetic"]["epochs_images_per_sec"],
            "images_per_sec_grain": grain,
            "epochs_grain": runs["grain"] and runs["grain"]["epochs_images_per_sec"],
            "images_per_sec_peer": rate(row),
            "speedup_over_peer": ratio(gpu, rate(row), 3),
            "fit_wait_seconds_gpu_pipeline": runs["gpu"] and runs["gpu"]["input_wait_seconds"],
        },
        "runs": runs,
    }


def digits(folder: Folder) -> dict:
    summary = folder.json("digits.json") or {}
    return {
        "what": "the app's default job (small_resnet on scikit-learn's digits) on one GPU "
                "with JAX, on a machine without TensorFlow",
        "digits_on_gpu": {k: summary.get(k) for k in (
            "best_val_top1", "val_top1", "epochs_completed", "input_pipeline", "device_kind",
            "versions")},
    }


def energy(folder: Folder) -> dict:
    return {"what": "the app's energy figures against nvidia-smi's power readings over "
                    "the same windows (benchmarks/energy_check.py)",
            "energy_check": folder.json("energy_check.json")}


def batchnorm(folder: Folder) -> dict:
    def scaling(two: str) -> dict:
        out = {}
        for per_gpu in (256, 1024):
            one = sweep_rate(folder, "one_gpu", per_gpu)
            both = sweep_rate(folder, two, 2 * per_gpu)
            out[f"per_gpu_{per_gpu}"] = {"one_gpu": one, "two_gpus": both,
                                         "scaling": ratio(both, one and 2 * one)}
        return out

    result = {
        "what": "ResNet-50 v1.5 bf16 on synthetic data, JAX, sweeps of 40 timed steps per "
                "size (app/modes/sweep.py); one GPU via CUDA_VISIBLE_DEVICES=0",
        "scaling": {"batchnorm_statistics": "per_replica", **scaling("two_per_replica")},
        "global_batchnorm_same_call": scaling("two_global"),
    }
    if folder.json("two_xla.sweep.json"):
        result["xla_flags_same_call"] = scaling("two_xla")
    return result


def scale(folder: Folder) -> dict:
    names = ("syn1", "gpu1", "grain1", "syn2", "gpu2", "grain2", "syn2_lhs")
    runs = {n: run(folder, n) for n in names}
    r = {n: rate(row) for n, row in runs.items()}

    def scaling(two, one):
        return ratio(r[two], r[one] and 2 * r[one])

    return {
        "what": f"{RESNET}, 256 images per GPU, real JPEGs with ImageNet's spread of sizes "
                "(benchmarks/make_jpegs.py), the first epoch warm-up; one GPU via "
                "CUDA_VISIBLE_DEVICES=0, two GPUs of one host, in one call",
        "real_data": {
            "images_per_sec_synthetic": r["syn1"],
            "images_per_sec_gpu_pipeline": r["gpu1"],
            "images_per_sec_grain": r["grain1"],
            "fraction_of_synthetic": ratio(r["gpu1"], r["syn1"]),
            "fraction_of_synthetic_grain": ratio(r["grain1"], r["syn1"]),
            "scaling_two_gpus": scaling("gpu2", "gpu1"),
            "scaling_two_gpus_grain": scaling("grain2", "grain1"),
            "scaling_two_gpus_synthetic": scaling("syn2", "syn1"),
            "scaling_two_gpus_synthetic_latency_hiding": scaling("syn2_lhs", "syn1"),
        },
        "runs": runs,
    }


def models(folder: Folder) -> dict:
    """Each family against its torchvision twin (torch_models_peer.py), in the same call;
    each family's repeated runs (NAME, NAME.run2, ...: each autotuned from an empty cache)
    and their spread; a profiled family's step breakdown (callbacks/profiling/breakdown.py)."""
    families = {}
    for log in sorted(n for n in os.listdir(folder.path) if n.endswith(".log")
                      and "." not in n[:-4]):
        name = log[:-4]
        later = sorted((n[:-4] for n in os.listdir(folder.path)
                        if re.fullmatch(re.escape(name) + r"\.run\d+\.log", n)),
                       key=lambda n: int(n.rsplit("run", 1)[1]))
        runs = [repeat(folder, n) for n in [name, *later]]
        summary = folder.json(f"{name}.json")
        twin = folder.json(f"{name}.peer.json")
        twin_row = twin["rows"][0] if twin and twin.get("rows") else None
        profiled = folder.json(f"{name}.profiled.json") or {}
        entry = summary and {
            "model": summary.get("model"), "images_per_sec": summary.get("images_per_sec"),
            "train_gflops_per_image": summary.get("train_gflops_per_image"),
            "mfu": summary.get("mfu"), "parameters": summary.get("parameters"),
            "step_time_ms": summary.get("step_time_ms")}
        if entry is None:
            families[name] = None
            continue
        entry["repeats"] = runs
        entry["spread"] = spread(folder, runs)
        if twin_row:
            entry.update({
                "twin": twin.get("peer"), "twin_images_per_sec": rate(twin_row),
                "twin_step_time_ms": twin_row.get("step_time_ms"),
                # the twin's MFU at the app's FLOP count (XLA's) of the same maths
                "twin_mfu": ratio(entry["mfu"] * rate(twin_row), entry["images_per_sec"], 4)
                if entry["mfu"] and entry["images_per_sec"] and rate(twin_row) else None,
                "speedup_over_twin": ratio(entry["images_per_sec"], rate(twin_row), 3)})
        breakdown = (profiled.get("profile") or {}).get("breakdown")
        if breakdown:
            entry.update(explained(breakdown, entry, profiled, folder.json(f"{name}.busy.json")))
        if profiled:  # the per-op truth of a profiled run that kept XLA's autotune log
            kept = profiled.get("kernels") or {}
            entry["profiled_slow_ops"] = kept.get("slow_ops")
            entry["profiled_slow_ops_not_read"] = kept.get("slow_ops_not_read")
            entry["profiled_same_kernels_as_first"] = (
                kept.get("digest") == (summary.get("kernels") or {}).get("digest"))
        entry["measured_choice"] = measured_choice(
            folder, name, [r["run"] for r in runs if r], rate(twin_row))
        families[name] = entry
    return {
        "what": "one GPU (machine.txt), synthetic data, 224 px, batch 256, bf16, every callback "
                "on: each "
                "family with the app (JAX) then its torchvision twin (bf16 autocast, "
                "channels-last for convolutional networks, torch.compile, the app's recipe "
                "family: benchmarks/torch_models_peer.py), in turn in one call; each family "
                "run REPEATS times, each from an empty JAX cache with its kernels kept "
                "(repeats, spread: min, max, max/min, and each run's kernels against the "
                "first's), each choosing its kernels by measurement where its summary says so "
                "(measured_choice: each run's A/B decision, its figure over the heuristic run's "
                "and the twin's); a profiled family's step breakdown from a second, profiled "
                "run (synchronous, not timed), set against the first run's timed step, with its "
                "checks, and the library calls its trace shows far slower than autotuned",
        "families": families,
    }


CHOICE_FIELDS = ("kept", "how", "autotuned_step_ms", "heuristic_step_ms", "autotuned_gain",
                 "margin", "kernels_differ", "digests", "kept_in", "loaded_from",
                 "not_measured", "compile_seconds", "seconds")


def measured_choice(folder: Folder, name: str, runs: list, twin_rate) -> dict:
    """A family's fresh runs under the measured choice of kernels (app/engine/measured.py)
    against its heuristic run (NAME.heuristic: --xla_autotune=heuristic from an empty
    cache) and its twin, in the same call: each run's A/B decision as its summary.json
    records it (kernels.choice), its images/sec over the heuristic's and the twin's; the
    lowest of each over the runs, and whether every run is at or above the heuristic's
    figure less 2%."""
    heuristic = rate(folder.json(f"{name}.heuristic.json"))
    rows = []
    for run_name in runs:
        summary = folder.json(f"{run_name}.json") or {}
        choice = (summary.get("kernels") or {}).get("choice") or {}
        images = summary.get("images_per_sec")
        rows.append({"run": run_name, "images_per_sec": images,
                     **{k: choice.get(k) for k in CHOICE_FIELDS},
                     "over_heuristic": ratio(images, heuristic),
                     "over_twin": ratio(images, twin_rate, 3)})
    over = [r["over_heuristic"] for r in rows if r["over_heuristic"] is not None]
    twins = [r["over_twin"] for r in rows if r["over_twin"] is not None]
    return {"heuristic_images_per_sec": heuristic, "runs": rows,
            "kept": [r["kept"] for r in rows],
            "min_over_heuristic": min(over, default=None),
            "all_at_least_heuristic_less_2pct": all(o >= 0.98 for o in over) if over else None,
            "min_over_twin": min(twins, default=None)}


def ladder(folder: Folder) -> dict:
    """Each model's rungs (app/modes/ladder.py): images/sec and the gains, as measured."""
    keys = ("rung", "changes", "status", "images_per_sec", "gain_over_previous",
            "gain_over_first", "global_batch_size", "precision", "steps_per_execution",
            "xla_autotune", "mfu", "peak_memory_gib")
    ladders = {}
    for model in ("resnet50", "vit_b16"):
        summary = folder.json(f"ladder_{model}.json")
        ladders[model] = summary and {
            "status": summary.get("status"), "device_kind": summary.get("device_kind"),
            "timed_steps_per_rung": summary.get("timed_steps_per_rung"),
            "total_gain": summary.get("total_gain"),
            "rungs": [{k: r.get(k) for k in keys} for r in summary.get("ladder", [])]}
    return {"what": "one GPU, synthetic data, 224 px: the same model from float32 at its "
                    "base batch to mixed bfloat16, the largest of x1-x8 that fits, 16 steps "
                    "per host call and XLA's full autotuning (the data-on-device rung needs "
                    "real data: skipped), each rung's images/sec and its gains",
            "ladders": ladders}


RECIPES = {
    "step": step,
    "real_data": real_data,
    "digits": digits,
    "energy": energy,
    "batchnorm": batchnorm,
    "scale": scale,
    "fashion_mnist": fashion_mnist,
    "coldstart": coldstart,
    "models": models,
    "ladder": ladder,
}


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def main(argv: list[str]) -> None:
    if len(argv) != 3 or argv[0] not in RECIPES:
        raise SystemExit(f"usage: python benchmarks/collect.py RECIPE OUT_DIR RESULT.json "
                         f"(RECIPE: {', '.join(RECIPES)})")
    recipe, out_dir, path = argv
    if not os.path.exists(os.path.join(out_dir, "run.json")):
        out_dir = os.path.join(out_dir, recipe)
    folder = Folder(out_dir)
    ran = folder.json("run.json")
    if ran is None or ran.get("recipe") != recipe:
        raise SystemExit(f"error: {out_dir} holds no run of recipe {recipe} (no run.json)")
    figures = RECIPES[recipe](folder)
    exits = [line.split() for line in (folder.text("exits.txt") or "").splitlines()]
    result = {
        "what": figures.pop("what"),
        "date": ran["date"],
        "machine": (folder.text("machine.txt") or "").strip().splitlines(),
        "command": ran["command"],
        "provenance": {
            "commit": ran.get("commit") or _git("rev-parse", "HEAD"),
            "commit_from": "the runner" if ran.get("commit") else "git rev-parse HEAD "
                           "where the collector ran",
            "uncommitted_changes": bool(_git("status", "--porcelain", "--untracked-files=no")),
            "collected_with": f"python benchmarks/collect.py {recipe} OUT_DIR "
                              f"{os.path.basename(path)}",
        },
        **figures,
        "exits": {name: int(code) for name, code in exits},
    }
    emit(result, path)


if __name__ == "__main__":
    main(sys.argv[1:])
