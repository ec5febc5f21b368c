"""Why the decision's winner wins: the term of its hours (or dollars) that decides.

Each option's hours to the target are a sum of terms (app/report/decision/predict.py):

    startup       the machine's start-up (process start to the compiled step)
    training      the epochs' images at the steady rate
    evaluation    what the epochs take beyond that (evaluation, checkpoints, logs)
    interruptions what expected spot interruptions add (spot, --interruptions_per_hour)

The fastest option and the runner-up (the best option of another device, backend or
device count: a probe of the winner's machine is no rival) differ by
the sum of their terms' differences; the term whose difference favours the winner
most decides, and the one that favours the runner-up most is what it outweighs:

    fastest: ... ; decided by start-up 6.8 s against 10.1 s, which outweighs its 0.93x
    rate (training 52.1 s against 48.6 s over 7 epochs)

Dollars are hours times a price, so the cheapest option's difference from the
runner-up's splits into each term's seconds at the runner-up's price, plus the price
difference over the winner's hours (a "price" term): the parts add up to the two
options' difference exactly. Pure Python; money's arithmetic is callbacks/figures/bill.py's.
"""

from __future__ import annotations

from callbacks.figures.bill import OPTION_WORDS, dollars, hours, usd, usd_per_hour

TERMS = ("startup", "training", "evaluation", "interruptions")
# Where amounts are set against each other, four significant digits: "$0.005556".
SIGNIFICANT = 4
ALSO = 0.5  # a second term in the winner's favour this large against the first is named too


def duration(seconds: float) -> str:
    """'0.012 s', '6.8 s', '41.2 min', '3.42 h'."""
    if seconds < 1:
        return f"{seconds:.2g} s"
    if seconds < 120:
        return f"{seconds:,.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:,.1f} min"
    return f"{seconds / 3600:,.2f} h"


def contributions(best: dict, other: dict, by: str) -> dict:
    """How much each term makes `best` better than `other` (positive: in best's
    favour), in seconds (`by` "hours") or dollars (`by` "dollars": each term's seconds
    at the other's price, and a "price" term: the price difference over best's hours).
    The values add up to other's hours (or dollars) less best's."""
    terms = [t for t in TERMS if best["terms"].get(t) is not None
             or other["terms"].get(t) is not None]

    def seconds(option, term):
        return option["terms"].get(term) or 0.0

    if by == "hours":
        return {t: seconds(other, t) - seconds(best, t) for t in terms}
    out = {t: dollars(hours(seconds(other, t) - seconds(best, t)), other["price_per_hour_usd"])
           for t in terms}
    out["price"] = dollars(best["hours"], other["price_per_hour_usd"] - best["price_per_hour_usd"])
    return out


def term_words(term: str, best: dict, other: dict) -> str:
    """One term of the two options, in words: 'start-up 6.8 s against 10.1 s'."""
    if term == "price":
        ratio = best["price_per_device_hour_usd"] / other["price_per_device_hour_usd"]
        return (f"its price per device-hour, {usd_per_hour(best['price_per_device_hour_usd'])} "
                f"against {usd_per_hour(other['price_per_device_hour_usd'])} ({ratio:.2f}x)")
    mine, theirs = (o["terms"].get(term) or 0.0 for o in (best, other))
    over = f" over {best['epochs']} epochs"
    if term == "training":
        rate = best["images_per_sec"] / other["images_per_sec"]
        return (f"its {rate:.2f}x rate (training {duration(mine)} against {duration(theirs)}"
                f"{over})")
    name = {"startup": "start-up", "evaluation": "evaluation and checkpoints",
            "interruptions": "spot interruptions"}[term]
    return f"{name} {duration(mine)} against {duration(theirs)}" + (
        over if term == "evaluation" else "")


def deciding(best: dict, other: dict, by: str) -> dict:
    """The term that decides and the one it outweighs (None where every term favours
    best): {"term", "words", "against", "against_words", "parts"}."""
    parts = contributions(best, other, by)
    order = sorted(parts, key=parts.get, reverse=True)
    term, against = order[0], order[-1] if parts[order[-1]] < 0 else None
    words = "decided by " + term_words(term, best, other)
    if len(order) > 1 and parts[order[1]] > 0 and parts[order[1]] >= ALSO * parts[term]:
        words += " and " + term_words(order[1], best, other)  # two terms of one size
    if against:
        words += ", which outweighs " + term_words(against, best, other)
    return {"term": term, "against": against, "words": words, "parts": parts}


def _name(option: dict) -> str:
    return f"{option['row']} {OPTION_WORDS[option['option']]}"


def _runner_up(options: list[dict], best: dict, key) -> dict | None:
    """The best option of another machine than `best`'s: another device, backend or
    device count (a probe and a full run of one machine are one choice, measured twice)."""
    others = [o for o in options if o.get("machine") != best.get("machine")
              and o["dollars"] is not None and o["hours"] is not None]
    return min(others, key=key) if others else None


def _why(best: dict, other: dict | None, by: str) -> str:
    if other is None:
        return "the only machine measured"
    amount = (usd(other["dollars"], SIGNIFICANT) if by == "dollars"
              else f"{other['hours']:,.4g} h")
    return (f"{deciding(best, other, by)['words']}; runner-up {other['machine_label']} as "
            f"{_name(other)}, {amount}")


KEYS = {"dollars": lambda o: (o["dollars"], o["hours"]),
        "hours": lambda o: (o["hours"], o["dollars"])}


def pick(options: list[dict], by: str) -> tuple[dict | None, dict | None]:
    """The best measured option by `by` ("dollars": the cheapest; "hours": the fastest)
    and the runner-up (the best option of another machine); (None, None) where none is
    priced. A machine never probed (predicted) is no verdict: its rate is a model's, its
    start-up borrowed; app/report/decision/predicted.py's `worth_probing` says whether
    one could beat the verdict and which probe would tell."""
    priced = [o for o in options if o["dollars"] is not None and o["hours"] is not None
              and not o.get("predicted")]
    if not priced:
        return None, None
    best = min(priced, key=KEYS[by])
    return best, _runner_up(priced, best, key=KEYS[by])


def cheapest_line(options: list[dict], headline: str | None = None) -> str | None:
    """The cheapest option to the target, and the term that makes it so, in one line;
    None where nothing was predicted (`headline` says why)."""
    best, other = pick(options, "dollars")
    if headline or best is None:
        return None
    return (f"cheapest: {best['machine_label']} as {_name(best)}: "
            f"{usd(best['dollars'], SIGNIFICANT)} in {best['hours']:,.4g} h; "
            f"{_why(best, other, 'dollars')}")


def fastest_line(options: list[dict], headline: str | None = None) -> str | None:
    """The machine that reaches the target soonest (its cheapest row), and the term
    that makes it so; None where nothing was predicted."""
    best, other = pick(options, "hours")
    if headline or best is None:
        return None
    return (f"fastest: {best['machine_label']}: {best['hours']:,.4g} h, "
            f"{usd(best['dollars'], SIGNIFICANT)} as {_name(best)}; "
            f"{_why(best, other, 'hours')}")
