"""The comparison report: the study's two platforms ranked and priced as the study did,
in words; missing pieces shown as missing; runs that did different work flagged; and
the HTML page rendered in headless Chromium with each chart and table (screenshots
kept under test-artifacts/)."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from browser import dom, needs_chromium, screenshot
from conftest import ROOT

from app import report
from app.report import page as report_page
from app.engine import plots
from app.pricing import catalog

IMAGENET_TRAIN = 1_281_167
STUDY = "https://medium.com/riseml/comparing-google-tpuv2-against-nvidia-v100-on-resnet-50-c2bbb6a51e5e"


def study_run(folder, *, images_per_sec, machine, num_replicas, device_kind, curve, epochs=90):
    """A run folder made from the study's published figures (STUDY), in the app's format:
    per-epoch top-1 on `curve` (piecewise linear through (epoch, top1) points), billed
    time from the published throughput, dollars from the catalog's price."""
    price = catalog.load_catalog()[machine].price_per_hour_usd("on_demand")
    xs, ys = zip(*curve)
    os.makedirs(folder)
    with open(os.path.join(folder, "metrics.jsonl"), "w") as f:
        for epoch in range(1, epochs + 1):
            hours = epoch * IMAGENET_TRAIN / images_per_sec / 3600
            f.write(json.dumps({"epoch": epoch, "val_top1": float(np.interp(epoch, xs, ys)),
                                "billed_hours": hours, "cost_usd": hours * price,
                                "images_per_sec": images_per_sec}) + "\n")
    summary = {"backend": "tensorflow", "accelerator": device_kind.split()[0].lower(),
               "device_kind": device_kind, "num_processes": 1, "num_replicas": num_replicas,
               "model": "resnet50", "dataset": "imagenet2012", "global_batch_size": 1024,
               "precision": "mixed_bfloat16", "images_per_sec": images_per_sec,
               "machine": machine, "pricing": "on_demand", "price_per_hour_usd": price,
               "epochs_completed": epochs, "best_val_top1": max(ys),
               "targets": [{"target_top1": 0.757}, {"target_top1": 0.764}], "mfu": None}
    with open(os.path.join(folder, "summary.json"), "w") as f:
        json.dump(summary, f)
    return folder


@pytest.fixture
def study(tmp_path):
    tpu = study_run(str(tmp_path / "tpu-v2-8"), images_per_sec=2796,
                    machine="gcp-tpu-v2-8-2018", num_replicas=8, device_kind="TPU v2",
                    curve=[(1, 0.10), (30, 0.60), (64, 0.757), (86, 0.764), (90, 0.765)])
    gpu = study_run(str(tmp_path / "4xv100"), images_per_sec=2839, machine="aws-p3.8xlarge",
                    num_replicas=4, device_kind="GPU V100",
                    curve=[(1, 0.08), (30, 0.55), (84, 0.757), (90, 0.7572)])
    return tpu, gpu


@pytest.fixture
def unlike(tmp_path):
    """Runs that did different work (illustrative figures, the app's formats): a 32-px
    synthetic sweep on CPU, and a digits training run at 8 px with step-time errors."""
    sweep = tmp_path / "sweep-32px"
    sweep.mkdir()
    rows = [{"global_batch_size": b, "images_per_sec": r, "step_time_ms": b / r * 1e3,
             "step_time_stderr_ms": 0.4, "status": "ok"}
            for b, r in ((16, 410.0), (32, 590.0), (64, 655.0))]
    sweep_summary = {"mode": "sweep", "backend": "jax", "accelerator": "cpu",
                     "device_kind": "cpu", "num_processes": 1, "num_replicas": 1,
                     "model": "small_resnet", "dataset": "synthetic", "image_size": 32,
                     "precision": "float32", "machine": "gcp-n2-standard-4",
                     "price_per_hour_usd": 0.194236, "sweep": rows, "best": rows[-1]}
    for name in ("sweep.json", "summary.json"):
        (sweep / name).write_text(json.dumps(sweep_summary))
    digits = tmp_path / "digits-8px"
    digits.mkdir()
    (digits / "metrics.jsonl").write_text("".join(json.dumps(
        {"epoch": e, "val_top1": 0.5 + e / 40, "billed_hours": e / 3600, "cost_usd": e * 5e-5})
        + "\n" for e in range(1, 16)))
    (digits / "summary.json").write_text(json.dumps({
        **{k: sweep_summary[k] for k in ("accelerator", "device_kind", "num_processes",
                                         "num_replicas", "model", "precision", "machine",
                                         "price_per_hour_usd")},
        "backend": "tensorflow", "dataset": "digits", "image_size": 8, "global_batch_size": 64,
        "images_per_sec": 1670.5, "step_time_ms": 38.3, "step_time_stderr_ms": 0.9,
        "pricing": "on_demand", "epochs_completed": 15, "best_val_top1": 0.875,
        "cost_usd": 0.0014, "targets": [], "mfu": None,
        "versions": {"keras": "3.15.1", "tensorflow": "2.21.0", "python": "3.11.7"},
        "attempts": [{"started_at": 1796000000.0}]}))
    return str(sweep), str(digits)


