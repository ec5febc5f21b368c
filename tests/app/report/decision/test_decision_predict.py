"""The decision's arithmetic (app/report/decision/predict.py), by hand, on run folders written
here as the app writes them (summary.json, metrics.jsonl), priced by a catalog file of
a few rows (--price_catalog's format).

A full run of 10 steps of 64 images an epoch at 320 images/sec (2 s of images) whose
epochs take 2.5 s (evaluation and checkpoints: 1.25x) after a 10 s start-up, reaching
top-1 0.9 at epoch 4; a probe of another machine at 640 images/sec with a 6 s
start-up. Every hour and dollar below is worked out in the test's own lines.
"""

import datetime
import math

import pytest

from app.report.decision import predict as decision, inputs as decision_inputs

from decision_folders import row, table_of, write_probe, write_run  # noqa: E402

TODAY = datetime.date(2026, 12, 6)


ALL = {"on_demand": 2.0, "spot": 0.5, "one_year": 1.5, "three_year": 1.0}
TABLE = table_of(row("fast", "^Fast X$", ALL), row("slow", "^Slow Y$", {"on_demand": 1.0}))


def predict(folders, target=0.9, table=TABLE, **kwargs):
    found = [decision_inputs.read_folder(f) for f in folders]
    return decision.predict(found, target, table, today=TODAY, **kwargs)


def test_hours_and_dollars_to_the_target_by_hand(tmp_path):
    run = write_run(tmp_path / "run")
    probe = write_probe(tmp_path / "probe")
    result = predict([run, probe])
    fast = next(m for m in result["machines"] if m["kind"] == "probe")
    # The run: epochs 2.5 s against 640 images / 320 a second = 2 s: overhead 1.25.
    # The probe: 640 images / 640 a second x 1.25 = 1.25 s an epoch; 4 epochs to 0.9.
    assert fast["epochs"] == 4 and fast["overhead"] == pytest.approx(1.25)
    assert fast["epoch_seconds"] == pytest.approx(1.25)
    hours = (6 + 4 * 1.25) / 3600
    assert fast["hours"] == pytest.approx(hours)
    options = {(o["row"], o["option"]): o for o in result["options"]}
    for option, price in ALL.items():  # every option: hours x price, by hand
        assert options[("fast", option)]["hours"] == pytest.approx(hours)
        assert options[("fast", option)]["dollars"] == pytest.approx(hours * price)
    # The run's own machine, predicted as it is measured: start-up 12.5 - 2.5 = 10 s.
    slow = next(m for m in result["machines"] if m["kind"] == "run")
    assert slow["startup_seconds"] == pytest.approx(10)
    assert slow["hours"] == pytest.approx((10 + 4 * 2.5) / 3600)
    assert slow["measured_hours"] == pytest.approx((10 + 4 * 2.5) / 3600)
    assert options[("slow", "on_demand")]["dollars"] == pytest.approx(20 / 3600 * 1.0)
    # Cheapest first: 11 s at $0.5, $1.0, $1.5 an hour; 20 s at $1.0; 11 s at $2.0.
    assert [o["row"] + " " + o["option"] for o in result["options"]] == [
        "fast spot", "fast three_year", "fast one_year", "slow on_demand", "fast on_demand"]
    assert fast["from"]["epochs"] == "4: the first epoch at top-1 >= 0.9 (run: epoch 4 (top-1 0.9100))"
    assert fast["from"]["startup"] == "6.0 s measured by probe probe"


def test_a_machine_of_eight_bills_whole_machines(tmp_path):
    """A row of 8 devices per machine: a 1-device measurement is billed one machine."""
    table = table_of(row("fast8", "^Fast X$", {"on_demand": 16.0}, devices=8))
    result = predict([write_run(tmp_path / "run"), write_probe(tmp_path / "probe")],
                     table=table)
    (option,) = [o for o in result["options"] if o["row"] == "fast8"]
    assert option["machines"] == 1 and option["dollars"] == pytest.approx(11 / 3600 * 16.0)
    assert option["price_per_device_hour_usd"] == 2.0


def test_an_interruption_costs_a_start_up_and_the_work_it_lost(tmp_path):
    """Epoch 3 was interrupted and resumed: it took 2.5 s + a 10 s start-up + 1.25 s
    lost (half an epoch). Resuming on the probe's machine: 6 s + 0.5 x 1.25 s; at 2
    interruptions an hour, spot's hours are hours / (1 - 2 x that)."""
    attempts = [{"resumed_from": {"epoch": 0, "step": 0}},
                {"resumed_from": {"epoch": 2, "step": 0}}]
    run = write_run(tmp_path / "run", attempts=attempts, extra_seconds={3: 11.25})
    found = decision_inputs.read_folder(run)
    timing = decision_inputs.run_timing(found)
    assert timing["epoch_seconds"] == pytest.approx(2.5)  # epoch 3 left out of the median
    assert timing["lost_epochs"] == pytest.approx(0.5) and timing["interruptions"] == 1
    result = predict([run, write_probe(tmp_path / "probe")], interruptions_per_hour=2.0)
    fast = next(m for m in result["machines"] if m["kind"] == "probe")
    resume = (6 + 0.5 * 1.25) / 3600
    assert fast["resume_hours"] == pytest.approx(resume)
    spot = next(o for o in result["options"] if (o["row"], o["option"]) == ("fast", "spot"))
    hours = 11 / 3600 / (1 - 2 * resume)
    assert spot["hours"] == pytest.approx(hours) and spot["dollars"] == pytest.approx(hours * 0.5)
    assert spot["dollars_per_interruption"] == pytest.approx(resume * 0.5)
    on_demand = next(o for o in result["options"] if o["option"] == "on_demand"
                     and o["row"] == "fast")
    assert on_demand["hours"] == pytest.approx(11 / 3600)  # interruptions are spot's only
    assert "0.50 epochs lost per interruption (measured over 1 interruption(s))" in (
        fast["from"]["resume"])


