"""Which layer implementations make ResNet-50 fastest (app/models/layers.py vs Keras's)?

Builds the app's model with each LayerSet, compiles it with the app's recipe, and
times the steady state of the same fit with the app's Throughput callback. Each
variant runs in a process of its own: measured one after another in one process,
every variant after the first ran about 40% slower on the H200 (2026-11-30), so
in-process comparisons are not trusted here.

    KERAS_BACKEND=jax python benchmarks/model_variants.py --batch=256 --out variants.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from results_io import emit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

VARIANTS = {
    "keras": ("keras", "keras", "keras"),
    "fast_batchnorm_f32_apply": ("fast_f32", "keras", "keras"),
    "fast_batchnorm": ("fast", "keras", "keras"),
    "fast_batchnorm+slice_pool": ("fast", "slices", "keras"),
    "fast_batchnorm+s2d_stem": ("fast", "keras", "s2d"),
    "all_fast": ("fast", "slices", "s2d"),  # the app's default until 2026-12-01
    "all_fast+argmax_pool": ("fast", "argmax", "s2d"),
    "all_fast+s2d16": ("fast", "slices", "s2d16"),
    "all_fast+argmax_pool+s2d16": ("fast", "argmax", "s2d16"),  # the app's default
    # the default with each BatchNorm's ReLU inside it (one hand-written gradient)
    "default+relu_in_batchnorm": ("fast", "argmax", "s2d16", 1, False, True),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accelerator", default="gpu")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if "," in args.variants:  # one child process per variant
        rows = []
        for name in args.variants.split(","):
            child = [f"--accelerator={args.accelerator}", f"--model={args.model}",
                     f"--image_size={args.image_size}", f"--batch={args.batch}",
                     f"--steps={args.steps}", f"--variants={name}"]
            done = subprocess.run([sys.executable, __file__, *child],
                                  capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith('{"variant"')]
            if not lines:  # say why, and go on with the next variant
                print(f"variant {name} failed (exit {done.returncode}):\n"
                      f"{done.stderr[-3000:]}", file=sys.stderr, flush=True)
                continue
            rows.append(json.loads(lines[-1]))
            print(json.dumps(rows[-1]), flush=True)
        base = rows[0]["images_per_sec"] if rows else 0.0
        for row in rows:
            row["vs_first"] = round(row["images_per_sec"] / base, 4) if base else None
        emit({"what": "steady-state images/sec per layer set, one process each",
              "global_batch_size": args.batch, "model": args.model, "rows": rows}, args.out)
        return

    os.environ.setdefault("KERAS_BACKEND", "jax")  # before anything imports Keras
    from app import models
    from app.engine import distribute
    from app.models import recipe
    from app.engine.data import input_spec
    from flags import Config

    config = Config(accelerator=args.accelerator, backend=os.environ["KERAS_BACKEND"],
                    model=args.model, dataset="synthetic", image_size=args.image_size,
                    global_batch_size=args.batch, validation_steps=-1, logdir="/tmp/unused")
    distribute.prepare_backend(config)
    topology = distribute.make_topology(config)
    import keras

    from callbacks.throughput import Throughput
    from preprocessing.datasets import make_datasets

    keras.config.set_dtype_policy(config.policy)
    data = make_datasets("synthetic", input_spec(config, topology.batch_shape(args.batch)))
    for name in args.variants.split(","):
        layer_set = models.LayerSet(*VARIANTS[name])
        keras.utils.set_random_seed(0)
        with topology.scope():
            model = models.make_model(args.model, data.num_classes, data.image_size, layer_set)
            recipe.compile_model(model, config, data.num_classes, args.steps)
        model.fit(data.train, epochs=1, steps_per_epoch=4, verbose=0, shuffle=False)
        meter = Throughput(args.batch, warmup_steps=4)
        model.fit(data.train, epochs=1, steps_per_epoch=args.steps, verbose=0, shuffle=False,
                  callbacks=[meter])
        print(json.dumps({"variant": name, "layer_set": VARIANTS[name],
                          "images_per_sec": round(meter.images_per_sec, 1),
                          "device_kind": topology.device_kind, "precision": config.policy}),
              flush=True)


if __name__ == "__main__":
    main()