def test_the_study_is_ranked_and_priced_as_the_study_did(study, tmp_path):
    runs = [report.load_run(folder) for folder in study]
    content = report.write(runs, [0.757, 0.764], str(tmp_path / "report"))
    tpu, gpu = content["rows"]
    assert content["title"] == "8 x TPU v2 vs 4 x GPU V100: ResNet-50 on ImageNet 2012"
    assert (tpu["label"], gpu["label"]) == ("8 x TPU v2", "4 x GPU V100")
    assert content["warning"] is None  # the same model, data and image size
    # Equal raw speed (the GPUs 1.5% ahead), but the TPU far cheaper per image...
    assert content["rankings"]["images_per_sec"] == [gpu["label"], tpu["label"]]
    assert gpu["speedup"] == pytest.approx(1.015, abs=0.002) and tpu["speedup"] == 1
    assert content["rankings"]["usd_per_million_images"][0] == tpu["label"]
    # ...and to accuracy: 75.7% after 64 epochs, ~8.15 h, ~$55 (GPU: 84 epochs);
    # 76.4% after 86 epochs, ~10.95 h, ~$73 (never reached by the GPU).
    tpu_757, tpu_764 = tpu["targets"]
    gpu_757, gpu_764 = gpu["targets"]
    assert (tpu_757["epoch"], gpu_757["epoch"], tpu_764["epoch"]) == (64, 84, 86)
    assert tpu_757["hours"] == pytest.approx(8.15, abs=0.01)
    assert tpu_757["cost_usd"] == pytest.approx(55, abs=1)
    assert tpu_764["hours"] == pytest.approx(10.95, abs=0.01)
    assert tpu_764["cost_usd"] == pytest.approx(73, abs=1)
    assert gpu_757["cost_usd"] > 2 * tpu_757["cost_usd"] and not gpu_764["reached"]
    assert content["rankings"]["usd_to_0.757"] == [tpu["label"], gpu["label"]]
    assert content["rankings"]["usd_to_0.764"] == [tpu["label"]]
    # The rankings in words, as the study put them.
    findings = content["findings"]
    assert findings[0] == ("Fastest at the steady state (start-up, evaluation and checkpoints "
                           "excluded): 4 x GPU V100 at 2,839 images/sec, 1.02x as fast as "
                           "8 x TPU v2 (2,796). " + report_page.SINGLE_RUNS)
    assert findings[1].startswith("Cheapest per million training images at the steady state: "
                                  "8 x TPU v2 at $")
    assert "To 75.7% top-1: cheapest 8 x TPU v2 ($54.50, 8.15 h, epoch 64), then 4 x GPU V100" \
        in findings[3]
    assert findings[4].endswith("not reached by 4 x GPU V100.")
    assert not any(">" in line for line in findings)
    text = (tmp_path / "report" / "report.md").read_text()
    assert "epoch 64, 8.15 h, $54.50" in text and "not reached" in text
    for chart in ("throughput", "usd_per_million_images", "top1_vs_epoch", "top1_vs_hours",
                  "top1_vs_dollars", "usd_to_target"):
        assert (tmp_path / "report" / f"{chart}.png").read_bytes()[:4] == b"\x89PNG"
    # Two training runs are two points, not a curve: no throughput-vs-batch chart.
    assert not (tmp_path / "report" / "throughput_vs_batch.png").exists()


