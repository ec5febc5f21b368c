"""The effort ladder (--benchmark=ladder) on CPU: its rungs in order, their gains
computed from the rung figures, the rungs that cannot apply here kept with why."""

import json
import os
import re

import pytest
from conftest import ROOT
from processes import run, snapshot, strict_json
from tensorboard_server import hparams_sessions

from app import report
from app.modes import ladder

NO_TF = os.path.join(os.path.dirname(__file__), "no_tensorflow")
NAMES = ["float32", "mixed_bfloat16", "largest_batch", "steps_per_execution",
         "data_on_device", "xla_full_autotune"]


def test_the_rungs_are_in_one_place_in_order_each_saying_what_it_changes():
    assert [r.name for r in ladder.RUNGS] == NAMES
    assert all(r.changes for r in ladder.RUNGS)


def test_gains_are_over_the_last_measured_rung_and_the_first_by_hand():
    rows = [{"rung": "a", "status": "ok", "images_per_sec": 100.0},
            {"rung": "b", "status": "ok", "images_per_sec": 250.0},
            {"rung": "c", "status": "skipped: not here"},
            {"rung": "d", "status": "out of memory"},
            {"rung": "e", "status": "ok", "images_per_sec": 300.0}]
    gains = [(r["gain_over_previous"], r["gain_over_first"]) for r in ladder.with_gains(rows)]
    assert gains == [(None, 1.0), (2.5, 2.5), (None, None), (None, None), (1.2, 3.0)]


def test_data_on_device_applies_to_a_real_dataset_on_jax_and_says_why_not_elsewhere():
    """The plain start reads a real dataset through the host's pipeline (grain on JAX,
    tf.data on TensorFlow, or the one --input_pipeline names); data_on_device holds it
    on the device on JAX only; synthetic data has no pipeline and no such setting."""
    from flags import Config

    rungs = {r.name: r for r in ladder.RUNGS}
    digits = Config(dataset="digits", backend="jax")
    start = ladder._settings(rungs["float32"], {}, digits)
    assert start["input_pipeline"] == "grain"
    assert ladder._settings(rungs["data_on_device"], start, digits) == {
        **start, "input_pipeline": "device"}
    tf_digits = Config(dataset="digits", backend="tensorflow")
    assert ladder._settings(rungs["float32"], {}, tf_digits)["input_pipeline"] == "tf.data"
    assert ladder._settings(rungs["data_on_device"], start, tf_digits) == (
        "skipped: --input_pipeline=device on tensorflow caches the decoded images in host "
        "memory (tf.data), not on the device (JAX only)")
    named = Config(dataset="digits", backend="jax", input_pipeline="tf.data")
    assert ladder._settings(rungs["float32"], {}, named)["input_pipeline"] == "tf.data"
    synthetic = Config(dataset="synthetic", backend="jax")
    assert "input_pipeline" not in ladder._settings(rungs["float32"], {}, synthetic)
    assert ladder._settings(rungs["data_on_device"], start, synthetic) == SYNTHETIC_SKIP


SYNTHETIC_SKIP = ("skipped: synthetic data is made on the device: it has no input pipeline "
                  "to hold there (climb on a real --dataset, e.g. digits)")


@pytest.mark.slow
def test_the_ladder_on_digits_measures_the_data_held_on_the_device(tmp_path):
    logdir = tmp_path / "ladder"
    done = run(["--backend=jax", "--model=small_resnet", "--dataset=digits",
                "--image_size=8", "--benchmark=ladder", "--global_batch_size=8",
                "--steps_per_epoch=32", f"--logdir={logdir}"], env={"PYTHONPATH": NO_TF})
    assert done.returncode == 0, done.stderr[-3000:]
    result = strict_json(logdir / "ladder.json")
    assert result["dataset"] == "digits" and result["image_size"] == 8
    rows = {r["rung"]: r for r in result["ladder"]}
    assert list(rows) == NAMES
    for name in NAMES[:4]:  # read through the host's pipeline until the data is held
        assert rows[name]["status"] == "ok" and rows[name]["input_pipeline"] == "grain"
    device = rows["data_on_device"]
    assert device["status"] == "ok" and device["images_per_sec"] > 0, device
    # it builds on the fastest rung before it (by hand: a slower rung is not built on)
    base = rows["float32"]
    for name in NAMES[1:4]:
        base = rows[name] if rows[name]["images_per_sec"] >= base["images_per_sec"] else base
    assert device["built_on"] == base["rung"]
    assert device["settings"] == {**base["settings"], "input_pipeline": "device"}
    assert device["input_pipeline"] == "device"  # what fed it
    assert device["gain_over_previous"] == round(
        device["images_per_sec"] / base["images_per_sec"], 3)
    assert "XLA picks no GPU kernels on jax" in rows["xla_full_autotune"]["status"]
    assert "data_on_device" in {p.name for p in (logdir / "points").iterdir()}


