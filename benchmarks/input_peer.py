"""The input pipeline against a well-known peer, on the same JPEG files, in one run.

Ours: the app's `standard` ImageNet training preset (fused decode-and-crop, Inception
crop, flip, normalize) in tf.data. The peer: torchvision's ImageFolder + DataLoader
with RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize and one worker
per core. Both batch 64 images of 224x224 and are timed over the same number of
batches after a warm-up.

    python benchmarks/input_peer.py --make_images=/tmp/jpegs          # once
    python benchmarks/input_peer.py --compare=/tmp/jpegs \
        --app_python=.venv/bin/python --torch_python=/tmp/torchvenv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from results_io import emit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH = 64


def make_images(folder: str, classes: int = 10, per_class: int = 200) -> None:
    """ImageNet-like JPEGs (500x375, smooth content, quality 90) in folder/train/<c>/."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:375, 0:500]
    for c in range(classes):
        path = os.path.join(folder, "train", f"class{c:02d}")
        os.makedirs(path, exist_ok=True)
        for i in range(per_class):
            a, b, phase = rng.uniform(0.005, 0.05, 2).tolist() + [rng.uniform(0, 6)]
            base = (np.sin(xx * a + phase) + np.cos(yy * b)) * 60 + 128
            image = np.stack([base, np.roll(base, 40, 1), 255 - base], -1)
            image += rng.normal(0, 6, image.shape)
            Image.fromarray(np.clip(image, 0, 255).astype("uint8")).save(
                os.path.join(path, f"{i:04d}.jpg"), quality=90)
    os.makedirs(os.path.join(folder, "validation"), exist_ok=True)


def time_app(folder: str, batches: int) -> float:
    sys.path.insert(0, ROOT)
    from app.modes.input_benchmark import time_pipeline
    from preprocessing.spec import BatchShape, InputSpec
    from preprocessing.datasets import folder as folder_builder

    data = folder_builder.make_from_root(folder, InputSpec(
        data_dir="", image_size=224, batch=BatchShape(BATCH), with_validation=False,
        preset="standard"), 224, "standard")
    return time_pipeline(data.train, batches, BATCH)


def time_torchvision(folder: str, batches: int) -> float:
    import torch
    from torchvision import datasets, transforms

    transform = transforms.Compose([
        transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    dataset = datasets.ImageFolder(os.path.join(folder, "train"), transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=True,
                                         num_workers=len(os.sched_getaffinity(0)),
                                         drop_last=True, persistent_workers=True)

    def forever():
        while True:
            yield from loader

    sys.path.insert(0, ROOT)
    from app.modes.input_benchmark import time_pipeline  # imports no framework

    return time_pipeline(forever(), batches, BATCH)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--make_images", default="")
    parser.add_argument("--pipeline", choices=["app", "torchvision"])
    parser.add_argument("--compare", default="")
    parser.add_argument("--folder", default="")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--app_python", default=sys.executable)
    parser.add_argument("--torch_python", default=sys.executable)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.make_images:
        make_images(args.make_images)
        return
    if args.pipeline:
        timer = time_app if args.pipeline == "app" else time_torchvision
        print(json.dumps({"pipeline": args.pipeline,
                          "images_per_sec": timer(args.folder, args.batches)}))
        return
    cores = len(os.sched_getaffinity(0))
    rows = []
    for name, python in (("app", args.app_python), ("torchvision", args.torch_python)):
        done = subprocess.run([python, __file__, f"--pipeline={name}",
                               f"--folder={args.compare}", f"--batches={args.batches}"],
                              capture_output=True, text=True, cwd=ROOT)
        line = [x for x in done.stdout.splitlines() if x.startswith('{"pipeline"')]
        if not line:
            raise SystemExit(f"{name} failed: {done.stderr[-2000:]}")
        row = json.loads(line[-1])
        row["images_per_sec_per_core"] = row["images_per_sec"] / cores
        rows.append(row)
    result = {"what": "training input pipeline alone, 224x224, batch 64, JPEG 500x375",
              "cpu_cores": cores, "batches": args.batches, "rows": rows,
              "app_over_torchvision": rows[0]["images_per_sec"] / rows[1]["images_per_sec"]}
    emit(result, args.out)


if __name__ == "__main__":
    main()
