"""Writes a folder dataset of JPEGs with ImageNet's spread of sizes, for benchmarks.

`python benchmarks/make_jpegs.py OUT --train=10000 --validation=1000 --classes=100`
writes OUT/train/<class>/*.JPEG and OUT/validation/<class>/*.JPEG. Sides are drawn
around ImageNet's (median about 500x375, most between 200 and 1,000 pixels, aspects
3:4 to 4:3 and some wider), content is smooth color fields with texture and noise,
so the files land near ImageNet's ~110 KB mean at quality 90. Deterministic for a
seed; written in parallel processes.
"""

import argparse
import io
import multiprocessing
import os

import numpy as np
from PIL import Image


def _image(rng: np.random.Generator) -> np.ndarray:
    width = int(np.clip(rng.lognormal(np.log(500), 0.28), 160, 1400))
    aspect = float(np.clip(rng.choice([0.75, 1.0, 1.333, 1.5]) * rng.uniform(0.9, 1.1),
                           0.5, 2.0))
    height = int(np.clip(width / aspect, 120, 1400))
    coarse = rng.uniform(0, 255, (max(2, height // 48), max(2, width // 48), 3))
    field = np.asarray(Image.fromarray(coarse.astype(np.uint8)).resize(
        (width, height), Image.BICUBIC), np.float32)
    texture = rng.normal(0, 1, (height // 4 + 1, width // 4 + 1, 1)).repeat(4, 0).repeat(
        4, 1)[:height, :width] * 14
    noise = rng.normal(0, 10.5, (height, width, 3))
    return np.clip(field + texture + noise, 0, 255).astype(np.uint8)


def _write(job):
    path, seed = job
    rng = np.random.default_rng(seed)
    buffer = io.BytesIO()
    Image.fromarray(_image(rng)).save(buffer, format="JPEG", quality=90)
    with open(path, "wb") as f:
        f.write(buffer.getvalue())
    return len(buffer.getvalue())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--train", type=int, default=10_000)
    parser.add_argument("--validation", type=int, default=1_000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    jobs = []
    for split, count in (("train", args.train), ("validation", args.validation)):
        for i in range(count):
            folder = os.path.join(args.out, split, f"c{i % args.classes:04d}")
            os.makedirs(folder, exist_ok=True)
            jobs.append((os.path.join(folder, f"{split}_{i:07d}.JPEG"),
                         args.seed * 10_000_000 + len(jobs)))
    with multiprocessing.Pool() as pool:
        sizes = pool.map(_write, jobs, chunksize=64)
    print(f"{len(sizes)} JPEGs in {args.out}: mean {np.mean(sizes) / 1024:.1f} KiB, "
          f"median {np.median(sizes) / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
