"""The device model's error, measured: every family and device pair that has
results, predicted and set against its measured images/sec.

    python benchmarks/predict_check.py --out benchmarks/results/DATE-predict-check.json \
        [--cpu-runs DIR | --cpu-from RESULT.json] [--make-cpu-runs DIR] [--write-table]

What it reads:
  - every result JSON of the models recipe in benchmarks/results/ (`families`: each
    family's images/sec, its MFU count and, where profiled, its step breakdown), and
    the H100 figures kept in other shapes (EXTRA: ConvNeXt-T with call 1's fast kernels,
    EfficientNetV2-S); a later device call's result of the recipe is read the same way;
  - CPU runs of the same families (--cpu-runs: run folders, each a few profiled steps at
    224 px; --make-cpu-runs makes them: CPU_BATCHES images a step, float32, JAX), or the
    CPU runs a previous result of this script kept (--cpu-from).

What it does:
  - derives the rates table (app/report/decision/device_rates.py's rows) from every accelerator
    breakdown: a breakdown without rates (before per-kind rates, 2026-12-04) gets each
    kind's work from the same family's breakdown with rates on another device (FLOPs and
    bytes do not depend on the device) over its own time; and the CPU's bytes ratios;
    --write-table writes them to app/report/decision/device_rates.csv;
  - predicts each family from each source (an accelerator's breakdown; the CPU runs'
    work, set to the device's batch: each kind's bytes a step as a + b x images, from two
    batches) on every other device class that measured the family, with a table that
    leaves that family's rows on that device out (and its CPU bytes ratios, from a CPU):
    the model's error on a family it has not seen there;
  - writes each prediction against each measured figure, the error per family and pair,
    the range of errors by source (accelerator, CPU), and the commits of both sides.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from results_io import emit  # noqa: E402

from app.pricing import catalog as price_catalog  # noqa: E402
from app.report.decision import device_model, device_rates  # noqa: E402
from callbacks.profiling.timed import reconcile  # noqa: E402

RESULTS = os.path.join(ROOT, "benchmarks", "results")
H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
# Measured figures kept in other shapes: (file, keys to the figure, family, note, device).
EXTRA = (
    ("2026-12-06-h100-kernels-reuse.json",
     ("kernels_reused_on_another_machine", "convnext_tiny_with_call_1s_fast_kernels"),
     "applications:ConvNeXtTiny", "call 1's fast kernels, loaded", H100),
    ("2026-12-06-h100-autotune-spread.json", ("runs", "call_1", "cx3_autotuned"),
     "applications:ConvNeXtTiny", "a fresh autotune that chose the fast kernels", H100),
    ("2026-12-06-h100-autotune-spread.json",
     ("runs", "call_2", "efficientnet_v2_s_autotuned_1"), "applications:EfficientNetV2S",
     "a fresh autotune", H100),
    *(("2026-12-03-h200-fashion-mnist-2b4b9e8.json",
       ("time_to_accuracy", turn, "images_per_sec_app"), "small_resnet",
       f"Fashion-MNIST's job (28 px, batch 512), turn {turn + 1}", H200) for turn in range(3)),
)
BATCH = 256  # the models recipe's
BATCHES = {"small_resnet": 512}  # the Fashion-MNIST job's
# The CPU runs: each family at 224 px on synthetic data, and Fashion-MNIST's job; two
# batches each, to part an image's bytes from a step's (the optimizer's update).
_SYNTHETIC = ("--dataset=synthetic", "--image_size=224", "--steps_per_epoch=4",
              "--profile_steps=3,4")
CPU_JOBS = {"vit_b16": (_SYNTHETIC, (8, 16)), "applications:ConvNeXtTiny": (_SYNTHETIC, (8, 16)),
            "resnet50": (_SYNTHETIC, (8, 16)),
            "applications:EfficientNetV2S": (_SYNTHETIC, (8, 16)),
            "small_resnet": (("--dataset=fashion_mnist", "--steps_per_epoch=12",
                              "--profile_steps=8,10"), (256, 512))}
CPU_FLAGS = ("--backend=jax", "--epochs=1", "--validation_steps=-1", "--precision=float32")


def _path(name: str) -> str:
    return os.path.join(RESULTS, name)


def _rel(name: str) -> str:
    return f"benchmarks/results/{os.path.basename(name)}"


def measurements() -> list[dict]:
    """Every measured figure of a family on an accelerator: {family, device_kind,
    images_per_sec, file, commit, breakdown (or None), mfu_flops_per_image, note}."""
    found = []
    for path in sorted(glob.glob(_path("*.json")), reverse=True):  # newest first
        with open(path) as f:
            result = json.load(f)
        families = result.get("families")
        if not isinstance(families, dict):
            continue
        machine = (result.get("machine") or [""])[0]
        for fig in families.values():
            if not isinstance(fig, dict) or not fig.get("images_per_sec"):
                continue
            breakdown = fig.get("breakdown")
            if breakdown and "traced_step_ms" not in breakdown:
                # before the breakdown was set against the timed step (2026-12-06): its
                # idle held the profiler's own time (12-13 ms a step on the H200)
                breakdown = reconcile(breakdown, fig.get("step_time_ms"))
            kind = (breakdown or {}).get("device_kind") or machine.split(",")[0]
            found.append({"family": fig["model"], "device_kind": kind,
                          "images_per_sec": fig["images_per_sec"], "file": _rel(path),
                          "commit": (result.get("provenance") or {}).get("commit"),
                          "breakdown": breakdown, "note": "the models recipe",
                          "mfu_flops_per_image": (fig.get("train_gflops_per_image") or 0) * 1e9
                          or None})
    for name, keys, family, note, device_kind in EXTRA:
        with open(_path(name)) as f:
            result = json.load(f)
        figure = result
        for key in keys:
            figure = figure[key]
        figure = figure if isinstance(figure, (int, float)) else figure["images_per_sec"]
        found.append({"family": family, "device_kind": device_kind,
                      "images_per_sec": figure, "file": _rel(name),
                      "commit": (result.get("provenance") or {}).get("commit"),
                      "breakdown": None, "note": note, "mfu_flops_per_image": None})
    return found


def _rated(breakdown: dict | None) -> bool:
    return bool(breakdown) and any("tflops_per_sec" in p or "gb_per_sec" in p
                                   for p in breakdown.get("parts", {}).values())


def fill_rates(breakdown: dict, work: dict) -> dict:
    """`breakdown` (time only) with each kind's rate: `work`'s (work_per_image of the
    same family elsewhere) FLOPs or bytes a step over this breakdown's time of it."""
    parts = {}
    for kind, part in breakdown["parts"].items():
        part = dict(part)
        for table, key, unit in ((work["flops"], "tflops_per_sec", 1e12),
                                 (work["bytes"], "gb_per_sec", 1e9)):
            if kind in table and part.get("ms"):
                part[key] = table[kind] * work["images_per_step"] / (part["ms"] / 1e3) / unit
        parts[kind] = part
    return {**breakdown, "parts": parts}


