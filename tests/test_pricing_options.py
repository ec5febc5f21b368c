"""The dollars to each target under every pricing option the machine's row sells.

The study priced one run two ways: on demand and with a 12-month commitment. A run here
is billed under --pricing, and summary.json, the closing lines and the report also give
its bill and each target's under every other pricing of its catalog row: the target's
billed hours times that pricing's price, checked here by hand from the catalog file.
"""

import csv
import json
import os

import pytest
from conftest import ROOT, run_cli, tiny_flags

# Sells on demand and with 1- and 3-year commitments, read 2024-12 (stale); a CPU run
# is billed at it as asked.
MACHINE = "gcp-tpu-v6e-commit-2024"


def _catalog_prices(machine: str) -> dict:
    with open(os.path.join(ROOT, "app", "pricing", "prices.csv"), newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["machine"] == machine)
    host = float(row["host_usd_per_hour"] or 0)
    return {option: float(row[f"{option}_usd_per_hour"]) + host
            for option in ("on_demand", "spot", "one_year", "three_year")
            if row[f"{option}_usd_per_hour"]}


@pytest.fixture(scope="module")
def priced_run(digits_dir, tmp_path_factory):
    logdir = tmp_path_factory.mktemp("pricing") / "run"
    done = run_cli(*tiny_flags(digits_dir, logdir, f"--machine={MACHINE}", "--pricing=one_year",
                               "--target_top1=0.01", "--verbose=2"))
    assert done.returncode == 0, done.stderr[-2000:]
    return done, json.loads((logdir / "summary.json").read_text()), logdir


def test_each_target_is_priced_under_every_option_as_hours_times_price(priced_run):
    _, summary, _ = priced_run
    prices = _catalog_prices(MACHINE)
    assert set(prices) == {"on_demand", "one_year", "three_year"}
    assert summary["price_per_hour_usd_by_pricing"] == pytest.approx(prices)
    (target,) = summary["targets"]
    assert target["reached"] and target["hours"] > 0
    by_hand = {option: target["hours"] * price for option, price in prices.items()}
    assert target["cost_usd_by_pricing"] == pytest.approx(by_hand, rel=1e-5, abs=1e-6)
    assert target["cost_usd"] == pytest.approx(by_hand["one_year"], rel=1e-4, abs=1e-6)
    whole = {option: summary["billed_seconds"] / 3600 * price for option, price in prices.items()}
    # billed_seconds is kept to 0.01 s, the dollars to 1e-6: compared to that precision
    assert summary["cost_usd_by_pricing"] == pytest.approx(whole, rel=1e-4, abs=5e-6)


def test_the_closing_lines_give_every_option(priced_run):
    done, summary, _ = priced_run
    (target,) = summary["targets"]
    (accuracy,) = [line for line in done.stdout.splitlines() if line.startswith("top-1:")]
    costs = target["cost_usd_by_pricing"]
    assert (f"0.010 reached at epoch {target['epoch']} ({target['hours']:.4f} h: "
            f"${costs['one_year']:,.4f} with 1-year commitment, ${costs['on_demand']:,.4f} on "
            f"demand, ${costs['three_year']:,.4f} with 3-year commitment)") in accuracy
    (money,) = [line for line in done.stdout.splitlines() if line.startswith("cost:")]
    assert f"${summary['cost_usd_by_pricing']['on_demand']:,.4f} on demand" in money


def test_the_banner_says_the_machine_is_not_this_one_and_its_prices_are_old(priced_run):
    """A --machine the run is not on, and a price read over 12 months ago, are
    said under the banner (Billing.notes), once each; MFU keeps this host's peak."""
    done, summary, _ = priced_run
    lines = done.stdout.splitlines()
    banner = next(i for i, line in enumerate(lines) if line.startswith("[") and "backend=" in line)
    notes = [line for line in lines if line.startswith("note: ")]
    assert lines[banner + 1:banner + 1 + len(notes)] == notes and len(notes) == 2, lines[:6]
    assert notes[0].startswith(f"note: --machine={MACHINE} has 1 x TPU v6e chip but this run "
                               "is on cpu: billed at")
    assert notes[1] == (f"note: {MACHINE}'s prices were read 2024-12, over 12 months ago: "
                        "check https://cloud.google.com/tpu/pricing")
    assert "warning: --machine" not in done.stderr  # said once, under the banner
    assert summary["peak_tflops_per_device"] != 918


def test_the_report_gives_every_option_for_each_target(priced_run, tmp_path):
    import subprocess
    import sys

    _, summary, logdir = priced_run
    done = subprocess.run([sys.executable, os.path.join(ROOT, "app", "report.py"), str(logdir),
                           "--out", str(tmp_path / "report")], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    markdown = (tmp_path / "report" / "report.md").read_text()
    prices = _catalog_prices(MACHINE)
    # The report's hours come from metrics.jsonl (the epoch where the target was reached).
    hours = next(json.loads(line)["billed_hours"] for line in open(logdir / "metrics.jsonl"))
    assert f"${hours * prices['on_demand']:,.4f} on demand" in markdown
