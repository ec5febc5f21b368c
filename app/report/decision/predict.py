"""The decision: which machine and pricing option reach a target top-1 for the fewest
dollars, and which the soonest, predicted from probes and full runs.

For each measured machine (a probe's, or a full run's own) and each catalog row that
sells its device (and the row it was billed as), under each pricing option the row
sells, the hours and dollars to the target:

    epochs E       the first epoch a full run of the same model, dataset, image size
                   and global batch reached the target (any machine: convergence does
                   not depend on where the same recipe ran; the machine's own backend's
                   runs first, decision_basis.py); several runs: the median
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

Given the rates table, each priced catalog device that no folder measured is predicted
too, its rate from the job's breakdown (decision_predicted.py, device_model.py).
Every prediction carries what it was predicted from ("from") and its hours split into
terms (start-up, training, evaluation and checkpoints, interruptions). The verdict: the
cheapest and the fastest measured machine, each in one line naming the term that
decides (decision_why.py); the Pareto frontier of (hours, dollars). Pure Python: the
catalog is app/pricing/catalog.py's; the files are read by decision_inputs.py.
"""

from __future__ import annotations

import datetime

from app.pricing import catalog as price_catalog
from app.report.decision import predicted as decision_predicted, why as decision_why
from app.report.decision.basis import (  # what each machine's prediction rests on
    SAME_JOB,
    convergence,
    epoch_overhead,
    measured_startup,
    startup_note,
)
from app.report.decision.inputs import first_epoch_at
from callbacks.figures.bill import OPTION_WORDS, SECONDS_PER_HOUR, dollars, hours, usd_per_hour

__all__ = ["SAME_JOB", "convergence", "epoch_overhead", "machine_label", "measured_startup",
           "on_frontier", "predict", "rows_for", "startup_note"]


