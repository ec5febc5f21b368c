"""callbacks/checkpoint.py: checkpoints atomic and kept two deep, a SIGTERM saved at the
next step, and a run folder deleted mid-run reported as deleted, never written again."""

import errno
import json
import os
import shutil
import time

import keras
import numpy as np
import pytest

from callbacks.checkpoint import Checkpoint, latest_checkpoint
from callbacks.figures.bill import Bill, saved_seconds
from callbacks.figures.steps import Position
from callbacks.stops import Preempted, StorageError
from tiny_keras import tiny_data, tiny_model


def test_checkpoint_arguments_are_checked_with_the_value_received():
    with pytest.raises(ValueError) as error:
        Checkpoint("/tmp/x", Position(steps_per_epoch=0))
    assert str(error.value) == ("position must be a Position of at least 1 step an epoch, "
                                "received Position(global_batch_size=1, per_process_batch=0, "
                                "steps_per_epoch=0, resume_step=0, images_before=0)")
    with pytest.raises(ValueError) as error:
        Checkpoint("/tmp/x", 8)  # an epoch's steps where its Position belongs
    assert "received 8" in str(error.value)


def test_checkpoints_are_atomic_kept_two_deep_and_restore_the_optimizer(tmp_path):
    x, y = tiny_data(64)
    model = tiny_model()
    # The run's Bill, started 20 s ago with 100 s billed before: each checkpoint saves
    # its seconds, between this test's clock read before and after the fit.
    before = time.time()
    saver = Checkpoint(str(tmp_path), Position(global_batch_size=8, steps_per_epoch=8),
                       every_steps=3,
                       bill=Bill(before - 20.0, 100.0),
                       extra_state=lambda step: {"note": "kept"})
    model.fit(x, y, batch_size=8, epochs=2, callbacks=[saver], verbose=0)
    after = time.time()
    names = sorted(os.listdir(tmp_path / "checkpoints"))
    assert names == ["ckpt-0000000014", "ckpt-0000000016"]  # newest two of 3,6,8,11,14,16
    os.makedirs(tmp_path / "checkpoints" / "ckpt-0000000099.tmp-1")  # a save killed midway
    path, state = latest_checkpoint(str(tmp_path))
    assert path.endswith("ckpt-0000000016")
    assert state["epoch"] == 2 and state["global_step"] == 16 and state["note"] == "kept"
    assert state["images_seen"] == 128
    assert 120.0 <= saved_seconds(state) <= 120.0 + (after - before)  # what a resume reads
    fresh = tiny_model()
    fresh.optimizer.build(fresh.trainable_variables)
    fresh.load_weights(os.path.join(path, "model.weights.h5"))
    assert int(fresh.optimizer.iterations) == 16
    np.testing.assert_allclose(fresh.get_weights()[0], model.get_weights()[0])


def test_sigterm_saves_at_the_next_step_and_raises_preempted(tmp_path):
    import signal

    x, y = tiny_data(64)
    model = tiny_model()
    saver = Checkpoint(str(tmp_path), Position(steps_per_epoch=8))

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
    saver = Checkpoint(str(tmp_path / "run"), Position(steps_per_epoch=8))
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
    saver = Checkpoint(str(run), Position(steps_per_epoch=8))
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
