"""One global-step rule for every callback, checked across a mid-epoch resume.

A run resumed mid-epoch finishes the epoch in a short `fit` (fewer steps), then
trains whole epochs. The step-level TensorBoard series, the NaN guard's step and the
profiler's traced steps must all count from the resume step, as if the run had
never stopped: these tests drive the real callbacks through real `fit` calls.
"""

import json
import os

import keras
import numpy as np

from callbacks.figures.steps import Position, global_step, steps_before
from callbacks.metrics_logger import MetricsLogger
from callbacks.profiler import Profiler
from callbacks.records import events

STEPS = 10  # steps per epoch


def test_the_rule_counts_from_the_resume_step_inside_its_epoch():
    assert global_step(0, 0, STEPS) == 1
    assert global_step(2, 4, STEPS) == 25
    # Resumed at step 25 (epoch 2, 5 steps done): the short fit's batch 0 is step 26.
    assert steps_before(2, STEPS, resume_step=25) == 25
    assert global_step(2, 0, STEPS, resume_step=25) == 26
    # Whole epochs after it are unaffected; a resume on an epoch boundary too.
    assert global_step(3, 0, STEPS, resume_step=25) == 31
    assert global_step(3, 0, STEPS, resume_step=30) == 31


def test_the_position_numbers_steps_and_counts_images_by_hand():
    """The run's Position (the one owner): resumed at step 25 of 10-step epochs, with
    2,400 images before, a global batch of 96 of which a process feeds 48."""
    import types

    position = Position.of_batch(types.SimpleNamespace(global_size=96, per_process=48),
                                 steps_per_epoch=STEPS, resume_step=25, images_before=2400)
    assert position.global_step(2, 0) == 26 == global_step(2, 0, STEPS, 25)
    assert position.steps_before(3) == 30
    assert position.images(3) == 288 and position.process_images(3) == 144
    assert position.images_at(30) == 2400 + 5 * 96  # steps 26-30 of this attempt
    # a fit of its own: the fit's steps number its epochs, the batch is the int given
    alone = Position.of(16)
    assert alone.global_step(1, 0, {"steps": 4}) == 5 and alone.process_images(2) == 32
    assert Position.of(alone) is alone
    for bad, said in ((dict(global_batch_size=0), "global_batch_size must be >= 1"),
                      (dict(resume_step=-1), "resume_step must be >= 0"),
                      (dict(images_before=1.5), "images_before must be >= 0, received 1.5")):
        try:
            Position(**bad)
        except ValueError as error:
            assert said in str(error)
        else:
            raise AssertionError(f"{bad} accepted")


def _tiny_model():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    return model


def _data():
    x = np.random.RandomState(0).rand(8, 4).astype("float32")
    y = np.zeros(8, "int64")
    import tensorflow as tf
    return tf.data.Dataset.from_tensors((x, y)).repeat()


def _step_series(folder):
    return sorted(e.step for path in events.event_files(str(folder))
                  for e in events.read_events(path) for v in e.summary.value
                  if v.tag == "loss/batch_loss")


def test_step_series_and_profiled_steps_continue_across_a_mid_epoch_resume(tmp_path):
    epochs, resume_step, every = 4, 25, 2
    model, data = _tiny_model(), _data()
    logger = MetricsLogger(str(tmp_path), log_every_steps=every,
                           position=Position(steps_per_epoch=STEPS, resume_step=resume_step))
    profiler = Profiler(str(tmp_path / "trace"), 27, 29, backend="tensorflow",
                        position=Position(steps_per_epoch=STEPS, resume_step=resume_step))
    callbacks = [logger, profiler]
    # What app/modes/train.py does after a resume at step 25: finish epoch 3 (index 2)...
    model.fit(data, epochs=3, initial_epoch=2, steps_per_epoch=STEPS - 5, verbose=0,
              callbacks=callbacks)
    # ...then the remaining whole epochs.
    model.fit(data, epochs=epochs, initial_epoch=3, steps_per_epoch=STEPS, verbose=0,
              callbacks=callbacks)
    # Every even step after 25 exactly once: no repeats, no gaps (26, 28, ..., 40).
    assert _step_series(tmp_path / "train") == list(range(26, epochs * STEPS + 1, every))
    assert profiler.traced_steps == [27, 28, 29]


def test_a_fresh_run_logs_every_nth_step_from_one():
    series = [global_step(e, b, STEPS) for e in range(2) for b in range(STEPS)]
    assert series == list(range(1, 2 * STEPS + 1))


def test_the_step_series_holds_when_worker_threads_run_batch_hooks_out_of_order(tmp_path):
    """On JAX, Keras runs the batch hooks of `async_safe` callbacks in a thread pool,
    so step 13's hook may run before step 12's (CI saw 2, 4, ..., 10, 13, 14: the
    logger once logged the first step at or past the next multiple it had seen).
    Which steps are logged must depend on the steps alone, never on hook order."""
    logger = MetricsLogger(str(tmp_path), log_every_steps=2,
                           position=Position(steps_per_epoch=5, resume_step=11))
    logger.on_train_begin()
    logger.on_epoch_begin(2)  # resumed at step 11: this epoch's batches are steps 12-15
    for batch in (1, 0, 3, 2):  # steps 13, 12, 15, 14
        logger.on_train_batch_end(batch, {"loss": 1.0})
    logger.on_epoch_end(2, {"loss": 1.0})
    logger.on_epoch_begin(3)  # steps 16-20
    for batch in (4, 2, 3, 0, 1):
        logger.on_train_batch_end(batch, {"loss": 1.0})
    logger.on_epoch_end(3, {"loss": 1.0})
    logger.on_train_end()
    assert _step_series(tmp_path / "train") == [12, 14, 16, 18, 20]


