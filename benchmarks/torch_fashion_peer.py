"""The PyTorch peer of the app's default recipe on Fashion-MNIST, for time to accuracy.

What a strong PyTorch user writes for this job: the app's `small_resnet` (3x3 stem of
32, three basic blocks of 32, 64, 128 channels, strides 1, 2, 2, global pooling,
dense head; He-normal fan-out init; BatchNorm momentum 0.9 in Keras's sense, eps 1e-5,
the last BatchNorm of each block starting at zero), the app's recipe (SGD, momentum 0.9,
learning rate 0.4 for 256 images (scaled linearly above, by the square root below,
as the app scales it) with a linear warm-up over the first epoch then
cosine decay to 0, weight decay 5e-4 decoupled and scaled by the learning rate as
Keras's SGD does, not on BatchNorm or biases, label smoothing 0.1), the app's `small`
augmentation (pad by 3, random 28x28 window; evaluation: none) and ImageNet
normalization of the gray image repeated to 3 channels. The whole dataset is held on
the GPU as uint8, shuffled there every epoch and augmented there; bf16 autocast;
`torch.compile`. The last partial batch of an epoch is dropped, as the app does.

The clock starts with the process (imports, reading the files and compiling are
counted, as the app's clock does); each epoch's line gives the seconds from start at
the end of its evaluation, the validation top-1 over all 10,000 test images and the
epoch's training images/sec.

    python benchmarks/torch_fashion_peer.py --data_dir=/usr/share/datasets/fashion-mnist \\
        --epochs=15 --batch=512 --out=peer.json
"""

from __future__ import annotations

import time

STARTED = time.time()  # noqa: E402 - the clock starts before the imports

import argparse  # noqa: E402
import gzip  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402

import numpy as np  # noqa: E402

from results_io import emit  # noqa: E402

MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


def read_idx(path: str) -> np.ndarray:
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(folder: str, prefix: str):
    def find(name):
        for candidate in (name + ".gz", name):
            if os.path.exists(os.path.join(folder, candidate)):
                return os.path.join(folder, candidate)
        raise SystemExit(f"{name} not found in {folder}")
    return (read_idx(find(f"{prefix}-images-idx3-ubyte")),
            read_idx(find(f"{prefix}-labels-idx1-ubyte")))


