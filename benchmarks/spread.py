"""A model family's repeated runs side by side (the models recipe: XLA's autotuner may
pick other kernels each run, benchmarks/results/2026-12-06-h100-autotune-spread.json):
each run's images/sec, kernels and GPU window, and the spread, for benchmarks/collect.py.

Each run of a family (NAME, NAME.run2, ...) autotuned from an empty JAX cache of its own
and kept its kernels (benchmarks/device_run.sh): NAME.json (its summary) and
NAME.kernels.json (app/engine/kernels.py's list) are read here.
"""

from __future__ import annotations


def ratio(a, b, digits: int = 4):
    return round(a / b, digits) if a is not None and b else None


def repeat(folder, name: str) -> dict | None:
    """One run of a family: its images/sec, kernels (digest, counts, where they came from)
    and the GPU's timed window (SM clock, throttle reasons' shares, other processes)."""
    summary = folder.json(f"{name}.json")
    if summary is None:
        return None
    block = summary.get("kernels") or {}
    window = ((summary.get("machine_state") or {}).get("timed_window") or {}).get("devices")
    gpu = window[0] if window else {}
    return {"run": name, "images_per_sec": summary.get("images_per_sec"),
            "kernels_digest": block.get("digest"), "kernels_source": block.get("source"),
            "library_calls": block.get("library_calls"), "fusions": block.get("fusions"),
            "sm_clock_mhz_mean": (gpu.get("sm_clock_mhz") or {}).get("mean"),
            "throttle_share": gpu.get("throttle_share"),
            "other_processes": gpu.get("other_processes")}


def spread(folder, runs: list[dict]) -> dict:
    """A family's runs side by side: min, max and max/min of images/sec, and
    each later run's kernels against the first's (equal digests, or how many of the
    kernels differ, from both kernels.json)."""
    from app.engine.kernels import differing

    rates = [r["images_per_sec"] for r in runs if r and r["images_per_sec"]]
    lists = {}
    for r in runs:
        recorded = folder.json(f"{r['run']}.kernels.json") if r else None
        lists[r and r["run"]] = recorded.get("kernels") if recorded else None
    first = runs[0]
    against_first = []
    for r in runs[1:]:
        if not (r and first and r["kernels_digest"] and first["kernels_digest"]):
            continue
        a, b = lists.get(first["run"]), lists.get(r["run"])
        against_first.append({
            "run": r["run"], "same_digest": r["kernels_digest"] == first["kernels_digest"],
            "kernels_differ": differing(a, b) if a is not None and b is not None else None,
            "of": max(len(a), len(b)) if a is not None and b is not None else None})
    return {"runs": len(rates), "min": min(rates, default=None), "max": max(rates, default=None),
            "max_over_min": ratio(max(rates), min(rates)) if rates else None,
            "kernels_against_first": against_first}