@pytest.mark.slow
def test_the_ladder_on_cpu_yields_its_rungs_in_order_with_gains_from_their_figures(tmp_path):
    logdir = tmp_path / "ladder"
    args = ["--backend=jax", "--model=small_resnet", "--dataset=synthetic", "--image_size=8",
            "--benchmark=ladder", "--global_batch_size=4", "--steps_per_epoch=32",
            f"--logdir={logdir}"]
    # The JAX path imports no TensorFlow; each rung's steps traced, as the app's default.
    done = run(args, env={"PYTHONPATH": NO_TF, "BENCH_POINT_TRACE_STEPS": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    result = strict_json(logdir / "ladder.json")
    assert strict_json(logdir / "summary.json") == result
    rows = {r["rung"]: r for r in result["ladder"]}
    assert list(rows) == NAMES
    for name in ("float32", "mixed_bfloat16", "largest_batch", "steps_per_execution"):
        assert rows[name]["status"] == "ok" and rows[name]["images_per_sec"] > 0, rows[name]
    assert rows["float32"]["settings"] == {"precision": "float32", "global_batch_size": 4,
                                           "steps_per_execution": 1,
                                           "xla_autotune": "heuristic"}
    # Each rung builds on the best rung before it (a slower one is not built on: on a
    # CPU mixed bfloat16 can lose), changes its own setting, and its gains are over
    # that rung and the first: all by hand from the rung figures.
    base, first = rows["float32"], rows["float32"]["images_per_sec"]
    changed = {"mixed_bfloat16": {"precision": "mixed_bfloat16"},
               "steps_per_execution": {"steps_per_execution": 16}}
    tried = rows["largest_batch"]["tried"]
    assert [t["global_batch_size"] for t in tried] == [4, 8, 16, 32]  # all fit on a CPU
    fastest = max(tried, key=lambda t: (t["images_per_sec"], t["global_batch_size"]))
    changed["largest_batch"] = {"global_batch_size": fastest["global_batch_size"]}
    for name in NAMES[1:4]:
        row = rows[name]
        assert row["built_on"] == base["rung"], (name, row["built_on"])
        assert row["settings"] == {**base["settings"], **changed[name]}, name
        assert row["gain_over_previous"] == round(row["images_per_sec"] /
                                                  base["images_per_sec"], 3)
        assert row["gain_over_first"] == round(row["images_per_sec"] / first, 3)
        assert row["kept"] == (row["images_per_sec"] >= base["images_per_sec"])
        if not row["kept"]:
            assert f"slower than {base['rung']}: not built on" in done.stdout
        base = row if row["kept"] else base
    assert rows["float32"]["gain_over_previous"] is None
    assert rows["data_on_device"]["status"] == SYNTHETIC_SKIP
    assert "XLA picks no GPU kernels on jax" in rows["xla_full_autotune"]["status"]
    for name in NAMES[4:]:
        assert rows[name]["gain_over_previous"] is None is rows[name]["gain_over_first"]
    assert result["best_rung"] == base["rung"]
    assert result["total_gain"] == base["gain_over_first"]
    # Why: each measured rung's profiled steps split by kind of work (parts summing to
    # the step), and the kind whose time an image moved most with the speed since the
    # rung it builds on (fell most where the rung gained, rose most where it lost),
    # found here by hand from the two breakdowns and the two rates.
    for index, name in enumerate(NAMES[:4]):
        found = rows[name]["breakdown"]
        # set against the rung's timed step (callbacks/profiling/timed.py): the parts sum
        # to it, or to the kinds' time where the traced work outlasts the timed step
        assert found["step_ms"] == rows[name]["step_time_ms"], found
        whole = max(found["step_ms"], found["busy_ms"])
        assert abs(sum(p["ms"] for p in found["parts"].values()) - whole) <= 0.05 * whole, found
        folder = (name if name != "largest_batch" else
                  f"largest_batch-x{fastest['global_batch_size'] // 4}")
        assert (logdir / "points" / folder / "plugins" / "profile").is_dir()
        if not index:
            assert rows[name]["largest_change"] is None
            continue
        before, now = rows[rows[name]["built_on"]], rows[name]
        per_image = {row["rung"]: {kind: part["ms"] * 1e3 / row["global_batch_size"]
                                   for kind, part in row["breakdown"]["parts"].items()}
                     for row in (before, now)}
        kinds = set(per_image[before["rung"]]) | set(per_image[name])
        sign = -1 if now["images_per_sec"] > before["images_per_sec"] else 1
        with_speed = {k: sign * (per_image[name].get(k, 0) - per_image[before["rung"]].get(k, 0))
                      for k in kinds}
        change = now["largest_change"]
        if max(with_speed.values()) <= 0:  # no kind moved with the speed
            assert change["kind"] is None and change["words"].startswith("none: "), change
        else:
            assert with_speed[change["kind"]] == pytest.approx(max(with_speed.values()),
                                                               abs=2e-3)
            assert change["after_us"] == pytest.approx(
                per_image[name].get(change["kind"], 0), abs=1e-3)
            # in the sentence the report uses (callbacks/profiling/difference.py)
            assert change["words"].startswith(change["kind"] + " ")
        assert f"  {name}: {change['words']} (step " in done.stdout
    # Each rung an HParams session of its own, in a group of its own named for the rung
    # and this folder (two ladders' float32 rungs are never one row of mixed figures).
    groups = {}
    sessions = hparams_sessions(logdir, groups)
    assert groups["points/float32"].startswith("float32 · ladder (")
    assert len(set(groups.values())) == len(groups) == len(sessions)
    assert "No UnifiedProfileProcessor" not in done.stderr  # the converters' noise
    assert (logdir / "ladder.png").read_bytes()[:4] == b"\x89PNG"
    assert "rung                  images/sec vs before vs first" in done.stdout
    # The report puts two machines' ladders side by side: this CPU's, and the H200's
    # measured ladder (benchmarks/results), each rung's gain on each, in one sentence.
    measured = strict_json(os.path.join(ROOT, "benchmarks", "results",
                                        "2026-12-04-h200-ladder.json"))["ladders"]["resnet50"]
    h200 = tmp_path / "h200"
    h200.mkdir()
    (h200 / "summary.json").write_text(json.dumps({
        "mode": "ladder", "model": "resnet50", "dataset": "synthetic", "backend": "jax",
        "device_kind": measured["device_kind"], "num_replicas": 1, "status": "completed",
        "ladder": measured["rungs"]}))
    content = report.write([report.load_run(str(logdir)), report.load_run(str(h200))], [],
                           str(tmp_path / "report"))
    labels = [row["label"] for row in content["rows"]]
    h200_bf16 = next(r for r in measured["rungs"] if r["rung"] == "mixed_bfloat16")
    assert (f"Effort ladder: mixed_bfloat16 gives "
            f"{rows['mixed_bfloat16']['gain_over_previous']:.2f}x on {labels[0]} and "
            f"{h200_bf16['gain_over_previous']:.2f}x on {labels[1]} (images/sec over the "
            "rung it builds on).") in content["findings"]
    assert "NVIDIA H200" in labels[1] and "cpu" in labels[0]
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert re.search(r"- Effort ladder: mixed\\?_bfloat16 gives [\d.]+x on 1 x cpu and "
                     r"[\d.]+x on 1 x NVIDIA H200", markdown), markdown[:3000]
    sessions = {p.name for p in (logdir / "points").iterdir()}
    assert {"float32", "mixed_bfloat16", "largest_batch-x8", "steps_per_execution"} <= sessions

    before = snapshot(logdir)
    again = run(args)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"ladder is complete: {logdir} holds its ladder.json" in again.stdout
    assert "[sweep]" not in again.stdout and "vs before vs first" in again.stdout
    assert snapshot(logdir) == before


def test_the_plain_start_takes_the_heuristic_kernels_only_where_the_app_would():
    """On an H200, ViT-B/16's bf16 attention does not compile under XLA's heuristic
    (deterministic) kernels (IndexError from XLA, benchmarks/results ladder run): the
    app never takes them for a ViT, so neither does its ladder's plain start, and the
    autotuning rung says it was on from the start."""
    from flags import Config

    resnet = Config(model="resnet50", dataset="synthetic", backend="jax", accelerator="gpu")
    vit = Config(model="vit_b16", dataset="synthetic", backend="jax", accelerator="gpu")
    first = {r.name: r for r in ladder.RUNGS}
    assert ladder._settings(first["float32"], {}, resnet)["xla_autotune"] == "heuristic"
    start = ladder._settings(first["float32"], {}, vit)
    assert start["xla_autotune"] == "full"
    assert ladder._settings(first["xla_full_autotune"], start, vit) == (
        "skipped: XLA's full autotuning was on from the start: the app never takes the "
        "heuristic kernels for vit_b16 (app/engine/autotune.py)")
    before = ladder._settings(first["float32"], {}, resnet)
    assert ladder._settings(first["xla_full_autotune"], before, resnet) == {
        **before, "xla_autotune": "full"}
