"""Each callback alone: built from plain values, publishing into logs and attributes."""

import errno
import json
import math
import os
import shutil
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from callbacks.accuracy import TopOneTargets
from callbacks.checkpoint import Checkpoint, latest_checkpoint
from callbacks.cost import CloudCost
from callbacks.metrics_logger import MetricsLogger
from callbacks.mfu import ModelFlopsUtilization
from callbacks.nan_guard import NanGuard
from callbacks.records import dashboard, events
from callbacks.records.metrics_file import read_metrics
from callbacks.stops import Diverged, Preempted, StorageError
from callbacks.throughput import Throughput
from conftest import ROOT


def tiny_model(steps_per_execution=1):
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inputs, keras.layers.Dense(10)(x))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=steps_per_execution)
    return model


def tiny_data(n=64):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 8, 8, 3)).astype("float32"), rng.integers(0, 10, n)


# ----------------------------------------------------------------------- validation
@pytest.mark.parametrize("make, message", [
    (lambda: Throughput(0), "global_batch_size must be >= 1, received 0"),
    (lambda: Throughput(8, num_devices=0), "num_devices must be >= 1, received 0"),
    (lambda: CloudCost(-1.0), "price_per_hour_usd must be >= 0, received -1.0"),
    (lambda: TopOneTargets([1.2]), "targets must be in (0, 1], received 1.2"),
    (lambda: ModelFlopsUtilization(0), "train_flops_per_image must be > 0"),
    (lambda: Checkpoint("/tmp/x", 0), "steps_per_epoch must be >= 1, received 0"),
    (lambda: MetricsLogger("/tmp/x", 0), "log_every_steps must be >= 1, received 0"),
])
def test_arguments_are_checked_with_the_value_received(make, message):
    with pytest.raises(ValueError) as error:
        make()
    assert message in str(error.value)