def test_with_steps_per_execution_each_call_logs_when_its_steps_hold_a_multiple(tmp_path):
    """One hook per 4 steps and an interval of 3, rounded up to 4 (a multiple of the
    steps per call): the hooks for steps 4, 8 and 12 each log once; a resumed epoch
    (from step 16) logs at the hooks for steps 20 and 24."""
    model = _tiny_model()
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy",
                  steps_per_execution=4)
    logger = MetricsLogger(str(tmp_path), log_every_steps=3,
                           position=Position(steps_per_epoch=12))
    model.fit(_data(), epochs=1, steps_per_epoch=12, verbose=0, callbacks=[logger])
    assert _step_series(tmp_path / "train") == [4, 8, 12]
    resumed = MetricsLogger(str(tmp_path / "resumed"), log_every_steps=3,
                            position=Position(steps_per_epoch=12, resume_step=16))
    model.fit(_data(), epochs=2, initial_epoch=1, steps_per_epoch=8, verbose=0,
              callbacks=[resumed])
    assert _step_series(tmp_path / "resumed" / "train") == [20, 24]


def test_a_run_asked_to_log_every_5_steps_at_4_per_call_logs_every_8_and_says_so(tmp_path):
    """A real run on the digits (held on the device: auto steps per execution, 4 of
    the epoch's 44 steps per call on a CPU) with --log_every_steps=5: the series sits
    at multiples of 8, each the figures of that step, and the banner says why."""
    from processes import run

    logdir = tmp_path / "run"
    done = run(["--backend=jax", "--dataset=digits", "--model=small_resnet",
                "--image_size=16", "--global_batch_size=32", "--epochs=1",
                "--validation_steps=-1", "--log_every_steps=5", f"--logdir={logdir}"],
               env={"KERAS_BACKEND": "jax"})
    assert done.returncode == 0, done.stderr[-2000:]
    banner = next(line for line in done.stdout.splitlines() if line.startswith("[small_resnet"))
    assert ("steps_per_execution=4 [log_every_steps=5 rounded up to 8: a multiple of "
            "steps_per_execution]" in banner), banner
    assert _step_series(logdir / "train") == [8, 16, 24, 32, 40]


def test_a_trace_session_planted_after_the_runs_own_is_not_read(tmp_path):
    """A valid trace of another run's steps 2-3, planted under a session
    name that sorts after this run's (9999_...), was silently reported as this run's.
    The profiler reads the session that appeared while it traced (`session`), and a
    checkpoint's record of it (`state()`) makes a resumed attempt trace nothing again."""
    import shutil

    other = Profiler(str(tmp_path / "other"), 2, 3, backend="tensorflow",
                     position=Position(steps_per_epoch=STEPS))
    _tiny_model().fit(_data(), epochs=1, steps_per_epoch=STEPS, verbose=0, callbacks=[other])
    assert other.breakdown["traced"] == [2, 3]
    mine = tmp_path / "mine"
    planted = mine / "plugins" / "profile" / "9999_12_31_23_59_59"
    shutil.copytree(tmp_path / "other" / "plugins" / "profile" / other.session, planted)
    profiler = Profiler(str(mine), 5, 7, backend="tensorflow",
                     position=Position(steps_per_epoch=STEPS))
    model = _tiny_model()
    model.fit(_data(), epochs=1, steps_per_epoch=STEPS, verbose=0, callbacks=[profiler])
    assert profiler.session not in (None, planted.name)
    assert profiler.traced_steps == [5, 6, 7] and profiler.breakdown["traced"] == [5, 7]

    # A resumed attempt (from step 10) carries the trace: no new session, the same split.
    resumed = Profiler(str(mine), 5, 7, backend="tensorflow",
                       position=Position(steps_per_epoch=STEPS, resume_step=STEPS),
                       carried=json.loads(json.dumps(profiler.state())))
    model.fit(_data(), epochs=2, initial_epoch=1, steps_per_epoch=STEPS, verbose=0,
              callbacks=[resumed])
    assert resumed.traced_steps == [5, 6, 7] and resumed.session == profiler.session
    assert resumed.breakdown["traced"] == [5, 7]
    assert sorted(os.listdir(mine / "plugins" / "profile")) == sorted(
        [planted.name, profiler.session])
    # Without a record (an attempt that kept none), steps past the range are not traced.
    late = Profiler(str(tmp_path / "late"), 5, 7, backend="tensorflow",
                    position=Position(steps_per_epoch=STEPS, resume_step=STEPS),
                    carried={"session": "../../etc", "traced_steps": [5]})
    model.fit(_data(), epochs=2, initial_epoch=1, steps_per_epoch=STEPS, verbose=0,
              callbacks=[late])
    assert late.traced_steps == [] and not (tmp_path / "late").exists()
