"""A JAX fit whose batch hooks run out of order, as they do on worker threads.

Run as a script (`python tests/late_hooks_check.py`) in a fresh process; prints one
JSON line. Used by tests/callbacks/test_marks_out_of_order.py.

Every callback is `async_safe`, so Keras runs the batch-end hooks in its worker
threads. `Late` holds the hook of step LATE for HOLD seconds before the meter's hook
of that step runs (callbacks of one step run in turn, in one thread), while the other
steps' hooks run in other threads: the meter's mark of step LATE comes after those of
several later steps, as a sweep window on JAX saw. `Order` records the order in which
the meter's hooks ran (it comes after the meter), and `Clock` times, on its own and in
the main thread, the epoch from the start of the first timed step to the epoch's end.
"""

import json
import os
import sys
import threading
import time

os.environ["KERAS_BACKEND"] = "jax"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from callbacks.throughput import Throughput  # noqa: E402

BATCH, STEPS, WARMUP, LATE, HOLD, STEP = 8, 40, 4, 8, 0.15, 0.01


class Late(keras.callbacks.Callback):
    async_safe = True

    def on_train_batch_begin(self, batch, logs=None):
        time.sleep(STEP)  # every step takes STEP seconds at least

    def on_train_batch_end(self, batch, logs=None):
        if batch == LATE:
            time.sleep(HOLD)


class Order(keras.callbacks.Callback):
    async_safe = True

    def __init__(self):
        super().__init__()
        self.order, self._lock = [], threading.Lock()

    def on_train_batch_end(self, batch, logs=None):
        with self._lock:
            self.order.append(batch)


class Clock(keras.callbacks.Callback):
    async_safe = True

    def on_train_batch_begin(self, batch, logs=None):
        if batch == WARMUP:
            self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.end = time.perf_counter()


def main():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(4, 3)(inputs))
    model = keras.Model(inputs, keras.layers.Dense(10)(x))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    images = rng.normal(size=(BATCH * STEPS, 8, 8, 3)).astype("float32")
    labels = rng.integers(0, 10, BATCH * STEPS)
    meter, order, clock = Throughput(BATCH, warmup_steps=WARMUP), Order(), Clock()
    history = model.fit(images, labels, batch_size=BATCH, epochs=1, verbose=0, shuffle=False,
                        callbacks=[Late(), meter, order, clock])
    print(json.dumps({"order": order.order, "gaps": meter.last_window_gaps,
                      "timed_steps": history.history["epoch_timed_steps"][0],
                      "step_time_ms": history.history["epoch_step_time_ms"][0],
                      "clock_seconds": clock.end - clock.start}))


if __name__ == "__main__":
    main()