def machine_label(found: dict) -> str:
    """"1 x NVIDIA H200 (jax, probe h200-probe)": what was measured, and where; "1 x H200
    (predicted from digits (cpu))": what was predicted, and from what."""
    if found["kind"] == "predicted":
        return (f"{found['billed_devices']} x {found['device_kind']} "
                f"(predicted from {found['predicted_from']})")
    return (f"{found['billed_devices']} x {found['device_kind']} ({found['backend'] or '?'}, "
            f"{found['kind']} {found['name']})")


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
            today: datetime.date | None = None, rates=None, errors=None) -> dict:
    """Hours and dollars to `target` for every measured machine x row x option.

    Args:
        found: decision_inputs.read_folder of each folder (probes and full runs).
        target: top-1 in (0, 1].
        table: the price catalog ({machine: Machine}).
        interruptions_per_hour: spot interruptions expected per hour of a spot run.
        today: for prices gone stale (default today).
        rates: the rates table (device_rates.load_rates) to predict the machines no
            folder measured (decision_predicted.py); None: none predicted.
        errors: the device model's measured error (decision_predicted.measured_error).

    Returns:
        {"target", "options" (one dict per machine x row x option, the measured machines'
        cheapest first, then the predicted ones', each
        with its hours split into `terms`), "machines" (per measured machine: its figures
        and what they came from, or why it has no prediction; a full run's `checks`),
        "cheapest", "fastest" (the lines, each naming the term that decides), "headline"
        (where nothing was predicted: why, in one line), "predicted" (the machines
        predicted: from what, left out, checked against a probe), "settle"}.
    """
    today = today or datetime.date.today()
    runs = [f for f in found if f["kind"] == "run"]
    machines, options = [], []
    extra = decision_predicted.predicted(found, table, rates, errors or {}, measured_startup) \
        if rates else None
    for item in found + (extra["items"] if extra else []):
        label = machine_label(item)
        basis = convergence(runs, item, target)
        startup = measured_startup(item)
        entry = {"label": label, "folder": item["folder"], "kind": item["kind"],
                 "name": item["name"], "backend": item["backend"],
                 "device_kind": item["device_kind"], "images_per_sec": item["images_per_sec"],
                 "images_per_sec_min": item.get("images_per_sec_min"),
                 "images_per_sec_max": item.get("images_per_sec_max"),
                 "repeats": item.get("repeats"), "startup_seconds": startup,
                 "startup_note": startup_note(item), "busy": item.get("busy"),
                 "job": [item[k] for k in SAME_MACHINE],
                 "same_machine": _same_machine(item, found), **basis}
        machines.append(entry)
        if "why" in basis:
            continue
        if startup is None:
            entry["why"] = "its start-up is not known (a full run of fewer than two epochs)"
            continue
        steady = basis["images_per_epoch"] / item["images_per_sec"]
        epoch_seconds = steady * basis["overhead"]
        terms = {"startup": startup, "training": basis["epochs"] * steady,
                 "evaluation": basis["epochs"] * (epoch_seconds - steady)}
        to_target_hours = hours(sum(terms.values()))
        lost = basis["lost_epochs"] or 0.0
        resume_hours = hours(startup + lost * epoch_seconds)
        entry.update(epoch_seconds=epoch_seconds, hours=to_target_hours, terms=terms,
                     resume_hours=resume_hours,
                     interruptions_measured_here=_interruptions_before(item, target),
                     measured_hours=_measured_hours(item, target), **{"from": _basis_words(
                         item, basis, startup, epoch_seconds, lost, target)})
        if basis.get("epochs_whose"):  # another run's epochs: the hours a few either way
            fewer = min(EPOCHS_EITHER_WAY, basis["epochs"] - 1)
            entry["epochs_either_way"] = {
                "epochs": [basis["epochs"] - fewer, basis["epochs"] + EPOCHS_EITHER_WAY],
                "hours": [to_target_hours - fewer * hours(epoch_seconds),
                          to_target_hours + EPOCHS_EITHER_WAY * hours(epoch_seconds)]}
        entry["from"]["hours"] = (" + ".join(
            f"{decision_why.duration(terms[t])} {words}" for t, words in (
                ("startup", "start-up"), ("training", "training at the steady rate"),
                ("evaluation", "evaluation and checkpoints")))
            + f" = {decision_why.duration(sum(terms.values()))}")
        for row in rows_for(item, table):
            count = row.machines_for(item["billed_devices"])
            for option in row.pricings():
                price = row.price_per_hour_usd(option) * count
                option_hours, option_terms = to_target_hours, dict(terms)
                if option == "spot" and interruptions_per_hour:
                    share = interruptions_per_hour * resume_hours
                    option_hours = to_target_hours / (1 - share) if share < 1 else None
                    option_terms["interruptions"] = (
                        (option_hours - to_target_hours) * SECONDS_PER_HOUR
                        if option_hours is not None else None)
                stale = bool(row.date) and price_catalog.stale(row, today)
                options.append({
                    "machine_label": label, "folder": item["folder"],
                    "device_kind": item["device_kind"], "machine": [
                        item["device_kind"], item["backend"], item["billed_devices"]],
                    "row": row.machine, "option": option, "hours": option_hours,
                    "terms": option_terms, "epochs": basis["epochs"],
                    "dollars": dollars(option_hours, price) if option_hours is not None
                    else None,
                    "price_per_hour_usd": price, "machines": count,
                    "price_per_device_hour_usd": row.price_per_device_hour_usd(option),
                    "images_per_sec": item["images_per_sec"],
                    "predicted": item["kind"] == "predicted",
                    "error_range": item.get("error_range"),
                    "dollars_per_interruption": dollars(resume_hours, price)
                    if option == "spot" else None,
                    "read": row.date, "stale": stale,
                    "stale_why": price_catalog.stale_why(row) if stale else None,
                    "price_from": (f"{row.machine}, {OPTION_WORDS[option]}: "
                                   f"{usd_per_hour(row.price_per_hour_usd(option))} x {count} "
                                   f"machine(s), read {row.date or 'with the run'}"
                                   f"{' (' + price_catalog.stale_why(row) + ')' if stale else ''}"
                                   f" from {row.source_short()}")})
    # Measured machines first: the verdict heads the table; a never-probed one follows.
    options.sort(key=lambda o: (o["predicted"], o["dollars"] is None, o["dollars"] or 0.0,
                                o["hours"] or 0.0))
    for option in options:
        option["frontier"] = on_frontier(option, options)
    for entry in machines:
        entry["checks"] = checks(entry, machines)
    headline = none_predicted(machines, options, target)
    return {"target": target, "interruptions_per_hour": interruptions_per_hour,
            "machines": machines, "options": options, "headline": headline,
            "cheapest": decision_why.cheapest_line(options, headline),
            "fastest": decision_why.fastest_line(options, headline),
            "predicted": extra and {k: v for k, v in extra.items() if k != "items"},
            "settle": decision_predicted.settle(options)}


SAME_MACHINE = ("device_kind", "backend", "billed_devices", "precision", *SAME_JOB)
EPOCHS_EITHER_WAY = 2  # a seed or a backend moved the digits job's epochs to 0.98 by one
# or two (TensorFlow 9, 9, 9, 8 and JAX 7, 7, 7, 9 at batch 64: decide_check's seeds)
PROBE_APART = 0.10  # a probe further than this from a full run of its machine: a caveat


