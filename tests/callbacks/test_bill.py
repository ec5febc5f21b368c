"""callbacks/figures/bill.py: the run's one bill. Billed seconds, hours and dollars
against hand counts and this test's own clock; the ledger's attempts summed; a
checkpoint's seconds read back; one way of writing dollars; one list of options."""

import math
import time

import pytest

from app.pricing.catalog import PRICE_COLUMNS
from callbacks.figures import bill
from callbacks.figures.bill import Bill
from flags import PRICINGS


def test_a_bill_is_its_clock_plus_the_earlier_attempts_priced_by_hand():
    """Started at t=1,000, 1,800 s billed before, read at t=2,800: one hour at $3.60/h;
    under the row's other options, that hour at their prices."""
    prices = {"on_demand": 3.6, "spot": 1.08}
    run = Bill(1000.0, 1800.0, 3.6, "on_demand", prices)
    assert run.seconds(at=2800.0) == 3600.0 and run.hours(at=2800.0) == 1.0
    assert run.cost_usd(at=2800.0) == pytest.approx(3.6)
    assert run.dollars_by_option(0.5) == pytest.approx({"on_demand": 1.8, "spot": 0.54})
    assert run.usd_per_million_images(1000.0) == pytest.approx(1.0)  # 1,000 s at $3.60/h
    assert run.state(at=2800.0) == {"billed_seconds": 3600.0}
    assert bill.saved_seconds(run.state(at=2800.0)) == 3600.0 and bill.saved_seconds({}) == 0.0


def test_without_a_price_hours_are_billed_and_dollars_are_unknown():
    unpriced = Bill(1000.0, 60.0)
    assert unpriced.hours(at=1060.0) == pytest.approx(120 / 3600)
    assert unpriced.cost_usd(at=1060.0) is None
    assert unpriced.usd_per_million_images(1000.0) is None
    assert unpriced.dollars_by_option(1.0) == {}


def test_the_bill_now_is_between_two_readings_of_this_tests_clock():
    before = time.time()
    run = Bill(before - 10.0, 5.0, 36.0)
    low = time.time()
    seconds = run.seconds()
    high = time.time()
    assert 15.0 + (low - before) <= seconds <= 15.0 + (high - before)
    assert run.cost_usd() == pytest.approx(seconds / 100, rel=1e-3)  # $36/h = 1 cent a second


@pytest.mark.parametrize("price, seconds_before, named", [
    (-1.0, 0.0, "price_per_hour_usd must be >= 0, received -1.0"),
    (math.nan, 0.0, "price_per_hour_usd must be >= 0, received nan"),
    (None, -5.0, "seconds_before must be >= 0, received -5.0"),
    (None, math.inf, "seconds_before must be >= 0, received inf"),
])
def test_a_bill_refuses_a_price_or_seconds_no_bill_can_hold(price, seconds_before, named):
    with pytest.raises(ValueError) as error:
        Bill(0.0, seconds_before, price)
    assert named in str(error.value)


def test_the_ledgers_attempts_are_billed_from_start_to_last_seen_never_below_zero():
    attempts = [{"started_at": 100.0, "last_seen": 160.0},
                {"started_at": 200.0, "last_seen": 190.0},  # a clock that went back: 0
                {"started_at": 0.0, "last_seen": 30.0}]  # recovered from a checkpoint
    assert bill.attempts_seconds(attempts) == 90.0
    assert bill.unbilled_seconds(attempts, 100.0) == 10.0
    assert bill.unbilled_seconds(attempts, 50.0) == 0.0


def test_dollars_are_written_one_way():
    assert [bill.usd(v) for v in (0.0035, 0.5, 1.0, 1234.567, None)] == [
        "$0.0035", "$0.5000", "$1.00", "$1,234.57", "n/a"]
    assert bill.usd(0.00555556, 4) == "$0.005556" and bill.usd(1000.0, 6) == "$1,000"
    assert bill.usd_per_hour(0.194236) == "$0.194236/h" and bill.usd_per_hour(2.5) == "$2.5/h"


def test_one_list_of_pricing_options_and_words_for_each():
    assert PRICINGS is bill.PRICINGS  # --pricing's choices
    assert tuple(PRICE_COLUMNS) == bill.PRICINGS  # the catalog's columns
    assert set(bill.PRICING_WORDS) == set(bill.OPTION_WORDS) == set(bill.PRICINGS)


def test_the_projection_is_the_bill_plus_the_epochs_left_at_the_last_ones_cost():
    assert bill.projected_cost_usd(2.0, 0.5, 4) == 4.0
    assert bill.projected_cost_usd(2.0, None, 0) == 2.0  # none left: the bill itself
    assert bill.projected_cost_usd(2.0, None, 3) is None
    assert bill.billed_usd_per_million_images(2.0, 4_000_000) == 0.5