# ----------------------------------------------------------------------- throughput
def test_throughput_counts_images_from_step_indices_with_steps_per_execution():
    x, y = tiny_data(256)
    model = tiny_model(steps_per_execution=4)
    meter = Throughput(global_batch_size=8, num_devices=2, warmup_steps=8)
    history = model.fit(x, y, batch_size=8, epochs=2, callbacks=[meter], verbose=0)
    # 32 steps an epoch, hooks fire every 4 steps: marks at steps 3, 7, ..., 31.
    assert meter.images_per_sec > 0
    assert len(meter.epoch_images_per_sec) == 2
    logs = history.history
    assert logs["epoch_images_per_sec_per_device"][-1] == pytest.approx(
        logs["epoch_images_per_sec"][-1] / 2)
    # Step times are per step, not per execution: 4 steps per gap.
    assert logs["epoch_step_time_ms"][-1] == pytest.approx(
        8 * 1e3 / logs["epoch_images_per_sec"][-1])
    assert meter.step_time()["step_time_ms"] == pytest.approx(8 * 1e3 / meter.images_per_sec)
    assert logs["epoch_step_time_jitter"][-1] >= 0
    # The first epoch times 24 steps after its warm-up (marks 7..31), the second 28.
    assert logs["epoch_timed_steps"] == [24, 28]


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_throughput_matches_an_independent_timing_of_the_same_fit(backend):
    """steps_per_execution=4: our figure vs a naive timer of the same steps (see
    tests/throughput_check.py), within 5%, in a fresh process per backend."""
    script = os.path.join(ROOT, "tests", "throughput_check.py")
    done = subprocess.run([sys.executable, script, backend], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["backend"] == backend
    assert sorted(result["ratios"])[1] == pytest.approx(1.0, abs=0.05), result


def test_throughput_is_async_safe_and_eval_speed_is_separate():
    assert Throughput.async_safe is True
    x, y = tiny_data(64)
    model = tiny_model()
    meter = Throughput(global_batch_size=8, validation_images=64)
    history = model.fit(x, y, batch_size=8, epochs=2, validation_data=(x, y), callbacks=[meter],
                        verbose=0)
    # Each epoch's evaluation pass, and the run's: both passes' images over their seconds.
    first, second = history.history["epoch_eval_images_per_sec"]
    assert meter.eval_images_per_sec == pytest.approx(128 / (64 / first + 64 / second))
    assert "images_per_sec" not in history.history  # the name of the run's figure only


# ---------------------------------------------------------------------------- cost
def test_cost_charges_wall_clock_from_the_start_including_earlier_attempts():
    started = time.time() - 1800  # half an hour ago
    meter = CloudCost(4.0, start_time=started, billed_seconds_before=1800,
                      global_batch_size=10, total_epochs=4)
    meter.set_params({"steps": 100})
    meter.on_epoch_begin(0)
    logs = {}
    meter.on_epoch_end(0, logs)
    assert logs["billed_hours"] == pytest.approx(1.0, abs=1e-3)
    assert logs["cost_usd"] == pytest.approx(4.0, abs=0.01)
    assert logs["billed_usd_per_million_images"] == pytest.approx(4.0 / 1000 * 1e6, rel=1e-3)
    assert "usd_per_million_images" not in logs  # that name is price / steady-state rate
    # Epoch 1 cost almost nothing (it just began), so the projection adds little.
    assert logs["projected_cost_usd"] == pytest.approx(4.0, abs=0.01)
    batch_logs = {}
    meter.on_train_batch_end(0, batch_logs)
    assert batch_logs["cost_usd"] >= logs["cost_usd"]


# ------------------------------------------------------------------------- targets
def history_point(logs):
    return {"val_top1": logs[0], "billed_hours": logs[1], "cost_usd": logs[2]}


def test_targets_are_reached_at_the_first_epoch_at_or_above_them_with_interpolation():
    tracker = TopOneTargets([0.5, 0.7, 0.99])
    for epoch, point in enumerate([(0.2, 1.0, 10.0), (0.6, 2.0, 20.0), (0.8, 3.0, 30.0)]):
        logs = history_point(point)
        tracker.on_epoch_end(epoch, logs)
    assert logs["best_val_top1"] == 0.8 and logs["targets_reached"] == 2
    half, seventy, high = tracker.targets()
    assert half["reached"] and half["epoch"] == 2 and half["hours"] == 2.0
    assert half["cost_usd"] == 20.0
    # 0.5 lies 3/4 of the way from 0.2 (epoch 1) to 0.6 (epoch 2).
    assert half["interpolated"]["epoch"] == pytest.approx(1.75)
    assert half["interpolated"]["cost_usd"] == pytest.approx(17.5)
    assert seventy["epoch"] == 3 and seventy["interpolated"]["hours"] == pytest.approx(2.5)
    assert high == {"target_top1": 0.99, "reached": False, "epoch": None, "hours": None,
                    "cost_usd": None, "interpolated": None}


def test_a_target_met_at_the_first_epoch_is_not_interpolated_and_history_resumes():
    tracker = TopOneTargets([0.1])
    tracker.on_epoch_end(0, history_point((0.3, 0.1, 1.0)))
    assert tracker.targets()[0]["epoch"] == 1 and tracker.targets()[0]["interpolated"] is None
    resumed = TopOneTargets([0.1], history=tracker.history)
    resumed.on_epoch_end(1, history_point((0.4, 0.2, 2.0)))
    assert [h["epoch"] for h in resumed.history] == [1, 2] and resumed.best_top1 == 0.4


def test_hours_to_a_target_need_no_price():
    """Without a price there is no cost callback: the hours come from the targets'
    own billing clock (earlier attempts included), the dollars stay unknown."""
    tracker = TopOneTargets([0.5], start_time=time.time() - 1800, billed_seconds_before=1800)
    logs = {"val_top1": 0.6}
    tracker.on_epoch_end(0, logs)
    target = tracker.targets()[0]
    assert target["reached"] and target["hours"] == pytest.approx(1.0, abs=1e-3)
    assert target["cost_usd"] is None
    assert logs["billed_hours"] == target["hours"]  # for metrics.jsonl and the report
    priced = {"val_top1": 0.6, "billed_hours": 2.0, "cost_usd": 8.0}
    TopOneTargets([0.5]).on_epoch_end(0, priced)
    assert priced["billed_hours"] == 2.0  # the cost callback's figure is kept as it is


# ----------------------------------------------------------------------------- MFU
def test_mfu_is_achieved_flops_over_peak():
    meter = ModelFlopsUtilization(24.5e9, num_devices=4, peak_tflops_per_device=125.0)
    logs = {"epoch_images_per_sec": 3128.0}
    meter.on_epoch_end(0, logs)
    assert logs["epoch_model_tflops_per_sec"] == pytest.approx(24.5e9 * 3128 / 1e12)
    assert logs["epoch_mfu"] == pytest.approx(24.5e9 * 3128 / (4 * 125e12))
    assert meter.utilization(3128.0) == logs["epoch_mfu"]
    no_peak = ModelFlopsUtilization(1e9)
    logs = {"epoch_images_per_sec": 10.0}
    no_peak.on_epoch_end(0, logs)
    assert "epoch_mfu" not in logs and no_peak.mfu is None
    uncounted = ModelFlopsUtilization(None, peak_tflops_per_device=125.0)
    logs = {"epoch_images_per_sec": 10.0}
    uncounted.on_epoch_end(0, logs)
    assert logs == {"epoch_images_per_sec": 10.0} and uncounted.utilization(10.0) is None


# -------------------------------------------------------------------------- logger
def test_the_learning_rate_logged_is_the_one_the_optimizer_uses_next():
    """Read from the schedule at the step count (host arithmetic for the app's own
    schedule), it must equal what the optimizer computes itself."""
    from app.engine.recipe import WarmupSchedule
    from callbacks.learning_rate import LearningRateLogger

    for rate in (WarmupSchedule(0.5, warmup_steps=3, total_steps=12), 0.25,
                 keras.optimizers.schedules.CosineDecay(0.5, decay_steps=12)):
        model = tiny_model()
        model.compile(keras.optimizers.SGD(rate),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        logger = LearningRateLogger()
        history = model.fit(*tiny_data(32), batch_size=8, epochs=2, verbose=0,
                            callbacks=[logger])
        expected = float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))
        assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 8
        assert logger.learning_rate == pytest.approx(expected, rel=1e-6), rate
        assert history.history["learning_rate"][-1] == logger.learning_rate
    assert logger.learning_rate != history.history["learning_rate"][0]  # it moved


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


