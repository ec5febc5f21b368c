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


def test_a_profiled_familys_breakdown_is_the_unprofiled_steps_with_its_two_checks(tmp_path):
    """The models recipe by hand: ConvNeXt-T's profiled run traced a 69.8 ms step (its
    kinds 47.3 ms, 8 GFLOP counted a step); its unprofiled run timed 57.1 ms. The
    family's breakdown is the 57.1 ms step's: idle 9.8 ms = 17.2%; the GPU's busy time
    read apart, 47.0 ms: 17.7% idle, 0.5 points apart; 8 GFLOP against the MFU count's
    0.03 x 256 = 7.68: 4.2% over, not within 2%."""
    folder = str(tmp_path)
    traced = {"step_ms": 69.8, "devices": 1, "device_kind": "NVIDIA H100 80GB HBM3",
              "gflop": 8.0, "ops_without_flops": 0,
              "parts": {"convolutions": {"ms": 14.5, "share": 0.21, "gflop": 3.0,
                                         "tflops_per_sec": 206.9},
                        "matrix products": {"ms": 13.3, "share": 0.19},
                        "elementwise and other": {"ms": 19.5, "share": 0.28},
                        "idle": {"ms": 22.5, "share": 0.32}}}
    _write(folder, "convnext_tiny.log", "")
    _write(folder, "convnext_tiny.json", {"model": "applications:ConvNeXtTiny",
                                          "images_per_sec": 4483.4, "step_time_ms": 57.1})
    _write(folder, "convnext_tiny.profiled.json", {
        "train_gflops_per_image": 0.03, "global_batch_size": 256, "steps_per_execution": 1,
        "peak_tflops_per_device": 989.0, "profile": {"breakdown": traced}})
    _write(folder, "convnext_tiny.busy.json", {"median_busy_ms": 47.0, "median_ms": 50.0})
    entry = collect.models(collect.Folder(folder))["families"]["convnext_tiny"]
    result, checks = entry["breakdown"], entry["breakdown_checks"]
    assert result["step_ms"] == 57.1 and result["traced_step_ms"] == 69.8
    assert result["parts"]["idle"]["ms"] == pytest.approx(9.8)
    assert checks["idle_share"] == pytest.approx(9.8 / 57.1, abs=1e-4)
    assert checks["idle_share_read_apart"] == pytest.approx(10.1 / 57.1, abs=1e-4)
    assert checks["idle_within_2_points"] is True
    assert checks["counted_over_mfu"] == pytest.approx(8.0 / 7.68, abs=1e-4)
    assert checks["flops_within_2_percent"] is False
    assert result["line"].startswith("step 57.1 ms timed (traced 69.8 ms, 12.7 ms of it the "
                                     "profiler's): 34% elementwise and other, 25% convolutions "
                                     "at 207 TFLOP/s (21% of peak)")
