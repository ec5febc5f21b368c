"""The PyTorch peer: torchvision's ResNet-50 (v1.5) trained on synthetic data.

The strongest plain-PyTorch recipe for this model on one GPU: channels-last memory
format, bf16 autocast, `torch.compile`, SGD with momentum, label smoothing, the
same synthetic data as the app (random images and labels made once on the GPU).
Timed with CUDA synchronization around the steady-state steps only.

    python benchmarks/torch_peer.py --batch_sizes=128,256,512 --steps=100 --out peer.json

With `--data=FOLDER` (FOLDER/train/<class>/*.JPEG) it trains on those real JPEGs
instead, fed the way PyTorch users feed ImageNet: torchvision's ImageFolder and a
DataLoader with 16 worker processes, pinned memory and the app's crops
(RandomResizedCrop(224, scale=(0.08, 1), ratio=(3/4, 4/3)), horizontal flip,
ImageNet normalization), batches copied to the GPU without blocking; the warm-up
then runs past the batches the workers made ahead while the model compiled (16 x 4),
so the timed steps wait for decoding as training does.

Prints one JSON document (and writes it to --out): per batch size, images/sec, the
mean step time, peak GPU memory, or "out of memory".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

PREFETCH = 4  # DataLoader batches per worker made ahead

from results_io import emit


def _real_batches(folder: str, batch: int, image_size: int, workers: int):
    """An endless iterator of (images, labels) on the GPU from FOLDER/train."""
    import torch
    import torchvision
    from torchvision import transforms

    dataset = torchvision.datasets.ImageFolder(os.path.join(folder, "train"), transforms.Compose([
        transforms.RandomResizedCrop(image_size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)),
        transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))]))
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=batch, shuffle=True, num_workers=workers, pin_memory=True,
        drop_last=True, persistent_workers=True, prefetch_factor=PREFETCH)
    while True:
        for images, labels in loader:
            yield (images.cuda(non_blocking=True).to(memory_format=torch.channels_last),
                   labels.cuda(non_blocking=True))


def measure(batch: int, steps: int, warmup: int, compile_model: bool, image_size: int,
            data: str = "", workers: int = 16) -> dict:
    import torch
    import torchvision

    torch.manual_seed(0)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    images = torch.randn(batch, 3, image_size, image_size, device="cuda").to(
        memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (batch,), device="cuda")
    forward = torch.compile(model) if compile_model else model
    batches = _real_batches(data, batch, image_size, workers) if data else None

    def step():
        nonlocal images, labels
        if batches is not None:
            images, labels = next(batches)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(forward(images), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    if batches is not None:
        # The DataLoader fills WORKERS x PREFETCH batches while the model compiles:
        # warm up past them, or the timed steps would eat a buffer, not the decoding.
        warmup = max(warmup, workers * PREFETCH + 5)
    return timed(torch, step, batch, steps, warmup)


def timed(torch, step, batch: int, steps: int, warmup: int) -> dict:
    """Runs `step` `warmup` times (compile), then `steps` times in three timed blocks
    with CUDA synchronized at each end; the row of one batch size (shared by the peers)."""
    start = time.perf_counter()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    compile_seconds = time.perf_counter() - start
    times = []
    for _ in range(3):  # three timed blocks (their spread shows a drift)
        begin = time.perf_counter()
        for _ in range(steps // 3):
            step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - begin) / (steps // 3))
    step_time = statistics.fmean(times)  # every timed step counts
    return {"global_batch_size": batch, "status": "ok",
            "images_per_sec": round(batch / step_time, 2),
            "step_time_ms": round(step_time * 1e3, 3),
            "block_step_times_ms": [round(t * 1e3, 3) for t in times],
            "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3),
            "compile_and_warmup_seconds": round(compile_seconds, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch_sizes", default="256")
    parser.add_argument("--steps", type=int, default=90)
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--no_compile", action="store_true")
    parser.add_argument("--data", default="", help="FOLDER with train/<class>/*.JPEG")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--out", default="")
    args = parser.parse_args()

    import torch
    import torchvision

    rows = []
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        try:
            rows.append(measure(batch, args.steps, args.warmup, not args.no_compile,
                                args.image_size, args.data, args.workers))
        except torch.cuda.OutOfMemoryError:
            rows.append({"global_batch_size": batch, "status": "out of memory"})
        print(json.dumps(rows[-1]), flush=True)
    result = {
        "peer": "torchvision resnet50 (v1.5), channels_last, bf16 autocast, "
                + ("eager" if args.no_compile else "torch.compile"),
        "device": torch.cuda.get_device_name(0), "image_size": args.image_size,
        "data": f"real JPEGs in {args.data}, DataLoader with {args.workers} workers"
        if args.data else "synthetic, on the GPU",
        "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__,
                     "python": platform.python_version()},
        "rows": rows,
    }
    emit(result, args.out)


if __name__ == "__main__":
    main()
