"""The one way a repeated figure is summarized: its median and its min-max, by hand."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbacks.figures import spread


def test_the_median_of_an_odd_and_an_even_count_by_hand():
    assert spread.median([3.0, 1.0, 2.0]) == 2.0
    assert spread.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert spread.median([7.5]) == 7.5
    with pytest.raises(ValueError):
        spread.median([])


def test_a_rows_fields_and_its_words_name_the_spread_once():
    row = {"repeats": 3, **spread.spread_fields("images_per_sec", [101.25, 95.125, 98.0])}
    assert row == {"repeats": 3, "images_per_sec": 98.0, "images_per_sec_min": 95.12,
                   "images_per_sec_max": 101.25}
    assert spread.words(row) == "median of 3, min-max 95.1-101.2 (6.3%)"
    assert spread.SPREAD in spread.words(row)
    assert spread.words({**row, "repeats": 1}) == ""  # measured once: no spread to say
    assert spread.words({"images_per_sec": 98.0}) == ""


@given(st.lists(st.floats(min_value=0.001, max_value=1e9), min_size=1, max_size=9))
def test_the_median_lies_within_the_spread(values):
    fields = spread.spread_fields("x", values, digits=6)
    assert fields["x_min"] <= fields["x"] <= fields["x_max"]