def accelerator_sources(found: list[dict], catalog: dict) -> list[dict]:
    """Each measurement with a breakdown, as work: its own rates, or filled from the same
    family's rated breakdown on another device ("work_from")."""
    sources = []
    for item in (m for m in found if m["breakdown"]):
        device = device_model.device_of_kind(item["device_kind"], catalog)
        breakdown, work_from = item["breakdown"], None
        if not _rated(breakdown):
            donor = next((m for m in found if m["family"] == item["family"]
                          and _rated(m["breakdown"])), None)
            if donor is None:
                continue
            batch = BATCHES.get(item["family"], BATCH)
            donor_work = device_model.work_per_image(
                donor["breakdown"], batch, batch,
                device_model.device_of_kind(donor["device_kind"], catalog))
            breakdown, work_from = fill_rates(breakdown, donor_work), donor["file"]
        batch = BATCHES.get(item["family"], BATCH)
        work = device_model.work_per_image(breakdown, batch, batch, device,
                                           item["mfu_flops_per_image"])
        sources.append({**item, "work": work, "work_from": work_from, "filled": breakdown})
    return sources


def class_name(device_kind: str, catalog: dict) -> str:
    if device_kind == "cpu":
        return "cpu"
    row = next((r for r in catalog.values() if r.matches(device_kind)), None)
    return row.device if row else device_kind


def table_rows(sources: list[dict], cpu: dict, catalog: dict, out: str) -> list:
    """The rates table: each source's shares (one per device class and family, the
    newest), then the CPU's bytes ratios."""
    rows, seen = [], set()
    for source in sources:
        name = class_name(source["device_kind"], catalog)
        if (name, source["family"]) in seen:
            continue
        seen.add((name, source["family"]))
        device = source["work"]["device"]
        where = f"families[{source['family']}].breakdown." + (
            f"(work from {source['work_from']}) " if source["work_from"] else "")
        rows += device_model_rows(source, name, device, where)
    for family, work in cpu.items():
        own = next((s for s in sources if s["family"] == family and not s["work_from"]), None)
        if own is None:
            continue
        for kind, accelerator in own["work"]["bytes"].items():
            if work["bytes"].get(kind):
                rows.append(device_rates.Rate(
                    "cpu", "cpu", kind, family, "cpu_bytes",
                    float(f"{accelerator / work['bytes'][kind]:.4g}"), _rel(out),
                    f"{accelerator / 1e6:,.1f} MB an image on {own['device_kind']} "
                    f"({own['file']}) over {work['bytes'][kind] / 1e6:,.1f} in the CPU runs "
                    f"(cpu_runs: float32, batches {work['batches']}, set to "
                    f"{BATCHES.get(family, BATCH)} images a step)"))
    return rows


