"""benchmarks/decide_check.py's seed spread, by hand: the range of the measured hours
over the seeds that reached the target, and whether a prediction falls inside it; the
range the decision states beside borrowed epochs, and which measured hours fall inside it;
a borrowed-epoch error recomputed with the machine's own overhead; the check refuses fewer than one seed before it runs anything."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import decide_check  # noqa: E402


def _run(seed, hours):
    return {"seed": seed, "hours": hours, "epoch": None if hours is None else 7,
            "best_top1": 0.99}


def test_the_spread_is_the_range_of_the_seeds_that_reached_the_target():
    runs = [_run(0, 0.0050), _run(1, None), _run(2, 0.0062), _run(3, 0.0055)]
    found = decide_check.spread(runs, 0.0060)
    assert found["measured_hours_range"] == [0.0050, 0.0062]
    assert found["seeds_reached"] == "3 of 4"
    assert found["within_seed_range"] is True
    assert decide_check.spread(runs, 0.0049)["within_seed_range"] is False
    assert decide_check.spread(runs, None)["within_seed_range"] is None


def test_one_seed_has_no_spread_and_none_reached_has_no_range():
    assert decide_check.spread([_run(0, 0.005)], 0.005) == {}
    found = decide_check.spread([_run(0, None), _run(1, None)], 0.005)
    assert found["measured_hours_range"] == [None, None]
    assert found["within_seed_range"] is None


def test_the_stated_range_is_the_decisions_and_is_checked_at_each_seed():
    either_way = {"epochs": [5, 9], "hours": [0.0040, 0.0060]}  # decision.json's entry
    runs = [_run(0, 0.0062), _run(1, 0.0050), _run(2, None), _run(3, 0.0040)]
    found = decide_check.stated(either_way, runs)
    assert found["stated_range_epochs"] == [5, 9]
    assert found["stated_range_hours"] == [0.0040, 0.0060]
    assert found["within_stated_range"] is False  # seed 0's 0.0062 is above it
    assert found["seeds_within_stated_range"] == "2 of 3"  # the edge counts; None did not reach
    assert decide_check.stated(either_way, [_run(0, None)])["within_stated_range"] is None
    assert decide_check.stated(None, runs) == {}  # its own epochs: no range is stated


def test_the_error_with_its_own_overhead_swaps_only_the_evaluation_term():
    # JAX from TensorFlow's epochs (the third check's digits at 64): start-up 6.91 s and
    # 9 epochs' training 12.97 s, TensorFlow's overhead 1.247; JAX's own run's is 1.089
    guess = {"terms": {"startup": 6.91, "training": 12.97, "evaluation": 12.97 * 0.247}}
    measured = 17.75 / 3600
    by_hand = (6.91 + 12.97 + 12.97 * 0.089) / 17.75 - 1
    assert decide_check.own_overhead_error(guess, 1.089, measured) == round(by_hand, 4)
    assert 0.18 < by_hand < 0.19  # against +30.0% with the borrowed overhead
    assert decide_check.own_overhead_error({"terms": None}, 1.089, measured) is None
    assert decide_check.own_overhead_error(guess, None, measured) is None
    assert decide_check.own_overhead_error(guess, 1.089, None) is None


@pytest.mark.parametrize("seeds", ["0", "-2"])
def test_fewer_than_one_seed_is_refused_before_any_run(tmp_path, seeds):
    work = tmp_path / "work"
    done = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "decide_check.py"),
                           "--out", str(tmp_path / "r.json"), "--work", str(work),
                           f"--seeds={seeds}"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert f"--seeds={seeds} must be at least 1" in done.stderr
    assert not work.exists() and not (tmp_path / "r.json").exists()