def test_why_a_machine_has_no_prediction(tmp_path):
    other_batch = write_probe(tmp_path / "b128", global_batch_size=128)
    never = write_run(tmp_path / "never", top1=(0.5, 0.6, 0.7), epochs=5)  # stopped early
    shorter = write_probe(tmp_path / "shorter", epochs=3, recipe={"weight_decay": 0.1})
    probe = write_probe(tmp_path / "probe", precision="mixed_bfloat16")
    result = predict([never, probe, other_batch, shorter])
    why = {m["label"].split()[-1].rstrip(")"): m.get("why") for m in result["machines"]}
    assert why["shorter"] == ("the full runs of this job trained another recipe (epochs, "
                              "weight_decay differ): its convergence is another; give a run "
                              "of the same flags")
    assert why["b128"].startswith("no full run of small_resnet on digits at 8 px and global "
                                  "batch 128 was given")
    assert why["probe"] == ("no full run of this job reached 0.9: the best top-1 logged was "
                            "0.7000; train longer or aim lower")
    assert result["options"] == [] and result["cheapest"] is None
    assert result["headline"] == ("no full run reached top-1 0.9 (the best logged: 0.7000): "
                                  "nothing to predict from; train longer or give a lower --target")
    reached = predict([write_run(tmp_path / "run"), probe])
    caveat = next(m for m in reached["machines"] if m["kind"] == "probe")["from"]["precision"]
    assert caveat == ("the full run trained in float32, this machine was measured in "
                      "mixed_bfloat16: convergence may differ")


def test_the_cheapest_and_the_fastest_say_why_in_one_line(tmp_path):
    table = table_of(row("fast", "^Fast X$", {"on_demand": 4.0}),
                     row("slow", "^Slow Y$", {"on_demand": 1.0}))
    result = predict([write_run(tmp_path / "run"), write_probe(tmp_path / "probe")],
                     table=table)
    # slow: 10 s start-up + 8 s training + 2 s evaluation = 20 s at $1/h; fast: 6 + 4 + 1
    # = 11 s at $4/h. In dollars at fast's price, slow's seconds cost it 4 + 4 + 1 s x $4/h;
    # its price saves 20 s x $3/h: the price decides, the rate (8 s against 4) is the
    # largest term against it (the start-up's 4 s ties it; the first in order is named).
    assert result["cheapest"] == (
        "cheapest: 1 x Slow Y (tensorflow, run run) as slow on demand: $0.005556 in "
        "0.005556 h; decided by its price per device-hour, $1/h against $4/h (0.25x), which "
        "outweighs its 0.50x rate (training 8.0 s against 4.0 s over 4 epochs); runner-up "
        "1 x Fast X (jax, probe probe) as fast on demand, $0.01222")
    assert result["fastest"] == (
        "fastest: 1 x Fast X (jax, probe probe): 0.003056 h, $0.01222 as fast on demand; "
        "decided by start-up 6.0 s against 10.0 s and its 2.00x rate (training 4.0 s against "
        "8.0 s over 4 epochs); runner-up 1 x Slow Y (tensorflow, run run) as slow on demand, "
        "0.005556 h")
    assert all(o["frontier"] for o in result["options"])  # one faster, one cheaper


def test_the_frontier_is_what_nothing_beats_on_both(tmp_path):
    options = [{"hours": 1.0, "dollars": 5.0}, {"hours": 2.0, "dollars": 3.0},
               {"hours": 2.0, "dollars": 4.0}, {"hours": 3.0, "dollars": 3.0},
               {"hours": None, "dollars": None}]
    assert [decision.on_frontier(o, options) for o in options] == [
        True, True, False, False, False]


def test_stale_rows_are_flagged_in_the_options(tmp_path):
    table = table_of(row("fast", "^Fast X$", {"on_demand": 3.0}, date="2026-05",
                         provider="nebius"))
    result = predict([write_run(tmp_path / "run"), write_probe(tmp_path / "probe")],
                     table=table)
    (option,) = result["options"]
    assert option["stale"] and option["stale_why"] == "over 90 days ago"
    assert "read 2026-05 (over 90 days ago) from example.com/p" in option["price_from"]


def test_a_probe_billed_at_a_price_of_its_own_is_priced_at_it(tmp_path):
    """A probe whose row is in no catalog given (--price_per_hour_usd, another
    catalog) is priced at what its summary.json says it was billed."""
    probe = write_probe(tmp_path / "probe", device_kind="Other Z", machine=None,
                        price_per_hour_usd_by_pricing={"on_demand": 3.6, "spot": "cheap"})
    result = predict([write_run(tmp_path / "run"), probe])
    (option,) = [o for o in result["options"] if o["device_kind"] == "Other Z"]
    assert option["row"] == "its own price (as billed)" and option["option"] == "on_demand"
    assert option["dollars"] == pytest.approx(11 / 3600 * 3.6)
    assert all(math.isfinite(o["dollars"]) for o in result["options"])