def device_model_rows(source, name, device, where) -> list:
    return device_rates.rows_from_breakdown(
        source["filled"], name, source["device_kind"], source["family"], source["file"],
        device.peak_tflops,
        device.bandwidth_gb_per_sec, where)


def cpu_work(runs: list[dict], catalog: dict) -> dict:
    """Each family's CPU work an image at the batch its accelerators measured (BATCHES,
    else BATCH): per kind, its work a step as a + b x images from the two batches (one
    batch: its own per image)."""
    cpu = device_model.device_of_kind("cpu", catalog)
    out = {}
    for family in sorted({r["model"] for r in runs}):
        mine = sorted((r for r in runs if r["model"] == family),
                      key=lambda r: r["global_batch_size"])
        works = [(r["global_batch_size"], device_model.work_per_image(
            r["breakdown"], r["global_batch_size"], r["global_batch_size"], cpu,
            r["train_flops_per_image"])) for r in mine]
        (b1, w1), (b2, w2) = works[0], works[-1]
        batch = BATCHES.get(family, BATCH)
        merged = dict(w2, images_per_step=batch, images_per_device=batch)
        for key in ("flops", "bytes"):
            table = {}
            for kind in set(w1[key]) | set(w2[key]):
                one, two = w1[key].get(kind, 0.0) * b1, w2[key].get(kind, 0.0) * b2
                slope = (two - one) / (b2 - b1) if b2 != b1 else two / b2
                table[kind] = max((one - slope * b1) + slope * batch, 0.0) / batch
            merged[key] = table
        merged["batches"] = [b for b, _ in works]
        out[family] = merged
    return out


def read_cpu_runs(folder: str, commit: str) -> list[dict]:
    runs = []
    for path in sorted(glob.glob(os.path.join(folder, "*", "summary.json"))):
        with open(path) as f:
            summary = json.load(f)
        breakdown = (summary.get("profile") or {}).get("breakdown")
        if breakdown:
            runs.append({k: summary.get(k) for k in (
                "model", "global_batch_size", "per_replica_batch_size", "precision",
                "images_per_sec", "train_flops_per_image", "device_kind")}
                | {"breakdown": breakdown, "folder": os.path.basename(os.path.dirname(path)),
                   "commit": commit})
    return runs


def make_cpu_runs(folder: str) -> None:
    for family, (flags, batches) in CPU_JOBS.items():
        for batch in batches:
            name = f"{family.split(':')[-1]}-b{batch}"
            if os.path.exists(os.path.join(folder, name, "summary.json")):
                continue
            subprocess.run([sys.executable, os.path.join(ROOT, "app", "main.py"),
                            f"--logdir={os.path.join(folder, name)}", f"--model={family}",
                            f"--global_batch_size={batch}", *flags, *CPU_FLAGS], cwd=ROOT,
                           check=False)


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True)
    return done.stdout.strip()


# What each check leaves out of the table: the family's rows on the target (its
# measurement there is what is predicted), and for a CPU run also, in a second check,
# every row of the family (a family no device of the table measured) and its bytes ratio.
PROTOCOLS = {"accelerator": "the family's rows on the target left out",
             "cpu": "a family measured on another device: its rows on the target left out "
                    "(its rows on the other device and its CPU bytes ratio kept)",
             "cpu_unseen": "every row of the family left out (a family never measured)"}


def _changed() -> list[str]:
    """The tree's paths that differ from the commit (git status), as the result records."""
    done = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True,
                          text=True)
    return sorted(line[3:] for line in done.stdout.splitlines())


def check(found, sources, cpu, rows, catalog) -> list[dict]:
    """Every prediction of a family from a source onto another device class's
    measurement of it (PROTOCOLS: what the table leaves out)."""
    out = []
    pairs = [(s["family"], s["device_kind"], s["work"], s["file"], s["commit"],
              s["work_from"]) for s in sources]
    pairs += [(f, "cpu", w, "this result's cpu_runs", w.get("commit"), None)
              for f, w in cpu.items()]
    for family, source_kind, work, file, commit, work_from in pairs:
        source_class = class_name(source_kind, catalog)
        for target in (m for m in found if m["family"] == family):
            target_class = class_name(target["device_kind"], catalog)
            if target_class == source_class:
                continue
            seen = any(r.family == family and r.device_class not in ("cpu", target_class)
                       for r in rows)  # the family measured on another device
            protocols = ("accelerator",) if source_kind != "cpu" else (
                ("cpu", "cpu_unseen") if seen else ("cpu_unseen",))
            for protocol in protocols:
                out.append(_one(work, target, family, source_class, target_class, protocol,
                                rows, catalog, (file, commit, work_from)))
    return out