def make_model(torch, num_classes: int = 10):
    nn = torch.nn

    def conv(cin, cout, k, stride):
        layer = nn.Conv2d(cin, cout, k, stride, padding=k // 2, bias=False)
        nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
        return layer

    def bn(channels, zero=False):
        layer = nn.BatchNorm2d(channels, eps=1e-5, momentum=0.1)  # Keras's 0.9
        if zero:
            nn.init.zeros_(layer.weight)
        return layer

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1, self.bn1 = conv(cin, cout, 3, stride), bn(cout)
            self.conv2, self.bn2 = conv(cout, cout, 3, 1), bn(cout, zero=True)
            self.proj = None
            if stride != 1 or cin != cout:
                self.proj = nn.Sequential(conv(cin, cout, 1, stride), bn(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.proj is None else self.proj(x)))

    head = nn.Linear(128, num_classes)  # Keras's Dense: Glorot uniform, zero bias
    nn.init.xavier_uniform_(head.weight)
    nn.init.zeros_(head.bias)
    return nn.Sequential(conv(3, 32, 3, 1), bn(32), nn.ReLU(), Block(32, 32, 1),
                         Block(32, 64, 2), Block(64, 128, 2), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), head)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no_compile", action="store_true")
    parser.add_argument("--device", default="cuda", help="cuda; cpu for a smoke run")
    parser.add_argument("--limit", type=int, default=0, help="train on the first N images")
    parser.add_argument("--out", default="")
    args = parser.parse_args()

    import torch

    torch.manual_seed(args.seed)
    device = args.device
    train_x, train_y = load(args.data_dir, "train")
    if args.limit:
        train_x, train_y = train_x[:args.limit], train_y[:args.limit]
    test_x, test_y = load(args.data_dir, "t10k")
    train_x, test_x = (torch.from_numpy(a.copy()).to(device) for a in (train_x, test_x))
    train_y, test_y = (torch.from_numpy(a.astype(np.int64)).to(device) for a in (train_y, test_y))
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)

    def normalized(images):  # uint8 [B, 28, 28] -> float [B, 3, 28, 28]
        return (images[:, None].float().expand(-1, 3, -1, -1) - mean) / std

    pad, size = 3, 28
    rows = torch.arange(size, device=device)

    def shifted(images, generator):
        """The small preset's shift: pad by 3 with zeros, a random 28x28 window."""
        batch = images.shape[0]
        padded = torch.nn.functional.pad(images, (pad, pad, pad, pad))
        offsets = torch.randint(0, 2 * pad + 1, (batch, 2), device=device, generator=generator)
        y = (offsets[:, 0, None] + rows[None])[:, :, None]
        x = (offsets[:, 1, None] + rows[None])[:, None, :]
        return padded[torch.arange(batch, device=device)[:, None, None], y, x]

    model = make_model(torch).to(device).to(memory_format=torch.channels_last)
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    peak = 0.4 * (args.batch / 256 if args.batch >= 256 else math.sqrt(args.batch / 256))
    steps_per_epoch = len(train_y) // args.batch
    total, warmup = steps_per_epoch * args.epochs, steps_per_epoch
    optimizer = torch.optim.SGD([{"params": decay}, {"params": no_decay}], lr=peak,
                                momentum=0.9)
    weight_decay = 5e-4

    def rate(step):  # the app's WarmupSchedule
        if step < warmup:
            return peak * (step + 1) / warmup
        progress = min(max((step - warmup) / max(total - warmup, 1), 0.0), 1.0)
        return 0.5 * peak * (1 + math.cos(math.pi * progress))

    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)

    def train_step(images, labels):
        with torch.autocast(device, torch.bfloat16):
            loss = loss_fn(model(images).float(), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        return loss

    def eval_step(images):
        with torch.autocast(device, torch.bfloat16):
            return model(images).argmax(1)

    if not args.no_compile:
        train_step = torch.compile(train_step)
        eval_step = torch.compile(eval_step)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    synchronize = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    epochs, step = [], 0
    for epoch in range(args.epochs):
        model.train()
        synchronize()
        began = time.perf_counter()
        order = torch.randperm(len(train_y), device=device, generator=generator)
        for batch in range(steps_per_epoch):
            chosen = order[batch * args.batch:(batch + 1) * args.batch]
            images = normalized(shifted(train_x[chosen], generator)).contiguous(
                memory_format=torch.channels_last)
            lr = rate(step)
            for group in optimizer.param_groups:
                group["lr"] = lr
            train_step(images, train_y[chosen])
            with torch.no_grad():  # Keras's decoupled decay: w -= lr * wd * w
                for p in decay:
                    p.mul_(1 - lr * weight_decay)
            optimizer.step()
            step += 1
        synchronize()
        seconds = time.perf_counter() - began
        model.eval()
        correct = 0
        with torch.no_grad():
            for start in range(0, len(test_y), 1000):
                images = normalized(test_x[start:start + 1000]).contiguous(
                    memory_format=torch.channels_last)
                correct += int((eval_step(images) == test_y[start:start + 1000]).sum())
        epochs.append({"epoch": epoch + 1, "seconds_from_start": round(time.time() - STARTED, 2),
                       "val_top1": correct / len(test_y),
                       "images_per_sec": round(steps_per_epoch * args.batch / seconds, 1)})
        print(epochs[-1], flush=True)
    steady = [e["images_per_sec"] for e in epochs[1:]] or [epochs[0]["images_per_sec"]]
    emit({"peer": "torch_fashion_peer", "torch": torch.__version__,
          "device": torch.cuda.get_device_name() if device == "cuda" else device, "batch": args.batch, "epochs": epochs,
          "compiled": not args.no_compile, "images_per_sec_after_epoch_1": round(
              sum(steady) / len(steady), 1), "final_top1": epochs[-1]["val_top1"]}, args.out)


if __name__ == "__main__":
    main()
