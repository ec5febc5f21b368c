"""The decision: which machine and pricing option reach a target top-1 for the fewest
dollars, and which the soonest, predicted from probes and full runs (issue 47).

For each measured machine (a probe's, or a full run's own) and each catalog row that
sells its device (and the row it was billed as), under each pricing option the row
sells, the hours and dollars to the target:

    epochs E       the first epoch a full run of the same model, dataset, image size
                   and global batch reached the target (any machine: convergence does
                   not depend on where the same recipe ran); several runs: the median
    epoch_seconds  images_per_epoch / rate x overhead: the run's images an epoch
                   (steps_per_epoch x global batch) at the machine's measured steady
                   rate, times how much longer the run's epochs took than their images
                   at its own steady rate (evaluation, checkpoints: scales with speed)
    hours          (start-up + E x epoch_seconds) / 3600, the start-up as measured on
                   the machine (a probe: process start to the compiled step)
    spot           hours / (1 - interruptions_per_hour x resume_hours): each
                   interruption costs a start-up on the machine plus the work it lost
                   (measured where a full run was interrupted and resumed: the
                   interrupted epoch's excess over a normal one, less a start-up);
                   with no interruption given, the spot hours are the on-demand ones,
                   and each option says what one interruption would add
    dollars        hours x machines x the row's price per machine-hour (the Bill's
                   arithmetic and words: callbacks/figures/bill.py)

Every prediction carries what it was predicted from ("from"). Rankings: the cheapest
and the fastest, each in one line with why (rate and price ratios against the best
other machine); the Pareto frontier of (hours, dollars). Pure Python: the catalog is
app/engine/catalog.py's; the files are read by decision_inputs.py.
"""

from __future__ import annotations

import datetime
import statistics

from app.engine import catalog as price_catalog
from app.engine.decision_inputs import first_epoch_at, run_timing
from callbacks.figures.bill import OPTION_WORDS, dollars, hours, usd, usd_per_hour

SAME_JOB = ("model", "dataset", "image_size", "global_batch_size")
SAME_RECIPE = ("epochs", "recipe")  # the schedule runs over the epochs: part of the recipe
# Where amounts are set against each other, four significant digits: "$0.005556".
SIGNIFICANT = 4


def machine_label(found: dict) -> str:
    """"1 x NVIDIA H200 (jax, probe h200-probe)": what was measured, and where."""
    return (f"{found['billed_devices']} x {found['device_kind']} ({found['backend'] or '?'}, "
            f"{found['kind']} {found['name']})")


def convergence(runs: list[dict], found: dict, target: float) -> dict:
    """Epochs to `target` for `found`'s job, from the full runs of the same job.

    Returns {"epochs", "images_per_epoch", "overhead", "runs" (what each said)} or
    {"why": ...} where no run of the job reached it.
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
        best = f"; the best top-1 logged was {best:.4f}" if best is not None else ""
        return {"why": f"no full run of this job reached {target:g} over two epochs or "
                       f"more{best}: train longer"}
    run, epoch, timing = usable[0]
    epochs = statistics.median_low([e["epoch"] for _, e, _ in usable])
    said = [f"{r['name']}: epoch {e['epoch']} (top-1 {e['top1']:.4f})" for r, e, _ in usable]
    lost = [t["lost_epochs"] for _, _, t in usable if t["lost_epochs"] is not None]
    return {"epochs": epochs, "images_per_epoch": run["steps_per_epoch"] * run["global_batch_size"],
            "steps_per_epoch": run["steps_per_epoch"], "overhead": timing["overhead"],
            "overhead_run": run["name"], "runs": said,
            "precision": run["precision"],
            "lost_epochs": statistics.mean(lost) if lost else None,
            "interruptions_measured": sum(t["interruptions"] for _, _, t in usable)}


def measured_startup(found: dict) -> float | None:
    """A probe's start-up as it measured it; a full run's, from its first epoch."""
    if found["kind"] == "probe":
        return found["startup_seconds"]
    timing = run_timing(found)
    return timing["startup_seconds"] if timing else None


def rows_for(found: dict, table: dict) -> list:
    """The catalog rows that sell `found`'s device (their pattern matches its device
    kind) and the row it was billed as, priced ones only; where that row is in no
    catalog given, its own run's prices as a row of its own."""
    rows = [r for r in table.values() if r.pricings() and (
        r.matches(found["device_kind"]) or r.machine == found["machine"])]
    if not rows and found["prices"]:
        rows = [price_catalog.Machine(
            machine=f"{found['machine'] or 'its own price'} (as billed)",
            accelerator=found["device_kind"], devices_per_machine=found["billed_devices"],
            device_kind_pattern="", provider="", region="",
            prices_usd_per_hour=dict(found["prices"]), host_usd_per_hour=0.0,
            peak_bf16_tflops_per_device=None, source=f"{found['name']}'s summary.json",
            date="", device=found["device_kind"])]
    return rows


