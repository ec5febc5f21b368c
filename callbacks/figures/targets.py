"""When a target top-1 was first reached, from a run's per-epoch history.

Pure Python (no framework), shared by the live callback (callbacks/accuracy.py)
and the report (app/report.py). A target is reached at the end of the first epoch
whose top-1 is at least the target; where the previous epoch was measured below
it, a linear interpolation within the epoch is given too, labelled as such.
"""

from __future__ import annotations


def _interpolate(before: dict, after: dict, target: float) -> dict:
    span = after["top1"] - before["top1"]
    fraction = (target - before["top1"]) / span if span > 0 else 1.0
    out = {"epoch": before["epoch"] + fraction * (after["epoch"] - before["epoch"])}
    for key in ("hours", "cost_usd"):
        if before.get(key) is not None and after.get(key) is not None:
            out[key] = before[key] + fraction * (after[key] - before[key])
        else:
            out[key] = None
    return out


def targets_reached(history: list[dict], targets) -> list[dict]:
    """One entry per target: target_top1, reached, epoch, hours, cost_usd, interpolated.

    Args:
        history: [{"epoch", "top1", "hours", "cost_usd"}, ...] in epoch order.
        targets: top-1 values in (0, 1].
    """
    measured = [h for h in history if h.get("top1") is not None]
    out = []
    for target in sorted(targets):
        entry = {"target_top1": target, "reached": False, "epoch": None, "hours": None,
                 "cost_usd": None, "interpolated": None}
        for index, point in enumerate(measured):
            if point["top1"] >= target:
                entry.update(reached=True, epoch=point["epoch"], hours=point.get("hours"),
                             cost_usd=point.get("cost_usd"))
                if index > 0 and measured[index - 1]["epoch"] == point["epoch"] - 1:
                    entry["interpolated"] = _interpolate(measured[index - 1], point, target)
                break
        out.append(entry)
    return out
