"""The PyTorch peer of the ViTs: torchvision's ViT-B/16 trained on synthetic data.

The method of torch_peer.py (the ResNet-50 peer), for a transformer: bf16 autocast,
`torch.compile`, the same synthetic data as the app (random images and labels made
once on the GPU), the app's ViT recipe (AdamW with betas 0.9/0.999 and weight decay
0.05, fused; the gradients' global norm clipped at 1; label smoothing 0.1), timed
with CUDA synchronization around the steady-state steps only, in three blocks.
Channels-last does not apply (the patch embedding is the only convolution).
torchvision's attention is `nn.MultiheadAttention`, which in training calls
`scaled_dot_product_attention` (flash attention on the GPU) with its class token's 197
tokens; the app's ViT (app/engine/models/vit.py) mean-pools 196 tokens instead.

    python benchmarks/torch_vit_peer.py --batch_sizes=256 --steps=60 --out peer.json

Prints one JSON document (and writes it to --out): per batch size, images/sec, the
mean step time, peak GPU memory (or "out of memory"), and the training FLOPs per image
counted by hand from the model's matmuls (the app's rule, app/engine/flops.py: 3 x the
forward pass less the images' gradient through the patch embedding) with the MFU they
give at --peak_tflops (989: an H200's dense bf16 peak, app/engine/prices.csv).
"""

from __future__ import annotations

import argparse
import json
import platform
from results_io import emit
from torch_peer import timed

# torchvision's vit_b_16: width, depth, MLP width, patch.
WIDTH, DEPTH, MLP, PATCH = 768, 12, 3072, 16


def train_flops_per_image(image_size: int, classes: int = 1000, class_token: bool = True):
    """3 x the forward matmuls less the patch embedding's input gradient (none needed)."""
    tokens = (image_size // PATCH) ** 2 + int(class_token)
    patch = 2.0 * (image_size // PATCH) ** 2 * PATCH * PATCH * 3 * WIDTH
    block = (2.0 * tokens * WIDTH * 4 * WIDTH        # q, k, v and the output projection
             + 2.0 * 2 * tokens * tokens * WIDTH     # scores and their weighted sum
             + 2.0 * 2 * tokens * WIDTH * MLP)       # the MLP's two layers
    forward = patch + DEPTH * block + 2.0 * WIDTH * classes
    return 3 * forward - patch


def measure(batch: int, steps: int, warmup: int, compile_model: bool, image_size: int) -> dict:
    import torch
    import torchvision

    torch.manual_seed(0)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = torchvision.models.vit_b_16(image_size=image_size).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2.5e-4, betas=(0.9, 0.999),
                                  weight_decay=0.05, fused=True)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    images = torch.randn(batch, 3, image_size, image_size, device="cuda")
    labels = torch.randint(0, 1000, (batch,), device="cuda")
    forward = torch.compile(model) if compile_model else model

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(forward(images), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return timed(torch, step, batch, steps, warmup)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch_sizes", default="256")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--no_compile", action="store_true")
    parser.add_argument("--peak_tflops", type=float, default=989.0)
    parser.add_argument("--out", default="")
    args = parser.parse_args()

    import torch
    import torchvision

    flops = train_flops_per_image(args.image_size)
    rows = []
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        try:
            row = measure(batch, args.steps, args.warmup, not args.no_compile, args.image_size)
            row["mfu"] = round(flops * row["images_per_sec"] / (args.peak_tflops * 1e12), 4)
        except torch.cuda.OutOfMemoryError:
            row = {"global_batch_size": batch, "status": "out of memory"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    emit({
        "peer": "torchvision vit_b_16, bf16 autocast, AdamW (fused), clip 1.0, "
                + ("eager" if args.no_compile else "torch.compile"),
        "device": torch.cuda.get_device_name(0), "image_size": args.image_size,
        "data": "synthetic, on the GPU",
        "train_gflops_per_image": round(flops / 1e9, 4), "peak_tflops": args.peak_tflops,
        "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__,
                     "python": platform.python_version()},
        "rows": rows,
    }, args.out)


if __name__ == "__main__":
    main()
