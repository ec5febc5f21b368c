"""The PyTorch twin of each model family the app trains: torchvision's, on synthetic data.

What a strong PyTorch user writes for the same job: the torchvision model of the same
architecture, bf16 autocast, channels-last memory for the convolutional networks,
`torch.compile` (or eager with --no_compile, whichever is faster is the one to beat),
the app's recipe for the family (SGD with momentum 0.9 for ResNet-50; AdamW with betas
0.9/0.999, weight decay 0.05, fused, the gradients' global norm clipped at 1, for the
rest: flags/config.py's RECIPES), label smoothing 0.1, and the app's synthetic data
(random images and labels made once on the GPU). Timed with CUDA synchronization
around the steady-state steps only, in three blocks (torch_peer.timed).

    python benchmarks/torch_models_peer.py --model=convnext_tiny --batch=256 --steps=60 \
        --out peer.json

The training FLOPs per image are counted by torch's own FlopCounterMode over one
forward and backward pass (an independent count from the app's, which is XLA's), and
the MFU is taken at --peak_tflops (989: an H200's dense bf16 peak, app/pricing/prices.csv).
"""

from __future__ import annotations

import argparse
import json
import platform

from results_io import emit
from torch_peer import timed

# The app's --model for each twin (README's model matrix pairs them by this).
TWINS = {
    "resnet50": "resnet50",
    "vit_b_16": "vit_b16",
    "convnext_tiny": "applications:ConvNeXtTiny",
    "efficientnet_v2_s": "applications:EfficientNetV2S",
    "mobilenet_v3_large": "applications:MobileNetV3Large",
}
CONVOLUTIONAL = ("resnet50", "convnext_tiny", "efficientnet_v2_s", "mobilenet_v3_large")


def build(torch, torchvision, name: str, batch: int, image_size: int):
    model = getattr(torchvision.models, name)(
        **({"image_size": image_size} if name.startswith("vit") else {})).cuda()
    images = torch.randn(batch, 3, image_size, image_size, device="cuda")
    if name in CONVOLUTIONAL:
        model = model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (batch,), device="cuda")
    return model, images, labels


def train_flops_per_image(name: str, image_size: int) -> float:
    """Forward and backward FLOPs of one image, by torch's FlopCounterMode (float32, CPU)."""
    import torch
    import torchvision
    from torch.utils.flop_counter import FlopCounterMode

    model = getattr(torchvision.models, name)(
        **({"image_size": image_size} if name.startswith("vit") else {}))
    counter = FlopCounterMode(display=False)
    with counter:
        model(torch.randn(2, 3, image_size, image_size)).sum().backward()
    return counter.get_total_flops() / 2


def measure(name: str, batch: int, steps: int, warmup: int, compile_model: bool,
            image_size: int, profile_out: str = "") -> dict:
    import torch
    import torchvision

    torch.manual_seed(0)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model, images, labels = build(torch, torchvision, name, batch, image_size)
    if name == "resnet50":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                                    weight_decay=5e-4)
        clip = 0.0
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=2.5e-4, betas=(0.9, 0.999),
                                      weight_decay=0.05, fused=True)
        clip = 1.0
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    forward = torch.compile(model) if compile_model else model

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(forward(images), labels)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    row = timed(torch, step, batch, steps, warmup)
    if profile_out:  # after the timing: the kernels of 3 steps, by their CUDA time
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                step()
            torch.cuda.synchronize()
        with open(profile_out, "w") as f:
            f.write(prof.key_averages().table(sort_by="cuda_time_total", row_limit=60,
                                              max_name_column_width=90))
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, choices=sorted(TWINS))
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--no_compile", action="store_true")
    parser.add_argument("--peak_tflops", type=float, default=989.0)
    parser.add_argument("--out", default="")
    parser.add_argument("--profile_out", default="", help="a table of 3 steps' kernels")
    args = parser.parse_args()

    import torch
    import torchvision

    flops = train_flops_per_image(args.model, args.image_size)
    try:
        row = measure(args.model, args.batch, args.steps, args.warmup, not args.no_compile,
                      args.image_size, args.profile_out)
        row["mfu"] = round(flops * row["images_per_sec"] / (args.peak_tflops * 1e12), 4)
    except torch.cuda.OutOfMemoryError:
        row = {"global_batch_size": args.batch, "status": "out of memory"}
    print(json.dumps(row), flush=True)
    emit({
        "peer": f"torchvision {args.model}, bf16 autocast"
                + (", channels-last" if args.model in CONVOLUTIONAL else "")
                + (", SGD momentum" if args.model == "resnet50" else
                   ", AdamW (fused), clip 1.0")
                + (", eager" if args.no_compile else ", torch.compile"),
        "model": args.model, "app_model": TWINS[args.model],
        "device": torch.cuda.get_device_name(0), "image_size": args.image_size,
        "data": "synthetic, on the GPU",
        "train_gflops_per_image": round(flops / 1e9, 4), "peak_tflops": args.peak_tflops,
        "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__,
                     "python": platform.python_version()},
        "rows": [row],
    }, args.out)


if __name__ == "__main__":
    main()
