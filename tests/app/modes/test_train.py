"""run(config) end to end on the TensorFlow backend, in-process, on tiny settings."""

import json
import os

import pytest

from app import main as app
from app.run.rundir import RunDirError
from callbacks.records import events
from callbacks.records.metrics_file import read_metrics
from flags import Config
from preprocessing.spec import DataError

SUMMARY_KEYS = {"backend", "accelerator", "num_replicas", "model", "dataset",
                "global_batch_size", "epochs_completed", "val_top1", "best_val_top1",
                "val_top1_by_epoch", "wall_seconds", "images_per_sec", "images_per_sec_per_device",
                "cost_usd", "price_per_hour_usd", "usd_per_million_images", "mfu", "targets",
                "xla_autotune"}


def tiny(digits_dir, logdir, **changes):
    values = dict(data_dir=digits_dir, logdir=str(logdir), image_size=8, epochs=2,
                  steps_per_epoch=6, validation_steps=0, verbose="0", seed=1)
    values.update(changes)
    return Config(**values)


def test_run_trains_evaluates_and_writes_every_output(digits_dir, tmp_path):
    config = tiny(digits_dir, tmp_path / "run", target_top1=(0.05, 0.999))
    summary = app.run(config)
    assert SUMMARY_KEYS <= set(summary)
    assert summary["backend"] == "tensorflow" and summary["num_replicas"] == 1
    assert summary["status"] == "completed" and summary["epochs_completed"] == 2
    assert len(summary["val_top1_by_epoch"]) == 2
    assert summary["best_val_top1"] == max(summary["val_top1_by_epoch"])
    assert summary["images_per_sec"] > 0
    assert summary["machine"] == "gcp-n2-standard-4" and summary["cost_usd"] > 0
    assert summary["mfu"] is None  # no peak is known for a CPU
    reached, missed = summary["targets"]
    assert reached["reached"] and reached["epoch"] == 1 and reached["cost_usd"] > 0
    assert not missed["reached"] and missed["epoch"] is None
    run_dir = tmp_path / "run"
    with open(run_dir / "summary.json") as f:
        assert json.load(f) == json.loads(json.dumps(summary))
    with open(run_dir / "config.json") as f:
        assert json.load(f) == config.to_dict()
    records = read_metrics(str(run_dir))
    assert [r["epoch"] for r in records] == [1, 2]
    assert {"loss", "top1", "val_top1", "learning_rate", "epoch_images_per_sec",
            "cost_usd"} <= set(records[-1])
    tags = {v.tag for path in events.event_files(str(run_dir / "train"))
            for e in events.read_events(path) for v in e.summary.value}
    assert {"loss/epoch_loss", "accuracy/epoch_top1", "optimizer/epoch_learning_rate"} <= tags
    assert sorted(os.listdir(run_dir / "checkpoints")) == ["ckpt-0000000006",
                                                           "ckpt-0000000012"]


# The only names metrics.jsonl shares with summary.json: figures "so far", which at the
# run's end are the run's (the bill, the latest and best validation top-1, the
# wall-clock rate, the projection).
SO_FAR = {"cost_usd", "val_top1", "best_val_top1", "images_per_sec_wall",
          "projected_cost_usd"}


def test_every_figure_of_the_summary_is_the_runs_and_names_mean_one_thing(digits_dir,
                                                                         tmp_path):
    """Three epochs: the summary's rate, step time, TFLOP/s and MFU are the run's (every
    epoch's timed steps over their seconds, from metrics.jsonl's epochs), not the last
    epoch's; a finished run's projection is its cost; an epoch's figures are named
    epoch_*, the run's are not."""
    logdir = tmp_path / "names"
    summary = app.run(tiny(digits_dir, logdir, epochs=3, peak_tflops_per_device=0.5))
    records = read_metrics(str(logdir))
    steps = sum(r["epoch_timed_steps"] for r in records)
    seconds = sum(r["epoch_timed_steps"] * 64 / r["epoch_images_per_sec"] for r in records)
    rate = steps * 64 / seconds
    assert summary["images_per_sec"] == pytest.approx(rate, abs=0.005)  # kept to 0.01
    assert summary["step_time_ms"] == pytest.approx(seconds / steps * 1e3, rel=1e-5)
    tflops = summary["train_flops_per_image"] * rate / 1e12
    assert summary["model_tflops_per_sec"] == pytest.approx(tflops, rel=1e-5)
    assert summary["mfu"] == pytest.approx(tflops / 0.5, rel=1e-5)
    assert summary["projected_cost_usd"] == summary["cost_usd"] > 0
    shared = set(summary) & {k for r in records for k in r} - {"epoch", "time"}
    assert shared <= SO_FAR, shared - SO_FAR
    assert isinstance(summary["input"], dict)  # what the input pipeline says of itself


