"""benchmarks/collect.py's Fashion-MNIST figures: time to the target top-1 for the app
and both modes of its PyTorch peer, and the speedups, against a count by hand from
files laid out as the runner writes them."""

import json
import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import collect  # noqa: E402


def _write(folder, name, value):
    with open(os.path.join(folder, name), "w") as f:
        f.write(value if isinstance(value, str) else json.dumps(value))


def _peer(epochs):
    """A peer result (torch_fashion_peer.py): (seconds from start, val top-1) per epoch."""
    return {"epochs": [{"epoch": i + 1, "seconds_from_start": s, "val_top1": t}
                       for i, (s, t) in enumerate(epochs)],
            "images_per_sec_after_epoch_1": 80000.0, "final_top1": epochs[-1][1]}


def test_the_speedup_that_counts_is_over_the_faster_of_the_peers_two_modes(tmp_path):
    folder = str(tmp_path)
    started = 1000.0
    _write(folder, "app1.json", {"attempts": [{"started_at": started}], "val_top1": 0.935,
                                 "images_per_sec": 200000.0, "input_pipeline": "device"})
    # the app reaches 0.93 at its 3rd epoch, 9.5 s after its process started
    _write(folder, "app1.metrics.jsonl", "\n".join(json.dumps(
        {"epoch": e, "val_top1": t, "time": started + s})
        for e, (s, t) in enumerate([(4.0, 0.85), (6.5, 0.91), (9.5, 0.931), (12.0, 0.935)], 1)))
    _write(folder, "peer1.json", _peer([(20.0, 0.88), (30.0, 0.925), (40.0, 0.932)]))  # compiled
    _write(folder, "eager1.json", _peer([(8.0, 0.9), (15.2, 0.93)]))  # eager: faster here

    turn = collect.fashion_mnist(collect.Folder(folder))["time_to_accuracy"]
    assert (turn["app_seconds_to_target"], turn["app_epoch_to_target"]) == (9.5, 3)
    assert (turn["peer_seconds_to_target"], turn["peer_epoch_to_target"]) == (40.0, 3)
    assert turn["eager_peer_seconds_to_target"] == 15.2  # 0.93 itself counts as reached
    assert turn["speedup_over_peer"] == pytest.approx(40.0 / 9.5, abs=1e-3)
    assert turn["speedup_over_eager_peer"] == pytest.approx(15.2 / 9.5, abs=1e-3)
    assert turn["speedup_over_faster_peer"] == turn["speedup_over_eager_peer"]


def test_a_peer_that_never_reaches_the_target_leaves_the_other_to_count(tmp_path):
    folder = str(tmp_path)
    _write(folder, "app1.json", {"attempts": [{"started_at": 0.0}], "val_top1": 0.94})
    _write(folder, "app1.metrics.jsonl", json.dumps({"epoch": 1, "val_top1": 0.94,
                                                     "time": 5.0}))
    _write(folder, "peer1.json", _peer([(10.0, 0.95)]))
    _write(folder, "eager1.json", _peer([(3.0, 0.5), (6.0, 0.92)]))  # never 0.93
    turn = collect.fashion_mnist(collect.Folder(folder))["time_to_accuracy"]
    assert turn["speedup_over_eager_peer"] is None
    assert turn["speedup_over_faster_peer"] == turn["speedup_over_peer"] == 2.0


def test_a_familys_repeats_give_its_spread_and_how_far_its_kernels_differ(tmp_path):
    """The models recipe's files for one family run twice (convnext_tiny and
    convnext_tiny.run2, each with its kernels.json) and once more profiled: the spread
    and the kernels against the first run, counted by hand."""
    import gzip

    from app.engine import kernels

    folder = str(tmp_path)
    with gzip.open(os.path.join(ROOT, "tests", "fixtures",
                                "convnext_tiny_h100_after_optimizations.hlo.txt.gz"), "rt") as f:
        program = f.read()
    slow = kernels.chosen_kernels(program)
    fast = [dict(e) for e in slow]
    for entry in fast[:2]:  # two choices another run's autotuner made otherwise
        entry["config"] = {**entry["config"], "num_warps": "8"}
    for name, found, rate, share in (("convnext_tiny", slow, 3290.0, None),
                                     ("convnext_tiny.run2", fast, 4440.0, 0.0),
                                     ("convnext_tiny.run3", slow, 3286.0, None)):
        block, _ = kernels.describe(program, False, None)
        block["digest"] = kernels.digest(found)
        _write(folder, f"{name}.json", {"model": "applications:ConvNeXtTiny",
                                        "images_per_sec": rate, "kernels": block,
                                        "machine_state": {"timed_window": {"devices": [
                                            {"sm_clock_mhz": {"mean": 1980.0},
                                             "throttle_share": {} if share is None else
                                             {"sw_power_cap": share}}]}}})
        _write(folder, f"{name}.kernels.json", {**block, "kernels": found})
        _write(folder, f"{name}.log", "")
    _write(folder, "convnext_tiny.profiled.log", "")
    family = collect.models(collect.Folder(folder))["families"]["convnext_tiny"]
    assert family["images_per_sec"] == 3290.0  # the first run's, as before
    assert [r["run"] for r in family["repeats"]] == ["convnext_tiny", "convnext_tiny.run2",
                                                     "convnext_tiny.run3"]
    assert family["repeats"][1]["sm_clock_mhz_mean"] == 1980.0
    spread = family["spread"]
    assert (spread["runs"], spread["min"], spread["max"]) == (3, 3286.0, 4440.0)
    assert spread["max_over_min"] == round(4440.0 / 3286.0, 4)
    assert spread["kernels_against_first"] == [
        {"run": "convnext_tiny.run2", "same_digest": False, "kernels_differ": 2, "of": 348},
        {"run": "convnext_tiny.run3", "same_digest": True, "kernels_differ": 0, "of": 348}]