def test_every_logged_figure_has_a_unit_and_a_description():
    for key, figure in dashboard.FIGURES.items():
        assert figure.unit and figure.description.endswith("."), key
        assert figure.tag("epoch") == f"{figure.group}/epoch_{figure.name}"
    assert dashboard.figure_of("val_top1").tag("epoch") == dashboard.figure_of(
        "top1").tag("epoch")
    assert dashboard.figure_of("mystery").tag("batch") == "other/batch_mystery"


def test_rewind_drops_what_came_after_a_checkpoint(tmp_path):
    writer = events.EventWriter(str(tmp_path))
    for step in range(1, 6):
        writer.scalar("accuracy/epoch_top1", step / 10, step)
        writer.scalar("loss/batch_loss", step / 10, step * 10)
    writer.close()
    duplicate = events.EventWriter(str(tmp_path))
    duplicate.scalar("accuracy/epoch_top1", 0.2, 2)  # a redone epoch
    duplicate.close()
    last = {"accuracy/epoch_top1": 3, "loss/batch_loss": 30}
    assert events.rewind(str(tmp_path), last.get) == 4
    points = [(v.tag, e.step) for path in events.event_files(str(tmp_path))
              for e in events.read_events(path) for v in e.summary.value]
    assert sorted(points) == [("accuracy/epoch_top1", s) for s in (1, 2, 3)] + [
        ("loss/batch_loss", s) for s in (10, 20, 30)]


