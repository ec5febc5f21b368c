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


def _cold_run(folder, name, cuts, to_first_step, images_per_sec, started=1000.0):
    """A coldstart run as the runner leaves it: summary (with its timeline), metrics."""
    _write(folder, f"{name}.json", {
        "attempts": [{"started_at": started + 0.05}], "images_per_sec": images_per_sec,
        "val_top1": 0.932, "startup": {
            "cuts": cuts, "seconds_to_first_step": to_first_step,
            "from": "process start (/proc/self/stat)", "process_started_at": started,
            "parts": [{"part": "interpreter", "seconds": 0.05, "program_seconds": 0.0},
                      {"part": "first_step", "seconds": to_first_step - 0.05,
                       "program_seconds": 0.25}],
            "programs_compiled": 3, "compile_seconds": 4.0, "programs": []}})
    _write(folder, f"{name}.metrics.jsonl", "\n".join(json.dumps(
        {"epoch": e, "val_top1": t, "time": started + 0.05 + to_first_step + s})
        for e, (s, t) in enumerate([(1.0, 0.8), (2.0, 0.931)], 1)))


def test_each_cut_is_weighed_against_the_mean_of_the_runs_with_the_defaults(tmp_path):
    folder = str(tmp_path)
    on, off = {"a": True, "b": False}, {"a": False, "b": False}
    _cold_run(folder, "defaults1", on, 10.0, 200000.0)
    _cold_run(folder, "defaults2", on, 11.0, 210000.0)
    _cold_run(folder, "turned_a", off, 12.5, 190000.0)  # a on by default: off costs 2 s
    _cold_run(folder, "turned_b", {"a": True, "b": True}, 9.5, 205000.0)  # b off: on saves 1
    _write(folder, "importtime.txt", "import time: self [us] | cumulative | imported package\n"
           "import time:      5 |     300000 |   jax.x\nimport time:      5 |    2500000 | jax\n"
           "import time:      5 |       9000 |     jax.x.y\n"
           "import time:      7 |    1500000 | keras\n")
    result = collect.coldstart(collect.Folder(folder))
    cuts = result["cuts"]
    assert cuts["_defaults"] == {"seconds_to_first_step": 10.5, "images_per_sec": 205000.0,
                                 "seconds_to_target": 12.5, "runs": 2, "spread_seconds": 1.0}
    assert cuts["a"]["on_by_default"] is True and cuts["a"]["seconds_saved"] == 2.0
    assert (cuts["a"]["images_per_sec_with"], cuts["a"]["images_per_sec_without"]) == (
        205000.0, 190000.0)
    assert cuts["b"]["on_by_default"] is False and cuts["b"]["seconds_saved"] == 1.0
    run = result["runs"]["defaults1"]
    # 0.931 at epoch 2: 2 s after the first step, 10 s after the first line (the ledger),
    # which came 0.05 s after the process started
    assert (run["seconds_to_target"], run["epoch_to_target"]) == (12.0, 2)
    assert run["app_seconds_to_target_from_process_start"] == 12.05
    assert run["parts"] == [["interpreter", 0.05], ["first_step", 9.95]]
    assert result["importtime_top"] == [["jax", 2.5], ["keras", 1.5], ["jax.x", 0.3]]


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


def test_a_familys_measured_choices_are_set_against_its_heuristic_run_and_its_twin(tmp_path):
    """The models recipe's files for one family whose three fresh runs chose their kernels
    by measurement (two kept the heuristic, one the autotuned), its heuristic run and its
    twin: each run's A/B decision as its summary.json holds it, and its figure over the
    heuristic's and the twin's, by hand."""
    folder = str(tmp_path)
    choices = [("convnext_tiny", 4380.0, {"kept": "heuristic", "how": "measured",
                                          "autotuned_step_ms": 77.9, "heuristic_step_ms": 58.3,
                                          "autotuned_gain": -0.2516, "kernels_differ": 31}),
               ("convnext_tiny.run2", 4420.0, {"kept": "autotuned", "how": "measured",
                                               "autotuned_step_ms": 57.1,
                                               "heuristic_step_ms": 58.4,
                                               "autotuned_gain": 0.0228, "kernels_differ": 30}),
               ("convnext_tiny.run3", 4300.0, {"kept": "heuristic", "how": "loaded",
                                               "loaded_from": "/s/x"})]
    for name, rate, choice in choices:
        _write(folder, f"{name}.json", {"model": "applications:ConvNeXtTiny",
                                        "images_per_sec": rate,
                                        "kernels": {"digest": "a" * 64, "choice": choice}})
        _write(folder, f"{name}.log", "")
    _write(folder, "convnext_tiny.heuristic.json", {"images_per_sec": 4400.0})
    _write(folder, "convnext_tiny.heuristic.log", "")
    _write(folder, "convnext_tiny.peer.json", {"peer": "torchvision convnext_tiny",
                                               "rows": [{"images_per_sec": 4000.0}]})
    families = collect.models(collect.Folder(folder))["families"]
    assert list(families) == ["convnext_tiny"]  # the heuristic run is not a family
    found = families["convnext_tiny"]["measured_choice"]
    assert found["heuristic_images_per_sec"] == 4400.0
    assert found["kept"] == ["heuristic", "autotuned", "heuristic"]
    assert [r["over_heuristic"] for r in found["runs"]] == [
        round(4380 / 4400, 4), round(4420 / 4400, 4), round(4300 / 4400, 4)]
    assert [r["over_twin"] for r in found["runs"]] == [1.095, 1.105, 1.075]
    assert found["runs"][1]["autotuned_gain"] == 0.0228 and found["runs"][2]["how"] == "loaded"
    assert found["min_over_heuristic"] == round(4300 / 4400, 4)
    assert found["all_at_least_heuristic_less_2pct"] is False  # 0.977 < 0.98
    assert found["min_over_twin"] == 1.075