def predict(found: list[dict], target: float, table: dict,
            interruptions_per_hour: float = 0.0,
            today: datetime.date | None = None) -> dict:
    """Hours and dollars to `target` for every measured machine x row x option.

    Args:
        found: decision_inputs.read_folder of each folder (probes and full runs).
        target: top-1 in (0, 1].
        table: the price catalog ({machine: Machine}).
        interruptions_per_hour: spot interruptions expected per hour of a spot run.
        today: for prices gone stale (default today).

    Returns:
        {"target", "options" (one dict per machine x row x option, cheapest first),
        "machines" (per measured machine: its figures and what they came from, or
        why it has no prediction), "cheapest", "fastest" (the lines), "frontier"}.
    """
    today = today or datetime.date.today()
    runs = [f for f in found if f["kind"] == "run"]
    machines, options = [], []
    for item in found:
        label = machine_label(item)
        basis = convergence(runs, item, target)
        startup = measured_startup(item)
        entry = {"label": label, "folder": item["folder"], "kind": item["kind"],
                 "device_kind": item["device_kind"], "images_per_sec": item["images_per_sec"],
                 "startup_seconds": startup, "busy": item.get("busy"),
                 "same_machine": _same_machine(item, found), **basis}
        machines.append(entry)
        if "why" in basis:
            continue
        if startup is None:
            entry["why"] = "its start-up is not known (a full run of fewer than two epochs)"
            continue
        epoch_seconds = basis["images_per_epoch"] / item["images_per_sec"] * basis["overhead"]
        to_target_hours = hours(startup + basis["epochs"] * epoch_seconds)
        lost = basis["lost_epochs"] or 0.0
        resume_hours = hours(startup + lost * epoch_seconds)
        entry.update(epoch_seconds=epoch_seconds, hours=to_target_hours,
                     resume_hours=resume_hours,
                     measured_hours=_measured_hours(item, target), **{"from": _basis_words(
                         item, basis, startup, epoch_seconds, lost, target)})
        for row in rows_for(item, table):
            count = row.machines_for(item["billed_devices"])
            for option in row.pricings():
                price = row.price_per_hour_usd(option) * count
                option_hours = to_target_hours
                if option == "spot" and interruptions_per_hour:
                    share = interruptions_per_hour * resume_hours
                    option_hours = to_target_hours / (1 - share) if share < 1 else None
                stale = bool(row.date) and price_catalog.stale(row, today)
                options.append({
                    "machine_label": label, "device_kind": item["device_kind"],
                    "row": row.machine, "option": option, "hours": option_hours,
                    "dollars": dollars(option_hours, price) if option_hours is not None
                    else None,
                    "price_per_hour_usd": price, "machines": count,
                    "price_per_device_hour_usd": row.price_per_device_hour_usd(option),
                    "images_per_sec": item["images_per_sec"],
                    "dollars_per_interruption": dollars(resume_hours, price)
                    if option == "spot" else None,
                    "read": row.date, "stale": stale,
                    "stale_why": price_catalog.stale_why(row) if stale else None,
                    "price_from": (f"{row.machine}, {OPTION_WORDS[option]}: "
                                   f"{usd_per_hour(row.price_per_hour_usd(option))} x {count} "
                                   f"machine(s), read {row.date or 'with the run'}"
                                   f"{' (' + price_catalog.stale_why(row) + ')' if stale else ''}"
                                   f" from {row.source_short()}")})
    options.sort(key=lambda o: (o["dollars"] is None, o["dollars"] or 0.0, o["hours"] or 0.0))
    for option in options:
        option["frontier"] = on_frontier(option, options)
    return {"target": target, "interruptions_per_hour": interruptions_per_hour,
            "machines": machines, "options": options,
            "cheapest": cheapest_line(options), "fastest": fastest_line(options)}


SAME_MACHINE = ("device_kind", "backend", "billed_devices", "precision", *SAME_JOB)


def _same_machine(item: dict, found: list[dict]) -> str | None:
    """For a full run: how a probe of the same machine, backend and job saw its rate
    ("probe P saw 1.10x this run's steady rate"), the check of a probe's rate against a
    run's (its per-step callbacks, evaluation between epochs); None where no probe is."""
    if item["kind"] != "run":
        return None
    probes = [f for f in found if f["kind"] == "probe"
              and all(f[k] == item[k] for k in SAME_MACHINE)]
    return "; ".join(f"probe {p['name']} saw {p['images_per_sec'] / item['images_per_sec']:.2f}x "
                     f"this run's steady rate" for p in probes) or None