def test_mirrored_strategy_over_two_logical_cpus(digits_dir, tmp_path):
    summary = app.run(tiny(digits_dir, tmp_path / "mirrored", num_devices=2,
                             global_batch_size=32, epochs=1))
    assert summary["num_replicas"] == 2 and summary["strategy"] == "MirroredStrategy"
    assert summary["per_replica_batch_size"] == 16


def test_rerunning_the_same_command_resumes_and_another_config_is_refused(digits_dir,
                                                                           tmp_path):
    logdir = tmp_path / "again"
    first = app.run(tiny(digits_dir, logdir, epochs=2))
    again = app.run(tiny(digits_dir, logdir, epochs=2))  # complete: left as it is
    assert again == json.loads((logdir / "summary.json").read_text())
    assert again["epochs_completed"] == 2 and len(again["attempts"]) == 1
    assert again["billed_seconds"] == first["billed_seconds"]
    assert again["images_per_sec"] == first["images_per_sec"]
    before = sorted(os.listdir(logdir))
    with pytest.raises(RunDirError, match="holds a run with another config"):
        app.run(tiny(digits_dir, logdir, epochs=3))
    assert sorted(os.listdir(logdir)) == before


def test_a_batch_larger_than_the_dataset_is_refused(digits_dir, tmp_path):
    with pytest.raises(DataError, match="more than the 1437 training images"):
        app.run(tiny(digits_dir, tmp_path / "big", steps_per_epoch=0,
                       global_batch_size=2048))
    assert not (tmp_path / "big").exists()


def test_fresh_moves_the_old_run_aside_and_starts_over(digits_dir, tmp_path):
    logdir = tmp_path / "redo"
    app.run(tiny(digits_dir, logdir, epochs=1))
    summary = app.run(tiny(digits_dir, logdir, epochs=2, fresh=True))
    assert summary["epochs_completed"] == 2 and len(summary["attempts"]) == 1
    aside = [p for p in os.listdir(tmp_path) if p.startswith("redo.old-")]
    assert len(aside) == 1
    with open(tmp_path / aside[0] / "config.json") as f:
        assert json.load(f)["epochs"] == 1  # the old run is kept, not deleted


def test_any_failure_to_make_the_run_folder_is_a_run_dir_error(digits_dir, tmp_path,
                                                                monkeypatch):
    """A full disk (or anything else the preflight could not foresee) is one line."""
    import errno

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "mkdir", full)  # the preflight makes the folder, level by level
    with pytest.raises(RunDirError, match="cannot be created or written .No space left"):
        app.run(tiny(digits_dir, tmp_path / "full"))
    assert not (tmp_path / "full").exists()


def test_val_loss_and_top1_equal_an_independent_evaluation_of_the_checkpoint(digits_dir,
                                                                             tmp_path):
    """360 validation digits in batches of 64: the last batch holds 40 images and 24
    weight-0 paddings, which neither val_loss nor val_top1 may count. The checkpoint
    of the epoch's end is evaluated again here, by hand, image by image."""
    import keras
    import numpy as np

    from app import models
    from app.models import recipe
    from callbacks.checkpoint import WEIGHTS_FILE, latest_checkpoint
    from preprocessing.datasets import make_datasets
    from preprocessing.spec import BatchShape, InputSpec

    config = tiny(digits_dir, tmp_path / "eval", epochs=1, validation_steps=0,
                  label_smoothing=0.1)
    app.run(config)
    logged = read_metrics(str(tmp_path / "eval"))[-1]
    model = models.make_model(config.model, 10, 8)
    recipe.compile_model(model, config, 10, 6)
    model.optimizer.build(model.trainable_variables)
    model.load_weights(os.path.join(latest_checkpoint(config.logdir)[0], WEIGHTS_FILE))
    data = make_datasets("digits", InputSpec(digits_dir, image_size=8, batch=BatchShape(64), seed=1))
    losses, hits = [], []
    for images, labels, weights in data.validation:
        logits = keras.ops.convert_to_numpy(model(images, training=False)).astype("float64")
        labels, real = np.asarray(labels).reshape(-1), np.asarray(weights) > 0
        log_p = logits - logits.max(1, keepdims=True)
        log_p -= np.log(np.exp(log_p).sum(1, keepdims=True))
        smoothed = np.full(log_p.shape, 0.1 / 10) + 0.9 * np.eye(10)[labels]
        losses += list(-(smoothed * log_p).sum(1)[real])
        hits += list((logits.argmax(1) == labels)[real])
    assert len(losses) == 360
    assert logged["val_loss"] == pytest.approx(np.mean(losses), rel=1e-4)
    assert logged["val_top1"] == pytest.approx(np.mean(hits), abs=1e-6)
