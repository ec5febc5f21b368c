"""What the app's callbacks cost: the same fit with all of them, and with none.

Both are timed the same way, from outside: the wall time of a fit of LONG steps
minus that of SHORT steps, so compile, start-up and end-of-epoch work (the
checkpoint, the metrics line) cancel, and what is left is the cost per step. The
two variants alternate, REPS times, and the medians are compared.

    KERAS_BACKEND=jax python benchmarks/callback_overhead.py --accelerator=gpu \
        --model=resnet50 --batch=256 --out overhead.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from results_io import emit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accelerator", default="cpu")
    parser.add_argument("--backend", default=os.environ.get("KERAS_BACKEND", "jax"))
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps_per_execution", type=int, default=1)
    parser.add_argument("--short", type=int, default=20)
    parser.add_argument("--long", type=int, default=120)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    os.environ["KERAS_BACKEND"] = args.backend  # before anything imports Keras

    from app.modes.train import Plan
    from app.modes.train_callbacks import make_callbacks
    from app.run import context as run_context
    from app.run.resume import NEW_RUN
    from flags import Config

    logdir = tempfile.mkdtemp(prefix="overhead-")
    config = Config(accelerator=args.accelerator, backend=args.backend, model=args.model,
                    dataset="synthetic", image_size=args.image_size,
                    global_batch_size=args.batch, steps_per_execution=args.steps_per_execution,
                    validation_steps=-1, logdir=logdir, verbose="2")
    context = run_context.start(run_context.prepare(config, time.time()))
    run_context.create_folder(context)
    from app.models.recipe import make_compiled_model
    from preprocessing.datasets import make_datasets

    data = make_datasets("synthetic", context.spec)
    model, flops = make_compiled_model(config, context.topology, data.num_classes,
                                       data.image_size, args.long)

    def fit(steps, with_callbacks):
        callbacks, verbose = [], 0
        if with_callbacks:
            plan = Plan(data, steps, 0, flops, NEW_RUN, 0.0)
            parts = make_callbacks(context, plan)
            callbacks, verbose = parts.callbacks, 2
        start = time.perf_counter()
        model.fit(data.train, epochs=1, steps_per_epoch=steps, callbacks=callbacks,
                  verbose=verbose, shuffle=False)
        return time.perf_counter() - start

    fit(args.short, False)  # compile
    fit(args.short, True)
    rates = {"none": [], "all": []}
    per_fit = {"none": [], "all": []}
    for _ in range(args.reps):
        for variant in ("none", "all"):
            short = fit(args.short, variant == "all")
            long = fit(args.long, variant == "all")
            rates[variant].append((args.long - args.short) * args.batch / (long - short))
            per_fit[variant].append(short - args.short * args.batch / rates[variant][-1])
    none, every = statistics.median(rates["none"]), statistics.median(rates["all"])
    result = {
        "what": "steady-state images/sec of the same fit with all app callbacks vs none",
        "model": args.model, "backend": args.backend, "device_kind": context.topology.device_kind,
        "global_batch_size": args.batch, "steps_per_execution": args.steps_per_execution,
        "timing": f"(fit of {args.long} steps) - (fit of {args.short} steps), "
                  f"median of {args.reps}, variants alternating",
        "images_per_sec_no_callbacks": round(none, 1),
        "images_per_sec_all_callbacks": round(every, 1),
        "ratio_all_over_none": round(every / none, 4),
        "rates": {k: [round(v, 1) for v in vs] for k, vs in rates.items()},
        "fixed_seconds_per_fit": {k: round(statistics.median(v), 3) for k, v in per_fit.items()},
    }
    emit(result, args.out)


if __name__ == "__main__":
    main()
