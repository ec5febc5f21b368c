"""Compares the Throughput callback with an independent timing of the same fit.

Run as a script (`python tests/throughput_check.py jax|tensorflow`), so each backend
gets a fresh process; prints one JSON line. Used by tests/test_throughput_backends.py.

The independent timer is deliberately naive: wall time from the start of the first
steady-state step (on_train_batch_begin) to the end of the last one, and the count
of steps in between. It is not async_safe, so the fit runs synchronously, and both
callbacks time exactly the same steps of the same fit.
"""

import json
import os
import sys
import time

os.environ["KERAS_BACKEND"] = sys.argv[1]
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from callbacks.throughput import Throughput  # noqa: E402

BATCH, STEPS, WARMUP, SPE = 64, 64, 16, 4


class NaiveTimer(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        if batch == WARMUP:
            self.start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        if batch == STEPS - 1:
            self.images_per_sec = (STEPS - WARMUP) * BATCH / (time.perf_counter() - self.start)


def main():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((32, 32, 3))
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(inputs)
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    outputs = keras.layers.Dense(10)(keras.layers.GlobalAveragePooling2D()(x))
    model = keras.Model(inputs, outputs)
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=SPE)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH * STEPS, 32, 32, 3)).astype("float32")
    y = rng.integers(0, 10, BATCH * STEPS)
    ratios = []
    for _ in range(3):
        meter, naive = Throughput(BATCH, warmup_steps=WARMUP), NaiveTimer()
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[meter, naive])
        ratios.append(meter.images_per_sec / naive.images_per_sec)
    print(json.dumps({"backend": keras.backend.backend(), "ratios": ratios,
                      "tensorflow_imported": "tensorflow" in sys.modules}))


if __name__ == "__main__":
    main()
