"""callbacks/accuracy.py: top-1 targets reached at the first epoch at or above them,
interpolated between epochs, with their hours and dollars."""

import time

import pytest

from callbacks.accuracy import TopOneTargets
from callbacks.cost import CloudCost
from callbacks.figures.bill import Bill


def test_targets_arguments_are_checked_with_the_value_received():
    with pytest.raises(ValueError) as error:
        TopOneTargets([1.2])
    assert "targets must be in (0, 1], received 1.2" in str(error.value)


def history_point(logs):
    return {"val_top1": logs[0], "billed_hours": logs[1], "cost_usd": logs[2]}


def test_targets_are_reached_at_the_first_epoch_at_or_above_them_with_interpolation():
    tracker = TopOneTargets([0.5, 0.7, 0.99])
    for epoch, point in enumerate([(0.2, 1.0, 10.0), (0.6, 2.0, 20.0), (0.8, 3.0, 30.0)]):
        logs = history_point(point)
        tracker.on_epoch_end(epoch, logs)
    assert logs["best_val_top1"] == 0.8 and logs["targets_reached"] == 2
    half, seventy, high = tracker.targets()
    assert half["reached"] and half["epoch"] == 2 and half["hours"] == 2.0
    assert half["cost_usd"] == 20.0
    # 0.5 lies 3/4 of the way from 0.2 (epoch 1) to 0.6 (epoch 2).
    assert half["interpolated"]["epoch"] == pytest.approx(1.75)
    assert half["interpolated"]["cost_usd"] == pytest.approx(17.5)
    assert seventy["epoch"] == 3 and seventy["interpolated"]["hours"] == pytest.approx(2.5)
    assert high == {"target_top1": 0.99, "reached": False, "epoch": None, "hours": None,
                    "cost_usd": None, "interpolated": None}


def test_a_target_met_at_the_first_epoch_is_not_interpolated_and_history_resumes():
    tracker = TopOneTargets([0.1])
    tracker.on_epoch_end(0, history_point((0.3, 0.1, 1.0)))
    assert tracker.targets()[0]["epoch"] == 1 and tracker.targets()[0]["interpolated"] is None
    resumed = TopOneTargets([0.1], history=tracker.history)
    resumed.on_epoch_end(1, history_point((0.4, 0.2, 2.0)))
    assert [h["epoch"] for h in resumed.history] == [1, 2] and resumed.best_top1 == 0.4


def test_hours_to_a_target_need_no_price():
    """Without a price the bill's meter still bills hours (earlier attempts included):
    the targets read them; the dollars stay unknown."""
    meter = CloudCost(Bill(time.time() - 1800, 1800))
    tracker = TopOneTargets([0.5])
    logs = {"val_top1": 0.6}
    meter.on_epoch_end(0, logs)
    tracker.on_epoch_end(0, logs)
    target = tracker.targets()[0]
    assert target["reached"] and target["hours"] == pytest.approx(1.0, abs=1e-3)
    assert target["cost_usd"] is None
    assert logs["billed_hours"] == target["hours"]  # for metrics.jsonl and the report
    priced = {"val_top1": 0.6, "billed_hours": 2.0, "cost_usd": 8.0}
    TopOneTargets([0.5]).on_epoch_end(0, priced)
    assert priced["billed_hours"] == 2.0  # the cost callback's figure is kept as it is
