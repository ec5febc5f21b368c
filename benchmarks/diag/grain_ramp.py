"""One-off: the grain training stream alone, as the app builds it, batch by batch.

Prints when each batch arrives (seconds from process start) over EPOCHS epochs, and the
rate of each epoch; with LOAD=1 a busy thread pool stands in for XLA's compile first.
    python benchmarks/diag/grain_ramp.py FOLDER [EPOCHS]
"""
import time

T0 = time.time()
import json, os, sys  # noqa: E402

from preprocessing.datasets import make_datasets  # noqa: E402
from preprocessing.spec import BatchShape, InputSpec  # noqa: E402


def main():
    folder, epochs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2
    spec = InputSpec(data_dir="", image_size=224, batch=BatchShape(256), backend="jax",
                     input_pipeline="grain", accelerator="gpu", with_validation=False, seed=0)
    data = make_datasets(f"folder:{folder}", spec)
    built = time.time() - T0
    steps = data.train_examples // 256
    it = iter(data.train)
    marks = []
    for _ in range(epochs * steps):
        next(it)
        marks.append(time.time() - T0)
    out = {"built_at": round(built, 2), "steps_per_epoch": steps,
           "first_batch_at": round(marks[0], 2), "marks": [round(m, 3) for m in marks]}
    for e in range(epochs):
        a = marks[e * steps - 1] if e else marks[0]
        b = marks[(e + 1) * steps - 1]
        n = steps - (0 if e else 1)
        out[f"epoch{e + 1}_images_per_sec"] = round(n * 256 / (b - a), 1)
    print(json.dumps({k: v for k, v in out.items() if k != "marks"}))
    with open(os.environ.get("RAMP_OUT", "/tmp/ramp.json"), "w") as f:
        json.dump(out, f)
    os._exit(0)


if __name__ == "__main__":
    main()
