"""The time-to-accuracy recipes' figures (benchmarks/collect.py): fashion_mnist (the app
against its PyTorch peers, turn by turn) and coldstart (the app's start-up timelines,
cut by cut: app/engine/cold_start.py's CUTS)."""

from __future__ import annotations

import json
import os
import re

from results_io import Folder, ratio


def _seconds_to(epochs, target: float):
    """The first epoch line reaching `target`: (seconds from start, epoch), or Nones."""
    reached = [e for e in epochs if e["val_top1"] is not None and e["val_top1"] >= target]
    return (reached[0]["seconds"], reached[0]["epoch"]) if reached else (None, None)


def fashion_mnist(folder: Folder, target: float = 0.93) -> dict:
    """Time to `target` top-1: the app's from its process start (its ledger's start and
    metrics.jsonl's epoch times), the peer's from its own clock, turn by turn."""
    turns = []
    for turn in range(1, 10):
        summary, peer_result = folder.json(f"app{turn}.json"), folder.json(f"peer{turn}.json")
        if summary is None and peer_result is None:
            break
        app_epochs = _app_epochs(folder, f"app{turn}", summary)
        peer_epochs = [{"epoch": e["epoch"], "val_top1": e["val_top1"],
                        "seconds": e["seconds_from_start"]}
                       for e in (peer_result or {}).get("epochs", [])]
        app_seconds, app_epoch = _seconds_to(app_epochs, target)
        peer_seconds, peer_epoch = _seconds_to(peer_epochs, target)
        eager = folder.json(f"eager{turn}.json")  # the same peer, --no_compile
        eager_seconds, _ = _seconds_to(
            [{"epoch": e["epoch"], "val_top1": e["val_top1"], "seconds": e["seconds_from_start"]}
             for e in (eager or {}).get("epochs", [])], target)
        fastest = min((s for s in (peer_seconds, eager_seconds) if s is not None), default=None)
        turns.append({
            "target_top1": target,
            "compile_caches": "cold (both emptied)" if turn == 1 else "warm (turn 1's)",
            "app_seconds_to_target": app_seconds, "app_epoch_to_target": app_epoch,
            "peer_seconds_to_target": peer_seconds, "peer_epoch_to_target": peer_epoch,
            "speedup_over_peer": ratio(peer_seconds, app_seconds, 3),
            "eager_peer_seconds_to_target": eager_seconds,
            "speedup_over_eager_peer": ratio(eager_seconds, app_seconds, 3),
            # the speedup that counts: over the faster of the peer's two modes
            "speedup_over_faster_peer": ratio(fastest, app_seconds, 3),
            "images_per_sec_app": summary and summary.get("images_per_sec"),
            "images_per_sec_peer": peer_result and peer_result.get("images_per_sec_after_epoch_1"),
            "final_top1_app": summary and summary.get("val_top1"),
            "final_top1_peer": peer_result and peer_result.get("final_top1"),
            "input_pipeline": summary and summary.get("input_pipeline"),
            "input": summary and summary.get("input"),
            "app_first_epoch_ends_at_seconds": app_epochs[0]["seconds"] if app_epochs else None,
            # the same figures from the app's process start (/proc), not its first line
            **_from_process_start(summary, app_epochs, app_seconds),
            "app_startup": summary and summary.get("startup"),  # app/engine/startup.py's parts
            "peer_first_epoch_ends_at_seconds": peer_epochs[0]["seconds"] if peer_epochs else None,
            "app_epochs": app_epochs, "peer_epochs": peer_epochs})
    return {
        "what": "time to 0.93 top-1 on Fashion-MNIST (60,000 + 10,000 images, 28x28), one GPU: "
                "the app's default recipe (small_resnet, batch 512, 15 epochs, "
                "--input_pipeline=auto) against its PyTorch peer (benchmarks/torch_fashion_peer.py: "
                "same network, recipe and augmentation, data on the GPU, bf16), torch.compile and "
                "eager, each timed from its process start, in turn in one call",
        "time_to_accuracy": (turns[0] if len(turns) == 1 else turns) or None,
        "file_cache": (folder.text("page_cache.txt") or "").strip() or None,
    }


def _from_process_start(summary: dict | None, epochs: list[dict], seconds) -> dict:
    """The app's first epoch and time to target from its process's start (its
    timeline's origin) rather than its first line (its ledger's start, as the peers
    time themselves from theirs): the interpreter's own start added."""
    startup = (summary or {}).get("startup") or {}
    attempts = (summary or {}).get("attempts") or [{}]
    began, first_line = startup.get("process_started_at"), attempts[0].get("started_at")
    if began is None or first_line is None or startup.get("from", "").find("process") < 0:
        return {"app_first_epoch_ends_at_seconds_from_process_start": None,
                "app_seconds_to_target_from_process_start": None}
    before = first_line - began
    return {"app_first_epoch_ends_at_seconds_from_process_start":
            round(epochs[0]["seconds"] + before, 2) if epochs else None,
            "app_seconds_to_target_from_process_start":
            round(seconds + before, 2) if seconds is not None else None}