def test_runs_that_did_different_work_are_flagged_and_sweeps_make_the_batch_chart(
        unlike, tmp_path):
    content = report.write([report.load_run(f) for f in unlike], [], str(tmp_path / "r"))
    sweep, digits = content["rows"]
    assert "dataset (synthetic vs digits)" in content["warning"]
    assert "image size (32 vs 8)" in content["warning"]
    assert content["title"] == "JAX vs TensorFlow, batches 16-64 vs batch 64: different work"
    assert [r["label"] for r in content["rows"]] == ["JAX, batches 16-64",
                                                      "TensorFlow, batch 64"]
    assert sweep["images_per_sec"] == 655.0 and sweep["has_sweep"]
    # Error bars: the rate's standard error follows the step time's (1670.5 x 0.9 / 38.3).
    assert digits["images_per_sec_stderr"] == pytest.approx(39.25, abs=0.01)
    assert digits["date"] == "2026-11-30" and digits["best_epoch"] == 15
    assert (tmp_path / "r" / "throughput_vs_batch.png").exists()


def test_the_runs_own_targets_are_ranked_without_being_asked_and_what_ran_names_the_input(
        study, tmp_path):
    runs = [report.load_run(folder) for folder in study]
    content = report.write(runs, None, str(tmp_path / "report"))  # as `report.py A B`
    assert content["targets"] == [0.757, 0.764]
    assert content["findings"][3].startswith("To 75.7% top-1: cheapest 8 x TPU v2")
    for run, pipeline in zip(runs, ("tf.data", "grain")):
        run["summary"].update(input_pipeline=pipeline, preprocessing="standard")
    header, body = report_page.tables(report.build(runs))[0][2:]
    column = header.index("input pipeline")
    assert [row[column] for row in body] == ["tf.data (standard)", "grain (standard)"]


@pytest.mark.parametrize("gap_images, within", [(2, True), (40, False)])
def test_an_accuracy_gap_is_said_in_images_and_against_binomial_noise(study, gap_images,
                                                                     within):
    """360 validation images (the digits): 2 images apart is far inside two standard
    errors (about 2.7% = 10 images at 96%), 40 images apart is beyond them."""
    runs = [report.load_run(folder) for folder in study]
    for run, correct in zip(runs, (350, 350 - gap_images)):
        run["summary"].update(best_val_top1=correct / 360, validation_examples=360)
    line = next(f for f in report.build(runs, [])["findings"] if f.startswith("Most accurate"))
    assert f"({gap_images} of 360 images apart: " in line
    assert ("within binomial noise" in line) == within
    assert ("could go either way" in line) == within


def test_dollar_axes_say_dollars():
    assert [plots.dollars(v) for v in (0.0012, 55, 1234.5)] == ["$0.0012", "$55", "$1,234.5"]


def test_missing_pieces_are_shown_as_missing_not_zero(study, tmp_path):
    tpu, _ = study
    no_price = str(tmp_path / "no-price")
    shutil.copytree(tpu, no_price)
    summary = json.loads(open(os.path.join(no_price, "summary.json")).read())
    summary.update(price_per_hour_usd=None, machine=None)
    with open(os.path.join(no_price, "summary.json"), "w") as f:
        json.dump(summary, f)
    content = report.write([report.load_run(tpu), report.load_run(no_price)], [0.757, 0.99],
                           str(tmp_path / "report"))
    row = content["rows"][1]
    assert row["usd_per_million_images"] is None and row["price_per_hour_usd"] is None
    assert content["rows"][0]["targets"][1]["reached"] is False
    text = (tmp_path / "report" / "report.md").read_text()
    assert "no sweep" in text and "no price" in text and "not reached" in text
    assert "| $0.00 |" not in text


def test_the_report_command_refuses_a_folder_that_is_not_a_run(tmp_path):
    done = subprocess.run([sys.executable, os.path.join(ROOT, "app", "report.py"),
                           str(tmp_path),
                           "--out", str(tmp_path / "r")], capture_output=True, text=True)
    assert done.returncode == 2 and "holds no summary.json or sweep.json" in done.stderr