# ---------------------------------------------------------------------- checkpoint
def test_checkpoints_are_atomic_kept_two_deep_and_restore_the_optimizer(tmp_path):
    x, y = tiny_data(64)
    model = tiny_model()
    saver = Checkpoint(str(tmp_path), steps_per_epoch=8, every_steps=3, global_batch_size=8,
                       extra_state=lambda step: {"note": "kept"})
    model.fit(x, y, batch_size=8, epochs=2, callbacks=[saver], verbose=0)
    names = sorted(os.listdir(tmp_path / "checkpoints"))
    assert names == ["ckpt-0000000014", "ckpt-0000000016"]  # newest two of 3,6,8,11,14,16
    os.makedirs(tmp_path / "checkpoints" / "ckpt-0000000099.tmp-1")  # a save killed midway
    path, state = latest_checkpoint(str(tmp_path))
    assert path.endswith("ckpt-0000000016")
    assert state["epoch"] == 2 and state["global_step"] == 16 and state["note"] == "kept"
    assert state["images_seen"] == 128
    fresh = tiny_model()
    fresh.optimizer.build(fresh.trainable_variables)
    fresh.load_weights(os.path.join(path, "model.weights.h5"))
    assert int(fresh.optimizer.iterations) == 16
    np.testing.assert_allclose(fresh.get_weights()[0], model.get_weights()[0])


def test_sigterm_saves_at_the_next_step_and_raises_preempted(tmp_path):
    import signal

    x, y = tiny_data(64)
    model = tiny_model()
    saver = Checkpoint(str(tmp_path), steps_per_epoch=8)

    class SendSigterm(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Preempted) as stop:
        model.fit(x, y, batch_size=8, epochs=3, callbacks=[SendSigterm(), saver], verbose=0)
    assert stop.value.step == 3 and stop.value.path.endswith("ckpt-0000000003")
    assert json.load(open(os.path.join(stop.value.path, "state.json")))["step_in_epoch"] == 3
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize("vanishes", ["checkpoints", "staging", "newest", None])
def test_a_save_failing_because_the_run_folder_is_being_deleted_says_so(tmp_path, vanishes):
    """A run folder deleted while a checkpoint is written (rmtree takes the checkpoint
    folder, the save's own staging folder, or the newest checkpoint's weights, which
    the space check reads, before the run folder itself) is reported as the folder
    deleted, not as a disk that cannot be written; a save that fails with everything
    in place is a write failure."""
    model = tiny_model()
    saver = Checkpoint(str(tmp_path / "run"), steps_per_epoch=8)
    saver.set_model(model)
    saver.on_train_begin()
    assert saver.save(0, 4).endswith("ckpt-0000000004")
    if vanishes == "newest":
        check_space = saver._check_space

        def take_the_newest_weights_first(*args):
            os.remove(tmp_path / "run" / "checkpoints" / "ckpt-0000000004" / "model.weights.h5")
            check_space(*args)

        saver._check_space = take_the_newest_weights_first
    write = model.save_weights

    def save_weights(path):
        write(path)
        if vanishes == "checkpoints":
            shutil.rmtree(tmp_path / "run" / "checkpoints")
        elif vanishes == "staging":
            shutil.rmtree(os.path.dirname(path))
        raise OSError(errno.ENOENT if vanishes else errno.ENOSPC, "the write failed")

    model.save_weights = save_weights
    with pytest.raises(StorageError) as failure:
        saver.save(1, 8)
    message = str(failure.value)
    if vanishes:
        assert message.startswith(f"the run folder {tmp_path / 'run'} was deleted or replaced")
    else:
        assert message.startswith("cannot write checkpoint") and "the write failed" in message
    saver.on_train_end()