def coldstart(folder: Folder, target: float = 0.93) -> dict:
    """Each cold run's start-up timeline and time to `target`, and what each cut of
    app/engine/cold_start.py takes off the time to the first step (its run turned from
    its default against the mean of the runs with the defaults)."""
    runs = {}
    for name in sorted(n[:-5] for n in os.listdir(folder.path)
                       if n.endswith(".json") and "." not in n[:-5]
                       and n[:-5] not in ("run", "machine")):
        summary = folder.json(f"{name}.json")
        startup = (summary or {}).get("startup")
        if not startup:
            runs[name] = None
            continue
        epochs = _app_epochs(folder, name, summary)
        seconds, epoch = _seconds_to(epochs, target)
        runs[name] = {
            "cuts": startup.get("cuts"),
            "seconds_to_first_step": startup["seconds_to_first_step"],
            "parts": [[p["part"], p["seconds"]] for p in startup["parts"]],
            "main_thread_program_seconds": {p["part"]: p["program_seconds"]
                                            for p in startup["parts"]
                                            if p.get("program_seconds")},
            "programs_compiled": startup.get("programs_compiled"),
            "compile_seconds": startup.get("compile_seconds"),
            "programs": [{k: p.get(k) for k in ("program", "compiles", "compile_seconds",
                                                 "cache_reads", "traces", "threads")}
                         for p in startup.get("programs", [])],
            "xla_options": startup.get("xla_options"),
            "first_epoch_ends_at_seconds": epochs[0]["seconds"] if epochs else None,
            "seconds_to_target": seconds, "epoch_to_target": epoch,
            **_from_process_start(summary, epochs, seconds),
            "images_per_sec": summary.get("images_per_sec"),
            "val_top1": summary.get("val_top1"),
        }
    return {
        "what": "the fashion_mnist job (small_resnet, batch 512, 15 epochs) on one GPU, each "
                "run from empty compile caches of its own: its start-up timeline "
                "(summary.json's startup, app/engine/startup.py) with the defaults, every cut "
                "of app/engine/cold_start.py on, none, and each cut turned from its default "
                "(BENCH_STARTUP_CUTS); then a warm run (the first run's caches)",
        "cuts": _cut_effects(runs),
        "runs": runs,
        "importtime_top": _importtime_top(folder.text("importtime.txt")),
    }


def _mean(values: list):
    values = [v for v in values if v is not None]
    return round(sum(values) / len(values), 4) if values else None


def _cut_effects(runs: dict) -> dict:
    """{cut: seconds to the first step and images/sec with it and without it, and the
    seconds it saves}: its turned run against the mean of the runs with the defaults."""
    defaults = [r for n, r in runs.items() if n.startswith("defaults") and r]
    if not defaults:
        return {}
    base = {"seconds_to_first_step": _mean([r["seconds_to_first_step"] for r in defaults]),
            "images_per_sec": _mean([r["images_per_sec"] for r in defaults]),
            "seconds_to_target": _mean([r["seconds_to_target"] for r in defaults])}
    spread = [r["seconds_to_first_step"] for r in defaults]
    effects = {"_defaults": {**base, "runs": len(defaults),
                             "spread_seconds": round(max(spread) - min(spread), 4)}}
    for name, run in runs.items():
        if not name.startswith("turned_") or not run:
            continue
        cut = name[len("turned_"):]
        on_by_default = defaults[0]["cuts"].get(cut)
        with_cut, without = (base, run) if on_by_default else (run, base)
        saved = (without["seconds_to_first_step"] - with_cut["seconds_to_first_step"]
                 if None not in (without["seconds_to_first_step"],
                                 with_cut["seconds_to_first_step"]) else None)
        effects[cut] = {
            "on_by_default": on_by_default,
            "seconds_to_first_step_with": with_cut["seconds_to_first_step"],
            "seconds_to_first_step_without": without["seconds_to_first_step"],
            "seconds_saved": round(saved, 4) if saved is not None else None,
            "images_per_sec_with": with_cut["images_per_sec"],
            "images_per_sec_without": without["images_per_sec"],
            "seconds_to_target_with": with_cut["seconds_to_target"],
            "seconds_to_target_without": without["seconds_to_target"]}
    return effects


def _importtime_top(text: str | None, count: int = 15) -> list | None:
    """The slowest top-level imports of `python -X importtime` (cumulative seconds)."""
    if not text:
        return None
    rows = []
    for line in text.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( +)(\S+)", line)
        if match and len(match.group(2)) <= 3:  # a top-level import and its first level
            rows.append([match.group(3), round(int(match.group(1)) / 1e6, 3)])
    return sorted(rows, key=lambda r: -r[1])[:count]


def _app_epochs(folder: Folder, name: str, summary: dict | None) -> list[dict]:
    """The app's epochs (top-1, seconds from its process start) from NAME.metrics.jsonl."""
    if summary is None:
        return []
    started = summary["attempts"][0]["started_at"] if summary.get("attempts") else None
    epochs = []
    for line in (folder.text(f"{name}.metrics.jsonl") or "").splitlines():
        record = json.loads(line)
        epochs.append({"epoch": record["epoch"], "val_top1": record.get("val_top1"),
                       "seconds": round(record["time"] - started, 2)})
    return epochs