def _render(folders, out, *extra):
    done = subprocess.run([sys.executable, os.path.join(ROOT, "app", "report.py"), *folders,
                           "--out", str(out), *extra], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return f"file://{out / 'report.html'}"


@needs_chromium
def test_the_page_renders_in_headless_chromium_with_each_chart_and_table(study, unlike,
                                                                         tmp_path):
    url = _render(study, tmp_path / "study", "--targets=0.757,0.764")
    page = dom(url, tmp_path / "dom")
    assert "<h1>8 x TPU v2 vs 4 x GPU V100: ResNet-50 on ImageNet 2012</h1>" in page
    for table in ("runs", "speed", "price", "accuracy"):
        assert f"<table id=\"{table}\">" in page, table
    for chart in ("throughput", "usd_per_million_images", "top1_vs_epoch", "top1_vs_hours",
                  "top1_vs_dollars", "usd_to_target"):
        assert f'<img alt="{chart}" src="data:image/png;base64,' in page, chart
    assert page.count("<figcaption>") == 6 and "throughput_vs_batch" not in page
    assert "excluded): 4 x GPU V100" in page and "Cheapest per million" in page
    assert "epoch 64, 8.15 h, $54.50" in page and 'id="warning"' not in page
    screenshot(url, "report.png", tmp_path / "shot")

    url = _render(unlike, tmp_path / "unlike")
    page = dom(url, tmp_path / "dom2")
    assert 'id="warning"' in page and "did not do the same work" in page
    assert '<img alt="throughput_vs_batch"' in page and "1,670.5 ± 39.3" in page
    screenshot(url, "report-not-comparable.png", tmp_path / "shot2", size=(1280, 1800))


def test_dollars_per_million_images_mean_one_thing_everywhere(digits_dir, tmp_path):
    """usd_per_million_images is price / steady-state rate in summary.json and the
    report (which says so); the bill over the images is billed_usd_per_million_images
    in metrics.jsonl and TensorBoard, and nothing else is called by the first name."""
    from conftest import run_cli, tiny_flags
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = tmp_path / "run"
    done = run_cli(*tiny_flags(digits_dir, logdir))
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((logdir / "summary.json").read_text())
    steady = summary["price_per_hour_usd"] / (summary["images_per_sec"] * 3600) * 1e6
    assert summary["usd_per_million_images"] == pytest.approx(steady, rel=1e-3)
    lines = [json.loads(line) for line in (logdir / "metrics.jsonl").read_text().splitlines()]
    assert all("billed_usd_per_million_images" in line for line in lines)
    assert not any("usd_per_million_images" in line for line in lines)
    events = EventAccumulator(str(logdir / "train"))
    events.Reload()
    tags = events.Tags()["tensors"] + events.Tags()["scalars"]
    assert "cost/epoch_billed_usd_per_million_images" in tags
    assert not [t for t in tags if t.endswith("_usd_per_million_images") and "billed" not in t]
    content = report.write([report.load_run(str(logdir))], [], str(tmp_path / "report"))
    assert content["rows"][0]["usd_per_million_images"] == pytest.approx(steady, rel=1e-3)
    # A real run's folder meets the report's schema: no figure n/a, status and plan shown.
    assert content["caveats"] == [] and content["rows"][0]["invalid"] == []
    assert content["rows"][0]["complete"] is True
    text = (tmp_path / "report" / "report.md").read_text()
    assert "$/million images (price / steady-state images/sec)" in text


def test_a_run_stopped_early_shows_its_status_and_epochs_and_is_named_in_the_caveats(
        tmp_path):
    """A run stopped at 4 of its 15 epochs is not compared as if
    complete: its status and epochs done of planned are shown, the caveats name it,
    and a target it did not reach says it stopped. The folders have the app's hashed
    names, so the runs are labelled by the setting that differs, not by the hash."""
    from test_report_untrusted import run_folder

    done = run_folder(tmp_path / "small_resnet-digits-jax-1a2b3c4d", epochs=15)
    stopped = run_folder(tmp_path / "small_resnet-digits-jax-5e6f7a8b",
                         {"status": "interrupted", "epochs_completed": 4, "epochs": None},
                         config={"epochs": 15, "base_learning_rate": 0.1, "logdir": "x"},
                         epochs=4)
    content = report.write([report.load_run(done), report.load_run(stopped)], [0.99],
                           str(tmp_path / "r"))
    assert [r["label"] for r in content["rows"]] == ["learning rate 0.4",
                                                      "learning rate 0.1"]
    first, second = content["rows"]
    assert (first["status"], first["epochs"], first["epochs_planned"], first["complete"]) \
        == ("completed", 15, 15, True)
    assert (second["status"], second["epochs"], second["epochs_planned"], second["complete"]) \
        == ("interrupted", 4, 15, False)
    assert content["caveats"] == [
        "Incomplete: learning rate 0.1 interrupted after 4 of 15 epochs; its accuracy, "
        "time and cost are those of the epochs it ran, not of a finished run."]
    md = (tmp_path / "r" / "report.md").read_text()
    assert "> - Incomplete: learning rate 0.1 interrupted after 4 of 15 epochs" in md
    assert ("| learning rate 0.1 | interrupted | 4 of 15 | 90.00% (epoch 4) | "
            "not reached in 4 of 15 epochs (incomplete) |") in md
    assert "| learning rate 0.4 | completed | 15 of 15 |" in md
    assert "id='caveats'" in (tmp_path / "r" / "report.html").read_text()


def test_runs_in_hashed_folders_are_labelled_by_the_settings_that_differ(tmp_path):
    """The fewest differing settings that tell the runs apart, most telling first; a
    folder's own name where it is not the app's hashed default."""
    from test_report_untrusted import run_folder

    config = {"model": "small_resnet", "epochs": 3, "seed": 1, "label_smoothing": 0.1}
    folders = [run_folder(tmp_path / f"small_resnet-digits-jax-{h}", config={**config, **c})
               for h, c in (("00000001", {}), ("00000002", {"seed": 2}),
                            ("00000003", {"seed": 2, "label_smoothing": 0.0}))]
    runs = [report.load_run(f) for f in folders]
    assert report.labels_of(runs) == ["label smoothing 0.1, seed 1",
                                      "label smoothing 0.1, seed 2",
                                      "label smoothing 0.0, seed 2"]
    named = run_folder(tmp_path / "baseline", config=config)
    assert report.labels_of([runs[0], report.load_run(named)]) == [
        "small_resnet-digits-jax-00000001", "baseline"]
    assert report.labels_of([runs[0], runs[0]]) == [  # the same folder twice: numbered
        "small_resnet-digits-jax-00000001 (1)", "small_resnet-digits-jax-00000001 (2)"]


def test_real_runs_one_preempted_are_reported_with_status_epochs_and_labels_by_batch(
        digits_dir, tmp_path):
    """The same, as a user meets it: two real runs (batch 32 finished, batch 64
    stopped by SIGTERM after some of its 15 epochs), then `python app/report.py A B
    --out DIR`: each run is labelled by the setting that differs, its status and
    epochs done of planned are those of its summary.json, and the caveats name the
    stopped run."""
    import signal

    from conftest import run_cli, tiny_flags
    from processes import start, until

    from callbacks.records.metrics_file import read_metrics

    finished, stopped = tmp_path / "first", tmp_path / "second"
    done = run_cli(*tiny_flags(digits_dir, finished, "--global_batch_size=32"))
    assert done.returncode == 0, done.stderr[-2000:]
    process = start(tiny_flags(digits_dir, stopped, "--global_batch_size=64", "--epochs=15"))
    until(process, lambda: read_metrics(str(stopped)), "the first epoch in metrics.jsonl")
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 75, stderr[-2000:]
    summary = json.loads((stopped / "summary.json").read_text())
    assert summary["status"] == "preempted" and summary["epochs_completed"] < 15
    epochs = summary["epochs_completed"]

    made = subprocess.run([sys.executable, os.path.join(ROOT, "app", "report.py"),
                           str(finished), str(stopped), "--out", str(tmp_path / "report")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    md = (tmp_path / "report" / "report.md").read_text()
    assert md.startswith("# batch 32 vs batch 64: ")
    assert "| batch 32 | completed | 2 of 2 |" in md
    assert f"| batch 64 | preempted | {epochs} of 15 |" in md
    assert (f"> - Incomplete: batch 64 preempted after {epochs} of 15 epochs; its accuracy, "
            "time and cost are those of the epochs it ran, not of a finished run.") in md
    page = (tmp_path / "report" / "report.html").read_text()
    assert "preempted" in page and f"{epochs} of 15" in page and "first" not in md