def test_a_run_folder_deleted_and_made_again_is_not_taken_for_the_same(tmp_path):
    """On ext4 a deleted folder's inode number goes to the next folder made, so a run
    folder deleted mid-run and made again by anyone has the number the run saw at its
    start, and a save went on into it (in CI, a later write then failed and was
    reported as a disk that cannot be written). The callback holds the folder open,
    which keeps its number taken."""
    run = tmp_path / "run"
    saver = Checkpoint(str(run), steps_per_epoch=8)
    saver.set_model(tiny_model())
    saver.on_train_begin()
    assert saver.save(0, 4).endswith("ckpt-0000000004")
    shutil.rmtree(run)
    os.mkdir(run)
    with pytest.raises(StorageError) as failure:
        saver.save(1, 8)
    assert str(failure.value) == (f"the run folder {run} was deleted or replaced during the "
                                  "run; nothing more can be saved there")
    assert os.listdir(run) == []  # nothing written into the new folder
    saver.on_train_end()


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


def test_non_finite_weights_are_never_checkpointed_and_nan_stops_training(tmp_path):
    x, y = tiny_data(64)
    model = tiny_model()
    saver = Checkpoint(str(tmp_path), steps_per_epoch=8)
    saver.set_model(model)
    model.layers[1].kernel.assign(np.full(model.layers[1].kernel.shape, np.nan, "float32"))
    assert saver.save(1, 8) is None
    guard = NanGuard(steps_per_epoch=8)
    guard.on_epoch_begin(1)
    with pytest.raises(Diverged) as stop:
        guard.on_train_batch_end(2, {"loss": math.nan})
    assert stop.value.step == 11 and guard.diverged_at == 11
    guard.on_train_batch_end(3, {"loss": 1.0})  # finite: nothing happens


@pytest.mark.parametrize("readers, said, not_said", [
    ({"read_power": lambda: 300.0}, "board-power samples", "energy counter"),
    ({"read_energy": lambda: 1.0}, "NVML's energy counter", "power samples")])
def test_the_energy_cards_say_how_the_energy_was_measured(tmp_path, monkeypatch, readers,
                                                          said, not_said):
    """The run's callbacks as app/modes/train_callbacks.py makes them, on a GPU that has
    an energy counter or only power samples: the power card says which was used."""
    import types

    from app.engine.distribute import Topology
    from app.engine.prices import resolve_billing
    from app.modes import train, train_callbacks
    from app.run import resume
    from flags import Config
    from preprocessing.spec import BatchShape

    monkeypatch.setattr(train_callbacks, "gpu_energy_readers", lambda *_: readers)
    config = Config(logdir=str(tmp_path), epochs=1, steps_per_epoch=4, global_batch_size=8)
    topology = Topology("tensorflow", "cpu", 1, 0, 1, "cpu")
    context = types.SimpleNamespace(
        config=config, topology=topology, logdir=str(tmp_path), started_at=time.time(),
        batch=BatchShape(8), billing=resolve_billing("auto", "on_demand", None, None, "cpu", 1))
    data = types.SimpleNamespace(input_state=None, validation_examples=0)
    parts = train_callbacks.make_callbacks(context, train.Plan(data, 4, 0, 1e6, resume.NEW_RUN,
                                                               0.0))
    logger = parts.logger
    logger.on_train_begin()
    logger.on_epoch_begin(0)
    logger.on_epoch_end(0, {"epoch_power_watts": 300.0})
    logger.on_train_end()
    (text,) = {v.metadata.summary_description for path in events.event_files(str(
        tmp_path / "train")) for e in events.read_events(path) for v in e.summary.value
        if v.tag == "energy/epoch_power_watts"}
    assert said in text and not_said not in text and "*Unit: watts.*" in text
