"""callbacks/stall.py: the watchdog calls its handler once no batch has ended for its
limit, and never while batches keep ending or after training ended."""

import threading
import time

import keras
import pytest

from callbacks.stall import StallWatchdog
from tiny_keras import tiny_data, tiny_model

LIMIT = 0.4  # seconds; the watchdog looks every LIMIT / 4


def test_the_limit_is_checked_with_the_value_received():
    with pytest.raises(ValueError) as error:
        StallWatchdog(0, print)
    assert "limit_seconds must be > 0, received 0" in str(error.value)


def test_no_batch_for_the_limit_calls_the_handler_once_with_the_limit():
    called, fired = [], threading.Event()
    watchdog = StallWatchdog(LIMIT, lambda seconds: (called.append(seconds), fired.set()))
    started = time.monotonic()
    watchdog.on_train_begin()
    assert fired.wait(10), "the stall handler was never called"
    assert time.monotonic() - started >= LIMIT
    time.sleep(3 * LIMIT)
    assert called == [LIMIT]  # once: its thread ends after calling it
    watchdog.on_train_end()


def test_batches_that_keep_ending_are_no_stall_and_an_ended_training_is_not_watched():
    """Batches (train and evaluation) ending every tenth of the limit for twice the
    limit: no call; then none once training has ended, however long nothing happens."""
    limit = 1.0  # a wide margin over a busy machine's oversleeping
    called = []
    watchdog = StallWatchdog(limit, called.append)
    watchdog.on_train_begin()
    until = time.monotonic() + 2 * limit
    batch = 0
    while time.monotonic() < until:
        time.sleep(limit / 10)
        (watchdog.on_train_batch_end if batch % 2 else watchdog.on_test_batch_end)(batch)
        batch += 1
    watchdog.on_train_end()
    time.sleep(2 * limit)
    assert called == [] and not watchdog._thread.is_alive()


def test_a_real_fit_with_steps_slower_than_a_quarter_limit_is_no_stall():
    """In `fit`, after a first fit compiled its step: twelve steps of a fifth of the
    limit each, the whole fit well over the limit, and no call."""
    limit = 1.5
    called = []
    watchdog = StallWatchdog(limit, called.append)

    class SlowSteps(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            time.sleep(limit / 5)

    model = tiny_model()
    x, y = tiny_data(96)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)  # compiles the step
    started = time.monotonic()
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[SlowSteps(), watchdog])
    assert time.monotonic() - started > limit  # the fit outlasted the limit
    assert called == []