def _one(work, target, family, source_class, target_class, protocol, rows, catalog, where):
    """One check: the prediction against the measured figure."""
    file, commit, work_from = where
    table = [r for r in rows if r.family != family or (
        protocol != "cpu_unseen" and r.device_class not in (target_class, "cpu"))] + [
        r for r in rows if protocol == "cpu" and r.family == family and r.device_class == "cpu"]
    device = device_model.device_of_kind(target["device_kind"], catalog)
    predicted = device_model.predict_step(work, device, table, family, catalog)
    entry = {"family": family, "pair": f"{source_class} -> {target_class}",
             "protocol": protocol, "source": file, "source_commit": commit,
             "work_from": work_from, "target": target["file"],
             "target_commit": target["commit"], "target_note": target["note"],
             "measured": target["images_per_sec"]}
    if "why" in predicted:
        return {**entry, "why": predicted["why"]}
    return {**entry, "predicted": round(predicted["images_per_sec"], 1),
            "error": round(predicted["images_per_sec"] / target["images_per_sec"] - 1, 4),
            "step_ms": round(predicted["step_ms"], 3),
            "terms": {k: {"ms": round(t["ms"], 3), "share": round(t["share"], 4),
                          "from": t["from"]} for k, t in predicted["terms"].items()},
            "carried_ms": predicted["carried_ms"], "notes": predicted["notes"]}


def summarize(checks: list[dict]) -> dict:
    """Errors by pair and family, and their range by source (accelerator, CPU)."""
    errors = {}
    for c in (c for c in checks if "error" in c):
        errors.setdefault(f"{c['pair']} ({c['protocol']})", {}).setdefault(
            c["family"], []).append(c["error"])
    ranges = {}
    for side in PROTOCOLS:
        picked = [c["error"] for c in checks if "error" in c and c["protocol"] == side]
        if picked:
            ranges[side] = {"what": PROTOCOLS[side], "min": min(picked), "max": max(picked),
                            "median_abs": round(statistics.median(abs(e) for e in picked), 4),
                            "checks": len(picked)}
    return {"by_pair": errors, "range": ranges}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="")
    parser.add_argument("--cpu-runs", default="", help="folder of CPU run folders")
    parser.add_argument("--cpu-from", default="", help="a result of this script: its CPU runs")
    parser.add_argument("--make-cpu-runs", default="", help="make the CPU runs in this folder")
    parser.add_argument("--cpu-commit", default="",
                        help="the commit the CPU runs were made at (default: HEAD)")
    parser.add_argument("--write-table", action="store_true",
                        help="write the derived table to app/report/decision/device_rates.csv")
    args = parser.parse_args(argv)
    if args.write_table and not args.out:
        parser.error("--write-table cites --out's result JSON: give --out")
    if args.make_cpu_runs:
        make_cpu_runs(args.make_cpu_runs)
        args.cpu_runs = args.cpu_runs or args.make_cpu_runs
    catalog = price_catalog.load_catalog()
    runs = read_cpu_runs(args.cpu_runs, args.cpu_commit or _commit()) if args.cpu_runs else []
    if args.cpu_from:
        with open(args.cpu_from) as f:
            runs = json.load(f)["cpu_runs"]
    found = measurements()
    sources = accelerator_sources(found, catalog)
    cpu = cpu_work(runs, catalog) if runs else {}
    for family in cpu:
        cpu[family]["commit"] = next(r["commit"] for r in runs if r["model"] == family)
    rows = table_rows(sources, cpu, catalog, args.out or "YYYY-MM-DD-predict-check.json")
    if args.write_table:
        with open(device_rates.RATES_PATH, "w", encoding="utf-8") as f:
            f.write(device_rates.to_csv(rows))
    checks = check(found, sources, cpu, rows, catalog)
    families = sorted({m["family"] for m in found})
    missing = {f: sorted({class_name(m["device_kind"], catalog) for m in found
                          if m["family"] == f and m["breakdown"] is None} - {
        class_name(s["device_kind"], catalog) for s in sources if s["family"] == f})
        for f in families}
    emit({"what": "the device model (app/report/decision/device_model.py): each family predicted from each source (an "
                  "accelerator's step breakdown, or CPU runs' work) on every other device "
                  "class that measured it, the family's rows there left out of the table; "
                  "error = predicted / measured images/sec - 1",
          "date": datetime.date.today().isoformat(), "commit": _commit(),
          "uncommitted_changes": _changed(),
          "command": "python benchmarks/predict_check.py " + " ".join(argv or sys.argv[1:]),
          "errors": summarize(checks),
          "no_breakdown": {f: m for f, m in missing.items() if m},
          "checks": checks, "table": [r.__dict__ for r in rows],
          "cpu_runs": runs}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
