"""callbacks/cost.py: the bill's meter: wall-clock time from the run's start, earlier
attempts included, priced and projected to the run's end; hours without a price."""

import time

import pytest

from callbacks.cost import CloudCost
from callbacks.figures.bill import Bill


def test_cost_arguments_are_checked_with_the_value_received():
    with pytest.raises(ValueError) as error:
        CloudCost(Bill(time.time(), price_per_hour_usd=-1.0))
    assert "price_per_hour_usd must be >= 0, received -1.0" in str(error.value)


def test_cost_charges_wall_clock_from_the_start_including_earlier_attempts():
    started = time.time() - 1800  # half an hour ago
    meter = CloudCost(Bill(started, 1800, price_per_hour_usd=4.0),
                      10, total_epochs=4)
    meter.set_params({"steps": 100})
    meter.on_epoch_begin(0)
    logs = {}
    meter.on_epoch_end(0, logs)
    assert logs["billed_hours"] == pytest.approx(1.0, abs=1e-3)
    assert logs["cost_usd"] == pytest.approx(4.0, abs=0.01)
    assert logs["billed_usd_per_million_images"] == pytest.approx(4.0 / 1000 * 1e6, rel=1e-3)
    assert "usd_per_million_images" not in logs  # that name is price / steady-state rate
    # Epoch 1 cost almost nothing (it just began), so the projection adds little.
    assert logs["projected_cost_usd"] == pytest.approx(4.0, abs=0.01)
    batch_logs = {}
    meter.on_train_batch_end(0, batch_logs)
    assert batch_logs["cost_usd"] >= logs["cost_usd"]


def test_without_a_price_the_meter_bills_hours_and_no_dollars():
    meter = CloudCost(Bill(time.time() - 360))
    meter.on_epoch_begin(0)
    logs, batch_logs = {}, {}
    meter.on_train_batch_end(0, batch_logs)
    meter.on_epoch_end(0, logs)
    assert logs["billed_hours"] == pytest.approx(0.1, abs=1e-3)
    assert set(logs) == {"billed_hours"} and batch_logs == {} and meter.cost_usd is None
