"""The start of a script that runs app/engine/measured.py's real A/B on a CPU
(tests/app/engine/test_measured.py): a tiny Keras model compiled for JAX, its batch, and
`compiled(variants, plan)`, which compiles the training step once per variant through
app/engine/precompile.py, as a GPU run does, and joins the compiles; the store is
$STORE."""

HELPERS = """
import json, os, sys
import numpy as np, keras, jax
from app.engine import kernel_choice, kernels, measured, precompile
from app.engine.distribute import Topology

keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"),
                          keras.layers.Dense(2)])
model.compile(optimizer="adam", loss="mse", jit_compile=True)
spec = (jax.ShapeDtypeStruct((32, 16), "float32"), jax.ShapeDtypeStruct((32, 2), "float32"))
topology = Topology("jax", "cpu", 1, 0, 1, "cpu")
store = os.environ["STORE"]
key = {"device_kind": "cpu", "model": "tiny", "per_device_batch": 32,
       "precision": "float32", "image_size": None}

def compiled(variants, plan):
    compiling = precompile.start(model, (spec, None), topology, hand_to_fit=True,
                                 train_variants=variants)
    compiling.join()
    compiling.choice = plan
    return compiling
"""
