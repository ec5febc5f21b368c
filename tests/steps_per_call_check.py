"""Traces one tiny convolutional model's training at 1 and at 16 steps a host call, in
turn (1, 16, 1, 16) in one JAX process, and splits each trace by kind of work with the
app's Profiler (callbacks/profiler.py, callbacks/profiling/breakdown.py); prints one
JSON line: each trace's breakdown and the app's MFU count of the same step
(app/models/flops.py). Run as a script (`python tests/steps_per_call_check.py DIR`);
used by tests/callbacks/profiling/test_steps_per_call.py. Also what summary.json
says of the traced steps (app/run/summary.py).
"""

import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from app.models.flops import train_flops_per_image  # noqa: E402
from app.run.summary import _profile  # noqa: E402
from callbacks.profiler import Profiler  # noqa: E402

BATCH, SIZE, STEPS, TRACED = 32, 16, 48, (17, 32)  # one call of 16 steps traced, or 16


def make_model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((SIZE, SIZE, 3))
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(inputs)
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    outputs = keras.layers.Dense(10)(keras.layers.GlobalAveragePooling2D()(x))
    return keras.Model(inputs, outputs)


def main(folder):
    rng = np.random.default_rng(0)
    images = rng.normal(size=(BATCH * STEPS, SIZE, SIZE, 3)).astype("float32")
    labels = rng.integers(0, 10, BATCH * STEPS)
    runs = []
    for turn, steps_per_call in enumerate((1, 16, 1, 16)):
        model = make_model()
        model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      steps_per_execution=steps_per_call)
        profiler = Profiler(os.path.join(folder, str(turn)), *TRACED, backend="jax")
        model.fit(images, labels, batch_size=BATCH, epochs=1, verbose=0, shuffle=False,
                  callbacks=[profiler])
        runs.append({"steps_per_call": steps_per_call, "breakdown": profiler.breakdown,
                     "summary_steps": _profile(profiler, folder, None)["steps"]})
    flops = train_flops_per_image(make_model(), SIZE, 1) * BATCH
    print(json.dumps({"runs": runs, "mfu_gflop_per_step": flops / 1e9}))


if __name__ == "__main__":
    main(sys.argv[1])