def _same_machine(item: dict, found: list[dict]) -> list[dict]:
    """For a full run: the probes of the same machine, backend and job, each with the
    ratio of its rate to the run's steady rate (the check of a probe's rate against a
    run's: its per-step callbacks, evaluation between epochs); [] for a probe."""
    if item["kind"] != "run":
        return []
    return [{"name": p["name"], "label": machine_label(p),
             "ratio": p["images_per_sec"] / item["images_per_sec"]}
            for p in found if p["kind"] == "probe"
            and all(p[k] == item[k] for k in SAME_MACHINE)]


def checks(entry: dict, machines: list[dict]) -> list[dict]:
    """A full run's measured hours to the target against what was predicted for it:
    from its own figures (its interruptions included: each a start-up and the work it
    lost), and from each probe of the same machine, backend and job (that probe's
    hours). [] where the run did not reach the target or is a probe."""
    measured = entry.get("measured_hours")
    if entry["kind"] != "run" or not measured or entry.get("hours") is None:
        return []
    interrupted = entry.get("interruptions_measured_here") or 0
    own = entry["hours"] + interrupted * entry["resume_hours"]
    out = [{"from": "its own figures" + (f" and its {interrupted} interruption(s)"
                                         if interrupted else ""),
            "predicted_hours": own, "error": own / measured - 1}]
    for probe in entry["same_machine"]:
        other = next((m for m in machines if m["kind"] == "probe" and m["name"] == probe["name"]
                      and m.get("hours") is not None), None)
        if other is not None:
            out.append({"from": f"probe {probe['name']}", "predicted_hours": other["hours"],
                        "error": other["hours"] / measured - 1, "rate_ratio": probe["ratio"]})
    return out


def none_predicted(machines: list[dict], options: list[dict], target: float) -> str | None:
    """Why nothing was predicted, as the decision's headline; None where an option was."""
    if any(o["dollars"] is not None for o in options):
        return None
    unreached = [m["unreached"] for m in machines if m.get("unreached") is not None]
    if unreached:
        return (f"no full run reached top-1 {target:g} (the best logged: {max(unreached):.4f}): "
                "nothing to predict from; train longer or give a lower --target")
    unpriced = sorted({m["device_kind"] for m in machines if m.get("hours") is not None})
    if unpriced:
        return (f"hours predicted, dollars not: no catalog row sells {', '.join(unpriced)} and "
                "no run carries a price of its own (give --price_catalog a row for it, or "
                "probe with --price_per_hour_usd)")
    whys = sorted({m["why"] for m in machines if m.get("why")})
    return "none predicted: " + ("; ".join(whys) if whys else "no run folder could be used")


def _interruptions_before(item: dict, target: float) -> int:
    """How many times a full run was interrupted and resumed before the end of the
    epoch that reached `target` (its ledger's attempts after the first)."""
    epoch = first_epoch_at(item, target) if item["kind"] == "run" else None
    if epoch is None:
        return 0
    return sum(1 for a in item["attempts"] if a["index"] > 0 and a["epoch"] < epoch["epoch"])


def _measured_hours(item: dict, target: float) -> float | None:
    """A full run's own billed hours at the end of the epoch that reached `target`."""
    if item["kind"] != "run":
        return None
    epoch = first_epoch_at(item, target)
    return epoch["hours"] if epoch else None


def _basis_words(item, basis, startup, epoch_seconds, lost, target) -> dict:
    """What each factor of the prediction came from, in words."""
    rate = f"{item['images_per_sec']:,.1f} images/sec measured by {item['kind']} {item['name']}"
    if item["kind"] == "predicted":
        rate = decision_predicted.rate_words(item)
    if item.get("repeats") and item.get("images_per_sec_min") is not None:
        rate += (f" (the median of {item['repeats']} windows, "
                 f"{item['images_per_sec_min']:,.1f}-{item['images_per_sec_max']:,.1f})")
    overhead = (f"{basis['overhead']:.2f}x: {basis['overhead_run']}'s epochs took "
                f"{basis['overhead']:.2f}x their images at its steady rate "
                "(evaluation, checkpoints, logs)")
    if basis.get("overhead_whose"):
        overhead += f"; {basis['overhead_whose']}"
    started = f"{startup:,.1f} s measured by {item['kind']} {item['name']}" + (
        " (borrowed)" if item["kind"] == "predicted" else "")
    if item["kind"] == "probe" and item.get("startup_cold_seconds") is not None:
        started += " from empty compile caches (a fresh machine's first hour)"
    return {
        "epochs": (f"{basis['epochs']}: the first epoch at top-1 >= {target:g} "
                   f"({'; '.join(basis['runs'])})"),
        "images_per_epoch": (f"{basis['images_per_epoch']:,} = {basis['steps_per_epoch']} "
                             f"steps x {item['global_batch_size']} ({basis['overhead_run']})"),
        "rate": rate,
        "epoch_overhead": overhead,
        "epoch_seconds": f"{epoch_seconds:,.2f} s = images per epoch / rate x overhead",
        "startup": started,
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
