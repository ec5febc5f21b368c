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


def run_epochs(tracker, bill, points):
    """Each epoch's (top-1, hours billed at its end) through the callback, as fit would."""
    logs = {}
    for epoch, (top1, hours) in enumerate(points):
        logs = {"val_top1": top1}
        tracker.on_epoch_begin(epoch)
        bill.epoch_end(epoch, at=bill.started_at + hours * 3600 - bill.seconds_before)
        tracker.on_epoch_end(epoch, logs)
    return logs


def test_targets_are_reached_at_the_first_epoch_at_or_above_them_with_interpolation():
    bill = Bill(time.time(), price_per_hour_usd=10.0)
    tracker = TopOneTargets([0.5, 0.7, 0.99], bill=bill)
    logs = run_epochs(tracker, bill, [(0.2, 1.0), (0.6, 2.0), (0.8, 3.0)])
    assert logs["best_val_top1"] == 0.8 and logs["targets_reached"] == 2
    half, seventy, high = tracker.targets()
    assert half["reached"] and half["epoch"] == 2 and half["hours"] == pytest.approx(2.0)
    assert half["cost_usd"] == pytest.approx(20.0)
    # 0.5 lies 3/4 of the way from 0.2 (epoch 1) to 0.6 (epoch 2).
    assert half["interpolated"]["epoch"] == pytest.approx(1.75)
    assert half["interpolated"]["cost_usd"] == pytest.approx(17.5)
    assert seventy["epoch"] == 3 and seventy["interpolated"]["hours"] == pytest.approx(2.5)
    assert high == {"target_top1": 0.99, "reached": False, "epoch": None, "hours": None,
                    "cost_usd": None, "interpolated": None}


def test_a_target_met_at_the_first_epoch_is_not_interpolated_and_history_resumes():
    bill = Bill(time.time())
    tracker = TopOneTargets([0.1], bill=bill)
    run_epochs(tracker, bill, [(0.3, 0.1)])
    assert tracker.targets()[0]["epoch"] == 1 and tracker.targets()[0]["interpolated"] is None
    resumed = TopOneTargets([0.1], history=tracker.history, bill=bill)
    resumed.on_epoch_end(1, {"val_top1": 0.4})
    assert [h["epoch"] for h in resumed.history] == [1, 2] and resumed.best_top1 == 0.4


def test_the_targets_take_their_money_from_the_bill_at_the_meter_s_instant():
    """The targets read the Bill, not the logs: whichever of them and the bill's meter
    runs first, both bill the epoch at one instant (`Bill.epoch_end`), so the target's
    hours are metrics.jsonl's billed_hours to the last digit. Without a price the hours
    are billed all the same (earlier attempts included); the dollars stay unknown."""
    for order in ("meter first", "targets first"):
        bill = Bill(time.time() - 1800, 1800)
        meter, tracker = CloudCost(bill), TopOneTargets([0.5], bill=bill)
        logs = {"val_top1": 0.6}
        first, second = (meter, tracker) if order == "meter first" else (tracker, meter)
        for callback in (first, second):
            callback.on_epoch_begin(0)
        time.sleep(0.01)
        first.on_epoch_end(0, logs)
        time.sleep(0.05)  # 14 microhours: a reading of its own would differ
        second.on_epoch_end(0, logs)
        target = tracker.targets()[0]
        assert target["reached"] and target["hours"] == pytest.approx(1.0, abs=1e-3)
        assert target["cost_usd"] is None
        assert logs["billed_hours"] == target["hours"], order
    # what the logs say is never read: a figure planted there is not the target's
    bill = Bill(time.time() - 3600, price_per_hour_usd=2.0)
    planted = {"val_top1": 0.6, "billed_hours": 9.0, "cost_usd": 99.0}
    tracker = TopOneTargets([0.5], bill=bill)
    tracker.on_epoch_end(0, planted)
    assert tracker.targets()[0]["hours"] == pytest.approx(1.0, abs=1e-3)
    assert tracker.targets()[0]["cost_usd"] == pytest.approx(2.0, abs=1e-2)
    assert planted["billed_hours"] == 9.0  # the meter's figure is left as it is
    # without a bill: top-1 and the targets, no hours or dollars
    alone = TopOneTargets([0.5])
    alone.on_epoch_end(0, {"val_top1": 0.6})
    assert alone.targets()[0]["epoch"] == 1 and alone.targets()[0]["hours"] is None