def _measured_hours(item: dict, target: float) -> float | None:
    """A full run's own billed hours at the end of the epoch that reached `target`."""
    if item["kind"] != "run":
        return None
    epoch = first_epoch_at(item, target)
    return epoch["hours"] if epoch else None


def _basis_words(item, basis, startup, epoch_seconds, lost, target) -> dict:
    """What each factor of the prediction came from, in words."""
    rate = f"{item['images_per_sec']:,.1f} images/sec measured by {item['kind']} {item['name']}"
    return {
        "epochs": (f"{basis['epochs']}: the first epoch at top-1 >= {target:g} "
                   f"({'; '.join(basis['runs'])})"),
        "images_per_epoch": (f"{basis['images_per_epoch']:,} = {basis['steps_per_epoch']} "
                             f"steps x {item['global_batch_size']} ({basis['overhead_run']})"),
        "rate": rate,
        "epoch_overhead": (f"{basis['overhead']:.2f}x: {basis['overhead_run']}'s epochs took "
                           f"{basis['overhead']:.2f}x their images at its steady rate "
                           "(evaluation, checkpoints, logs)"),
        "epoch_seconds": f"{epoch_seconds:,.2f} s = images per epoch / rate x overhead",
        "startup": f"{startup:,.1f} s measured by {item['kind']} {item['name']}",
        "resume": (f"{startup:,.1f} s start-up + {lost:.2f} epochs lost per interruption "
                   + (f"(measured over {basis['interruptions_measured']} interruption(s))"
                      if basis["lost_epochs"] is not None else
                      "(no full run was interrupted: the app saves a checkpoint at the "
                      "spot notice's SIGTERM, so none is counted)")),
        "precision": (None if basis["precision"] == item["precision"] else
                      f"the full run trained in {basis['precision']}, this machine was "
                      f"measured in {item['precision']}: convergence may differ"),
    }


def on_frontier(option: dict, options: list[dict]) -> bool:
    """Whether no other option is as fast and as cheap, and better in one (Pareto)."""
    if option["dollars"] is None or option["hours"] is None:
        return False
    return not any(o is not option and o["dollars"] is not None and o["hours"] is not None
                   and o["dollars"] <= option["dollars"] and o["hours"] <= option["hours"]
                   and (o["dollars"] < option["dollars"] or o["hours"] < option["hours"])
                   for o in options)


def _name(option: dict) -> str:
    return f"{option['row']} {OPTION_WORDS[option['option']]}"


def _why(best: dict, other: dict | None) -> str:
    """"1.40x 1 x NVIDIA H100's rate at 1.15x its price per device-hour" or why none."""
    if other is None:
        return "the only machine measured"
    rate = best["images_per_sec"] / other["images_per_sec"]
    price = best["price_per_device_hour_usd"] / other["price_per_device_hour_usd"]
    return (f"{rate:.2f}x the rate of {other['machine_label']} at {price:.2f}x its price per "
            f"device-hour ({_name(other)}, {usd(other['dollars'], SIGNIFICANT)})")


def _best_other(options: list[dict], best: dict, key) -> dict | None:
    others = [o for o in options if o["machine_label"] != best["machine_label"]
              and o["dollars"] is not None]
    return min(others, key=key) if others else None


def cheapest_line(options: list[dict]) -> str:
    """The cheapest option to the target, and why, in one line."""
    priced = [o for o in options if o["dollars"] is not None]
    if not priced:
        return "cheapest: none predicted (no measured machine has a price and a full run)"
    best = priced[0]
    other = _best_other(priced, best, key=lambda o: o["dollars"])
    return (f"cheapest: {best['machine_label']} as {_name(best)}: "
            f"{usd(best['dollars'], SIGNIFICANT)} in "
            f"{best['hours']:,.4g} h; {_why(best, other)}")


def fastest_line(options: list[dict]) -> str:
    """The machine that reaches the target soonest (its cheapest row), and why."""
    priced = [o for o in options if o["dollars"] is not None and o["hours"] is not None]
    if not priced:
        return "fastest: none predicted (no measured machine has a price and a full run)"
    best = min(priced, key=lambda o: (o["hours"], o["dollars"]))
    other = _best_other(priced, best, key=lambda o: (o["hours"], o["dollars"]))
    return (f"fastest: {best['machine_label']}: {best['hours']:,.4g} h, "
            f"{usd(best['dollars'], SIGNIFICANT)} "
            f"as {_name(best)}; {_why(best, other)}")
