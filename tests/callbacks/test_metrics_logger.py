"""callbacks/metrics_logger.py: metrics.jsonl and TensorBoard's scalars in Keras's
layout, and a deleted run folder never made again by a log."""

import shutil

import pytest

from callbacks.metrics_logger import MetricsLogger
from callbacks.records import events
from callbacks.records.metrics_file import read_metrics
from callbacks.stops import StorageError


def test_metrics_logger_arguments_are_checked_with_the_value_received():
    with pytest.raises(ValueError) as error:
        MetricsLogger("/tmp/x", 0)
    assert "log_every_steps must be >= 1, received 0" in str(error.value)


def test_metrics_logger_writes_jsonl_and_grouped_tensorboard_scalars(tmp_path):
    logger = MetricsLogger(str(tmp_path), log_every_steps=2, hparams={"model": "m", "batch": 8})
    logger.set_params({"steps": 4})
    logger.on_train_begin()
    for epoch in range(2):
        logger.on_epoch_begin(epoch)
        for batch in range(4):
            logger.on_train_batch_end(batch, {"loss": 1.0,
                                              "running_images_per_sec": 100.0 + batch})
        logger.on_epoch_end(epoch, {"val_top1": 0.5 + epoch / 10, "cost_usd": 0.01,
                                    "top1": 0.4, "loss": float("nan"), "note": "text"})
    logger.on_train_end()
    records = read_metrics(str(tmp_path))
    assert [r["epoch"] for r in records] == [1, 2]
    assert records[1]["val_top1"] == pytest.approx(0.6)
    assert "loss" not in records[0] and "note" not in records[0]  # NaN and text are not numbers

    def points(run):
        return {(v.tag, e.step) for path in events.event_files(str(tmp_path / run))
                for e in events.read_events(path) for v in e.summary.value}

    train, validation = points("train"), points("validation")
    # Keras's layout: one tag for top-1 in both runs, epoch_ at epochs, batch_ at steps.
    assert ("accuracy/epoch_top1", 2) in validation and ("accuracy/epoch_top1", 2) in train
    assert ("cost/epoch_cost_usd", 1) in train
    assert {s for t, s in train if t == "throughput/batch_running_images_per_sec"} == {2, 4, 6, 8}
    assert not any("epoch_images_per_sec" in t for t, _ in train)  # only in batch logs here
    assert any(tag.startswith("_hparams_") for tag, _ in points(""))


def test_logs_never_make_a_deleted_run_folder_again(tmp_path):
    """A TensorBoard run opened after the run folder was deleted (validation's, at the
    first epoch's end) is a lost folder in one line, and the folder stays deleted."""
    run = tmp_path / "run"
    logger = MetricsLogger(str(run), log_every_steps=1)
    logger.on_train_begin()
    logger.on_epoch_begin(0)
    logger.on_train_batch_end(0, {"loss": 1.0})  # opens train/
    shutil.rmtree(run)
    with pytest.raises(StorageError) as failure:
        logger.on_epoch_end(0, {"loss": 1.0, "val_loss": 2.0})
    assert str(failure.value) == (f"the run folder {run} was deleted or replaced during the "
                                  "run; nothing more can be logged there")
    assert not run.exists()
    with pytest.raises(FileNotFoundError):
        events.EventWriter(str(run / "validation"))
    assert not run.exists()
