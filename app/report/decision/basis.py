"""What each machine's prediction rests on (app/report/decision/predict.py): the epochs to the
target and the epoch overhead, from the full runs of the job, and the start-up a
machine's first rented hour pays.

The epochs and the overhead come from a full run of the machine's own backend where one
was given (one recipe on two backends reached a target an epoch apart; their epochs took
1.26x and 1.10x their images at the steady rate), else from another's, and say so. A
probe's start-up is its cold one; a run's is its own, said where its compile cache was
warm. Pure Python.
"""

from __future__ import annotations

import statistics

from app.report.decision.inputs import first_epoch_at, run_timing

SAME_JOB = ("model", "dataset", "image_size", "global_batch_size")
SAME_RECIPE = ("epochs", "recipe")  # the schedule runs over the epochs: part of the recipe


def convergence(runs: list[dict], found: dict, target: float) -> dict:
    """Epochs to `target` for `found`'s job, from the full runs of the same job, and the
    epoch overhead `found`'s machine is predicted with (`epoch_overhead`).

    Returns {"epochs", "images_per_epoch", "overhead", "overhead_run", "overhead_whose"
    (None: the machine's own backend's run; else the words naming whose it borrowed),
    "runs" (what each said)} or {"why": ...} where no run of the job reached it.
    """
    job = [r for r in runs if all(r[k] == found[k] for k in SAME_JOB)]
    if not job:
        return {"why": (f"no full run of {found['model']} on {found['dataset']} at "
                        f"{found['image_size']} px and global batch {found['global_batch_size']} "
                        "was given: train one on any machine")}
    same = [r for r in job if all(r[k] == found[k] for k in SAME_RECIPE)]
    if not same:
        differ = sorted({k for r in job for k in ("epochs", *found["recipe"])
                         if (r[k] if k == "epochs" else r["recipe"].get(k))
                         != (found[k] if k == "epochs" else found["recipe"].get(k))})
        return {"why": (f"the full runs of this job trained another recipe ({', '.join(differ)} "
                        "differ): its convergence is another; give a run of the same flags")}
    reached = [(r, first_epoch_at(r, target), run_timing(r)) for r in same]
    usable = [(r, e, t) for r, e, t in reached if e is not None and t is not None]
    if not usable:
        best = max((e["top1"] for r in same for e in r["epochs_logged"]
                    if e["top1"] is not None), default=None)
        if best is not None and best < target:
            return {"why": f"no full run of this job reached {target:g}: the best top-1 "
                           f"logged was {best:.4f}; train longer or aim lower",
                    "unreached": best}
        return {"why": f"no full run of this job reached {target:g} over two epochs or "
                       "more: train longer"}
    run, timing = epoch_overhead(usable, found)
    # The epochs from the machine's own backend's runs where there are any: one recipe
    # on two backends reached Fashion-MNIST's 0.78 an epoch apart (TensorFlow at epoch 3,
    # JAX at 2: 0.748 and 0.784 at epoch 2), whose hours then differed by a third.
    own = [(r, e, t) for r, e, t in usable if r["backend"] == found["backend"]]
    epochs = statistics.median_low([e["epoch"] for _, e, _ in own or usable])
    said = [f"{r['name']}: epoch {e['epoch']} (top-1 {e['top1']:.4f})" for r, e, _ in usable]
    apart = sorted({e["epoch"] for _, e, _ in usable})
    converged = None
    if not own:
        converged = (f"from {', '.join(r['name'] for r, _, _ in usable)} "
                     f"({', '.join(sorted({r['backend'] for r, _, _ in usable}))}): no full run on "
                     f"{found['backend']} was given, and another backend's numerics can reach "
                     "the target an epoch or two sooner or later")
    elif len(apart) > 1:
        converged = (f"the full runs reached it at epochs {apart[0]}-{apart[-1]}: this "
                     f"machine's backend's at {epochs}")
    lost = [t["lost_epochs"] for _, _, t in usable if t["lost_epochs"] is not None]
    whose = None
    if run["backend"] != found["backend"]:
        whose = (f"borrowed from {run['name']} ({run['backend']}): no full run on "
                 f"{found['backend']} was given")
    return {"epochs": epochs, "images_per_epoch": run["steps_per_epoch"] * run["global_batch_size"],
            "steps_per_epoch": run["steps_per_epoch"], "overhead": timing["overhead"],
            "overhead_run": run["name"], "overhead_whose": whose, "runs": said,
            "epochs_whose": converged,
            "precision": run["precision"],
            "lost_epochs": statistics.mean(lost) if lost else None,
            "interruptions_measured": sum(t["interruptions"] for _, _, t in usable)}


def epoch_overhead(usable: list, found: dict) -> tuple[dict, dict]:
    """The full run whose epoch overhead (evaluation, checkpoints, logs over the steady
    rate) predicts `found`'s machine, and its timing: a run of the same device kind and
    backend, else of the same backend (the overhead is mostly the backend's evaluation
    and saving: on this CPU TensorFlow's epochs took 1.26x their images, JAX's 1.10x),
    else the first (borrowed, and said so)."""
    for same in (("device_kind", "backend"), ("backend",)):
        for run, _, timing in usable:
            if all(run[k] == found[k] for k in same):
                return run, timing
    run, _, timing = usable[0]
    return run, timing


def measured_startup(found: dict) -> float | None:
    """The start-up a machine's first rented hour pays: a probe's from empty compile
    caches (measured, or its warm start-up plus a fresh compile's difference); a full
    run's, from its first epoch (as its own process found the caches)."""
    if found["kind"] == "predicted":  # borrowed from the folder it was predicted from
        return found["startup_seconds"]
    if found["kind"] == "probe":
        cold = found.get("startup_cold_seconds")
        return cold if cold is not None else found["startup_seconds"]
    timing = run_timing(found)
    return timing["startup_seconds"] if timing else None


def startup_note(found: dict) -> str | None:
    """What a machine's start-up was measured with, where a reader must know: a warm
    compile cache (a fresh machine pays more), or a probe that could not say."""
    if found["kind"] == "predicted":
        return (f"its start-up is {found['predicted_from']}'s, borrowed: a start-up is not "
                "predicted")
    if found["kind"] == "probe":
        if found.get("compile_cache") == "warm" and found.get("startup_cold_seconds") is not None:
            return (f"its process found its step in the compile cache (start-up "
                    f"{found['startup_seconds']:,.1f} s); from empty caches, as a fresh "
                    f"machine starts, {found['startup_cold_seconds']:,.1f} s: the decision "
                    "uses the cold one")
        if found.get("compile_cache") is None and found["backend"] == "jax":
            return "it does not say whether its compile cache was warm (a probe from before)"
        return None
    if found.get("compile_cache") == "warm":
        return ("its start-up came from a warm compile cache (JAX read its programs from "
                "it): a fresh machine's first hour starts colder; probe one from empty caches")
    return None
